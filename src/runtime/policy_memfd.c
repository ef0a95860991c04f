/* policy_memfd.c - the agent policy's memfd exec layer (vm.memfd_noexec), see policy_apply.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/process.h"
#include "runtime/policy_apply.h"
#include "runtime/policy_noexec.h"

int
policy_apply_memfd_noexec (const struct policy_plan *plan, bool new_pidns, asbx_err_t *err)
{
  static const char *const why = "filesystem.allowExec: a memfd could be executed";
  char buf[16] = "";
  ssize_t n;

  if (!plan || !plan->active || !policy_exec_restricted (plan))
    return 0;
  /* a shared (host or engine-given) pid namespace: raising it there would change every other
   * process in it, and lowering is impossible - refuse rather than leak the setting */
  if (!new_pidns)
    return asbx_error (err, EINVAL,
                       "%s: vm.memfd_noexec needs a new pid namespace / kernel >= 6.3 (the container joins an "
                       "existing pid namespace)",
                       why);
  cleanup_close int procfd = open ("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct statfs sfs;
  if (procfd < 0 || fstatfs (procfd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
    return asbx_error (err, procfd < 0 ? errno : EXDEV, "%s: /proc is not a procfs", why);
  if (faccessat (procfd, "sys/vm/memfd_noexec", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    return asbx_error (err, errno,
                       "%s: vm.memfd_noexec needs a new pid namespace / kernel >= 6.3 (no /proc/sys/vm/memfd_noexec)",
                       why);
  /* the sysctl handler acts on the WRITER's pid namespace (task_active_pid_ns(current)), not on
   * the procfs instance's: the init is in the container's, so any procfs will do */
  char *keys[] = { (char *) "vm.memfd_noexec" }, *vals[] = { (char *) "2" };
  struct oci_map m = { .keys = keys, .values = vals, .len = 1 };
  if (linux_sysctl_apply_at (procfd, &m, err) < 0)
    return asbx_error_wrap (err,
                            "%s: set vm.memfd_noexec=2 in the container's pid namespace (needs "
                            "CAP_SYS_ADMIN and a real-root writer: not possible in a user namespace)",
                            why);
  /* read back: a kernel that silently ignored the write must not pass */
  cleanup_close int rfd = openat (procfd, "sys/vm/memfd_noexec", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (rfd < 0 || (n = read (rfd, buf, sizeof buf - 1)) <= 0 || buf[0] != '2')
    return asbx_error (err, rfd < 0 ? errno : EIO, "%s: vm.memfd_noexec reads back `%.*s`, not 2", why,
                       (int) strcspn (buf, "\n"), buf);
  log_debug ("policy: vm.memfd_noexec=2 in the container's pid namespace");
  return 0;
}

/* Read /proc/sys/vm/memfd_noexec as the caller's pid namespace sees it: 0 when it is 2. */
static int
memfd_noexec_is_2 (const char *why, asbx_err_t *err)
{
  char buf[16] = "";
  ssize_t n = -1;
  cleanup_close int fd = open ("/proc/sys/vm/memfd_noexec", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

  if (fd < 0 || (n = read (fd, buf, sizeof buf - 1)) <= 0 || buf[0] != '2')
    return asbx_error (err, fd < 0 ? errno : EIO,
                       "%s: vm.memfd_noexec reads `%.*s` in the container's pid namespace, not 2", why,
                       n > 0 ? (int) strcspn (buf, "\n") : 0, buf);
  return 0;
}

int
policy_apply_memfd_noexec_from_parent (const struct policy_plan *plan, pid_t init_pid, bool new_pidns, asbx_err_t *err)
{
  static const char *const why = "filesystem.allowExec: a memfd could be executed";
  int status = 0;
  pid_t c;

  if (!plan || !plan->active || !policy_exec_restricted (plan))
    return 0;
  if (!new_pidns)
    return policy_apply_memfd_noexec (plan, false, err); /* the same refusal as without a user namespace */
  cleanup_free char *path = xasprintf ("/proc/%d/ns/pid", (int) init_pid);
  cleanup_close int nsfd = open (path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0)
    return asbx_error (err, errno, "%s: open %s", why, path);
  c = fork ();
  if (c < 0)
    return asbx_error (err, errno, "%s: fork", why);
  if (c == 0)
    {
      /* setns(CLONE_NEWPID) places our children, not us, in the container's pid namespace */
      asbx_err_t e = NULL;
      pid_t w;
      int st = 0;
      if (setns (nsfd, CLONE_NEWPID) < 0)
        _exit (10);
      w = fork ();
      if (w == 0)
        _exit (policy_apply_memfd_noexec (plan, true, &e) < 0 ? 11 : 0);
      if (w < 0 || waitpid (w, &st, 0) < 0)
        _exit (12);
      _exit (WIFEXITED (st) ? WEXITSTATUS (st) : 13);
    }
  while (waitpid (c, &status, 0) < 0)
    if (errno != EINTR)
      return asbx_error (err, errno, "%s: wait for the sysctl writer", why);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return asbx_error (err, EPERM,
                       "%s: setting vm.memfd_noexec=2 in the container's pid namespace from the runtime failed "
                       "(status %d: %s)",
                       why, WIFEXITED (status) ? WEXITSTATUS (status) : -1,
                       WIFEXITED (status) && WEXITSTATUS (status) == 10 ? "setns" : "write or read back");
  return 0;
}

int
policy_verify_memfd_noexec (const struct policy_plan *plan, asbx_err_t *err)
{
  if (!plan || !plan->active || !policy_exec_restricted (plan))
    return 0;
  return memfd_noexec_is_2 ("filesystem.allowExec: a memfd could be executed", err);
}
