/* pause.c - `agentsbx pause ID` / `agentsbx resume ID`: freeze or thaw every process of the
 * container through its cgroup freezer (runc's verbs; no options). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "runtime/container_cgroup.h"

static int
pause_or_resume (struct asbx_global *g, int argc, char **argv, bool freeze)
{
  static const struct option opts[] = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
  const char *verb = freeze ? "pause" : "resume";
  asbx_err_t err = NULL;
  int c;

  while ((c = getopt_long_only (argc, argv, "+h", opts, NULL)) != -1)
    {
      if (c == 'h')
        {
          printf ("usage: agentsbx %s CONTAINER_ID\n", verb);
          return 0;
        }
      return cli_usage (verb, "unknown option `%s`", argv[optind - 1]);
    }
  if (optind != argc - 1)
    return cli_usage (verb, "expected exactly one argument: the container id");
  return asbx_container_pause (g, argv[optind], freeze, &err) < 0 ? cli_fail (&err) : 0;
}

int
cli_pause (struct asbx_global *g, int argc, char **argv)
{
  return pause_or_resume (g, argc, argv, true);
}

int
cli_resume (struct asbx_global *g, int argc, char **argv)
{
  return pause_or_resume (g, argc, argv, false);
}
