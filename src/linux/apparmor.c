/* apparmor.c - process.apparmorProfile: change-onexec (the profile is entered at the next
 * execve, so the runtime's own remaining steps run unconfined by it). We write libapparmor's
 * command ("exec <profile>") ourselves through the verified procfs fd of lsm_procattr.c instead
 * of calling aa_change_onexec(), which opens /proc by path; libapparmor is used for the enabled
 * check when the build has it. Ordering: after the startContainer hooks (forked hooks would
 * inherit the pending exec label), right before the identity steps and execve. */
#include <errno.h>
#include <string.h>
#ifdef HAVE_APPARMOR
#include <sys/apparmor.h>
#endif

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/lsm_procattr.h"

bool
linux_apparmor_enabled (void)
{
#ifdef HAVE_APPARMOR
  return aa_is_enabled () == 1;
#else
  cleanup_free char *v = NULL;
  return read_file_at (-100, "/sys/module/apparmor/parameters/enabled", 64, &v, NULL, NULL) == 0 && v[0] == 'Y';
#endif
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
