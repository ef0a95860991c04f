/* pathsafe.c - fd-based path resolution inside the container rootfs.
 *
 * Threat model: the rootfs (an image, possibly written by the container of a previous run) may
 * hold symlinks such as /proc -> /etc or /dev/null -> /host/etc/passwd. Every function here
 * resolves with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS) from the root fd, creates with
 * *at() on a parent fd, and returns fds, so the caller never re-resolves a string.
 * Where openat2 is missing (kernel < 5.6, or refused by a seccomp filter) ps_openat2() hands the
 * same request to the userspace walk of pathsafe_fallback.c, which keeps these guarantees.
 * Ordering: none; these are building blocks used before pivot_root (rootfd = the rootfs mount)
 * and after it (rootfd = "/").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/pathsafe.h"

#define PS_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)

/* 1 once openat2 is known to be unavailable (ENOSYS, or EPERM from a seccomp filter).
 * Per process; a forked child inherits the answer, which stays true for it. */
static int openat2_missing;

/* Is the syscall itself refused? An EPERM can be a real answer (O_NOATIME on a file we do not
 * own, a Landlock/LSM hook...), so ask for something every openat2 grants: "/" as O_PATH. */
static int
openat2_unavailable (int e)
{
  struct open_how how = { .flags = O_PATH | O_CLOEXEC };
  int fd;

  if (openat2_missing)
    return 1;
  if (e != ENOSYS && e != EPERM)
    return 0;
  fd = (int) syscall (SYS_openat2, AT_FDCWD, "/", &how, sizeof (how));
  if (fd >= 0)
    {
      close (fd);
      return 0;
    }
  openat2_missing = (errno == ENOSYS || errno == EPERM);
  return openat2_missing;
}

int
ps_openat2 (int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
  struct open_how how = { .flags = flags | O_CLOEXEC, .mode = mode, .resolve = resolve };
  int fd = -1;

  /* EAGAIN: a rename raced with the lookup; the kernel (or the fallback) asks us to retry.
   * Bounded. */
  for (int i = 0; i < 32; i++)
    {
      if (!openat2_missing)
        {
          fd = (int) syscall (SYS_openat2, dirfd, path, &how, sizeof (how));
          if (fd < 0)
            {
              int e = errno;
              if (openat2_unavailable (e))
                log_debug ("openat2 unavailable (%s): resolving `%s` in userspace", strerror (e), path);
              errno = e;
            }
        }
      if (openat2_missing)
        fd = ps_openat2_fallback (dirfd, path, flags, mode, resolve);
      if (fd >= 0 || errno != EAGAIN)
        return fd;
    }
  return -1;
}

int
ps_open_in_root (int rootfd, const char *path, int flags, asbx_err_t *err)
{
  int fd = ps_openat2 (rootfd, path, (uint64_t) flags, 0, PS_RESOLVE);
  if (fd < 0)
    return asbx_error (err, errno, "open `%s` in the container root", path);
  return fd;
}

int
ps_open_cover_target (int rootfd, const char *path)
{
  for (int attempt = 0; attempt < 16; attempt++)
    {
      int fd = ps_openat2 (rootfd, path, O_PATH, 0, PS_RESOLVE);
      if (fd >= 0 || (errno != ENOENT && errno != ENOTDIR))
        return fd;
      fd = ps_openat2 (rootfd, path, O_PATH, 0, PS_RESOLVE | RESOLVE_NO_SYMLINKS);
      if (fd < 0)
        return -1; /* ENOENT/ENOTDIR: missing; ELOOP: through a symlink; else an error */
      close (fd);  /* there now: it changed between the lookups */
    }
  errno = EAGAIN;
  return -1;
}

char *
ps_clean (const char *path)
{
  size_t n = strlen (path);
  char *out = xmalloc (n + 2);
  size_t o = 0;
  const char *p = path;

  out[o++] = '/';
  while (*p)
    {
      const char *e;
      size_t len;

      while (*p == '/')
        p++;
      e = strchrnul (p, '/');
      len = (size_t) (e - p);
      if (len == 0 || (len == 1 && p[0] == '.'))
        ;
      else if (len == 2 && p[0] == '.' && p[1] == '.')
        {
          /* drop the last component, never above "/" */
          while (o > 1 && out[o - 1] != '/')
            o--;
          if (o > 1)
            o--;
        }
      else
        {
          if (o > 1)
            out[o++] = '/';
          memcpy (out + o, p, len);
          o += len;
        }
      p = e;
    }
  out[o] = '\0';
  return out;
}

/* create one missing component under parent_fd and open it without following any symlink */
/* symlinks followed while creating a path whose last components are dangling links (the
 * kernel's own limit for one lookup) */
#define PS_LINKS_MAX 40

static char *
fd_readlink (int fd)
{
  char proc[64], buf[4096];
  ssize_t n;

  snprintf (proc, sizeof proc, "/proc/self/fd/%d", fd);
  n = readlink (proc, buf, sizeof buf - 1);
  if (n < 0)
    return NULL;
  buf[n] = '\0';
  return xstrdup (buf);
}

/* The path in the root an fd refers to ("/" for the root itself), from /proc/self/fd; NULL when
 * fd lies outside rootfd's tree. */
static char *
path_in_root (int rootfd, int fd)
{
  cleanup_free char *r = NULL;
  cleanup_free char *f = NULL;
  size_t n;

  r = fd_readlink (rootfd);
  f = fd_readlink (fd);
  if (!r || !f)
    return NULL;
  n = strcmp (r, "/") == 0 ? 0 : strlen (r);
  if (strncmp (f, r, n) != 0 || (f[n] != '/' && f[n] != '\0'))
    return NULL;
  return xstrdup (f[n] ? f + n : "/");
}

/* parent_fd/name is an existing entry that did not resolve (ENOENT through it): when it is a
 * symlink, the path in the root it points to (its target, to be created in the root, as runc's
 * securejoin does for a dangling symlink); NULL otherwise (errno set). */
static char *
dangling_target (int rootfd, int parent_fd, const char *name)
{
  char target[4096];
  cleanup_free char *dir = NULL;
  cleanup_free char *joined = NULL;
  ssize_t n = readlinkat (parent_fd, name, target, sizeof target - 1);

  if (n < 0)
    return NULL;
  target[n] = '\0';
  if (target[0] == '/')
    return ps_clean (target);
  dir = path_in_root (rootfd, parent_fd);
  if (!dir)
    return errno = EXDEV, NULL;
  joined = xasprintf ("%s/%s", dir, target);
  return ps_clean (joined);
}

static int mkdir_p_links (int rootfd, const char *path, mode_t mode, int links, asbx_err_t *err);

static int
mkdir_component (int rootfd, int parent_fd, const char *name, mode_t mode, const char *full, int links, asbx_err_t *err)
{
  int fd;

  if (mkdirat (parent_fd, name, mode) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "mkdir `%s` in the container root", full);
  fd = ps_openat2 (parent_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0,
                   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd < 0 && (errno == ELOOP || errno == ENOTDIR) && links < PS_LINKS_MAX)
    {
      /* a dangling symlink: create what it points to, inside the root */
      int e = errno;
      cleanup_free char *target = dangling_target (rootfd, parent_fd, name);
      if (target)
        return mkdir_p_links (rootfd, target, mode, links + 1, err);
      errno = e;
    }
  if (fd < 0)
    return asbx_error (err, errno, "open new directory `%s` in the container root", full);
  return fd;
}

int
ps_mkdir_p (int rootfd, const char *path, mode_t mode, asbx_err_t *err)
{
  return mkdir_p_links (rootfd, path, mode, 0, err);
}

static int
mkdir_p_links (int rootfd, const char *path, mode_t mode, int links, asbx_err_t *err)
{
  cleanup_free char *clean = ps_clean (path);
  cleanup_close int cur = -1;
  char *p;

  cur = ps_openat2 (rootfd, clean, O_PATH | O_DIRECTORY, 0, PS_RESOLVE);
  if (cur >= 0)
    return steal_fd (&cur);
  if (errno != ENOENT)
    return asbx_error (err, errno, "open `%s` in the container root", clean);

  /* walk down: the longest existing prefix is resolved from the root, then create */
  cur = ps_openat2 (rootfd, "/", O_PATH | O_DIRECTORY, 0, PS_RESOLVE);
  if (cur < 0)
    return asbx_error (err, errno, "open the container root");
  p = clean + 1;
  while (*p)
    {
      char *slash = strchrnul (p, '/');
      char saved = *slash;
      int next;

      *slash = '\0';
      next = ps_openat2 (rootfd, clean, O_PATH | O_DIRECTORY, 0, PS_RESOLVE);
      if (next < 0 && errno == ENOENT)
        next = mkdir_component (rootfd, cur, p, mode, clean, links, err);
      else if (next < 0)
        asbx_error (err, errno, "open `%s` in the container root", clean);
      *slash = saved;
      if (next < 0)
        return -1;
      close (cur);
      cur = next;
      p = saved ? slash + 1 : slash;
    }
  return steal_fd (&cur);
}

int
ps_open_parent (int rootfd, const char *path, mode_t dir_mode, int *parent_fd, char **buf, const char **base,
                asbx_err_t *err)
{
  cleanup_free char *clean = ps_clean (path);
  char *slash = strrchr (clean, '/');
  int fd;

  if (clean[1] == '\0')
    {
      asbx_error (err, EINVAL, "`%s`: the container root has no parent", path);
      return -1; /* always -1; spelled out for clang-analyzer (make lint) */
    }
  *slash = '\0';
  fd = ps_mkdir_p (rootfd, clean[0] ? clean : "/", dir_mode, err);
  *slash = '/';
  if (fd < 0)
    return -1;
  *parent_fd = fd;
  *base = slash + 1;
  *buf = steal_ptr (&clean);
  return 0;
}

static int
create_file_links (int rootfd, const char *path, mode_t mode, int links, asbx_err_t *err)
{
  cleanup_close int parent = -1;
  cleanup_free char *buf = NULL;
  const char *base;
  int fd;

  fd = ps_openat2 (rootfd, path, O_PATH, 0, PS_RESOLVE);
  if (fd >= 0)
    return fd;
  if (ps_open_parent (rootfd, path, 0755, &parent, &buf, &base, err) < 0)
    return -1;
  fd = openat (parent, base, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0 && errno != EEXIST)
    return asbx_error (err, errno, "create `%s` in the container root", buf);
  if (fd < 0 && links < PS_LINKS_MAX)
    {
      /* it exists but did not resolve: a dangling symlink; create its target in the root */
      cleanup_free char *target = dangling_target (rootfd, parent, base);
      if (target)
        return create_file_links (rootfd, target, mode, links + 1, err);
    }
  if (fd >= 0)
    close (fd);
  /* re-open from the parent fd: never through a symlink planted in between */
  fd = ps_openat2 (parent, base, O_PATH | O_NOFOLLOW, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
  if (fd < 0)
    return asbx_error (err, errno, "open `%s` in the container root", buf);
  return fd;
}

int
ps_create_file (int rootfd, const char *path, mode_t mode, asbx_err_t *err)
{
  return create_file_links (rootfd, path, mode, 0, err);
}

int
ps_check_fstype (int fd, long magic, const char *what, asbx_err_t *err)
{
  struct statfs sfs;

  if (fstatfs (fd, &sfs) < 0)
    return asbx_error (err, errno, "statfs %s", what);
  if ((long) sfs.f_type != magic)
    return asbx_error (err, EXDEV, "%s is not the expected filesystem (f_type 0x%lx, want 0x%lx)", what,
                       (long) sfs.f_type, magic);
  return 0;
}
