/* overlay.c - the overlay of the review workspace from cloned layer mounts; see the header. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "linux/mount.h"
#include "linux/overlay.h"
#include "linux/pathsafe.h"

/* one layer: by fd, or (an older kernel) by the fd's magic link */
static int
set_layer (int fsfd, const char *key, int fd, asbx_err_t *err)
{
  char link[32];

  if (fsconfig (fsfd, FSCONFIG_SET_FD, key, NULL, fd) == 0)
    return 0;
  if (errno != EINVAL)
    return mnt_fs_error (fsfd, errno, "overlay", key, err);
  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  if (fsconfig (fsfd, FSCONFIG_SET_STRING, key, link, 0) == 0)
    return 0;
  /* "lowerdir+" itself is 6.7; before it only "lowerdir" (one string for every layer) */
  if (errno == EINVAL && strcmp (key, "lowerdir+") == 0
      && fsconfig (fsfd, FSCONFIG_SET_STRING, "lowerdir", link, 0) == 0)
    return 0;
  return mnt_fs_error (fsfd, errno, "overlay", key, err);
}

static int
make_overlay (const struct linux_overlay *o, int upper, int work, uint64_t attrs, asbx_err_t *err)
{
  /* redirect_dir=nofollow: no redirect is created (as with "off") and none is followed; "off"
   * follows existing ones when the module's redirect_always_follow is set, which userxattr
   * refuses ("conflicting options: userxattr,redirect_dir=follow") */
  static const char *const keys[] = { "index", "redirect_dir", "metacopy", "xino" };
  static const char *const vals[] = { "off", "nofollow", "off", "off" };
  cleanup_close int fsfd = fsopen ("overlay", FSOPEN_CLOEXEC);
  int mfd;

  if (fsfd < 0)
    return asbx_error (err, errno, "mount overlay: fsopen (is overlayfs available?)");
  if (fsconfig (fsfd, FSCONFIG_SET_STRING, "source", "agentsbx-workspace", 0) < 0)
    return mnt_fs_error (fsfd, errno, "overlay", "source", err);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (fsconfig (fsfd, FSCONFIG_SET_STRING, keys[i], vals[i], 0) < 0)
      return mnt_fs_error (fsfd, errno, "overlay", keys[i], err);
  if (o->userxattr && fsconfig (fsfd, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
    return mnt_fs_error (fsfd, errno, "overlay", "userxattr", err);
  if (set_layer (fsfd, "lowerdir+", o->lower_mnt, err) < 0 || set_layer (fsfd, "upperdir", upper, err) < 0
      || set_layer (fsfd, "workdir", work, err) < 0)
    return -1;
  if (fsconfig (fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return mnt_fs_error (fsfd, errno, "overlay", "create", err);
  mfd = fsmount (fsfd, FSMOUNT_CLOEXEC, (unsigned) attrs);
  if (mfd < 0)
    return mnt_fs_error (fsfd, errno, "overlay", "fsmount", err);
  return mfd;
}

/* path opened beneath "/" with no symlink in it, and the pinned directory's identity */
static int
open_pinned (const char *path, uint64_t dev, uint64_t ino, const char *what, asbx_err_t *err)
{
  cleanup_close int root = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int fd = -1;
  struct stat st;

  fd = root < 0 ? -1
                : ps_openat2 (root, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS);
  if (fd < 0 || fstat (fd, &st) < 0)
    return asbx_error (err, errno, "overlay: open the %s `%s`", what, path);
  if ((uint64_t) st.st_dev != dev || (uint64_t) st.st_ino != ino)
    return asbx_error (err, 0, "overlay: the %s `%s` was replaced since it was checked: refused", what, path);
  return steal_fd (&fd);
}

/* the non-root runtime's case: the layers resolved here, in our own namespaces */
static int
overlay_in_ns (const struct linux_overlay *o, uint64_t attrs, asbx_err_t *err)
{
  cleanup_close int lower = open_pinned (o->lower_path, o->lower_dev, o->lower_ino, "lower", err);
  cleanup_close int layout = -1, upper = -1, work = -1;

  if (lower < 0)
    return -1;
  layout = open_pinned (o->layout_path, o->layout_dev, o->layout_ino, "workspace directory", err);
  if (layout < 0)
    return -1;
  upper = openat (layout, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  work = openat (layout, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (upper < 0 || work < 0)
    return asbx_error (err, errno, "overlay: open upper/ and work/ of `%s`", o->layout_path);
  struct linux_overlay in = *o;
  in.lower_mnt = lower;
  return make_overlay (&in, upper, work, attrs, err);
}

int
linux_overlay_mount (const struct linux_overlay *o, int dest_fd, uint64_t attrs, asbx_err_t *err)
{
  if (o->lower_mnt < 0)
    return overlay_in_ns (o, attrs, err);

  char link[32];
  int mfd;

  /* the layout clone on the mount point, the lower's on top of it: both in our namespace now */
  if (move_mount (o->layout_mnt, "", dest_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return asbx_error (err, errno, "overlay: attach the upper layer's directory");
  if (move_mount (o->lower_mnt, "", o->layout_mnt, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    mfd = asbx_error (err, errno, "overlay: attach the lower layer");
  else
    mfd = make_overlay (o, o->upper_fd, o->work_fd, attrs, err);
  /* the overlay holds private clones of its layers: the helpers go, the top one first (the
   * magic link of a mount point resolves to what is mounted on it); one left behind would lie
   * under the overlay with the workspaces directory in it, so that is an error */
  const int helpers[] = { o->lower_mnt, o->layout_mnt };
  for (size_t i = 0; i < 2; i++)
    {
      snprintf (link, sizeof link, "/proc/self/fd/%d", helpers[i]);
      if (umount2 (link, MNT_DETACH) < 0 && !(i == 0 && errno == EINVAL && mfd < 0))
        {
          int e = errno;
          if (mfd >= 0)
            close (mfd);
          return asbx_error (err, e, "overlay: detach the layers' helper mounts");
        }
    }
  return mfd;
}
