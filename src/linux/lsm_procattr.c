/* lsm_procattr.c - writes to /proc/thread-self/attr/<name> through a verified procfs fd.
 *
 * Threat model: the container's rootfs is untrusted. After pivot_root, "/proc" is whatever the
 * rootfs and the mounts made it; a rootfs shipping a fake /proc (plain directory, tmpfs, symlink
 * to somewhere writable) must not receive - or redirect - the label write, or the process would
 * silently run unconfined. So: O_PATH open, fstatfs == PROC_SUPER_MAGIC, then openat2 beneath it
 * without magic links, and fstatfs again on the attribute fd before writing. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/lsm_procattr.h"
#include "linux/pathsafe.h"

static int
check_procfs (int fd, const char *what, asbx_err_t *err)
{
  struct statfs sf;
  if (fstatfs (fd, &sf) < 0)
    return asbx_error (err, errno, "fstatfs `%s`", what);
  if (sf.f_type != PROC_SUPER_MAGIC)
    return asbx_error (err, EXDEV, "`%s` is not on procfs (f_type %#lx): refusing to write an LSM label there", what,
                       (unsigned long) sf.f_type);
  return 0;
}

int
linux_lsm_write_attr (const char *proc_root, const char *attr, const char *data, size_t len, asbx_err_t *err)
{
  cleanup_close int proc = open (proc_root, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  cleanup_close int fd = -1;
  cleanup_free char *rel = xasprintf ("thread-self/attr/%s", attr);

  if (proc < 0)
    return asbx_error (err, errno, "open `%s`", proc_root);
  if (check_procfs (proc, proc_root, err) < 0)
    return -1;
  /* ps_openat2: the userspace fallback keeps BENEATH|NO_MAGICLINKS where openat2 is missing */
  fd = ps_openat2 (proc, rel, O_WRONLY, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
  if (fd < 0)
    return asbx_error (err, errno, "open `%s/%s`", proc_root, rel);
  if (check_procfs (fd, rel, err) < 0)
    return -1;
  for (;;)
    {
      ssize_t w = write (fd, data, len);
      if (w == (ssize_t) len)
        return 0;
      if (w >= 0)
        return asbx_error (err, EIO, "short write to `%s/%s`", proc_root, rel);
      if (errno != EINTR)
        return asbx_error (err, errno, "write `%.*s` to `%s/%s`", (int) len, data, proc_root, rel);
    }
}

bool
linux_lsm_library_confirms (const char *soname, const char *symbol, const char *kernel_files)
{
  /* RTLD_LOCAL: nothing else resolves against it; RTLD_NODELETE: the handle stays (the caller
   * caches the answer) */
  void *h = dlopen (soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  int (*fn) (void) = h ? (int (*) (void)) dlsym (h, symbol) : NULL;
  if (fn == NULL)
    {
      log_debug ("%s not loadable (%s): trusting %s", soname, dlerror (), kernel_files);
      return true;
    }
  return fn () == 1;
}
