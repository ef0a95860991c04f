/* oci_unpack.c - one OCI layer onto a rootfs through directory fds (see oci_unpack.h for why
 * not archive_write_disk). The changeset rules are image-spec layer.md: entries replace what
 * lower layers had at their path (a non-directory replaces a directory tree and vice versa),
 * `.wh.NAME` deletes NAME of lower layers, `.wh..wh..opq` deletes every lower-layer entry of
 * its directory, and neither touches what the same layer adds, whatever the order of the
 * entries in the tar. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/libarchive_dl.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/oci_unpack.h"

#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

struct reader
{
  int fd;
  struct oci_hash hash;
  int errnum; /* errno of a failed read, 0 */
  char buf[1 << 16];
};

/* libarchive's read callback: every byte it sees is hashed */
static la_ssize_t
reader_read (struct archive *a, void *p, const void **out)
{
  struct reader *r = p;
  ssize_t n;
  (void) a;
  do
    n = read (r->fd, r->buf, sizeof r->buf);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    {
      r->errnum = errno;
      archive_set_error (a, errno, "read the blob");
      return -1;
    }
  oci_hash_update (&r->hash, r->buf, (size_t) n);
  *out = r->buf;
  return n;
}

/* a deferred directory: mode and mtime are set after the layer's entries (a 0555 directory
 * would refuse its own children to a non-root caller; its mtime would change with each) */
struct dir_fix
{
  char *path;
  mode_t mode;
  struct timespec mtime;
};

struct layer
{
  int rootfd;
  const struct oci_descriptor *d;
  struct oci_unpack_stats *st;
  void *added;          /* tsearch tree of the paths this layer made (heap strings) */
  struct dir_fix *dirs; /* n_dirs */
  size_t n_dirs;
  bool root;
};

/* One directory of the removal's path from the top: its identity, to check each step back up. */
struct rm_level
{
  dev_t dev;
  ino_t ino;
};

/* Unlink every non-directory in `dir`; the first subdirectory's name into sub (true), or false
 * when none is left. -1 with errno on a failure. */
static int
rm_files_find_dir (int dir, char sub[NAME_MAX + 1])
{
  int fd = dup (dir);
  DIR *d = fd < 0 ? NULL : fdopendir (fd);
  struct dirent *de;
  int found = 0;
  if (!d)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  rewinddir (d); /* the dup shares the offset of an earlier pass */
  while (!found && (errno = 0, de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (unlinkat (dir, de->d_name, 0) == 0 || errno == ENOENT)
        continue;
      if (errno != EISDIR && errno != EPERM)
        found = -1;
      else
        {
          snprintf (sub, NAME_MAX + 1, "%s", de->d_name);
          found = 1;
        }
    }
  int e = errno;
  closedir (d);
  if (found == 0 && e)
    found = -1;
  errno = e;
  return found;
}

/* rmdir the entry of `dir` that is the directory `child` (found by identity: the walk keeps no
 * names, so its memory does not grow with a name per level) */
static int
rm_child_dir (int dir, const struct rm_level *child)
{
  int fd = dup (dir);
  DIR *d = fd < 0 ? NULL : fdopendir (fd);
  struct dirent *de;
  struct stat st;
  if (!d)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  rewinddir (d);
  while ((errno = 0, de = readdir (d)) != NULL)
    if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0
        && fstatat (dir, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode) && st.st_dev == child->dev
        && st.st_ino == child->ino)
      {
        int r = unlinkat (dir, de->d_name, AT_REMOVEDIR);
        int e = errno;
        closedir (d);
        errno = e;
        return r;
      }
  closedir (d);
  errno = ENOENT;
  return -1;
}

/* Depth first without recursion and with two fds at a time: a tree deeper than the fd limit (or
 * the stack) is removed too (outside attack 14: a guest made 1,100 nested directories in the VM's
 * private upper layer; the recursive walk, one fd per level, failed with EMFILE and left the run
 * directory, so that container id could not be created again). Going back up is by "..", checked
 * against the identity recorded on the way down: a directory moved meanwhile stops the removal
 * (EXDEV) rather than letting it continue somewhere else. */
int
oci_remove_at (int parent, const char *name)
{
  if (unlinkat (parent, name, 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -1;
  int cur = openat (parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cur < 0)
    return -1;
  struct rm_level *stack = NULL;
  size_t depth = 0, cap = 0;
  char sub[NAME_MAX + 1];
  int ret = -1, e = 0;
  struct stat st;

  if (fstat (cur, &st) < 0)
    goto out;
  stack = xmalloc ((cap = 16) * sizeof *stack);
  stack[depth++] = (struct rm_level){ st.st_dev, st.st_ino };
  for (;;)
    {
      if (geteuid () != 0)
        (void) fchmod (cur, 0700); /* ours: a 0555 directory from a tar is emptied too */
      int found = rm_files_find_dir (cur, sub);
      if (found < 0)
        goto out;
      if (found)
        {
          int child = openat (cur, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (child < 0 || fstat (child, &st) < 0)
            {
              e = errno;
              if (child >= 0)
                close (child);
              errno = e;
              goto out;
            }
          close (cur);
          cur = child;
          if (depth == cap)
            stack = xrealloc (stack, (cap *= 2) * sizeof *stack);
          stack[depth++] = (struct rm_level){ st.st_dev, st.st_ino };
          continue;
        }
      /* cur is empty: remove it from its parent */
      struct rm_level me = stack[--depth];
      if (depth == 0)
        {
          close (cur);
          cur = -1;
          ret = unlinkat (parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
          break;
        }
      int up = openat (cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      close (cur);
      cur = up;
      if (cur < 0 || fstat (cur, &st) < 0)
        goto out;
      if (st.st_dev != stack[depth - 1].dev || st.st_ino != stack[depth - 1].ino)
        {
          errno = EXDEV;
          goto out;
        }
      if (rm_child_dir (cur, &me) < 0)
        goto out;
    }
out:
  e = errno;
  if (cur >= 0)
    close (cur);
  free (stack);
  errno = e;
  return ret;
}

/* The entry's path, made relative and clean ("./a//b/" -> "a/b"). "" is the root itself.
 * Absolute paths and ".." components are refused: layer.md's changesets are relative to the
 * root, and a tool that wrote "/etc/x" or "../x" made a layer we will not guess about. */
static int
clean_entry_path (const struct layer *l, const char *raw, char *out, size_t size, asbx_err_t *err)
{
  size_t o = 0;

  if (!raw || !*raw)
    return asbx_error (err, 0, "layer %s: an entry without a path", l->d->digest);
  if (raw[0] == '/')
    return asbx_error (err, 0, "layer %s: entry `%s`: an absolute path escapes the root: refused", l->d->digest, raw);
  for (const char *p = raw; *p;)
    {
      size_t n = strcspn (p, "/");
      if (n == 2 && p[0] == '.' && p[1] == '.')
        return asbx_error (err, 0, "layer %s: entry `%s`: a `..` component escapes the root: refused", l->d->digest,
                           raw);
      if (n > NAME_MAX)
        return asbx_error (err, 0, "layer %s: entry `%.64s...`: a component longer than %d bytes", l->d->digest, raw,
                           NAME_MAX);
      if (n && !(n == 1 && p[0] == '.'))
        {
          if (o + n + 2 > size)
            return asbx_error (err, 0, "layer %s: entry `%.64s...`: path longer than %zu bytes", l->d->digest, raw,
                               size - 1);
          if (o)
            out[o++] = '/';
          memcpy (out + o, p, n);
          o += n;
        }
      p += n;
      while (*p == '/')
        p++;
    }
  out[o] = '\0';
  return 0;
}

/* O_PATH fd of the directory `path` (relative, clean; "" = the root) beneath the root, never
 * through a symlink; missing components are made (0755, as tar does; the layer may list a file
 * before its directory) */
static int
open_dir (const struct layer *l, const char *path, const char *entry, bool create, asbx_err_t *err)
{
  int fd;

  if (!*path)
    fd = fcntl (l->rootfd, F_DUPFD_CLOEXEC, 3);
  else
    fd = ps_openat2 (l->rootfd, path, O_PATH | O_DIRECTORY, 0, RESOLVE_STRICT);
  if (fd >= 0)
    return fd;
  if (errno == ENOENT && !create)
    return -1; /* errno ENOENT, *err untouched: the caller decides */
  if (errno == ENOENT)
    {
      /* component by component from the root, each made if missing */
      cleanup_free char *copy = xstrdup (path);
      int cur = fcntl (l->rootfd, F_DUPFD_CLOEXEC, 3);
      for (char *save = NULL, *c = strtok_r (copy, "/", &save); cur >= 0 && c; c = strtok_r (NULL, "/", &save))
        {
          if (mkdirat (cur, c, 0755) < 0 && errno != EEXIST)
            {
              int e = errno;
              close (cur);
              errno = e;
              cur = -1;
              break;
            }
          int next = ps_openat2 (cur, c, O_PATH | O_DIRECTORY, 0, RESOLVE_STRICT);
          int e = errno;
          close (cur);
          errno = e;
          cur = next;
        }
      if (cur >= 0)
        return cur;
    }
  if (errno == ELOOP || errno == EXDEV)
    return asbx_error (err, errno,
                       "layer %s: entry `%s`: its directory `%s` is (or goes through) a symlink: refused (entries "
                       "are never extracted through symlinks)",
                       l->d->digest, entry, path);
  return asbx_error (err, errno, "layer %s: entry `%s`: open its directory `%s`", l->d->digest, entry, path);
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (a, b);
}

static bool
added_here (const struct layer *l, const char *path)
{
  return tfind (path, &l->added, cmp_str) != NULL;
}

static void
mark_added (struct layer *l, const char *path)
{
  char *k = xstrdup (path);
  char **slot = tsearch (k, &l->added, cmp_str);
  if (!slot)
    abort ();
  if (*slot != k)
    free (k);
}

/* `.wh..wh..opq` in directory `dir` (fd dfd): every child a lower layer made goes */
static int
apply_opaque (struct layer *l, int dfd, const char *dir, asbx_err_t *err)
{
  int fd = openat (dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "layer %s: opaque directory `%s`: open", l->d->digest, dir);
  DIR *dd = fdopendir (fd);
  if (!dd)
    {
      close (fd);
      return asbx_error (err, errno, "layer %s: opaque directory `%s`: read", l->d->digest, dir);
    }
  struct dirent *de;
  int ret = 0;
  while (ret == 0 && (de = readdir (dd)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      cleanup_free char *child = *dir ? xasprintf ("%s/%s", dir, de->d_name) : xstrdup (de->d_name);
      if (added_here (l, child))
        continue;
      if (oci_remove_at (dirfd (dd), de->d_name) < 0)
        ret = asbx_error (err, errno, "layer %s: opaque directory `%s`: remove `%s`", l->d->digest, dir, child);
    }
  closedir (dd);
  l->st->whiteouts++;
  return ret;
}

static int
apply_whiteout (struct layer *l, int dfd, const char *dir, const char *name, const char *entry, asbx_err_t *err)
{
  if (!*name || strcmp (name, ".") == 0 || strcmp (name, "..") == 0 || strchr (name, '/'))
    return asbx_error (err, 0, "layer %s: whiteout `%s`: names no file", l->d->digest, entry);
  cleanup_free char *victim = *dir ? xasprintf ("%s/%s", dir, name) : xstrdup (name);
  l->st->whiteouts++;
  if (added_here (l, victim))
    return 0; /* layer.md: a whiteout hides lower layers only */
  if (oci_remove_at (dfd, name) < 0)
    return asbx_error (err, errno, "layer %s: whiteout `%s`: remove `%s`", l->d->digest, entry, victim);
  return 0;
}

static void
set_xattrs (struct layer *l, int fd, struct archive_entry *e)
{
  const char *name;
  const void *val;
  size_t size;

  archive_entry_xattr_reset (e);
  while (archive_entry_xattr_next (e, &name, &val, &size) == ARCHIVE_OK)
    {
      /* trusted.* (overlayfs' own whiteouts and redirects among them) and security.* are not an
       * image's to set: security.capability would give any host user who can reach the cache
       * the file's capabilities (see set_meta for setuid) */
      bool ok = strncmp (name, "user.", 5) == 0;
      if (!ok || fsetxattr (fd, name, val, size, 0) < 0)
        l->st->xattrs++;
    }
}

static int
write_data (struct layer *l, struct archive *a, int fd, const char *entry, int64_t size, asbx_err_t *err)
{
  const void *buf;
  size_t len;
  la_int64_t off;
  int r;

  while ((r = archive_read_data_block (a, &buf, &len, &off)) == ARCHIVE_OK)
    {
      const char *p = buf;
      while (len > 0)
        {
          ssize_t n = pwrite (fd, p, len, off);
          if (n < 0 && errno == EINTR)
            continue;
          if (n < 0)
            return asbx_error (err, errno, "layer %s: entry `%s`: write", l->d->digest, entry);
          p += n, len -= (size_t) n, off += n;
        }
    }
  if (r != ARCHIVE_EOF)
    return asbx_error (err, archive_errno (a), "layer %s: entry `%s`: %s", l->d->digest, entry,
                       archive_error_string (a));
  if (ftruncate (fd, size) < 0) /* a sparse file's trailing hole */
    return asbx_error (err, errno, "layer %s: entry `%s`: truncate", l->d->digest, entry);
  return 0;
}

/* The mode bits an entry of the cache may keep: no group or other write, no sticky bit. The
 * cache lies on the host and is searchable by others; an image's 1777 /var/tmp or 0666 file kept
 * as it is let any local user change what a later root `sandbox --image` run of that image sees
 * (outside tester, attack 06). The container sees its root read-only, so the bits granted
 * nothing inside it; a fresh tmpfs is where it writes. */
#define CACHE_MODE_DROP ((mode_t) (S_IWGRP | S_IWOTH | S_ISVTX))

/* owner, mode, times of what fd (or dfd/name for a symlink) is */
static int
set_meta (struct layer *l, int fd, struct archive_entry *e, const char *entry, asbx_err_t *err)
{
  struct timespec ts[2] = { { archive_entry_mtime (e), archive_entry_mtime_nsec (e) },
                            { archive_entry_mtime (e), archive_entry_mtime_nsec (e) } };
  if (l->root && fchown (fd, (uid_t) archive_entry_uid (e), (gid_t) archive_entry_gid (e)) < 0)
    return asbx_error (err, errno, "layer %s: entry `%s`: chown", l->d->digest, entry);
  /* The cache lies on the host and is searchable by others (a mapped sandbox uid must reach
   * it): a setuid-root file of a hostile image would be a host user's root shell. Setuid and
   * setgid bits are dropped (a policy container runs with no_new_privs, where they do nothing
   * anyway) and counted. */
  mode_t perm = archive_entry_perm (e) & 07777;
  if (perm & (S_ISUID | S_ISGID))
    l->st->setid++;
  if (fchmod (fd, perm & ~(mode_t) (S_ISUID | S_ISGID) & ~CACHE_MODE_DROP) < 0)
    return asbx_error (err, errno, "layer %s: entry `%s`: chmod", l->d->digest, entry);
  set_xattrs (l, fd, e);
  if (futimens (fd, ts) < 0)
    return asbx_error (err, errno, "layer %s: entry `%s`: set times", l->d->digest, entry);
  return 0;
}

static int
make_dir (struct layer *l, int dfd, const char *base, const char *path, struct archive_entry *e, asbx_err_t *err)
{
  if (mkdirat (dfd, base, 0700) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "layer %s: entry `%s`: mkdir", l->d->digest, path);
  cleanup_close int fd = openat (dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "layer %s: entry `%s`: open the directory", l->d->digest, path);
  if (l->root && fchown (fd, (uid_t) archive_entry_uid (e), (gid_t) archive_entry_gid (e)) < 0)
    return asbx_error (err, errno, "layer %s: entry `%s`: chown", l->d->digest, path);
  set_xattrs (l, fd, e);
  l->dirs = xrealloc (l->dirs, (l->n_dirs + 1) * sizeof *l->dirs);
  l->dirs[l->n_dirs++] = (struct dir_fix){ xstrdup (path),
                                           archive_entry_perm (e) & 07777 & ~CACHE_MODE_DROP,
                                           { archive_entry_mtime (e), archive_entry_mtime_nsec (e) } };
  return 0;
}

static int
fix_dirs (struct layer *l, asbx_err_t *err)
{
  int ret = 0;
  /* deepest (latest listed) first, so a parent's mtime is set after its children changed it */
  for (size_t i = l->n_dirs; i-- > 0;)
    {
      struct dir_fix *f = &l->dirs[i];
      struct timespec ts[2] = { f->mtime, f->mtime };
      cleanup_close int fd = ps_openat2 (l->rootfd, f->path, O_RDONLY | O_DIRECTORY, 0, RESOLVE_STRICT);
      if (ret == 0 && fd < 0 && errno != ENOENT) /* gone: a later entry replaced it */
        ret = asbx_error (err, errno, "layer %s: directory `%s`: open", l->d->digest, f->path);
      /* a non-root caller keeps u+rwx on its directories: a later layer (or a whiteout) must
       * still create and remove in a 0555 one, and in the sandbox's user namespace the caller is
       * root, whom the missing bits would not stop anyway */
      mode_t mode = l->root ? f->mode : f->mode | S_IRWXU;
      if (ret == 0 && fd >= 0 && (fchmod (fd, mode) < 0 || futimens (fd, ts) < 0))
        ret = asbx_error (err, errno, "layer %s: directory `%s`: chmod", l->d->digest, f->path);
      free (f->path);
    }
  free (l->dirs);
  l->dirs = NULL;
  l->n_dirs = 0;
  return ret;
}

static int
make_hardlink (struct layer *l, int dfd, const char *base, const char *path, const char *target_raw, asbx_err_t *err)
{
  char target[PATH_MAX] = "";
  if (clean_entry_path (l, target_raw, target, sizeof target, err) < 0)
    return asbx_error_wrap (err, "hard link `%s`", path);
  if (!*target)
    return asbx_error (err, 0, "layer %s: hard link `%s` to the root: refused", l->d->digest, path);
  char *slash = strrchr (target, '/');
  const char *tbase = slash ? slash + 1 : target;
  if (slash)
    *slash = '\0';
  cleanup_close int tfd = open_dir (l, slash ? target : "", path, false, err);
  if (tfd < 0 && errno == ENOENT)
    return asbx_error (err, ENOENT, "layer %s: hard link `%s` -> `%s`", l->d->digest, path, target_raw);
  if (tfd < 0)
    return -1;
  /* flags 0: a symlink as target is linked itself, never followed */
  if (linkat (tfd, tbase, dfd, base, 0) < 0)
    return asbx_error (err, errno, "layer %s: hard link `%s` -> `%s`", l->d->digest, path, target_raw);
  return 0;
}

static int
make_entry (struct layer *l, struct archive *a, struct archive_entry *e, asbx_err_t *err)
{
  char path[PATH_MAX] = "";
  const char *raw = archive_entry_pathname (e);
  struct stat cur;

  if (clean_entry_path (l, raw, path, sizeof path, err) < 0)
    return -1;
  if (!*path)
    return 0; /* "./": the root itself, made by the cache */
  char *slash = strrchr (path, '/');
  const char *base = slash ? slash + 1 : path;
  cleanup_free char *dir = slash ? xasprintf ("%.*s", (int) (slash - path), path) : xstrdup ("");
  bool whiteout = strncmp (base, WH_PREFIX, strlen (WH_PREFIX)) == 0;
  cleanup_close int dfd = open_dir (l, dir, raw, !whiteout, err);
  if (dfd < 0 && whiteout && errno == ENOENT)
    {
      l->st->whiteouts++; /* nothing below to hide */
      return 0;
    }
  if (dfd < 0)
    return -1;
  if (strcmp (base, WH_OPAQUE) == 0)
    return apply_opaque (l, dfd, dir, err);
  if (whiteout)
    return apply_whiteout (l, dfd, dir, base + strlen (WH_PREFIX), raw, err);

  const char *hl = archive_entry_hardlink (e);
  mode_t type = archive_entry_filetype (e);
  if (!hl && (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK))
    {
      l->st->devices++;
      return 0;
    }
  /* what a lower layer (or an earlier entry) has there goes, unless both are directories */
  if (fstatat (dfd, base, &cur, AT_SYMLINK_NOFOLLOW) == 0 && !(S_ISDIR (cur.st_mode) && !hl && type == AE_IFDIR))
    if (oci_remove_at (dfd, base) < 0)
      return asbx_error (err, errno, "layer %s: entry `%s`: replace what a lower layer had", l->d->digest, raw);
  mark_added (l, path);
  l->st->entries++;
  if (hl)
    return make_hardlink (l, dfd, base, raw, hl, err);
  switch (type)
    {
    case AE_IFDIR: return make_dir (l, dfd, base, path, e, err);
    case AE_IFREG:
      {
        cleanup_close int fd = openat (dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
          return asbx_error (err, errno, "layer %s: entry `%s`: create", l->d->digest, raw);
        if (write_data (l, a, fd, raw, archive_entry_size (e), err) < 0)
          return -1;
        return set_meta (l, fd, e, raw, err);
      }
    case AE_IFLNK:
      {
        const char *target = archive_entry_symlink (e);
        struct timespec ts[2] = { { archive_entry_mtime (e), archive_entry_mtime_nsec (e) },
                                  { archive_entry_mtime (e), archive_entry_mtime_nsec (e) } };
        /* the target is stored, never resolved here: later entries cannot go through it */
        if (!target || symlinkat (target, dfd, base) < 0)
          return asbx_error (err, target ? errno : 0, "layer %s: entry `%s`: symlink", l->d->digest, raw);
        if (l->root
            && fchownat (dfd, base, (uid_t) archive_entry_uid (e), (gid_t) archive_entry_gid (e), AT_SYMLINK_NOFOLLOW)
                   < 0)
          return asbx_error (err, errno, "layer %s: entry `%s`: chown", l->d->digest, raw);
        (void) utimensat (dfd, base, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
      }
    case AE_IFIFO:
      {
        if (mkfifoat (dfd, base, 0600) < 0)
          return asbx_error (err, errno, "layer %s: entry `%s`: mkfifo", l->d->digest, raw);
        cleanup_close int fd = openat (dfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
          return asbx_error (err, errno, "layer %s: entry `%s`: open", l->d->digest, raw);
        if (l->root
            && fchownat (dfd, base, (uid_t) archive_entry_uid (e), (gid_t) archive_entry_gid (e), AT_SYMLINK_NOFOLLOW)
                   < 0)
          return asbx_error (err, errno, "layer %s: entry `%s`: chown", l->d->digest, raw);
        if (fchmodat (dfd, base, archive_entry_perm (e) & 0777 & ~CACHE_MODE_DROP, 0) < 0)
          return asbx_error (err, errno, "layer %s: entry `%s`: chmod", l->d->digest, raw);
        return 0;
      }
    default: return asbx_error (err, 0, "layer %s: entry `%s`: unknown file type 0%o", l->d->digest, raw, type);
    }
}

static void
free_key (void *k)
{
  free (k);
}

int
oci_unpack_layer (int rootfd, int blob_fd, const struct oci_descriptor *d, struct oci_unpack_stats *st, asbx_err_t *err)
{
  struct layer l = { .rootfd = rootfd, .d = d, .st = st, .root = geteuid () == 0 };
  struct reader *r;
  struct archive *a;
  struct archive_entry *e;
  char hex[65];
  int ret = -1, rc;

  if (libarchive_load (err) < 0)
    return -1;
  r = xmalloc0 (sizeof *r);
  a = archive_read_new ();
  if (!a)
    abort ();
  r->fd = blob_fd;
  oci_hash_init (&r->hash);
  if (lseek (blob_fd, 0, SEEK_SET) < 0)
    {
      asbx_error (err, errno, "layer %s: seek", d->digest);
      goto out;
    }
  /* only tar, and only the compression the media type names */
  archive_read_support_format_tar (a);
  if (strstr (d->media_type, "gzip"))
    archive_read_support_filter_gzip (a);
  else if (strstr (d->media_type, "zstd"))
    archive_read_support_filter_zstd (a);
  if (archive_read_open (a, r, NULL, reader_read, NULL) != ARCHIVE_OK)
    {
      asbx_error (err, r->errnum, "layer %s (%s): %s", d->digest, d->media_type, archive_error_string (a));
      goto out;
    }
  while ((rc = archive_read_next_header (a, &e)) == ARCHIVE_OK || rc == ARCHIVE_WARN)
    if (make_entry (&l, a, e, err) < 0)
      goto out;
  if (rc != ARCHIVE_EOF)
    {
      asbx_error (err, r->errnum, "layer %s (%s): %s", d->digest, d->media_type, archive_error_string (a));
      goto out;
    }
  /* the rest of the blob (tar padding libarchive did not ask for) is part of the digest */
  for (const void *b; (rc = (int) reader_read (a, r, &b)) > 0;)
    ;
  if (rc < 0)
    {
      asbx_error (err, r->errnum, "layer %s: read", d->digest);
      goto out;
    }
  if (fix_dirs (&l, err) < 0)
    goto out;
  ret = 0;
out:
  oci_hash_final (&r->hash, hex);
  if (ret == 0 && ((int64_t) r->hash.bytes != d->size || strcmp (hex, d->hex) != 0))
    ret = asbx_error (err, 0,
                      "blob %s: digest mismatch while unpacking (the content read hashes to sha256:%s, %llu "
                      "bytes): the layout changed or is corrupt",
                      d->digest, hex, (unsigned long long) r->hash.bytes);
  if (l.dirs)
    {
      asbx_err_t e2 = NULL;
      fix_dirs (&l, &e2);
      asbx_error_free (&e2);
    }
  tdestroy (l.added, free_key);
  archive_read_free (a);
  free (r);
  return ret;
}
