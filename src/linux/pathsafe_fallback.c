/* pathsafe_fallback.c - userspace emulation of openat2(2) scoped resolution, for kernels (< 5.6)
 * or seccomp filters that answer openat2 with ENOSYS.
 *
 * Mechanism: the path is walked one component at a time from an O_PATH fd, each step an
 * openat(cur, name, O_PATH|O_NOFOLLOW). A step can only go *down* from `cur`, never through a
 * symlink, so the kernel never resolves more than one name for us. Symlinks are read with
 * readlinkat(fd, "") and their target is spliced in front of the rest of the path: an absolute
 * target restarts at the root fd (RESOLVE_IN_ROOT) or fails with EXDEV (RESOLVE_BENEATH), as
 * openat2(2) documents. ".." at the root stays there (IN_ROOT) or fails with EXDEV (BENEATH).
 * 40 symlinks at most (MAXSYMLINKS, path_resolution(7)) -> ELOOP. The final component is
 * opened with the caller's flags from its parent fd with O_NOFOLLOW, and checked to be the very
 * inode the walk found (else EAGAIN, which ps_openat2() retries); a directory is re-opened as
 * "." from its own fd, so no name is looked up again. No /proc/self/fd reopen is needed.
 *
 * Threat model: the tree under the root fd belongs to the container (or an image) and may be
 * changed concurrently by it: symlinks to "/", "../../..", /proc/self/root and friends,
 * directories renamed or swapped for symlinks between two of our steps.
 *  - a symlink swapped in after a check: every open is O_NOFOLLOW, so it is refused (ELOOP) or
 *    opened as the link itself, which the inode comparison rejects;
 *  - ".." escaping because a directory we hold was moved out of the root (rename(2) within the
 *    same mount): after each ".." and before the final open once a ".." was taken, the fd is
 *    walked up with ".." until it meets the root's (st_dev, st_ino); meeting the top of the
 *    namespace first means it is outside -> EXDEV (the kernel's path_is_under() check);
 *  - magic links (/proc/<pid>/{fd/N, cwd, root, exe, ns/X, map_files/X}): their readlink text is not
 *    where the kernel would jump, so they are never followed. A symlink on procfs is magic
 *    unless it sits in the procfs root directory (inode 1: "self", "thread-self", "mounts"...,
 *    which openat2 follows too); magic -> ELOOP under RESOLVE_NO_MAGICLINKS, EXDEV otherwise
 *    (nd_jump_link() refuses them in scoped lookups).
 * Residual window: like the kernel, the check proves the fd was beneath the root when checked;
 * a directory moved out *after* the last check is reached only by a process that can rename
 * across the root boundary, i.e. one that already sees the same mount outside the root.
 * Not emulated (refused with EINVAL, fail closed): RESOLVE_NO_XDEV, RESOLVE_CACHED, and unscoped
 * lookups (neither IN_ROOT nor BENEATH); no caller uses them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/pathsafe.h"

#define FB_MAXSYMLINKS 40 /* include/linux/namei.h MAXSYMLINKS */
#define FB_MAXWALKUP 4096 /* bound on ".." steps when proving an fd is beneath the root */
#define FB_PROC_ROOT_INO 1
#define FB_SUPPORTED (RESOLVE_IN_ROOT | RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

struct fb_walk
{
  int root; /* borrowed: the caller's dirfd (or our fd of ".") */
  struct stat root_st;
  uint64_t resolve;
  uint64_t flags;
  uint64_t mode;
  int cur; /* owned: O_PATH fd of the directory the walk stands in */
  struct stat cur_st;
  bool dotdot_seen;
  int links;
};

static bool
same_inode (const struct stat *a, const struct stat *b)
{
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* fail with errno = e; returns -1 */
static int
fb_fail (int e)
{
  errno = e;
  return -1;
}

static void *
fb_fail_null (int e)
{
  errno = e;
  return NULL;
}

/* Replace w->cur by fd (owned), refreshing its stat. Returns 0 or -1 with errno. */
static int
fb_set_cur (struct fb_walk *w, int fd)
{
  struct stat st;

  if (fstat (fd, &st) < 0)
    {
      int e = errno;
      close (fd);
      return fb_fail (e);
    }
  if (w->cur >= 0)
    close (w->cur);
  w->cur = fd;
  w->cur_st = st;
  return 0;
}

static int
fb_restart_at_root (struct fb_walk *w)
{
  int fd = openat (w->root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  return fb_set_cur (w, fd);
}

/* Is the directory fd `dir` (stat `st`) beneath the root? Walks up with ".." (which crosses
 * mounts upwards like the kernel's follow_dotdot) until the root's inode (yes) or a directory
 * that is its own parent, the top of our namespace (no). Returns 0, or -1 with EXDEV. */
static int
fb_check_beneath (const struct fb_walk *w, int dir, const struct stat *st)
{
  cleanup_close int up = -1;
  struct stat cur = *st;

  for (int i = 0; i < FB_MAXWALKUP; i++)
    {
      struct stat parent;
      int next;

      if (same_inode (&cur, &w->root_st))
        return 0;
      next = openat (up >= 0 ? up : dir, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (next < 0)
        return -1;
      if (fstat (next, &parent) < 0)
        {
          close (next);
          return -1;
        }
      if (up >= 0)
        close (up);
      up = next;
      if (same_inode (&parent, &cur))
        break; /* the top: the root was never met */
      cur = parent;
    }
  return fb_fail (EXDEV);
}

/* ".." from w->cur: stays at the root (IN_ROOT) or EXDEV (BENEATH); otherwise the parent,
 * proved to be beneath the root. */
static int
fb_dotdot (struct fb_walk *w)
{
  int fd;

  if (same_inode (&w->cur_st, &w->root_st))
    return (w->resolve & RESOLVE_BENEATH) ? fb_fail (EXDEV) : 0;
  fd = openat (w->cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fb_set_cur (w, fd) < 0)
    return -1;
  w->dotdot_seen = true;
  return fb_check_beneath (w, w->cur, &w->cur_st);
}

/* Is a symlink in w->cur a procfs magic link? (see the threat model above). Decided before
 * readlink: a magic link's text ("/etc/passwd", "pipe:[42]") says nothing reliable. */
static bool
fb_is_magic (const struct fb_walk *w)
{
  struct statfs sfs;

  if (fstatfs (w->cur, &sfs) < 0)
    return true; /* cannot tell: treat as magic, i.e. refuse */
  return sfs.f_type == PROC_SUPER_MAGIC && w->cur_st.st_ino != FB_PROC_ROOT_INO;
}

/* Open the final object of the walk with the caller's flags. `obj` (owned by the caller) is the
 * O_PATH|O_NOFOLLOW fd the walk took of `name` in w->cur, or -1 when the object is w->cur itself
 * (path ending in "/", ".", ".."). Returns the new fd or -1 with errno. */
static int
fb_open_final (struct fb_walk *w, const char *name, int obj, bool trailing_slash)
{
  struct stat want, got;
  int flags = (int) w->flags | O_CLOEXEC;
  int fd;

  if (w->dotdot_seen && fb_check_beneath (w, w->cur, &w->cur_st) < 0)
    return -1;
  if (obj < 0)
    return openat (w->cur, ".", flags, (mode_t) w->mode);
  if (fstat (obj, &want) < 0)
    return -1;
  if (trailing_slash && !S_ISDIR (want.st_mode))
    return fb_fail (ENOTDIR);
  /* A directory is not reopened through "." of its own fd: that lookup needs search permission
   * on the directory itself, which openat2 does not ask of the last component (an O_PATH of a
   * 0700 directory of another owner succeeds; from a user namespace, the host's 0700
   * /var/log/agentsbx). O_PATH takes the walk's fd, anything else the name, checked below. */
  if ((flags & O_PATH) && (flags & O_DIRECTORY) && !S_ISDIR (want.st_mode))
    return fb_fail (ENOTDIR);
  if (flags & O_PATH)
    return fcntl (obj, F_DUPFD_CLOEXEC, 0); /* the walk's fd is already what was asked for */
  fd = openat (w->cur, name, flags | O_NOFOLLOW, (mode_t) w->mode);
  if (fd < 0)
    return -1;
  if (fstat (fd, &got) < 0)
    {
      int e = errno;
      close (fd);
      return fb_fail (e);
    }
  if (!same_inode (&want, &got))
    {
      close (fd);
      return fb_fail (EAGAIN); /* swapped between the walk and the open: ps_openat2() retries */
    }
  return fd;
}

/* O_CREAT of a missing last component: created from its parent fd with O_NOFOLLOW, so a
 * symlink planted meanwhile is refused (ELOOP/EEXIST) rather than followed. */
static int
fb_create (struct fb_walk *w, const char *name)
{
  if (w->dotdot_seen && fb_check_beneath (w, w->cur, &w->cur_st) < 0)
    return -1;
  return openat (w->cur, name, (int) w->flags | O_CLOEXEC | O_NOFOLLOW, (mode_t) w->mode);
}

/* Follow the symlink fd `lnk` (named in w->cur): splice its target in front of `rest` and
 * return the new remaining path (heap), moving w->cur to the root for an absolute target. */
static char *
fb_follow (struct fb_walk *w, int lnk, const char *rest)
{
  char target[PATH_MAX + 1];
  ssize_t n;

  if (w->resolve & RESOLVE_NO_SYMLINKS)
    return fb_fail_null (ELOOP);
  if (++w->links > FB_MAXSYMLINKS)
    return fb_fail_null (ELOOP);
  /* read first even for a magic link: procfs checks ptrace access there (EACCES) before the
   * kernel's nd_jump_link() refuses the jump, and we answer in the same order */
  n = readlinkat (lnk, "", target, sizeof (target));
  if (n < 0)
    return NULL;
  if (fb_is_magic (w))
    return fb_fail_null ((w->resolve & RESOLVE_NO_MAGICLINKS) ? ELOOP : EXDEV);
  if ((size_t) n >= sizeof (target))
    return fb_fail_null (ENAMETOOLONG);
  target[n] = '\0';
  if (n == 0)
    return fb_fail_null (ENOENT);
  if (target[0] == '/')
    {
      if (w->resolve & RESOLVE_BENEATH)
        return fb_fail_null (EXDEV);
      if (fb_restart_at_root (w) < 0)
        return NULL;
    }
  return xasprintf ("%s%s", target, rest);
}

/* One step on the component [p, e) of the remaining path *restp. Returns 1 to go on with the
 * next component (w->cur moved), 2 when *restp was replaced after a symlink (start it over),
 * 0 when done with *out = the final fd, -1 with errno. */
static int
fb_step (struct fb_walk *w, char **restp, const char *p, const char *e, int *out)
{
  const char *after = e + strspn (e, "/");
  bool last = *after == '\0', trailing_slash = last && *e == '/';
  size_t len = (size_t) (e - p);
  char name[NAME_MAX + 1];
  cleanup_close int obj = -1;
  struct stat st;
  bool nofollow;

  if (len > NAME_MAX)
    return fb_fail (ENAMETOOLONG);
  memcpy (name, p, len);
  name[len] = '\0';
  if (strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
    {
      if (name[1] == '.' && fb_dotdot (w) < 0)
        return -1;
      if (!last)
        return 1;
      *out = fb_open_final (w, NULL, -1, trailing_slash);
      return *out < 0 ? -1 : 0;
    }
  obj = openat (w->cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (obj < 0)
    {
      if (errno != ENOENT || !last || trailing_slash || !(w->flags & O_CREAT))
        return -1;
      *out = fb_create (w, name);
      return *out < 0 ? -1 : 0;
    }
  if (fstat (obj, &st) < 0)
    return -1;
  /* O_CREAT|O_EXCL never follows a trailing symlink (open(2)) */
  nofollow = (w->flags & O_NOFOLLOW) || (w->flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
  if (S_ISLNK (st.st_mode) && !(last && !trailing_slash && nofollow))
    {
      char *n = fb_follow (w, obj, e);
      if (n == NULL)
        return -1;
      free (*restp);
      *restp = n;
      return 2;
    }
  if (last)
    {
      *out = fb_open_final (w, name, obj, trailing_slash);
      return *out < 0 ? -1 : 0;
    }
  if (!S_ISDIR (st.st_mode))
    return fb_fail (ENOTDIR);
  return fb_set_cur (w, steal_fd (&obj)) < 0 ? -1 : 1;
}

int
ps_openat2_fallback (int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
  struct fb_walk w = { .root = dirfd, .resolve = resolve, .flags = flags, .mode = mode, .cur = -1 };
  cleanup_close int cwd = -1;
  cleanup_free char *rest = NULL;
  const char *p;
  int fd = -1, rc = 1;

  if ((resolve & ~(uint64_t) FB_SUPPORTED) || !(resolve & (RESOLVE_IN_ROOT | RESOLVE_BENEATH))
      || (resolve & RESOLVE_IN_ROOT && resolve & RESOLVE_BENEATH))
    return fb_fail (EINVAL);
  if (path[0] == '\0')
    return fb_fail (ENOENT);
  if (strlen (path) >= PATH_MAX)
    return fb_fail (ENAMETOOLONG);
  if (dirfd == AT_FDCWD)
    {
      cwd = open (".", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (cwd < 0)
        return -1;
      w.root = cwd;
    }
  if (fstat (w.root, &w.root_st) < 0)
    return -1;
  if (!S_ISDIR (w.root_st.st_mode))
    return fb_fail (ENOTDIR);
  if (path[0] == '/' && (resolve & RESOLVE_BENEATH))
    return fb_fail (EXDEV);
  if (fb_restart_at_root (&w) < 0)
    return -1;
  rest = xstrdup (path);
  p = rest;
  while (rc > 0)
    {
      const char *e;

      if (rc == 2)
        p = rest; /* a symlink target was spliced in */
      p += strspn (p, "/");
      if (*p == '\0')
        {
          /* "/" or a path ending in "/" after a symlink to a directory: the object is cur */
          fd = fb_open_final (&w, NULL, -1, true);
          break;
        }
      e = strchrnul (p, '/');
      rc = fb_step (&w, &rest, p, e, &fd);
      if (rc == 1)
        p = e;
    }
  if (rc < 0)
    fd = -1;
  if (w.cur >= 0)
    {
      int e = errno;
      close (w.cur);
      errno = e;
    }
  return fd;
}
