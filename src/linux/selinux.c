/* selinux.c - process.selinuxLabel (exec context, as setexeccon(3): written to
 * /proc/thread-self/attr/exec, applied at the next execve) and linux.mountLabel (the context=
 * mount option). The write goes through lsm_procattr.c's verified procfs fd rather than
 * libselinux (which opens /proc by path); libselinux gives the enabled check when built in.
 * Ordering: as apparmor.c (after startContainer hooks, before execve). */
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

bool
linux_selinux_enabled (void)
{
#ifdef HAVE_SELINUX
  return is_selinux_enabled () == 1;
#else
  return access ("/sys/fs/selinux/enforce", F_OK) == 0;
#endif
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
