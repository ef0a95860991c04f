/* ps.c - `agentsbx ps [--format table|json] ID [ps options]`: like runc, run the host's ps(1)
 * with the given options (default -ef), keep the header and the lines whose PID column is one
 * of the container's pids; --format json prints the pid array. ps is run with its output on a
 * pipe, from PATH, with our environment; its stderr passes through. */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/container_cgroup.h"

static bool
in_set (pid_t p, const pid_t *v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (v[i] == p)
      return true;
  return false;
}

/* Index of the PID column in the header, or -1. */
static int
pid_column (const char *header)
{
  cleanup_free char *h = xstrdup (header);
  char *save = NULL;
  int i = 0;
  for (char *t = strtok_r (h, " \t\n", &save); t; t = strtok_r (NULL, " \t\n", &save), i++)
    if (strcmp (t, "PID") == 0)
      return i;
  return -1;
}

static long
field (const char *line, int col)
{
  cleanup_free char *l = xstrdup (line);
  char *save = NULL, *t = strtok_r (l, " \t\n", &save);
  for (int i = 0; t && i < col; i++)
    t = strtok_r (NULL, " \t\n", &save);
  return t ? strtol (t, NULL, 10) : -1;
}

static int
run_ps (char **args, const pid_t *pids, size_t n)
{
  int pfd[2], status, col = -1;
  cleanup_fclose FILE *f = NULL;
  char *line = NULL;
  size_t cap = 0;
  bool first = true;
  pid_t child;

  if (pipe2 (pfd, O_CLOEXEC) < 0)
    return perror ("pipe"), 1;
  child = fork ();
  if (child == 0)
    {
      dup2 (pfd[1], STDOUT_FILENO);
      execvp ("ps", args);
      perror ("exec ps");
      _exit (127);
    }
  close (pfd[1]);
  f = fdopen (pfd[0], "r");
  while (f && getline (&line, &cap, f) > 0)
    {
      if (first)
        {
          col = pid_column (line);
          fputs (line, stdout);
          first = false;
          if (col < 0)
            {
              fprintf (stderr, "agentsbx ps: no PID column in the output of ps\n");
              break;
            }
          continue;
        }
      if (in_set ((pid_t) field (line, col), pids, n))
        fputs (line, stdout);
    }
  free (line);
  waitpid (child, &status, 0);
  return col < 0 || !WIFEXITED (status) || WEXITSTATUS (status) ? 1 : 0;
}

int
cli_ps (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = { { "format", required_argument, 0, 'f' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  const char *format = "table";
  cleanup_free pid_t *pids = NULL;
  asbx_err_t err = NULL;
  size_t n = 0;
  int c;

  while ((c = getopt_long_only (argc, argv, "+hf:", opts, NULL)) != -1)
    switch (c)
      {
      case 'f': format = optarg; break;
      case 'h': printf ("usage: agentsbx ps [--format table|json] CONTAINER_ID [ps options]\n"); return 0;
      default: return cli_usage ("ps", "unknown option `%s`", argv[optind - 1]);
      }
  if (strcmp (format, "table") != 0 && strcmp (format, "json") != 0)
    return cli_usage ("ps", "invalid --format `%s`: expected table or json", format);
  if (optind >= argc)
    return cli_usage ("ps", "expected a container id");
  if (asbx_container_pids (g, argv[optind], &pids, &n, &err) < 0)
    return cli_fail (&err);
  if (strcmp (format, "json") == 0)
    {
      printf ("[");
      for (size_t i = 0; i < n; i++)
        printf ("%s%d", i ? "," : "", (int) pids[i]);
      printf ("]\n");
      return 0;
    }
  {
    /* argv for ps: "ps" + the user's options, or "-ef" (runc's default) */
    int extra = argc - optind - 1;
    cleanup_free char **args = xmalloc0 (sizeof (char *) * (size_t) (extra + 2));
    args[0] = (char *) "ps";
    if (extra == 0)
      args[1] = (char *) "-ef";
    for (int i = 0; i < extra; i++)
      args[1 + i] = argv[optind + 1 + i];
    if (extra == 0)
      {
        char **a2 = xmalloc0 (sizeof (char *) * 3);
        a2[0] = args[0], a2[1] = args[1];
        free (args);
        args = a2;
      }
    fflush (stdout);
    return run_ps (args, pids, n);
  }
}
