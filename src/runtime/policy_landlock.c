/* policy_landlock.c - the agent policy's Landlock ruleset (policy_build_landlock, see
 * policy_landlock.h); the carve around denyRead paths is policy_carve.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/landlock_ruleset.h"
#include "linux/pathsafe.h"
#include "runtime/policy_apply.h"
#include "runtime/policy_carve.h"
#include "runtime/policy_landlock.h"

#define LL_READ (ASBX_LL_FS_READ_FILE | ASBX_LL_FS_READ_DIR)
#define LL_WRITE                                                                                                       \
  (ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_REMOVE_DIR | ASBX_LL_FS_REMOVE_FILE | ASBX_LL_FS_MAKE_DIR | ASBX_LL_FS_MAKE_REG  \
   | ASBX_LL_FS_MAKE_SOCK | ASBX_LL_FS_MAKE_FIFO | ASBX_LL_FS_MAKE_SYM | ASBX_LL_FS_REFER | ASBX_LL_FS_TRUNCATE)
#define LL_FILE_ONLY                                                                                                   \
  (ASBX_LL_FS_EXECUTE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_READ_FILE | ASBX_LL_FS_TRUNCATE | ASBX_LL_FS_IOCTL_DEV)

/* What every process needs beyond the policy's grants: the standard character devices and the
 * terminal, readable and writable (never creatable: MAKE_CHAR/MAKE_BLOCK stay denied). */
static const struct
{
  const char *path;
  uint64_t rights;
} implicit_rules[] = {
  { "/dev/null", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/zero", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/full", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/random", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/urandom", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/tty", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/ptmx", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/pts", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_READ_DIR | ASBX_LL_FS_IOCTL_DEV },
};

static bool
degraded (const struct policy_plan *plan, const char *layer)
{
  for (size_t i = 0; i < plan->degrade_len; i++)
    if (strcmp (plan->degrade[i], layer) == 0)
      return true;
  return false;
}

static int
ll_allow (struct linux_landlock *ll, int rootfd, const char *path, uint64_t rights, bool quiet_missing, asbx_err_t *err)
{
  struct stat st;
  cleanup_close int fd = ps_openat2 (rootfd, path, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd < 0)
    {
      if (errno == ENOENT && quiet_missing)
        return 0;
      return asbx_error (err, errno, "open `%s`", path);
    }
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "stat `%s`", path);
  if (!S_ISDIR (st.st_mode))
    rights &= LL_FILE_ONLY;
  return linux_landlock_allow_fd (ll, fd, path, rights, err);
}

/* the fs rights the policy's ruleset handles on a kernel of Landlock ABI `abi` */
static uint64_t
ll_handled (int abi)
{
  uint64_t handled = LL_READ | LL_WRITE | ASBX_LL_FS_EXECUTE | ASBX_LL_FS_MAKE_CHAR | ASBX_LL_FS_MAKE_BLOCK;
  if (abi >= 5)
    handled |= ASBX_LL_FS_IOCTL_DEV; /* hardening beyond the policy, where the kernel has it */
  return handled;
}

char *
policy_apply_landlock_degraded (const struct policy_plan *plan)
{
  int abi = linux_landlock_abi ();
  uint64_t fs, net, scope;
  uint32_t log;
  char *dropped = NULL;
  asbx_err_t e = NULL;
  if (!plan->fs_rules_len || !degraded (plan, "landlock"))
    return NULL;
  if (linux_landlock_check (ll_handled (abi), 0, 0, abi >= 7 ? ASBX_LL_LOG_NEW_EXEC_ON : 0, abi, true, &fs, &net,
                            &scope, &log, &dropped, &e)
      < 0)
    asbx_error_free (&e);
  if (!dropped && abi > 0)
    return NULL;
  char *s = xasprintf ("landlock: ABI %d, not enforced: %s", abi, dropped ? dropped : "everything");
  free (dropped);
  return s;
}

struct linux_landlock *
policy_build_landlock (const struct policy_plan *plan, const struct policy_homes_seen *seen, asbx_err_t *err)
{
  int abi = linux_landlock_abi ();
  bool best_effort = degraded (plan, "landlock");
  uint64_t handled = ll_handled (abi);
  cleanup_close int rootfd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct linux_landlock *ll;

  /* log the denials of the program the init execs too (ABI 7; the default logs only the init's
   * own), so the monitor can write `denial` records (monitor/denials.c) */
  /* abstract unix sockets created outside the sandbox's Landlock domain are unreachable (ABI 6):
   * with a shared network namespace (mode open) those are the host's (containerd shims, X11...).
   * Pathname sockets have no Landlock right on this kernel: monitor/unixsock.h. */
  uint64_t scope = abi >= 6 ? ASBX_LL_SCOPE_ABSTRACT_UNIX_SOCKET : 0;
  ll = linux_landlock_new (handled, 0, scope, abi >= 7 ? ASBX_LL_LOG_NEW_EXEC_ON : 0, abi, best_effort, err);
  if (!ll)
    return NULL;
  if (best_effort && linux_landlock_dropped (ll))
    log_warning ("policy degrade landlock: rights not enforced on this kernel: %s", linux_landlock_dropped (ll));
  /* read-only rules are carved around the denyRead paths beneath them (policy_carve.h): a file
   * the host puts at a denied name during the session has no right, whatever the mounts show */
  struct timespec c0, c1;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &c0);
  struct policy_carve *carve = policy_carve_collect (rootfd, plan, seen, err);
  if (!carve)
    {
      linux_landlock_free (ll);
      return NULL;
    }
  for (size_t i = 0; i < plan->fs_rules_len; i++)
    {
      const struct policy_fs_rule *r = &plan->fs_rules[i];
      uint64_t rights = (r->rights & POLICY_FS_READ ? LL_READ : 0) | (r->rights & POLICY_FS_WRITE ? LL_WRITE : 0)
                        | (r->rights & POLICY_FS_EXEC ? ASBX_LL_FS_EXECUTE : 0);
      bool carved = false;
      if (abi >= 5 && (r->rights & POLICY_FS_WRITE))
        rights |= ASBX_LL_FS_IOCTL_DEV;
      if ((r->rights & POLICY_FS_READ) && !(r->rights & POLICY_FS_WRITE)
          && policy_carve_rule (carve, ll, rootfd, r->path, rights, &carved, err) < 0)
        {
          policy_carve_free (carve);
          linux_landlock_free (ll);
          return asbx_error_wrap (err, "policy %s", r->origin), NULL;
        }
      /* an allow on a missing path creates nothing (POLICY.md §2): skipped */
      if (!carved && ll_allow (ll, rootfd, r->path, rights, true, err) < 0)
        {
          policy_carve_free (carve);
          linux_landlock_free (ll);
          return asbx_error_wrap (err, "policy %s", r->origin), NULL;
        }
    }
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &c1);
  log_debug ("policy: %zu Landlock rules carved around denyRead paths (%ld us of CPU with the other rules)",
             policy_carve_rules (carve), (long) ((c1.tv_sec - c0.tv_sec) * 1000000 + (c1.tv_nsec - c0.tv_nsec) / 1000));
  policy_carve_free (carve);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (implicit_rules); i++)
    if (ll_allow (ll, rootfd, implicit_rules[i].path,
                  implicit_rules[i].rights & (abi >= 5 ? ~0ull : ~ASBX_LL_FS_IOCTL_DEV), true, err)
        < 0)
      {
        linux_landlock_free (ll);
        return NULL;
      }
  return ll;
}
