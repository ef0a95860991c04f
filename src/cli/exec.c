/* exec.c - `exec` with runc's flags. Everything after the container id is the command. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/exec.h"

enum
{
  O_PROCESS = 256,
  O_CONSOLE,
  O_CWD,
  O_NNP,
  O_APPARMOR,
  O_LABEL,
  O_PIDFILE,
  O_PRESERVE,
  O_IGNORE_PAUSED,
  O_CGROUP,
};

static void
push (char ***v, size_t *n, char *s)
{
  *v = xrealloc (*v, sizeof (char *) * (*n + 2));
  (*v)[(*n)++] = s;
  (*v)[*n] = NULL;
}

int
cli_exec (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "process", required_argument, 0, 'p' },
    { "tty", no_argument, 0, 't' },
    { "console-socket", required_argument, 0, O_CONSOLE },
    { "cwd", required_argument, 0, O_CWD },
    { "env", required_argument, 0, 'e' },
    { "user", required_argument, 0, 'u' },
    { "additional-gids", required_argument, 0, 'g' },
    { "cap", required_argument, 0, 'c' },
    { "no-new-privs", no_argument, 0, O_NNP },
    { "apparmor", required_argument, 0, O_APPARMOR },
    { "process-label", required_argument, 0, O_LABEL },
    { "detach", no_argument, 0, 'd' },
    { "pid-file", required_argument, 0, O_PIDFILE },
    { "preserve-fds", required_argument, 0, O_PRESERVE },
    { "ignore-paused", no_argument, 0, O_IGNORE_PAUSED },
    { "cgroup", required_argument, 0, O_CGROUP },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  struct asbx_exec_opts o = { 0 };
  asbx_err_t err = NULL;
  int c, status = 0;

  while ((c = getopt_long_only (argc, argv, "+p:te:u:g:c:dh", opts, NULL)) != -1)
    switch (c)
      {
      case 'p': o.process_file = optarg; break;
      case 't': o.tty = true; break;
      case O_CONSOLE: o.console_socket = optarg; break;
      case O_CWD: o.cwd = optarg; break;
      case 'e': push (&o.env, &o.env_len, optarg); break;
      case 'u': o.user = optarg; break;
      case 'g':
        {
          /* runc takes one flag per gid; accept a comma list too */
          char *dup = xstrdup (optarg), *save = NULL;
          for (char *t = strtok_r (dup, ",", &save); t; t = strtok_r (NULL, ",", &save))
            push (&o.add_gids, &o.add_gids_len, xstrdup (t));
          free (dup);
          break;
        }
      case 'c': push (&o.caps, &o.caps_len, optarg); break;
      case O_NNP: o.no_new_privs = true; break;
      case O_APPARMOR: o.apparmor = optarg; break;
      case O_LABEL: o.process_label = optarg; break;
      case 'd': o.detach = true; break;
      case O_PIDFILE: o.pid_file = optarg; break;
      case O_PRESERVE:
        if (cli_parse_int ("exec", "--preserve-fds", optarg, &o.preserve_fds) < 0)
          return 1;
        break;
      case O_IGNORE_PAUSED: o.ignore_paused = true; break;
      case O_CGROUP: push (&o.cgroups, &o.cgroups_len, optarg); break;
      case 'h':
        printf ("usage: agentsbx exec [options] CONTAINER_ID COMMAND [ARG...]\n"
                "       agentsbx exec [options] --process process.json CONTAINER_ID\n");
        return 0;
      default: return cli_usage ("exec", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind >= argc)
    return cli_usage ("exec", "expected a container id");
  o.id = argv[optind++];
  o.args = argv + optind;
  o.args_len = (size_t) (argc - optind);
  if (o.process_file && o.args_len)
    return cli_usage ("exec", "--process and a command cannot be used together");
  /* a failed exec exits 255, as runc's "exec failed" does: an exec'd process's own status is
   * 0-255 too, but engines match runc's 255 together with the message */
  int r = status;
  if (asbx_container_exec (g, &o, &status, &err) < 0)
    {
      (void) cli_fail (&err);
      r = 255;
    }
  else
    r = status;
  /* the option vectors: env and caps point into argv, the gids were split into copies */
  free (o.env);
  free (o.caps);
  free (o.cgroups);
  asbx_strv_free (o.add_gids);
  return r;
}
