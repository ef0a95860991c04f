/* policy_noexec.c - with filesystem.allowExec, no mount outside the allowExec paths allows
 * exec: see the header. Found by issue 13 §2 (a .so the agent wrote, copied into /tmp or reached
 * read-only through /srv/proj or /home/u/.local, loaded with dlopen: Landlock's EXECUTE is not
 * asked for mmap(PROT_EXEC)).
 *
 * Threat model: nothing of the container runs yet (this is the init, before pivot_root); the
 * rootfs's contents are the image's, so every mount point is re-opened beneath the rootfs fd
 * and must be the very mount mountinfo listed (STATX_MNT_ID), or it is skipped as not visible. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <linux/openat2.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/mount.h"
#include "linux/pathsafe.h"
#include "runtime/policy_alias.h"
#include "linux/mountinfo.h"
#include "runtime/policy_noexec.h"

static const char *const why = "filesystem.allowExec";

bool
policy_exec_restricted (const struct policy_plan *plan)
{
  if (!plan || !plan->active || !plan->landlock)
    return false;
  for (size_t i = 0; i < plan->fs_rules_len; i++)
    if ((plan->fs_rules[i].rights & (POLICY_FS_READ | POLICY_FS_WRITE)) && !(plan->fs_rules[i].rights & POLICY_FS_EXEC))
      return true;
  return false;
}

bool
policy_path_within (const char *dir, const char *path)
{
  size_t n = strcmp (dir, "/") == 0 ? 0 : strlen (dir);
  return strncmp (path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool
under_exec (const struct policy_plan *plan, const char *path)
{
  for (size_t i = 0; i < plan->fs_rules_len; i++)
    if ((plan->fs_rules[i].rights & POLICY_FS_EXEC) && policy_path_within (plan->fs_rules[i].path, path))
      return true;
  return false;
}

static bool
id_in (const uint64_t *v, size_t n, uint64_t id)
{
  for (size_t i = 0; i < n; i++)
    if (v[i] == id)
      return true;
  return false;
}

/* step 1: noexec on every visible mount of the tree outside the allowExec paths; *made lists the
 * mount ids this changed (heap) */
static int
noexec_outside (int rootfd, const struct policy_plan *plan, uint64_t **made, size_t *made_n, asbx_err_t *err)
{
  struct mountinfo_entry *v = NULL;
  size_t n = 0;
  uint64_t root_id;
  const char *prefix = NULL;
  int r = 0;

  if (mountinfo_mount_id (rootfd, &root_id) < 0)
    return asbx_error (err, errno, "%s: statx the rootfs", why);
  if (mountinfo_read (&v, &n, err) < 0)
    return asbx_error_wrap (err, "%s", why);
  for (size_t i = 0; i < n; i++)
    if (v[i].id == root_id)
      prefix = v[i].point;
  if (!prefix)
    {
      mountinfo_free (v, n);
      return asbx_error (err, ENOENT, "%s: the rootfs mount is not in /proc/self/mountinfo", why);
    }
  size_t plen = strcmp (prefix, "/") != 0 ? strlen (prefix) : 0;
  for (size_t i = 0; r == 0 && i < n; i++)
    {
      const char *rel = v[i].point + plen;
      struct statvfs sv;
      uint64_t id;
      if (strncmp (v[i].point, prefix, plen) != 0 || (rel[0] != '\0' && rel[0] != '/'))
        continue; /* not beneath the rootfs */
      if (rel[0] == '\0')
        rel = "/";
      if (under_exec (plan, rel))
        continue;
      cleanup_close int fd = rel[1] == '\0' ? dup (rootfd)
                                            : ps_openat2 (rootfd, rel, O_PATH | O_CLOEXEC, 0,
                                                          RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
      if (fd < 0 || mountinfo_mount_id (fd, &id) < 0 || id != v[i].id)
        continue; /* overmounted or not reachable by its name: not part of the container's view */
      if (fstatvfs (fd, &sv) < 0)
        r = asbx_error (err, errno, "%s: statvfs `%s`", why, rel);
      else if (!(sv.f_flag & ST_NOEXEC))
        {
          if (mnt_setattr (fd, false, MOUNT_ATTR_NOEXEC, 0, 0, err) < 0)
            r = asbx_error_wrap (err, "%s: make `%s` noexec", why, rel);
          *made = xrealloc (*made, (*made_n + 1) * sizeof (**made));
          (*made)[(*made_n)++] = id;
        }
    }
  mountinfo_free (v, n);
  return r;
}

static size_t
depth (const char *p)
{
  size_t d = 0;
  for (; *p; p++)
    d += *p == '/';
  return d;
}

/* step 2: each allowExec path on a mount step 1 changed, shallowest first, gets an exec bind;
 * root_ro_id: the top mount when it is to be read-only (0: not) */
static int
exec_binds (int rootfd, const struct policy_plan *plan, const uint64_t *made, size_t made_n, uint64_t root_ro_id,
            asbx_err_t *err)
{
  size_t maxd = 0;
  for (size_t i = 0; i < plan->fs_rules_len; i++)
    if (depth (plan->fs_rules[i].path) > maxd)
      maxd = depth (plan->fs_rules[i].path);
  for (size_t d = 0; d <= maxd; d++)
    for (size_t i = 0; i < plan->fs_rules_len; i++)
      {
        const struct policy_fs_rule *r = &plan->fs_rules[i];
        uint64_t id;
        if (!(r->rights & POLICY_FS_EXEC) || depth (r->path) != d)
          continue;
        cleanup_close int fd = ps_openat2 (rootfd, r->path, O_PATH | O_CLOEXEC, 0,
                                           RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
          continue; /* an allow on a missing path grants nothing */
        if (fd < 0 || mountinfo_mount_id (fd, &id) < 0)
          return asbx_error (err, errno, "%s: open `%s`", r->origin, r->path);
        if (!id_in (made, made_n, id))
          continue; /* already on an exec mount (or noexec by the spec's own choice) */
        /* a bind out of the rootfs's top mount: that one is made read-only only when the rootfs
         * is finalized (linux/rootfs.c, after the spec's mounts), so the bind gets it here */
        uint64_t ro = root_ro_id && id == root_ro_id ? MOUNT_ATTR_RDONLY : 0;
        cleanup_close int mfd = mnt_clone (fd, "", true, err);
        if (mfd < 0 || mnt_setattr (mfd, false, ro, MOUNT_ATTR_NOEXEC, 0, err) < 0 || mnt_attach (mfd, fd, err) < 0)
          return asbx_error_wrap (err, "%s: exec bind of `%s`", r->origin, r->path);
      }
  return 0;
}

int
policy_apply_noexec (int rootfd, const struct policy_plan *plan, bool root_readonly, asbx_err_t *err)
{
  cleanup_free uint64_t *made = NULL;
  size_t made_n = 0;
  uint64_t root_id;

  if (!policy_exec_restricted (plan))
    return 0;
  if (mountinfo_mount_id (rootfd, &root_id) < 0)
    return asbx_error (err, errno, "%s: statx the rootfs", why);
  if (noexec_outside (rootfd, plan, &made, &made_n, err) < 0)
    return -1;
  if (exec_binds (rootfd, plan, made, made_n, root_readonly ? root_id : 0, err) < 0)
    return -1;
  /* last: the exec binds above are mounts too */
  return policy_noexec_aliases (rootfd, plan, err);
}
