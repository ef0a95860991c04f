/* apparmor.c - process.apparmorProfile: change-onexec (the profile is entered at the next
 * execve, so the runtime's own remaining steps run unconfined by it). We write libapparmor's
 * command ("exec <profile>") ourselves through the verified procfs fd of lsm_procattr.c instead
 * of calling aa_change_onexec(), which opens /proc by path. Ordering: after the startContainer
 * hooks (forked hooks would inherit the pending exec label), right before the identity steps and
 * execve.
 *
 * Loading: libapparmor is not linked (it cost every command a mapped library); the kernel says
 * whether AppArmor is on (/sys/module/apparmor/parameters/enabled, the file aa_is_enabled()
 * reads first), and only when a profile is requested and that says "Y" is the library opened
 * with dlopen to confirm with aa_is_enabled() (which also checks securityfs).
 * Threat model of the check: the answer is cached at the first call, which linux_lsm_probe()
 * makes in the runtime before it forks the container's processes, i.e. from the host's /sys.
 * Asked first after pivot_root, /sys would be the container's, whose image could ship
 * "enabled = N" and so have the profile silently ignored; and a dlopen after pivot_root would
 * load the container's libraries into the init. */
#include <errno.h>
#include <string.h>
#ifdef HAVE_APPARMOR
#include <sys/apparmor.h>
#endif

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/lsm_procattr.h"

static int enabled_cache = -1; /* -1: not asked yet */

static bool
library_confirms (void)
{
#ifdef HAVE_APPARMOR
  _Static_assert(__builtin_types_compatible_p (__typeof__ (aa_is_enabled), int (void)), "aa_is_enabled (void)");
  return linux_lsm_library_confirms ("libapparmor.so.1", "aa_is_enabled", "/sys/module/apparmor");
#else
  return true;
#endif
}

bool
linux_apparmor_enabled (void)
{
  if (enabled_cache < 0)
    {
      cleanup_free char *v = NULL;
      enabled_cache = read_file_at (-100, "/sys/module/apparmor/parameters/enabled", 64, &v, NULL, NULL) == 0
                      && v[0] == 'Y' && library_confirms ();
    }
  return enabled_cache == 1;
}

char *
linux_apparmor_exec_command (const char *profile)
{
  return xasprintf ("exec %s", profile);
}

int
linux_apparmor_apply (const char *profile, asbx_err_t *err)
{
  if (profile == NULL || *profile == '\0')
    return 0;
  if (!linux_apparmor_enabled ())
    {
      log_debug ("process.apparmorProfile `%s` ignored: AppArmor is not enabled", profile);
      return 0;
    }
#ifndef HAVE_APPARMOR
  return asbx_error (err, ENOTSUP, "process.apparmorProfile: AppArmor is enabled but this build lacks libapparmor");
#else
  cleanup_free char *cmd = linux_apparmor_exec_command (profile);
  /* the LSM-stacking interface first (5.x+), then the legacy shared attr file */
  if (linux_lsm_write_attr ("/proc", "apparmor/exec", cmd, strlen (cmd), NULL) == 0)
    return 0;
  if (linux_lsm_write_attr ("/proc", "exec", cmd, strlen (cmd), err) < 0)
    return asbx_error_wrap (err, "process.apparmorProfile `%s`", profile);
  return 0;
#endif
}
