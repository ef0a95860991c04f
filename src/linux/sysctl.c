/* sysctl.c - linux.sysctl (runtime-spec config-linux.md "Sysctl").
 *
 * Mechanism: write /proc/sys/<key with '.' -> '/'> inside the container's namespaces.
 * Threat model: a sysctl that is not namespaced would change the host, so only keys that live in
 * a namespace the container owns are accepted (the same rules as runc's validateSysctl): the
 * SysV IPC and POSIX mqueue keys need a new ipc namespace, net.* a network namespace that is not
 * the host's, kernel.hostname/kernel.domainname a new uts namespace; everything else is refused.
 * Keys are names, never paths: "..", "/" and a leading "." are refused, and the write goes
 * through an fd whose filesystem is checked to be procfs (fstatfs), so a symlink or a non-proc
 * mount on /proc cannot redirect it.
 * Ordering: check at create (pure); apply in init after the namespaces and /proc exist and
 * before /proc/sys is made read-only. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#endif

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/process.h"

static const char *const ipc_keys[] = {
  "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem",
  "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced",
};

/* Reject keys that could walk out of /proc/sys once '.' becomes '/'. */
static int
key_is_safe (const char *key)
{
  size_t n = strlen (key);

  if (n == 0 || key[0] == '.' || key[n - 1] == '.' || strstr (key, "..") || strchr (key, '/'))
    return 0;
  for (const char *p = key; *p; p++)
    if ((unsigned char) *p <= ' ' || *p == 0x7f)
      return 0;
  return 1;
}

int
linux_sysctl_check_key (const char *key, unsigned long ns_new_flags, asbx_err_t *err)
{
  if (key == NULL || !key_is_safe (key))
    return asbx_error (err, EINVAL, "linux.sysctl: invalid key `%s` (no \"..\", \"/\", leading or trailing \".\")",
                       key ? key : "(null)");
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (ipc_keys); i++)
    if (strcmp (key, ipc_keys[i]) == 0)
      goto ipc;
  if (strncmp (key, "fs.mqueue.", 10) == 0)
    goto ipc;
  if (strncmp (key, "net.", 4) == 0)
    {
      if (ns_new_flags & CLONE_NEWNET)
        return 0;
      return asbx_error (err, EINVAL, "linux.sysctl: `%s` is not allowed in the host's network namespace", key);
    }
  if (strcmp (key, "kernel.hostname") == 0 || strcmp (key, "kernel.domainname") == 0)
    {
      if (ns_new_flags & CLONE_NEWUTS)
        return 0;
      return asbx_error (err, EINVAL, "linux.sysctl: `%s` is not allowed in the host's uts namespace", key);
    }
  return asbx_error (err, EINVAL, "linux.sysctl: `%s` is not in a separate kernel namespace", key);

ipc:
  if (ns_new_flags & CLONE_NEWIPC)
    return 0;
  return asbx_error (err, EINVAL, "linux.sysctl: `%s` is not allowed in the host's ipc namespace", key);
}

int
linux_sysctl_check (const struct oci_map *sysctl, unsigned long ns_new_flags, asbx_err_t *err)
{
  if (sysctl == NULL)
    return 0;
  for (size_t i = 0; i < sysctl->len; i++)
    {
      if (linux_sysctl_check_key (sysctl->keys[i], ns_new_flags, err) < 0)
        return -1;
      if (sysctl->values[i] == NULL)
        return asbx_error (err, EINVAL, "linux.sysctl.%s: missing value", sysctl->keys[i]);
    }
  return 0;
}

static int
is_procfs (int fd)
{
  struct statfs sfs;
  return fstatfs (fd, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC;
}

/* Open sys/<rel> below procfd for writing without following symlinks. */
static int
open_sysctl_file (int procfd, const char *rel)
{
#if defined HAVE_LINUX_OPENAT2_H && defined SYS_openat2
  struct open_how how = { .flags = O_WRONLY | O_CLOEXEC | O_NOCTTY,
                          .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
  int fd = (int) syscall (SYS_openat2, procfd, rel, &how, sizeof how);
  if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
    return fd;
#endif
  /* No openat2: key_is_safe() already excludes "..", and /proc/sys has no directory symlinks;
   * O_NOFOLLOW covers the last component. */
  return openat (procfd, rel, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
}

int
linux_sysctl_apply_at (int procfd, const struct oci_map *sysctl, asbx_err_t *err)
{
  if (sysctl == NULL || sysctl->len == 0)
    return 0;
  if (!is_procfs (procfd))
    return asbx_error (err, EXDEV, "linux.sysctl: the /proc directory is not a procfs");
  for (size_t i = 0; i < sysctl->len; i++)
    {
      const char *key = sysctl->keys[i], *val = sysctl->values[i] ? sysctl->values[i] : "";
      cleanup_free char *rel = NULL;
      cleanup_close int fd = -1;

      if (!key_is_safe (key))
        return asbx_error (err, EINVAL, "linux.sysctl: invalid key `%s`", key);
      rel = xasprintf ("sys/%s", key);
      for (char *p = rel + 4; *p; p++)
        if (*p == '.')
          *p = '/';
      fd = open_sysctl_file (procfd, rel);
      if (fd < 0)
        return asbx_error (err, errno, "linux.sysctl.%s: open /proc/%s", key, rel);
      if (!is_procfs (fd))
        return asbx_error (err, EXDEV, "linux.sysctl.%s: /proc/%s is not on procfs", key, rel);
      if (write_all (fd, val, strlen (val)) < 0)
        return asbx_error (err, errno, "linux.sysctl.%s: write `%s`", key, val);
    }
  return 0;
}

int
linux_sysctl_apply (const struct oci_map *sysctl, asbx_err_t *err)
{
  cleanup_close int procfd = -1;

  if (sysctl == NULL || sysctl->len == 0)
    return 0;
  procfd = open ("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (procfd < 0)
    return asbx_error (err, errno, "linux.sysctl: open /proc");
  return linux_sysctl_apply_at (procfd, sysctl, err);
}
