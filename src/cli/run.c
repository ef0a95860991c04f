/* run.c - `run`: create + start, then (unless --detach) wait for the init and exit with its
 * status (128+N for a signal), forwarding signals, and delete unless --keep (runc's behaviour). */
#include <stdio.h>

#include "cli/cli.h"
#include "core/log.h"

int
cli_run (struct asbx_global *g, int argc, char **argv)
{
  struct asbx_create_opts o = { 0 };
  asbx_err_t err = NULL;
  int detach = 0, keep = 0, status;
  pid_t pid;
  int r = cli_parse_create_opts ("run", argc, argv, &o, &detach, &keep);
  if (r < 0)
    return r == -2 ? 0 : 1;
  if (detach && keep)
    return cli_usage ("run", "--keep cannot be used with --detach");
  if (asbx_container_create (g, &o, &pid, &err) < 0)
    return cli_fail (&err);
  if (asbx_container_start (g, o.id, &err) < 0)
    {
      asbx_err_t e2 = NULL;
      status = cli_fail (&err);
      if (asbx_container_delete (g, o.id, true, &e2) < 0)
        cli_fail (&e2);
      return status;
    }
  if (detach)
    return 0;
  status = asbx_container_wait (pid);
  if (!keep && asbx_container_delete (g, o.id, true, &err) < 0)
    cli_fail (&err);
  return status;
}
