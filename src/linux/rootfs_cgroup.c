/* rootfs_cgroup.c - build /sys/fs/cgroup inside the container.
 *
 * Threat model: the destination fd was resolved inside the root by the caller; the sub-directories
 * are created inside our own fresh tmpfs (through its fd), and bind sources are host cgroup
 * paths read from the host's /proc (before pivot_root), never from the rootfs.
 * Ordering: the tmpfs is attached first, hierarchies are mounted into it, and it is made
 * read-only last (otherwise the sub-directories could not be created).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/mount.h"
#include "linux/pathsafe.h"
#include "linux/rootfs_cgroup.h"

struct hier
{
  char mountpoint[256];
  char data[256]; /* super options without rw/ro: "cpu,cpuacct", "xattr,name=systemd" */
  bool v2;
};

#define MAX_HIER 32

/* host cgroup mounts from /proc/self/mountinfo; returns the count, -1 with *err */
static int
read_hierarchies (struct hier *h, asbx_err_t *err)
{
  cleanup_fclose FILE *f = fopen ("/proc/self/mountinfo", "re");
  char line[4096];
  int n = 0;

  if (f == NULL)
    {
      asbx_error (err, errno, "open /proc/self/mountinfo"); /* always -1; spelled out for clang-analyzer (make lint) */
      return -1;
    }
  while (n < MAX_HIER && fgets (line, sizeof (line), f))
    {
      char mp[256], fstype[64], super[256];
      char *sep = strstr (line, " - ");

      if (sep == NULL || sscanf (line, "%*s %*s %*s %*s %255s", mp) != 1
          || sscanf (sep + 3, "%63s %*s %255s", fstype, super) != 2)
        continue;
      if (strcmp (fstype, "cgroup") != 0 && strcmp (fstype, "cgroup2") != 0)
        continue;
      memset (&h[n], 0, sizeof (h[n]));
      snprintf (h[n].mountpoint, sizeof (h[n].mountpoint), "%s", mp);
      h[n].v2 = strcmp (fstype, "cgroup2") == 0;
      for (char *save = NULL, *t = strtok_r (super, ",", &save); t; t = strtok_r (NULL, ",", &save))
        if (strcmp (t, "rw") != 0 && strcmp (t, "ro") != 0)
          {
            size_t l = strlen (h[n].data);
            snprintf (h[n].data + l, sizeof (h[n].data) - l, "%s%s", l ? "," : "", t);
          }
      n++;
    }
  return n;
}

/* the calling process' cgroup in the hierarchy named `base` (basename of its mount point) */
static char *
own_cgroup (const char *base, bool v2, asbx_err_t *err)
{
  cleanup_fclose FILE *f = fopen ("/proc/self/cgroup", "re");
  char line[4096];

  if (f == NULL)
    return asbx_error (err, errno, "open /proc/self/cgroup"), NULL;
  while (fgets (line, sizeof (line), f))
    {
      char *c1 = strchr (line, ':'), *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      const char *ctrl;

      if (c2 == NULL)
        continue;
      *c2 = '\0';
      line[strcspn (line, "\n")] = '\0';
      c2[1 + strcspn (c2 + 1, "\n")] = '\0';
      ctrl = c1 + 1;
      if (strncmp (ctrl, "name=", 5) == 0)
        ctrl += 5;
      if ((v2 && *ctrl == '\0') || (!v2 && *ctrl && strcmp (ctrl, base) == 0))
        return xstrdup (c2 + 1);
    }
  return asbx_error (err, ENOENT, "cgroup of hierarchy %s not found in /proc/self/cgroup", base), NULL;
}

static int
hier_mount (const struct hier *h, const char *base, uint64_t attrs, bool cgroupns, const char *cgroup_path,
            asbx_err_t *err)
{
  cleanup_free char *own = NULL;
  cleanup_free char *src = NULL;
  int mfd;

  if (cgroupns)
    return mnt_new_fs (h->v2 ? "cgroup2" : "cgroup", h->v2 ? "cgroup2" : "cgroup", h->v2 ? NULL : h->data, 0, attrs,
                       err);
  if (cgroup_path == NULL)
    {
      own = own_cgroup (base, h->v2, err);
      if (own == NULL)
        return -1;
      cgroup_path = own;
    }
  src = xasprintf ("%s/%s", h->mountpoint, cgroup_path[0] == '/' ? cgroup_path + 1 : cgroup_path);
  mfd = mnt_clone (AT_FDCWD, src, false, err);
  if (mfd < 0)
    return -1;
  if (mnt_setattr (mfd, false, attrs, attrs & MOUNT_ATTR__ATIME ? MOUNT_ATTR__ATIME : 0, 0, err) < 0)
    {
      close (mfd);
      return -1;
    }
  return mfd;
}

/* mount hierarchy h into the directory `base` of the tmpfs */
static int
mount_one_hier (int tmpfs_fd, const struct hier *h, uint64_t attrs, bool cgroupns, const char *cgroup_path,
                asbx_err_t *err)
{
  const char *base = strrchr (h->mountpoint, '/');
  cleanup_close int dir = -1;
  cleanup_close int mfd = -1;

  base = base ? base + 1 : h->mountpoint;
  if (*base == '\0' || strcmp (base, "..") == 0 || strcmp (base, ".") == 0)
    return asbx_error (err, EINVAL, "unexpected cgroup mount point %s", h->mountpoint);
  if (mkdirat (tmpfs_fd, base, 0755) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "mkdir %s", base);
  dir = ps_openat2 (tmpfs_fd, base, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
  if (dir < 0)
    return asbx_error (err, errno, "open %s", base);
  mfd = hier_mount (h, base, attrs, cgroupns, cgroup_path, err);
  if (mfd < 0 || mnt_attach (mfd, dir, err) < 0)
    return asbx_error_wrap (err, "cgroup hierarchy %s", base);
  /* "cpu,cpuacct": runc also offers cpu and cpuacct as symlinks to the combined directory */
  if (strchr (base, ','))
    {
      cleanup_free char *copy = xstrdup (base);
      for (char *save = NULL, *t = strtok_r (copy, ",", &save); t; t = strtok_r (NULL, ",", &save))
        if (symlinkat (base, tmpfs_fd, t) < 0 && errno != EEXIST)
          return asbx_error (err, errno, "symlink %s", t);
    }
  return 0;
}

int
rootfs_mount_cgroup (int dest_fd, uint64_t attrs, bool new_cgroupns, const char *cgroup_path, asbx_err_t *err)
{
  struct hier h[MAX_HIER];
  cleanup_close int tmpfs = -1;
  int n = read_hierarchies (h, err);
  bool v1 = false;
  uint64_t rw_attrs = attrs & ~(uint64_t) MOUNT_ATTR_RDONLY;

  if (n < 0)
    return -1;
  for (int i = 0; i < n; i++)
    v1 |= !h[i].v2;
  if (!v1)
    {
      cleanup_close int mfd = -1;
      for (int i = 0; i < n; i++)
        if (strcmp (h[i].mountpoint, "/sys/fs/cgroup") == 0)
          {
            mfd = hier_mount (&h[i], "", attrs, new_cgroupns, cgroup_path, err);
            if (mfd < 0)
              return -1;
            return mnt_attach (mfd, dest_fd, err);
          }
      return asbx_error (err, ENOENT, "no cgroup filesystem mounted on the host");
    }

  tmpfs = mnt_new_fs ("tmpfs", "tmpfs", "mode=755", 0, rw_attrs, err);
  if (tmpfs < 0 || mnt_attach (tmpfs, dest_fd, err) < 0)
    return -1;
  for (int i = 0; i < n; i++)
    {
      /* only hierarchies below the standard location: a stray cgroup mount elsewhere is not ours */
      if (strncmp (h[i].mountpoint, "/sys/fs/cgroup/", 15) != 0 || strchr (h[i].mountpoint + 15, '/'))
        continue;
      if (mount_one_hier (tmpfs, &h[i], attrs, new_cgroupns, cgroup_path, err) < 0)
        return -1;
    }
  if (attrs & MOUNT_ATTR_RDONLY)
    return mnt_setattr (tmpfs, false, MOUNT_ATTR_RDONLY, 0, 0, err);
  return 0;
}
