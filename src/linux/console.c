/* console.c - process.terminal: a pty from the container's own devpts, bound onto /dev/console.
 * Source: runtime-spec config.md "Console" / runtime.md; runc's setupConsole/mountConsole.
 *
 * Threat model: runs after pivot_root, so "/" is the container's root; paths are still resolved
 * with openat2 RESOLVE_IN_ROOT from "/" (no magic links) and the master is checked to live on a
 * devpts. The slave is obtained with TIOCGPTPEER (Linux >= 4.13), never by a pts path lookup, so
 * a planted /dev/pts/N cannot substitute another file.
 * Ordering: after pivot_root and the devpts mount, before finalize makes paths read-only.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "linux/mount.h"
#include "linux/pathsafe.h"
#include "linux/rootfs.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO ('T', 0x41)
#endif

/* Open a pty from the devpts of the current root; with `bind_console` also bind the slave onto
 * /dev/console. The slave becomes the controlling terminal and fds 0-2. */
static int
pty_setup (const struct oci_process *proc, bool bind_console, int *master_out, asbx_err_t *err)
{
  cleanup_close int rootfd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int master = -1;
  cleanup_close int slave = -1;
  cleanup_close int console = -1;
  cleanup_close int mfd = -1;
  int unlock = 0;

  if (rootfd < 0)
    return asbx_error (err, errno, "console: open /");
  master = ps_openat2 (rootfd, "/dev/pts/ptmx", O_RDWR | O_NOCTTY, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (master < 0)
    master = ps_openat2 (rootfd, "/dev/ptmx", O_RDWR | O_NOCTTY, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (master < 0)
    return asbx_error (err, errno, "console: open /dev/ptmx");
  if (ps_check_fstype (master, DEVPTS_SUPER_MAGIC, "console: /dev/ptmx", err) < 0)
    return -1;
  if (ioctl (master, TIOCSPTLCK, &unlock) < 0)
    return asbx_error (err, errno, "console: unlockpt");
  slave = ioctl (master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0)
    return asbx_error (err, errno, "console: open the pty slave");
  if (proc && proc->has_console_size)
    {
      struct winsize ws = { .ws_row = (unsigned short) proc->console_height,
                            .ws_col = (unsigned short) proc->console_width };
      if (ioctl (slave, TIOCSWINSZ, &ws) < 0)
        return asbx_error (err, errno, "console: set the window size");
    }

  if (bind_console)
    {
      /* /dev/console: an empty file inside the root with the slave bound onto it */
      console = ps_create_file (rootfd, "/dev/console", 0600, err);
      if (console < 0)
        return asbx_error_wrap (err, "console");
      mfd = mnt_clone (slave, "", false, err);
      if (mfd < 0 || mnt_attach (mfd, console, err) < 0)
        return asbx_error_wrap (err, "console: bind the pty onto /dev/console");
    }

  if (ioctl (slave, TIOCSCTTY, 0) < 0)
    return asbx_error (err, errno, "console: make the pty the controlling terminal");
  for (int fd = 0; fd < 3; fd++)
    if (dup2 (slave, fd) < 0)
      return asbx_error (err, errno, "console: dup2 onto fd %d", fd);
  *master_out = steal_fd (&master);
  return 0;
}

int
linux_console_setup (const struct oci_spec *spec, int *master_out, asbx_err_t *err)
{
  return pty_setup (spec->process, true, master_out, err);
}

int
linux_pty_setup (const struct oci_process *proc, int *master_out, asbx_err_t *err)
{
  return pty_setup (proc, false, master_out, err);
}
