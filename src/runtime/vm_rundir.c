/* vm_rundir.c - the vm tier's run directory (vm_rundir.h), split from vm.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "runtime/oci_unpack.h"
#include "runtime/vm.h"
#include "runtime/vm_rundir.h"
#include "runtime/vm_runrec.h"

int
vm_rundir_write (const char *dir, const char *name, const char *text, asbx_err_t *err)
{
  cleanup_free char *p = xasprintf ("%s/%s", dir, name);
  cleanup_close int fd = open (p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 || write_all (fd, text, strlen (text)) < 0)
    return asbx_error (err, errno, "isolation vm: write %s", p);
  return 0;
}

/* rm -r of the run's directory through fds, never following a symlink (oci_remove_at): the
 * directory is QEMU's uid's while it runs, so whatever is in it now was put there by an
 * attacker's hand as far as root is concerned (outside attack 11: `share` replaced by a symlink
 * to a root-only directory, whose files this removal then unlinked as root) */
void
vm_rundir_remove (const char *dir)
{
  cleanup_free char *parent = xstrdup (dir);
  char *slash = strrchr (parent, '/');
  if (!slash || slash == parent)
    return;
  *slash = '\0';
  cleanup_close int pfd = open (parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (pfd >= 0 && oci_remove_at (pfd, slash + 1) < 0)
    log_warning ("isolation vm: remove %s: %s", dir, strerror (errno));
}

/* Read the run directory's file `name` (console.log, status) that QEMU wrote: beneath the
 * directory's fd, O_NOFOLLOW, O_NONBLOCK (a FIFO put there must not block root: outside attack
 * 11 hung `run` past its wall clock), a regular file only, at most `max` bytes. A symlink put
 * there (to a root-only file: attack 11 had the console tail print it) is refused. NULL when
 * absent or refused. */
char *
vm_rundir_read (const char *dir, const char *name, size_t max, size_t *len)
{
  struct stat st;
  char *text = NULL;
  cleanup_close int dfd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_close int fd = dfd < 0 ? -1 : openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  *len = 0;
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || read_all_fd (fd, max, &text, len) < 0)
    {
      free (text);
      *len = 0;
      return NULL;
    }
  return text;
}

/* the run's directory and what we wrote in it to QEMU's uid/gid: it reads the initramfs and
 * share/, writes console.log and status (the directory stays reachable only through QEMU's
 * private mount: the state root above it is root's, 0700) */
int
vm_rundir_chown (const char *dir, uid_t uid, gid_t gid, asbx_err_t *err)
{
  cleanup_free char *share = xasprintf ("%s/share", dir);
  const char *subs[] = { share, dir };
  for (size_t i = 0; i < 2; i++)
    {
      cleanup_closedir DIR *d = opendir (subs[i]);
      struct dirent *de;
      if (!d)
        return asbx_error (err, errno, "isolation vm: open %s", subs[i]);
      while ((de = readdir (d)) != NULL)
        if (strcmp (de->d_name, "..") != 0 && fchownat (dirfd (d), de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
          return asbx_error (err, errno, "isolation vm: chown %s/%s", subs[i], de->d_name);
    }
  return 0;
}

void
vm_rundir_console_tail (const char *dir)
{
  size_t len = 0;
  cleanup_free char *text = vm_rundir_read (dir, "console.log", 16u << 20, &len);
  if (!text || !len)
    return;
  const char *t = len > 3000 ? text + len - 3000 : text;
  log_warning ("isolation vm: the guest's console (last lines):\n%s", t);
}

/* the status line the guest wrote: "exit N" or "error MESSAGE" */
int
vm_rundir_status (const char *dir, int *status, asbx_err_t *err)
{
  size_t len = 0;
  cleanup_free char *text = vm_rundir_read (dir, "status", 65536, &len);
  uint64_t v;
  if (!text)
    len = 0;
  char *nl = text ? strchr (text, '\n') : NULL;
  if (nl)
    *nl = '\0';
  if (len && text && strncmp (text, "exit ", 5) == 0 && parse_u64 (text + 5, &v) == 0 && v <= 255)
    {
      *status = (int) v;
      return 0;
    }
  if (len && text && strncmp (text, "error ", 6) == 0)
    return asbx_error (err, EIO, "isolation vm: in the guest: %s", text + 6);
  vm_rundir_console_tail (dir);
  return asbx_error (err, EIO, "isolation vm: the VM ended without reporting an exit status");
}

void
vm_run_dir_remove (const char *state_root, const char *id)
{
  cleanup_free char *dir = xasprintf ("%s/vm/%s", state_root, id);
  struct stat st;
  if (vm_runrec_live_other (state_root, id))
    return; /* another run's, alive */
  if (lstat (dir, &st) == 0)
    vm_rundir_remove (dir);
  vm_runrec_release (state_root, id); /* its owner's record (runtime/vm_runrec.h) goes with it */
}
