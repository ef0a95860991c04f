/* run.c - `run`: create + start, then (unless --detach) wait for the init and exit with its
 * status (128+N for a signal), forwarding signals, and delete unless --keep (runc's behaviour).
 * In the foreground with process.terminal and no --console-socket, the runtime itself is the
 * terminal: it receives the pty master and proxies it (runtime/tty.h), as runc does. */
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/log.h"
#include "runtime/tty.h"

int
cli_run (struct asbx_global *g, int argc, char **argv)
{
  struct asbx_create_opts o = { 0 };
  asbx_err_t err = NULL;
  int detach = 0, keep = 0, status, tty = -1, master = -1;
  pid_t pid;
  int r = cli_parse_create_opts ("run", argc, argv, &o, &detach, &keep);
  if (r < 0)
    return r == -2 ? 0 : 1;
  if (detach && keep)
    return cli_usage ("run", "--keep cannot be used with --detach");
  int vm_status = 0;
  if (!detach && !o.console_socket)
    o.tty_proxy_fd = &tty;
  if (!detach)
    o.vm_status = &vm_status; /* isolation vm: create runs it all (runtime/vm.h) */
  r = asbx_container_create (g, &o, &pid, &err);
  if (r == 1)
    return vm_status;
  if (r < 0)
    {
      if (tty >= 0)
        close (tty);
      return cli_fail (&err);
    }
  /* the init sent the pty master during create; take it before start so that the process
   * never writes to a pty nobody reads */
  if (tty >= 0)
    {
      master = asbx_tty_recv_master (tty, &err);
      close (tty);
    }
  if ((tty >= 0 && master < 0) || asbx_container_start (g, o.id, &err) < 0)
    {
      asbx_err_t e2 = NULL;
      status = cli_fail (&err);
      if (master >= 0)
        close (master);
      if (asbx_container_delete (g, o.id, true, &e2) < 0)
        cli_fail (&e2);
      return status;
    }
  if (detach)
    return 0;
  status = master >= 0 ? asbx_tty_proxy_wait (master, pid) : asbx_container_wait (pid);
  if (!keep && asbx_container_delete (g, o.id, true, &err) < 0)
    cli_fail (&err);
  return status;
}
