/* create.c - `create` and the options it shares with `run` (runc's names). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

enum
{
  O_CONSOLE = 256,
  O_PIDFILE,
  O_NOPIVOT,
  O_NOKEYRING,
  O_PRESERVE,
  O_KEEP,
};

int
cli_parse_create_opts (const char *verb, int argc, char **argv, struct asbx_create_opts *o, int *detach, int *keep)
{
  static const struct option opts[] = {
    { "bundle", required_argument, 0, 'b' },
    { "console-socket", required_argument, 0, O_CONSOLE },
    { "pid-file", required_argument, 0, O_PIDFILE },
    { "no-pivot", no_argument, 0, O_NOPIVOT },
    { "no-new-keyring", no_argument, 0, O_NOKEYRING },
    { "preserve-fds", required_argument, 0, O_PRESERVE },
    { "detach", no_argument, 0, 'd' },
    { "keep", no_argument, 0, O_KEEP },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  int c;
  while ((c = getopt_long_only (argc, argv, "+b:dh", opts, NULL)) != -1)
    switch (c)
      {
      case 'b': o->bundle = optarg; break;
      case O_CONSOLE: o->console_socket = optarg; break;
      case O_PIDFILE: o->pid_file = optarg; break;
      case O_NOPIVOT: o->no_pivot = true; break;
      case O_NOKEYRING: o->no_new_keyring = true; break;
      case O_PRESERVE:
        if (cli_parse_int (verb, "--preserve-fds", optarg, &o->preserve_fds) < 0)
          return -1;
        break;
      case 'd':
        if (!detach)
          return cli_usage (verb, "unknown option `-d`"), -1;
        *detach = 1;
        break;
      case O_KEEP:
        if (!keep)
          return cli_usage (verb, "unknown option `--keep`"), -1;
        *keep = 1;
        break;
      case 'h':
        printf ("usage: agentsbx %s [--bundle DIR] [--console-socket PATH] [--pid-file FILE] [--no-pivot]\n"
                "       [--no-new-keyring] [--preserve-fds N]%s CONTAINER_ID\n",
                verb, detach ? " [--detach] [--keep]" : "");
        return -2;
      default: return cli_usage (verb, "unknown option `%s`", argv[optind - 1]), -1;
      }
  if (optind != argc - 1)
    return cli_usage (verb, "expected exactly one argument: the container id"), -1;
  o->id = argv[optind];
  return optind;
}

int
cli_create (struct asbx_global *g, int argc, char **argv)
{
  struct asbx_create_opts o = { 0 };
  asbx_err_t err = NULL;
  pid_t pid;
  int r = cli_parse_create_opts ("create", argc, argv, &o, NULL, NULL);
  if (r < 0)
    return r == -2 ? 0 : 1;
  if (asbx_container_create (g, &o, &pid, &err) < 0)
    return cli_fail (&err);
  return 0;
}
