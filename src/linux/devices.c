/* devices.c - device nodes in the container's /dev.
 *
 * Threat model: the image may have planted /dev/null -> /etc/passwd, or /dev -> /tmp. The /dev
 * directory is resolved inside the root (pathsafe), nodes are created with mknodat on that
 * directory's fd, ownership is changed with AT_SYMLINK_NOFOLLOW, and a pre-existing entry that is
 * not the exact device is unlinked (unlinkat removes a symlink itself, never its target).
 * The mode is exact because the umask is cleared around mknodat (init is single-threaded).
 * Ordering: after the spec mounts (a tmpfs on /dev hides the image's /dev), before pivot_root
 * (bind sources of the userns case are host paths).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/devices.h"
#include "linux/mount.h"
#include "linux/pathsafe.h"

struct dev_node
{
  const char *path;
  char type; /* c b p */
  unsigned major, minor;
  mode_t mode;
  uid_t uid;
  gid_t gid;
};

static const struct dev_node default_devices[] = {
  { "/dev/null", 'c', 1, 3, 0666, 0, 0 },    { "/dev/zero", 'c', 1, 5, 0666, 0, 0 },
  { "/dev/full", 'c', 1, 7, 0666, 0, 0 },    { "/dev/random", 'c', 1, 8, 0666, 0, 0 },
  { "/dev/urandom", 'c', 1, 9, 0666, 0, 0 }, { "/dev/tty", 'c', 5, 0, 0666, 0, 0 },
};

static mode_t
node_type (char t)
{
  return t == 'b' ? S_IFBLK : t == 'p' ? S_IFIFO : S_IFCHR;
}

/* 1 when parent/base is already exactly this node, 0 when absent (after removing anything else) */
static int
existing_ok (int parent, const char *base, const struct dev_node *d, asbx_err_t *err)
{
  struct stat st;

  if (fstatat (parent, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : asbx_error (err, errno, "stat");
  if ((st.st_mode & S_IFMT) == node_type (d->type) && (d->type == 'p' || st.st_rdev == makedev (d->major, d->minor)))
    return 1;
  if (unlinkat (parent, base, S_ISDIR (st.st_mode) ? AT_REMOVEDIR : 0) < 0)
    return asbx_error (err, errno, "remove the existing entry");
  return 0;
}

static int
mknod_node (int parent, const char *base, const struct dev_node *d, asbx_err_t *err)
{
  mode_t old;
  int r;

  old = umask (0);
  r = mknodat (parent, base, node_type (d->type) | (d->mode & 07777), makedev (d->major, d->minor));
  umask (old);
  if (r < 0 && errno != EEXIST)
    return asbx_error (err, errno, "mknod");
  return 0;
}

/* user namespace: mknod is refused; bind the host's node onto an empty file */
static int
bind_node (int parent, const char *base, const struct dev_node *d, asbx_err_t *err)
{
  cleanup_close int target = -1;
  cleanup_close int mfd = -1;
  struct stat st;
  int fd;

  fd = openat (parent, base, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0 && errno != EEXIST)
    return asbx_error (err, errno, "create the bind target");
  if (fd >= 0)
    close (fd);
  target = openat (parent, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (target < 0)
    return asbx_error (err, errno, "open the bind target");
  mfd = mnt_clone (AT_FDCWD, d->path, false, err);
  if (mfd < 0)
    return asbx_error_wrap (err, "in a user namespace the node cannot be made (mknod needs CAP_MKNOD in the "
                                 "initial user namespace): the host's node of that path is bind-mounted instead");
  /* the host's node must be the one asked: binding another device under the asked name would
   * give the container a device its spec never named */
  if (fstat (mfd, &st) < 0)
    return asbx_error (err, errno, "stat the host's `%s`", d->path);
  if ((st.st_mode & S_IFMT) != node_type (d->type) || (d->type != 'p' && st.st_rdev != makedev (d->major, d->minor)))
    return asbx_error (err, 0,
                       "in a user namespace the node cannot be made (mknod needs CAP_MKNOD in the initial user "
                       "namespace) and the host's `%s` bind-mounted instead is not %c %lld:%lld (it is %s %u:%u)",
                       d->path, d->type, (long long) d->major, (long long) d->minor,
                       S_ISCHR (st.st_mode)    ? "c"
                       : S_ISBLK (st.st_mode)  ? "b"
                       : S_ISFIFO (st.st_mode) ? "p"
                                               : "not a device,",
                       major (st.st_rdev), minor (st.st_rdev));
  return mnt_attach (mfd, target, err);
}

static int
create_one (int rootfd, const struct dev_node *d, bool userns, asbx_err_t *err)
{
  cleanup_close int parent = -1;
  cleanup_free char *buf = NULL;
  const char *base;
  int r;

  if (ps_open_parent (rootfd, d->path, 0755, &parent, &buf, &base, err) < 0)
    return -1;
  r = existing_ok (parent, base, d, err);
  if (r < 0)
    return -1;
  if (r == 0 && (userns ? bind_node (parent, base, d, err) : mknod_node (parent, base, d, err)) < 0)
    return -1;
  if (userns)
    return 0; /* the bound host node keeps its owner; chown would fail with EPERM/EOVERFLOW */
  if (fchownat (parent, base, d->uid, d->gid, AT_SYMLINK_NOFOLLOW) < 0)
    return asbx_error (err, errno, "chown %u:%u", d->uid, d->gid);
  return 0;
}

static int
from_spec (const struct oci_device *s, struct dev_node *d, asbx_err_t *err)
{
  if (s->path == NULL || s->path[0] != '/')
    return asbx_error (err, EINVAL, "path must be absolute");
  if (s->type == NULL || strlen (s->type) != 1 || strchr ("cubp", s->type[0]) == NULL)
    return asbx_error (err, EINVAL, "type must be one of c, u, b, p");
  if (s->type[0] != 'p' && (!s->has_major || !s->has_minor || s->major < 0 || s->minor < 0))
    return asbx_error (err, EINVAL, "major and minor are required for type %s", s->type);
  d->path = s->path;
  d->type = s->type[0] == 'u' ? 'c' : s->type[0];
  d->major = (unsigned) s->major;
  d->minor = (unsigned) s->minor;
  d->mode = s->has_file_mode ? (mode_t) s->file_mode & 07777 : 0666;
  d->uid = s->has_uid ? s->uid : 0;
  d->gid = s->has_gid ? s->gid : 0;
  return 0;
}

static bool
in_spec (const struct oci_spec *spec, const char *path)
{
  const struct oci_linux *l = spec->linux_;

  for (size_t i = 0; l && i < l->devices_len; i++)
    if (l->devices[i].path && strcmp (l->devices[i].path, path) == 0)
      return true;
  return false;
}

int
linux_devices_create (int rootfd, const struct oci_spec *spec, bool userns, asbx_err_t *err)
{
  const struct oci_linux *l = spec->linux_;

  for (size_t i = 0; i < ASBX_ARRAY_SIZE (default_devices); i++)
    if (!in_spec (spec, default_devices[i].path) && create_one (rootfd, &default_devices[i], userns, err) < 0)
      return asbx_error_wrap (err, "default device %s", default_devices[i].path);
  for (size_t i = 0; l && i < l->devices_len; i++)
    {
      struct dev_node d;

      if (from_spec (&l->devices[i], &d, err) < 0 || create_one (rootfd, &d, userns, err) < 0)
        return asbx_error_wrap (err, "linux.devices[%zu] (%s)", i, l->devices[i].path ? l->devices[i].path : "");
    }
  return 0;
}

int
linux_devices_symlinks (int rootfd, bool devpts, asbx_err_t *err)
{
  static const char *const links[][2] = {
    { "/proc/self/fd", "fd" },
    { "/proc/self/fd/0", "stdin" },
    { "/proc/self/fd/1", "stdout" },
    { "/proc/self/fd/2", "stderr" },
  };
  cleanup_close int dev = ps_mkdir_p (rootfd, "/dev", 0755, err);

  if (dev < 0)
    return -1;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (links); i++)
    if (symlinkat (links[i][0], dev, links[i][1]) < 0 && errno != EEXIST)
      return asbx_error (err, errno, "symlink /dev/%s", links[i][1]);
  if (access ("/proc/kcore", F_OK) == 0 && symlinkat ("/proc/kcore", dev, "core") < 0 && errno != EEXIST)
    return asbx_error (err, errno, "symlink /dev/core");
  if (devpts)
    {
      if (unlinkat (dev, "ptmx", 0) < 0 && errno != ENOENT)
        return asbx_error (err, errno, "remove /dev/ptmx");
      if (symlinkat ("pts/ptmx", dev, "ptmx") < 0)
        return asbx_error (err, errno, "symlink /dev/ptmx");
    }
  return 0;
}
