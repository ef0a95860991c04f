/* user.c - process.user (uid, gid, additionalGids, umask) and process.noNewPrivileges.
 *
 * Mechanism: setgroups(2), setresgid(2), setresuid(2), umask(2), prctl(PR_SET_NO_NEW_PRIVS).
 * Threat model: the supplementary groups of the runtime must never leak into the container, so
 * setgroups() always runs (with the asked list, possibly empty) - except in a user namespace
 * whose /proc/self/setgroups is "deny" (user_namespaces(7)), where the call is impossible and,
 * with no additional gids asked, the groups are already those of the mapping.
 * Ordering: groups and gid before uid (after setresuid we lack CAP_SETGID); the caller has set
 * PR_SET_KEEPCAPS and re-applies capabilities afterwards. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/process.h"

/* true when /proc/self/setgroups says "deny"; missing file (kernel < 3.19) = allowed. */
static bool
setgroups_denied (void)
{
  cleanup_free char *buf = NULL;

  if (read_file_at (AT_FDCWD, "/proc/self/setgroups", 64, &buf, NULL, NULL) < 0)
    return false;
  return strncmp (buf, "deny", 4) == 0;
}

int
linux_user_apply (const struct oci_user *user, bool userns, asbx_err_t *err)
{
  cleanup_free gid_t *gids = NULL;
  size_t n = user->additional_gids_len;

  if (n > 0)
    {
      gids = xmalloc (n * sizeof (*gids));
      for (size_t i = 0; i < n; i++)
        gids[i] = (gid_t) user->additional_gids[i];
    }
  if (n == 0 && userns && setgroups_denied ())
    log_debug ("setgroups is denied in this user namespace and no additionalGids: skipped");
  else if (setgroups (n, gids) < 0)
    {
      if (errno == EPERM && userns && setgroups_denied ())
        return asbx_error (err, errno,
                           "process.user.additionalGids: setgroups is denied in this user namespace "
                           "(/proc/self/setgroups is \"deny\")");
      return asbx_error (err, errno, "process.user.additionalGids: setgroups (%zu groups)", n);
    }
  if (setresgid (user->gid, user->gid, user->gid) < 0)
    return asbx_error (err, errno, "process.user.gid: setresgid %u", user->gid);
  if (setresuid (user->uid, user->uid, user->uid) < 0)
    return asbx_error (err, errno, "process.user.uid: setresuid %u", user->uid);
  return 0;
}

void
linux_umask_apply (const struct oci_user *user)
{
  mode_t m = 0022;

  if (user && user->has_umask)
    m = (mode_t) (user->umask & 07777);
  umask (m);
}

int
linux_nnp_apply (const struct oci_process *proc, asbx_err_t *err)
{
  if (proc == NULL || !proc->no_new_privileges)
    return 0;
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return asbx_error (err, errno, "process.noNewPrivileges: prctl PR_SET_NO_NEW_PRIVS");
  return 0;
}
