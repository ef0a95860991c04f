/* workspace_layout.c - the review workspace's directory: its lock, creation and removal (meta.json:
 * workspace_meta.c); see the header. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "libocispec/oci_json.h"
#include "runtime/state.h"
#include "runtime/workspace_diff.h"
#include "runtime/workspace_layout.h"

int
ws_root_open (const char *dir, bool create, asbx_err_t *err)
{
  if (dir == NULL || dir[0] != '/')
    return asbx_error (err, EINVAL, "workspaces directory `%s`: expected an absolute path", dir ? dir : "");
  if (create)
    {
      /* parents as the admin would make them (0755), the directory itself private */
      cleanup_free char *p = xstrdup (dir);
      for (char *s = strchr (p + 1, '/'); s; s = strchr (s + 1, '/'))
        {
          *s = '\0';
          if (mkdir (p, 0755) < 0 && errno != EEXIST)
            return asbx_error (err, errno, "workspaces directory: create `%s`", p);
          *s = '/';
        }
      if (mkdir (dir, 0700) < 0 && errno != EEXIST)
        return asbx_error (err, errno, "workspaces directory: create `%s`", dir);
    }
  int fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "workspaces directory `%s`", dir);
  return fd;
}

int
ws_id_check (const char *id, asbx_err_t *err)
{
  return asbx_id_validate (id, err);
}

int
ws_name_check (const char *name, asbx_err_t *err)
{
  size_t n = strlen (name);
  if (n == 0 || n > 64 || name[0] == '.')
    return asbx_error (err, EINVAL, "snapshot name `%s`: expected 1-64 of [A-Za-z0-9._-], not starting with '.'", name);
  for (const char *p = name; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_'
          || *p == '-'))
      return asbx_error (err, EINVAL, "snapshot name `%s`: expected 1-64 of [A-Za-z0-9._-], not starting with '.'",
                         name);
  return 0;
}

static int
lock_at (int dirfd, bool create, bool nonblock, const char *id, asbx_err_t *err)
{
  cleanup_close int fd = openat (dirfd, WS_LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0),
                                 0600);
  if (fd < 0)
    return asbx_error (err, errno, "workspace `%s`: open its lock", id);
  if (flock (fd, LOCK_EX | (nonblock ? LOCK_NB : 0)) < 0)
    {
      if (errno == EWOULDBLOCK)
        return asbx_error (err, EWOULDBLOCK, "workspace `%s` is in use (locked by another agentsbx)", id);
      return asbx_error (err, errno, "workspace `%s`: lock", id);
    }
  return steal_fd (&fd);
}

int
ws_open (int rootfd, const char *id, bool nonblock, int *lockfd, asbx_err_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  if (ws_id_check (id, err) < 0)
    return -1;
  fd = openat (rootfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "workspace `%s`", id);
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "workspace `%s`: stat", id);
  if (st.st_uid != geteuid () || (st.st_mode & 077))
    return asbx_error (err, EPERM,
                       "workspace `%s`: expected a directory of uid %u, mode 0700 (found uid %u, mode %04o)", id,
                       (unsigned) geteuid (), (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777));
  *lockfd = lock_at (fd, false, nonblock, id, err);
  if (*lockfd < 0)
    return -1;
  return steal_fd (&fd);
}

int
ws_create (int rootfd, const char *id, uid_t uid, gid_t gid, int *lockfd, asbx_err_t *err)
{
  static const char *const sub[] = { WS_UPPER, WS_WORK };
  cleanup_close int fd = -1, lk = -1;

  if (ws_id_check (id, err) < 0)
    return -1;
  if (mkdirat (rootfd, id, 0700) < 0)
    return asbx_error (err, errno, "workspace `%s`: create", id);
  fd = openat (rootfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || (lk = lock_at (fd, true, true, id, err)) < 0)
    goto fail;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (sub); i++)
    if (mkdirat (fd, sub[i], 0755) < 0 || fchownat (fd, sub[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
      {
        asbx_error (err, errno, "workspace `%s`: create %s/", id, sub[i]);
        goto fail;
      }
  *lockfd = steal_fd (&lk);
  return steal_fd (&fd);
fail:
  if (fd < 0 && !*err)
    asbx_error (err, errno, "workspace `%s`: open", id);
  {
    asbx_err_t e = NULL;
    ws_remove_tree (rootfd, id, id, &e);
    asbx_error_free (&e);
  }
  return -1;
}

/* the entries of dfd, then nothing: a directory's children removed before it */
static int
remove_children (int dfd, const char *where, unsigned depth, asbx_err_t *err)
{
  DIR *d;
  struct dirent *de;
  int r = 0;

  if (depth > 4096)
    return ws_error_path (err, ELOOP, "remove `%s`: deeper than 4096 directories", where);
  d = fdopendir (dfd);
  if (d == NULL)
    {
      close (dfd);
      return ws_error_path (err, errno, "remove `%s`: read directory", where);
    }
  while (r == 0 && (errno = 0, de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (unlinkat (dirfd (d), de->d_name, 0) == 0 || errno == ENOENT)
        continue;
      if (errno != EISDIR && errno != EPERM)
        {
          int en = errno;
          cleanup_free char *p = xasprintf ("%s/%s", where, de->d_name);
          r = ws_error_path (err, en, "remove `%s`", p);
          break;
        }
      int sub = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      /* overlayfs makes work/work mode 0000: a non-root owner must open it up to empty it */
      if (sub < 0 && errno == EACCES && fchmodat (dirfd (d), de->d_name, 0700, 0) == 0)
        sub = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0)
        {
          int en = errno;
          cleanup_free char *p = xasprintf ("%s/%s", where, de->d_name);
          r = ws_error_path (err, en, "remove `%s`", p);
          break;
        }
      cleanup_free char *w = xasprintf ("%s/%s", where, de->d_name);
      r = remove_children (sub, w, depth + 1, err);
      if (r == 0 && unlinkat (dirfd (d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        r = ws_error_path (err, errno, "remove `%s`", w);
    }
  closedir (d);
  return r;
}

int
ws_remove_tree (int dirfd, const char *name, const char *where, asbx_err_t *err)
{
  if (unlinkat (dirfd, name, 0) == 0 || errno == ENOENT)
    return 0;
  int fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : asbx_error (err, errno, "remove `%s`", where);
  if (remove_children (fd, where, 0, err) < 0)
    return -1;
  if (unlinkat (dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return asbx_error (err, errno, "remove `%s`", where);
  return 0;
}

int
ws_set_state (const char *workspaces_dir, const char *id, const char *state, asbx_err_t *err)
{
  cleanup_close int rootfd = -1, dfd = -1, lk = -1;
  struct ws_meta m;
  asbx_err_t e = NULL;
  int r;

  rootfd = ws_root_open (workspaces_dir, false, &e);
  if (rootfd >= 0)
    dfd = ws_open (rootfd, id, false, &lk, &e);
  if (dfd < 0)
    {
      bool gone = e && e->errnum == ENOENT;
      if (gone)
        {
          asbx_error_free (&e);
          return 0;
        }
      asbx_error_move (err, &e);
      return -1;
    }
  cleanup_free char *where = xasprintf ("%s/%s", workspaces_dir, id);
  if (ws_meta_read (dfd, where, &m, err) < 0)
    return -1;
  free (m.state);
  m.state = xstrdup (state);
  r = ws_meta_write (dfd, where, &m, err);
  ws_meta_clear (&m);
  return r;
}

/* entries below dirfd (not counting directories that only hold others) */
static uint64_t
count_changed (int dfd, unsigned depth)
{
  int fd = openat (dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir (fd);
  struct dirent *de;
  uint64_t n = 0;

  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return 0;
    }
  while ((de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (de->d_type == DT_DIR && depth < 4096)
        {
          int sub = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          uint64_t k = sub < 0 ? 0 : count_changed (sub, depth + 1);
          if (sub >= 0)
            close (sub);
          n += k ? k : 1; /* an empty (new or opaque) directory is a change by itself */
        }
      else
        n++;
    }
  closedir (d);
  return n;
}

uint64_t
ws_upper_changed (int dirfd)
{
  int up = openat (dirfd, WS_UPPER, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  uint64_t n = up < 0 ? 0 : count_changed (up, 0);
  if (up >= 0)
    close (up);
  return n;
}
