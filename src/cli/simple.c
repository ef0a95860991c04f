/* simple.c - the verbs that take only a container id and a flag or two: start, state, kill,
 * delete, list. Each is a thin parse + one runtime call. */
#include <ctype.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/util.h"

static int
one_id (const char *verb, int argc, char **argv, const struct option *opts, int (*on) (int c, void *), void *data,
        const char **id)
{
  int c;
  while ((c = getopt_long_only (argc, argv, "+h", opts, NULL)) != -1)
    {
      if (c == 'h')
        {
          printf ("usage: agentsbx %s [options] CONTAINER_ID\n", verb);
          return -2;
        }
      if (c == '?' || !on || on (c, data) < 0)
        return cli_usage (verb, "unknown option `%s`", argv[optind - 1]), -1;
    }
  if (optind >= argc)
    return cli_usage (verb, "expected a container id"), -1;
  *id = argv[optind];
  return optind;
}

static const struct option no_opts[] = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };

int
cli_start (struct asbx_global *g, int argc, char **argv)
{
  const char *id;
  asbx_err_t err = NULL;
  int r = one_id ("start", argc, argv, no_opts, NULL, NULL, &id);
  if (r < 0)
    return r == -2 ? 0 : 1;
  if (r != argc - 1)
    return cli_usage ("start", "expected exactly one argument: the container id");
  return asbx_container_start (g, id, &err) < 0 ? cli_fail (&err) : 0;
}

int
cli_state (struct asbx_global *g, int argc, char **argv)
{
  const char *id;
  asbx_err_t err = NULL;
  char *json;
  int r = one_id ("state", argc, argv, no_opts, NULL, NULL, &id);
  if (r < 0)
    return r == -2 ? 0 : 1;
  if (r != argc - 1)
    return cli_usage ("state", "expected exactly one argument: the container id");
  json = asbx_container_state_json (g, id, &err);
  if (!json)
    return cli_fail (&err);
  printf ("%s\n", json);
  free (json);
  return 0;
}

/* signal by name ("KILL", "SIGKILL", "sigkill") or number, as runc's kill accepts */
static int
parse_signal (const char *s)
{
  static const struct
  {
    const char *n;
    int v;
  } t[] = {
    { "HUP", SIGHUP },   { "INT", SIGINT },       { "QUIT", SIGQUIT }, { "ILL", SIGILL },     { "TRAP", SIGTRAP },
    { "ABRT", SIGABRT }, { "IOT", SIGIOT },       { "BUS", SIGBUS },   { "FPE", SIGFPE },     { "KILL", SIGKILL },
    { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV },     { "USR2", SIGUSR2 }, { "PIPE", SIGPIPE },   { "ALRM", SIGALRM },
    { "TERM", SIGTERM }, { "STKFLT", SIGSTKFLT }, { "CHLD", SIGCHLD }, { "CONT", SIGCONT },   { "STOP", SIGSTOP },
    { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN },     { "TTOU", SIGTTOU }, { "URG", SIGURG },     { "XCPU", SIGXCPU },
    { "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH }, { "IO", SIGIO },
    { "POLL", SIGPOLL }, { "PWR", SIGPWR },       { "SYS", SIGSYS },
  };
  uint64_t n;
  char up[32];
  size_t i;

  if (parse_u64 (s, &n) == 0)
    return n >= 1 && n <= (uint64_t) SIGRTMAX ? (int) n : -1;
  for (i = 0; i < sizeof up - 1 && s[i]; i++)
    up[i] = (char) toupper ((unsigned char) s[i]);
  up[i] = '\0';
  const char *name = strncmp (up, "SIG", 3) == 0 ? up + 3 : up;
  for (i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp (t[i].n, name) == 0)
      return t[i].v;
  return -1;
}

static int
kill_opt (int c, void *data)
{
  if (c != 'a')
    return -1;
  *(bool *) data = true;
  return 0;
}

int
cli_kill (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = { { "all", no_argument, 0, 'a' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  const char *id;
  asbx_err_t err = NULL;
  bool all = false;
  int sig = SIGTERM;
  int r = one_id ("kill", argc, argv, opts, kill_opt, &all, &id);
  if (r < 0)
    return r == -2 ? 0 : 1;
  /* runc accepts `kill ID SIG` and (containerd) `kill --all ID SIG`; also `kill ID SIG --all` */
  for (int i = r + 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--all") == 0 || strcmp (argv[i], "-all") == 0 || strcmp (argv[i], "-a") == 0)
        all = true;
      else if (i == r + 1)
        {
          sig = parse_signal (argv[i]);
          if (sig < 0)
            return cli_usage ("kill", "unknown signal `%s`", argv[i]);
        }
      else
        return cli_usage ("kill", "too many arguments");
    }
  return asbx_container_kill (g, id, sig, all, &err) < 0 ? cli_fail (&err) : 0;
}

static int
delete_opt (int c, void *data)
{
  if (c != 'f')
    return -1;
  *(bool *) data = true;
  return 0;
}

int
cli_delete (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = { { "force", no_argument, 0, 'f' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  const char *id;
  asbx_err_t err = NULL;
  bool force = false;
  int r = one_id ("delete", argc, argv, opts, delete_opt, &force, &id);
  if (r < 0)
    return r == -2 ? 0 : 1;
  if (r != argc - 1)
    return cli_usage ("delete", "expected exactly one argument: the container id");
  return asbx_container_delete (g, id, force, &err) < 0 ? cli_fail (&err) : 0;
}

int
cli_list (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = { { "format", required_argument, 0, 'f' },
                                        { "quiet", no_argument, 0, 'q' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  const char *format = "table";
  bool quiet = false;
  asbx_err_t err = NULL;
  int c;
  while ((c = getopt_long_only (argc, argv, "+f:qh", opts, NULL)) != -1)
    switch (c)
      {
      case 'f': format = optarg; break;
      case 'q': quiet = true; break;
      case 'h': printf ("usage: agentsbx list [--format table|json] [--quiet]\n"); return 0;
      default: return cli_usage ("list", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind != argc)
    return cli_usage ("list", "takes no arguments");
  return asbx_container_list (g, format, quiet, &err) < 0 ? cli_fail (&err) : 0;
}
