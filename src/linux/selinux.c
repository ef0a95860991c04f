/* selinux.c - process.selinuxLabel (exec context, as setexeccon(3): written to
 * /proc/thread-self/attr/exec, applied at the next execve) and linux.mountLabel (the context=
 * mount option). The write goes through lsm_procattr.c's verified procfs fd rather than
 * libselinux (which opens /proc by path). Ordering: as apparmor.c (after startContainer hooks,
 * before execve).
 *
 * Loading: libselinux (with libpcre2) is not linked: its constructor ran on every command of the
 * runtime (reading /proc/filesystems and /proc/mounts) and its pages were a good part of the
 * resident set. The kernel says whether SELinux is on (selinuxfs mounted with an enforce file,
 * what is_selinux_enabled() looks for first); only when a label is requested and that holds is
 * libselinux opened with dlopen for is_selinux_enabled() (which also checks a policy is
 * loaded). Cached at the first call, made by linux_lsm_probe() before the runtime forks the
 * container (host view; see apparmor.c for why never after pivot_root). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_SELINUX
#include <selinux/selinux.h>
#endif

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/lsm_procattr.h"

static int enabled_cache = -1; /* -1: not asked yet */

static bool
library_confirms (void)
{
#ifdef HAVE_SELINUX
  _Static_assert(__builtin_types_compatible_p (__typeof__ (is_selinux_enabled), int (void)),
                 "is_selinux_enabled (void)");
  return linux_lsm_library_confirms ("libselinux.so.1", "is_selinux_enabled", "/sys/fs/selinux");
#else
  return true;
#endif
}

bool
linux_selinux_enabled (void)
{
  if (enabled_cache < 0)
    enabled_cache = access ("/sys/fs/selinux/enforce", F_OK) == 0 && library_confirms ();
  return enabled_cache == 1;
}

void
linux_lsm_probe (const char *apparmor_profile, const char *selinux_label, const char *mount_label)
{
  if (apparmor_profile && *apparmor_profile)
    (void) linux_apparmor_enabled ();
  if ((selinux_label && *selinux_label) || (mount_label && *mount_label))
    (void) linux_selinux_enabled ();
}

int
linux_selinux_apply (const char *label, asbx_err_t *err)
{
  if (label == NULL || *label == '\0')
    return 0;
  if (!linux_selinux_enabled ())
    {
      log_debug ("process.selinuxLabel `%s` ignored: SELinux is not enabled", label);
      return 0;
    }
#ifndef HAVE_SELINUX
  return asbx_error (err, ENOTSUP, "process.selinuxLabel: SELinux is enabled but this build lacks libselinux");
#else
  /* setexeccon writes the context including its terminating NUL */
  if (linux_lsm_write_attr ("/proc", "exec", label, strlen (label) + 1, err) < 0)
    return asbx_error_wrap (err, "process.selinuxLabel `%s`", label);
  return 0;
#endif
}

char *
linux_selinux_context_option (const char *data, const char *label)
{
  if (label == NULL || *label == '\0')
    return xstrdup (data ? data : "");
  return xasprintf ("%s%scontext=\"%s\"", data && *data ? data : "", data && *data ? "," : "", label);
}

char *
linux_selinux_mount_data (const char *data, const char *label)
{
  if (label && *label && !linux_selinux_enabled ())
    {
      log_debug ("linux.mountLabel `%s` ignored: SELinux is not enabled", label);
      label = NULL;
    }
  if (!label || !*label)
    return data ? xstrdup (data) : NULL;
  return linux_selinux_context_option (data, label);
}
