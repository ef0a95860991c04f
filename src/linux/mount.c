/* mount.c - thin, error-reporting wrappers over the new mount API (see mount.h for why).
 *
 * Threat model: the callers hand in fds that were resolved inside the root; nothing here looks
 * up a path inside the container (the only paths accepted are host paths: bind sources).
 * Ordering: a mount is created detached, attached with mnt_attach, then adjusted with
 * mnt_setattr (propagation can only be changed once the mount is attached to our namespace).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/mount.h"
#include "linux/mountopts.h"

#ifndef ST_NOSYMFOLLOW
#define ST_NOSYMFOLLOW 0x2000 /* include/linux/statfs.h */
#endif

int
mnt_clone (int dirfd, const char *path, bool recursive, asbx_err_t *err)
{
  unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  int fd;

  if (*path == '\0')
    flags |= AT_EMPTY_PATH;
  fd = open_tree (dirfd, path, flags);
  if (fd < 0)
    return asbx_error (err, errno, "bind `%s`", *path ? path : "(fd)");
  return fd;
}

/* fail with the fs-context log lines ("e tmpfs: Bad value for 'mode'") appended */
int
mnt_fs_error (int fsfd, int errnum, const char *type, const char *what, asbx_err_t *err)
{
  char line[512], logs[1024] = "";
  ssize_t n;

  while ((n = read (fsfd, line, sizeof (line) - 1)) > 0)
    {
      line[n] = '\0';
      line[strcspn (line, "\n")] = '\0';
      if (strlen (logs) + (size_t) n + 4 < sizeof (logs))
        {
          strcat (logs, *logs ? "; " : "");
          strcat (logs, line[1] == ' ' ? line + 2 : line);
        }
    }
  if (*logs)
    return asbx_error (err, errnum, "mount %s: %s (%s)", type, what, logs);
  return asbx_error (err, errnum, "mount %s: %s", type, what);
}

static int
config_items (int fsfd, const char *type, const char *data, unsigned sb_flags, asbx_err_t *err)
{
  static const struct
  {
    unsigned bit;
    const char *key;
  } sb[] = { { MOUNTOPTS_SB_SYNC, "sync" },
             { MOUNTOPTS_SB_DIRSYNC, "dirsync" },
             { MOUNTOPTS_SB_MAND, "mand" },
             { MOUNTOPTS_SB_LAZYTIME, "lazytime" } };
  cleanup_free char *copy = xstrdup (data);
  char *save = NULL;

  for (char *item = copy ? strtok_r (copy, ",", &save) : NULL; item; item = strtok_r (NULL, ",", &save))
    {
      char *eq = strchr (item, '=');
      int r;

      if (eq)
        {
          *eq = '\0';
          r = fsconfig (fsfd, FSCONFIG_SET_STRING, item, eq + 1, 0);
          *eq = '=';
        }
      else
        r = fsconfig (fsfd, FSCONFIG_SET_FLAG, item, NULL, 0);
      if (r < 0)
        return mnt_fs_error (fsfd, errno, type, item, err);
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (sb); i++)
    if ((sb_flags & sb[i].bit) && fsconfig (fsfd, FSCONFIG_SET_FLAG, sb[i].key, NULL, 0) < 0)
      return mnt_fs_error (fsfd, errno, type, sb[i].key, err);
  return 0;
}

int
mnt_new_fs (const char *type, const char *source, const char *data, unsigned sb_flags, uint64_t attrs, asbx_err_t *err)
{
  cleanup_close int fsfd = -1;
  int mfd;

  fsfd = fsopen (type, FSOPEN_CLOEXEC);
  if (fsfd < 0)
    return asbx_error (err, errno, "mount %s: fsopen", type);
  if (source && *source && fsconfig (fsfd, FSCONFIG_SET_STRING, "source", source, 0) < 0)
    return mnt_fs_error (fsfd, errno, type, "source", err);
  if (config_items (fsfd, type, data, sb_flags, err) < 0)
    return -1;
  if (fsconfig (fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return mnt_fs_error (fsfd, errno, type, "create", err);
  mfd = fsmount (fsfd, FSMOUNT_CLOEXEC, (unsigned) attrs);
  if (mfd < 0)
    return mnt_fs_error (fsfd, errno, type, "fsmount", err);
  return mfd;
}

int
mnt_reconfigure (int fd, const char *data, unsigned sb_flags, asbx_err_t *err)
{
  cleanup_close int fsfd = fspick (fd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);

  if (fsfd < 0)
    return asbx_error (err, errno, "remount: fspick");
  if (config_items (fsfd, "(remount)", data, sb_flags, err) < 0)
    return -1;
  if (fsconfig (fsfd, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) < 0)
    return mnt_fs_error (fsfd, errno, "(remount)", "reconfigure", err);
  return 0;
}

int
mnt_attach (int mfd, int dest_fd, asbx_err_t *err)
{
  if (move_mount (mfd, "", dest_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return asbx_error (err, errno, "move_mount");
  return 0;
}

int
mnt_setattr (int fd, bool recursive, uint64_t set, uint64_t clr, unsigned long propagation, asbx_err_t *err)
{
  struct mount_attr attr = { .attr_set = set, .attr_clr = clr, .propagation = propagation };

  if (set == 0 && clr == 0 && propagation == 0)
    return 0;
  if (mount_setattr (fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr, sizeof (attr)) < 0)
    return asbx_error (err, errno, "mount_setattr%s", recursive ? " (recursive)" : "");
  return 0;
}

int64_t
mnt_current_attrs (int fd)
{
  struct statvfs st;
  int64_t a = 0;

  if (fstatvfs (fd, &st) < 0)
    return -1;
  if (st.f_flag & ST_RDONLY)
    a |= MOUNT_ATTR_RDONLY;
  if (st.f_flag & ST_NOSUID)
    a |= MOUNT_ATTR_NOSUID;
  if (st.f_flag & ST_NODEV)
    a |= MOUNT_ATTR_NODEV;
  if (st.f_flag & ST_NOEXEC)
    a |= MOUNT_ATTR_NOEXEC;
  if (st.f_flag & ST_NOATIME)
    a |= MOUNT_ATTR_NOATIME;
  if (st.f_flag & ST_NODIRATIME)
    a |= MOUNT_ATTR_NODIRATIME;
  if (st.f_flag & ST_NOSYMFOLLOW)
    a |= MOUNT_ATTR_NOSYMFOLLOW;
  return a;
}
