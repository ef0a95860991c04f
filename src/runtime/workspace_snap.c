/* workspace_snap.c - the copy of an upper layer; see the header. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "runtime/workspace_diff.h"
#include "runtime/workspace_layout.h"
#include "runtime/workspace_snap.h"

#define MAX_DEPTH 4096

struct copy
{
  uint64_t files, bytes;
  asbx_err_t *err;
};

/* every xattr of src (dirfd/name, not followed) onto dst (dirfd/name, not followed), through the
 * fds' /proc/self/fd paths: the l*xattr calls take a path and do not follow its last component */
static int
copy_xattrs (int sdir, const char *sname, int ddir, const char *dname, const char *where, asbx_err_t *err)
{
  char sp[PATH_MAX], dp[PATH_MAX];
  cleanup_free char *list = NULL, *val = NULL;
  ssize_t n;

  snprintf (sp, sizeof sp, "/proc/self/fd/%d/%s", sdir, sname);
  snprintf (dp, sizeof dp, "/proc/self/fd/%d/%s", ddir, dname);
  n = llistxattr (sp, NULL, 0);
  if (n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP))
    return 0;
  if (n < 0)
    return ws_error_path (err, errno, "snapshot: list the xattrs of `%s`", where);
  if (n == 0)
    return 0;
  list = xmalloc ((size_t) n);
  n = llistxattr (sp, list, (size_t) n);
  if (n < 0)
    return ws_error_path (err, errno, "snapshot: list the xattrs of `%s`", where);
  for (char *k = list; k < list + n; k += strlen (k) + 1)
    {
      ssize_t vn = lgetxattr (sp, k, NULL, 0);
      if (vn < 0)
        {
          int en = errno;
          cleanup_free char *ek = ws_escape (k);
          cleanup_free char *ew = ws_escape (where);
          return asbx_error (err, en, "snapshot: read xattr `%s` of `%s`", ek, ew);
        }
      free (val);
      val = xmalloc ((size_t) vn + 1);
      vn = lgetxattr (sp, k, val, (size_t) vn);
      if (vn < 0 || lsetxattr (dp, k, val, (size_t) vn, 0) < 0)
        {
          int en = errno;
          cleanup_free char *ek = ws_escape (k);
          cleanup_free char *ew = ws_escape (where);
          return asbx_error (err, en, "snapshot: copy xattr `%s` of `%s`", ek, ew);
        }
    }
  return 0;
}

static int
copy_file (int sdir, int ddir, const char *name, const struct stat *st, const char *where, struct copy *c)
{
  cleanup_close int in = openat (sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  cleanup_close int out = -1;

  if (in < 0)
    return ws_error_path (c->err, errno, "snapshot: open `%s`", where);
  out = openat (ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    return ws_error_path (c->err, errno, "snapshot: create `%s`", where);
  for (off_t left = st->st_size; left > 0;)
    {
      ssize_t n = copy_file_range (in, NULL, out, NULL, (size_t) left, 0);
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL))
        {
          /* across filesystems before 5.19, or a filesystem without it: read and write */
          char buf[65536];
          n = read (in, buf, sizeof buf);
          if (n > 0 && write_all (out, buf, (size_t) n) < 0)
            n = -1;
        }
      if (n < 0)
        return ws_error_path (c->err, errno, "snapshot: copy `%s`", where);
      if (n == 0)
        break; /* shrank while copied (a running container's write): what is there */
      left -= n;
      c->bytes += (uint64_t) n;
    }
  c->files++;
  return 0;
}

static int copy_dir (int sdir, int ddir, const char *where, unsigned depth, struct copy *c);

/* one entry of sdir into ddir, then its owner, xattrs, mode and times */
static int
copy_entry (int sdir, int ddir, const char *name, const char *where, unsigned depth, struct copy *c)
{
  struct stat st;
  int r = 0;

  if (fstatat (sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : ws_error_path (c->err, errno, "snapshot: stat `%s`", where);
  switch (st.st_mode & S_IFMT)
    {
    case S_IFDIR:
      {
        if (mkdirat (ddir, name, 0700) < 0)
          return ws_error_path (c->err, errno, "snapshot: create `%s`", where);
        int s2 = openat (sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int d2 = s2 < 0 ? -1 : openat (ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s2 < 0 || d2 < 0)
          r = ws_error_path (c->err, errno, "snapshot: open `%s`", where);
        else
          r = copy_dir (s2, d2, where, depth + 1, c);
        if (s2 >= 0)
          close (s2);
        if (d2 >= 0)
          close (d2);
        break;
      }
    case S_IFREG: r = copy_file (sdir, ddir, name, &st, where, c); break;
    case S_IFLNK:
      {
        char target[PATH_MAX];
        ssize_t n = readlinkat (sdir, name, target, sizeof target - 1);
        if (n < 0)
          return ws_error_path (c->err, errno, "snapshot: read the link `%s`", where);
        target[n] = '\0';
        if (symlinkat (target, ddir, name) < 0)
          return ws_error_path (c->err, errno, "snapshot: create the link `%s`", where);
        break;
      }
    case S_IFCHR:
    case S_IFBLK:
    case S_IFIFO:
      /* whiteouts are char 0:0 (mknod of a whiteout needs no CAP_MKNOD since Linux 5.8) */
      if (mknodat (ddir, name, st.st_mode & S_IFMT, st.st_rdev) < 0)
        return ws_error_path (c->err, errno, "snapshot: create `%s`", where);
      break;
    default: return 0; /* sockets: overlayfs copies none up */
    }
  if (r < 0)
    return -1;
  if (fchownat (ddir, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != EPERM)
    return ws_error_path (c->err, errno, "snapshot: chown `%s`", where);
  if (copy_xattrs (sdir, name, ddir, name, where, c->err) < 0)
    return -1;
  if (!S_ISLNK (st.st_mode) && fchmodat (ddir, name, st.st_mode & 07777, 0) < 0)
    return ws_error_path (c->err, errno, "snapshot: chmod `%s`", where);
  struct timespec times[2] = { st.st_atim, st.st_mtim };
  if (utimensat (ddir, name, times, AT_SYMLINK_NOFOLLOW) < 0)
    return ws_error_path (c->err, errno, "snapshot: set the times of `%s`", where);
  return 0;
}

static int
copy_dir (int sdir, int ddir, const char *where, unsigned depth, struct copy *c)
{
  int fd = fcntl (sdir, F_DUPFD_CLOEXEC, 3);
  DIR *d;
  struct dirent *de;
  int r = 0;

  if (depth > MAX_DEPTH)
    return ws_error_path (c->err, ELOOP, "snapshot: `%s`: deeper than %d directories", where, MAX_DEPTH);
  if (fd < 0 || (d = fdopendir (fd)) == NULL)
    {
      if (fd >= 0)
        close (fd);
      return ws_error_path (c->err, errno, "snapshot: read `%s`", where);
    }
  while (r == 0 && (de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      cleanup_free char *w = xasprintf ("%s/%s", where, de->d_name);
      r = copy_entry (sdir, ddir, de->d_name, w, depth, c);
    }
  closedir (d);
  return r;
}

int
ws_copy_tree (int src_parent, const char *src_name, int dst_parent, const char *dst_name, const char *where,
              uint64_t *files, uint64_t *bytes, asbx_err_t *err)
{
  struct copy c = { .err = err };
  struct stat st;
  cleanup_close int s = openat (src_parent, src_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_close int d = -1;

  if (s < 0 || fstat (s, &st) < 0)
    return ws_error_path (err, errno, "snapshot: open `%s`", where);
  if (mkdirat (dst_parent, dst_name, 0700) < 0)
    return ws_error_path (err, errno, "snapshot: create the copy of `%s`", where);
  d = openat (dst_parent, dst_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (d < 0)
    return ws_error_path (err, errno, "snapshot: open the copy of `%s`", where);
  if (copy_dir (s, d, where, 0, &c) < 0)
    return -1;
  /* the top directory's own owner, mode and xattrs (an opaque upper root) */
  if ((fchown (d, st.st_uid, st.st_gid) < 0 && errno != EPERM) || fchmod (d, st.st_mode & 07777) < 0)
    return ws_error_path (err, errno, "snapshot: set the owner and mode of the copy of `%s`", where);
  if (copy_xattrs (src_parent, src_name, dst_parent, dst_name, where, err) < 0)
    return -1;
  if (files)
    *files = c.files;
  if (bytes)
    *bytes = c.bytes;
  return 0;
}

int
ws_snap_meta_write (int dirfd, const char *name, uint64_t files, uint64_t bytes, asbx_err_t *err)
{
  cleanup_free char *created = asbx_rfc3339_now ();
  yajl_gen g = json_gen_new (JSON_GEN_PRETTY);
  char num[24];
  size_t len = 0;

  yajl_gen_map_open (g);
  json_gen_kv (g, "name", name);
  json_gen_kv (g, "created", created);
  json_gen_str (g, "files");
  snprintf (num, sizeof num, "%llu", (unsigned long long) files);
  yajl_gen_number (g, num, strlen (num));
  json_gen_str (g, "bytes");
  snprintf (num, sizeof num, "%llu", (unsigned long long) bytes);
  yajl_gen_number (g, num, strlen (num));
  yajl_gen_map_close (g);
  cleanup_free char *text = json_gen_finish (g, true, &len);
  cleanup_close int fd = openat (dirfd, WS_META ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || write_all (fd, text, len) < 0 || fsync (fd) < 0 || renameat (dirfd, WS_META ".tmp", dirfd, WS_META) < 0)
    return asbx_error (err, errno, "snapshot %s: write meta.json", name);
  return 0;
}
