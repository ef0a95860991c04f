/* policy_pin.c - pins of the files a deny masks inside a writable bind grant; see the header.
 *
 * Kernel behaviour relied on (fs/namei.c, fs/namespace.c, checked on this kernel):
 * - vfs_rename, vfs_unlink, vfs_rmdir return EBUSY when a dentry involved is a mount point in
 *   the caller's mount namespace (is_local_mountpoint); in any other namespace the kernel
 *   detaches the mounts on the dentry instead (detach_mounts), which is how a mask was lost;
 * - a bind mount of a file onto itself changes nothing a reader or in-place writer sees;
 * - statx(STATX_MNT_ID_UNIQUE) (6.8) names a mount by an id never reused until reboot;
 * - umount2("/proc/self/fd/N") follows the magic link to exactly the fd's mount and dentry.
 * Records: <state dir>/pins, one line per pin: "UNIQUE_ID OLD_ID DEV INO HOSTPATH" (OLD_ID:
 * /proc/self/mountinfo's reusable id, to find a pin whose path moved). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/mount.h"
#include "linux/pathsafe.h"
#include "runtime/policy_pin.h"
#include "runtime/sync.h"
#include "spec/model.h"

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U /* include/uapi/linux/stat.h, 6.8 */
#endif

#define PINS_FILE "pins"
#define WATCH_FILE "unpinned" /* a non-root caller's: "DEV INO HOSTPATH" of each file not pinned */

/* ---- I: the notes ---- */

int
policy_pin_note (char **notes, const struct policy_mount *grant, const char *path, int fd, asbx_err_t *err)
{
  struct stat st;

  if (!grant || grant->kind != POLICY_MOUNT_BIND_RW)
    return 0; /* no grant (nothing writable around it) or a tmpfs (no host file) */
  if (strchr (path, '\n'))
    return asbx_error (err, EINVAL, "policy: `%s`: a path with a newline cannot be pinned", path);
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "policy: stat `%s`", path);
  char *line = xasprintf ("%s%ju %ju %s\n", *notes ? *notes : "", (uintmax_t) st.st_dev, (uintmax_t) st.st_ino, path);
  free (*notes);
  *notes = line;
  return 1;
}

int
policy_pin_send (const char *notes, int sync_fd, asbx_err_t *err)
{
  cleanup_free char *all = xstrdup (notes ? notes : "");
  const size_t room = sizeof (((struct sync_msg *) 0)->text) - 1;
  char *p = all;

  for (;;)
    {
      size_t n = strlen (p);
      if (n > room)
        {
          /* whole lines only: cut after the last newline that fits */
          char *cut = memrchr (p, '\n', room);
          if (!cut)
            return asbx_error (err, ENAMETOOLONG, "policy: pin record too long");
          char save = cut[1];
          cut[1] = '\0';
          int r = sync_send (sync_fd, SYNC_PINS, 1, p, err);
          cut[1] = save;
          if (r < 0)
            return -1;
          p = cut + 1;
          continue;
        }
      return sync_send (sync_fd, SYNC_PINS, 0, p, err);
    }
}

/* ---- P: shared helpers ---- */

struct mnt_ids
{
  uint64_t unique, old;
  dev_t dev;
  ino_t ino;
  bool root; /* the fd is the root of its mount */
};

static int
mnt_ids_of (int fd, struct mnt_ids *out)
{
  struct statx a, b;

  if (statx (fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID, &a) < 0
      || statx (fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID_UNIQUE, &b) < 0)
    return -1;
  if (!(a.stx_mask & STATX_MNT_ID) || !(b.stx_mask & STATX_MNT_ID_UNIQUE))
    {
      errno = ENOSYS; /* before 6.8: no unique mount id to check a pin by */
      return -1;
    }
  out->unique = b.stx_mnt_id;
  out->old = a.stx_mnt_id;
  out->dev = makedev (a.stx_dev_major, a.stx_dev_minor);
  out->ino = a.stx_ino;
  out->root = (a.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (a.stx_attributes & STATX_ATTR_MOUNT_ROOT);
  return 0;
}

/* the state root, locked: pins are made and released one container at a time */
static int
root_lock (int state_rootfd)
{
  int fd = openat (state_rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  while (flock (fd, LOCK_EX) < 0)
    if (errno != EINTR)
      {
        close (fd);
        return -1;
      }
  return fd;
}

struct pin_rec
{
  unsigned long long unique, old, dev, ino;
  char path[4096];
};

/* Parse one record line; false when it is malformed. */
static bool
rec_parse (const char *line, struct pin_rec *r)
{
  int off = 0;
  if (sscanf (line, "%llu %llu %llu %llu %n", &r->unique, &r->old, &r->dev, &r->ino, &off) != 4 || off == 0
      || line[off] != '/' || strlen (line + off) >= sizeof r->path)
    return false;
  strcpy (r->path, line + off);
  return true;
}

/* Whether a `pins` file of the state root other than `dirfd`'s (or also its own, `self`)
 * records the pin `unique`. */
static bool
recorded (int state_rootfd, int dirfd, unsigned long long unique, bool self)
{
  struct stat own;
  int dfd = openat (state_rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* an offset of its own */
  DIR *d = dfd >= 0 ? fdopendir (dfd) : NULL;
  struct dirent *de;
  bool found = false;

  if (!d)
    {
      if (dfd >= 0)
        close (dfd);
      return true; /* cannot tell: keep the pin (a leftover mount, never a lost mask) */
    }
  if (fstat (dirfd, &own) < 0)
    own.st_ino = 0;
  while (!found && (de = readdir (d)))
    {
      struct stat st;
      cleanup_free char *raw = NULL;
      asbx_err_t e = NULL;
      size_t len;
      if (de->d_name[0] == '.')
        continue;
      cleanup_close int cfd = openat (state_rootfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (cfd < 0 || fstat (cfd, &st) < 0 || (!self && st.st_dev == own.st_dev && st.st_ino == own.st_ino))
        continue;
      if (read_file_at (cfd, PINS_FILE, 1 << 20, &raw, &len, &e) < 0)
        {
          asbx_error_free (&e);
          continue;
        }
      char *save = NULL;
      for (char *l = strtok_r (raw, "\n", &save); l && !found; l = strtok_r (NULL, "\n", &save))
        {
          struct pin_rec r;
          found = rec_parse (l, &r) && r.unique == unique;
        }
    }
  closedir (d);
  return found;
}

/* ---- P: making pins ---- */

/* The spec mount the container sees at `path` (the deepest destination containing it, the later
 * of equal ones) and the length of its destination; NULL when none (the rootfs). */
static const struct oci_mount *
covering_mount (const struct oci_spec *spec, const char *path, size_t *dlen)
{
  const struct oci_mount *best = NULL;
  size_t best_n = 0;

  for (size_t i = 0; i < spec->mounts_len; i++)
    {
      const char *d = spec->mounts[i].destination;
      size_t n = d ? strlen (d) : 0;
      while (n > 0 && d[n - 1] == '/')
        n--;
      if (!d || *d != '/' || strncmp (path, d, n) != 0 || (path[n] != '/' && path[n] != '\0'))
        continue;
      if (!best || n >= best_n)
        best = &spec->mounts[i], best_n = n;
    }
  *dlen = best_n;
  return best;
}

/* Open the host's file behind container path `path`: beneath the covering bind's source (or the
 * rootfs), never above it. 0 with *fd = -1 when no host file is behind it (a tmpfs or other
 * filesystem mount); -1 with *err. */
static int
host_open (const struct policy_pin_ctx *ctx, const char *path, int *fd, asbx_err_t *err)
{
  size_t n = 0;
  const struct oci_mount *m = covering_mount (ctx->spec, path, &n);
  cleanup_free char *base = NULL;

  *fd = -1;
  if (m && !spec_mount_is_bind (m))
    return 0;
  if (m && !m->source)
    return asbx_error (err, EINVAL, "policy: pin `%s`: its bind mount has no source", path);
  base = !m                    ? xstrdup (ctx->rootfs)
         : m->source[0] == '/' ? xstrdup (m->source)
                               : xasprintf ("%s/%s", ctx->bundle, m->source);
  const char *rest = path + n;
  while (*rest == '/')
    rest++;
  /* the bind's source is the host's own choice (followed as the bind followed it); the rest is
   * the container's, kept beneath it */
  cleanup_close int bfd = open (base, O_PATH | O_CLOEXEC);
  if (bfd < 0)
    return asbx_error (err, errno, "policy: pin `%s`: open host `%s`", path, base);
  *fd = *rest ? ps_openat2 (bfd, rest, O_PATH | O_CLOEXEC, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
              : fcntl (bfd, F_DUPFD_CLOEXEC, 3);
  if (*fd < 0)
    return asbx_error (err, errno,
                       "policy: pin `%s`: open host `%s/%s` beneath the bind source (the container masked a file "
                       "there; a symlink leading out of the grant cannot be pinned)",
                       path, base, rest);
  return 0;
}

static int
record (int dirfd, const struct mnt_ids *id, const char *hostpath, asbx_err_t *err)
{
  cleanup_close int fd = openat (dirfd, PINS_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  cleanup_free char *line = xasprintf ("%" PRIu64 " %" PRIu64 " %ju %ju %s\n", id->unique, id->old, (uintmax_t) id->dev,
                                       (uintmax_t) id->ino, hostpath);
  if (fd < 0 || write_all (fd, line, strlen (line)) < 0)
    return asbx_error (err, errno, "state directory: record the pin of `%s`", hostpath);
  return 0;
}

/* Whether the pin `id` is what the host path of `path` reaches now, on the inode dev/ino: a host
 * replacement racing the attach could have left it on a dropped dentry. */
static bool
pin_in_place (const struct policy_pin_ctx *ctx, const char *path, const struct mnt_ids *id)
{
  asbx_err_t e = NULL;
  struct mnt_ids now;
  cleanup_close int fd = -1;

  if (host_open (ctx, path, &fd, &e) < 0)
    {
      asbx_error_free (&e);
      return false;
    }
  return fd >= 0 && mnt_ids_of (fd, &now) == 0 && now.root && now.unique == id->unique && now.dev == id->dev
         && now.ino == id->ino;
}

/* Bind `fd`'s file onto itself in our namespace, check it is in place, record it, then make it
 * private. */
static int
pin_new (const struct policy_pin_ctx *ctx, int fd, const char *path, const char *hostpath, asbx_err_t *err)
{
  int dirfd = ctx->dirfd;
  struct mnt_ids id;
  cleanup_close int tree = mnt_clone (fd, "", false, err);

  if (tree < 0 || mnt_attach (tree, fd, err) < 0)
    return asbx_error_wrap (err,
                            "policy: pin `%s` (host `%s`) in the runtime's mount namespace: a deny inside a "
                            "writable bind grant needs it (CAP_SYS_ADMIN there), so that replacing the file on the "
                            "host cannot drop the mask - refused%s",
                            path, hostpath,
                            geteuid () != 0 ? " (agentsbx run by a non-root user cannot mount in the host's mount "
                                              "namespace: a workspace holding such a file, e.g. a git repository's "
                                              ".git/config under `agent`, is not yet supported without root)"
                                            : "");
  if (mnt_ids_of (tree, &id) < 0)
    {
      int e = errno;
      umount2 (hostpath, MNT_DETACH | UMOUNT_NOFOLLOW); /* just made, nothing could change it yet */
      return asbx_error (err, e, "policy: pin `%s`: statx of the pin (STATX_MNT_ID_UNIQUE needs Linux 6.8)", path);
    }
  if (!pin_in_place (ctx, path, &id))
    {
      cleanup_free char *self = xasprintf ("/proc/self/fd/%d", tree);
      umount2 (self, MNT_DETACH); /* through the pin's own fd: never another mount */
      return asbx_error (err, EXDEV,
                         "policy: pin `%s`: host `%s` was replaced while it was pinned (the container masks the "
                         "file it replaced) - refused",
                         path, hostpath);
    }
  if (record (dirfd, &id, hostpath, err) < 0)
    {
      cleanup_free char *self = xasprintf ("/proc/self/fd/%d", tree);
      umount2 (self, MNT_DETACH);
      return -1;
    }
  /* attached under a shared parent, the pin joined a peer group with its copies: leave it, so
   * nothing mounted on it later propagates (its copies still go when it is unmounted) */
  if (mnt_setattr (tree, false, 0, 0, MS_PRIVATE, err) < 0)
    return asbx_error_wrap (err, "policy: pin `%s`: make it private", path);
  log_debug ("policy: pinned `%s` as host `%s` (mount %" PRIu64 ")", path, hostpath, id.unique);
  return 0;
}

/* A non-root caller cannot mount in the host's mount namespace (docs/security.md "When the
 * caller is not root": git workspaces). The container's own read-only binds and its ancestor
 * pins (policy_mounts.c) are mount points in the sandbox's mount namespace, so the agent's own
 * rename/unlink of them fails with EBUSY and its writes with EROFS; what no pin stops is a host
 * process (the caller's own `git config`) replacing the file, which drops the container's mask.
 * So the host file is recorded instead, and policy_pin_release warns when it was replaced while
 * the sandbox ran. */
static int
watch_new (int dirfd, const struct mnt_ids *id, const char *path, const char *hostpath, asbx_err_t *err)
{
  cleanup_close int fd = openat (dirfd, WATCH_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  cleanup_free char *line = xasprintf ("%ju %ju %s\n", (uintmax_t) id->dev, (uintmax_t) id->ino, hostpath);

  if (fd < 0 || write_all (fd, line, strlen (line)) < 0)
    return asbx_error (err, errno, "state directory: record the unpinned `%s`", hostpath);
  log_debug ("policy: `%s` (host `%s`) not pinned: non-root caller (replacement detected at exit)", path, hostpath);
  return 0;
}

/* A non-root caller's deny inside a writable bind: recorded when the policy accepts running
 * without the host pin (degrade `pin`), else refused naming the way out (fail closed). */
static int
unpinned (const struct policy_pin_ctx *ctx, const struct mnt_ids *id, const char *path, const char *hostpath,
          asbx_err_t *err)
{
  bool accepted = false;

  for (size_t i = 0; ctx->plan && i < ctx->plan->degrade_len && !accepted; i++)
    accepted = strcmp (ctx->plan->degrade[i], "pin") == 0;
  if (accepted)
    return watch_new (ctx->dirfd, id, path, hostpath, err);
  return asbx_error (err, 0,
                     "policy: `%s` (host `%s`) is denied inside a writable workspace: agentsbx run by a non-root "
                     "user (uid %u) keeps it read-only inside the sandbox, but cannot pin it in the host's mount "
                     "namespace, so a host process replacing the file during the session (your own `git config`) "
                     "would drop the mask. Accept that by listing \"pin\" in the policy's \"degrade\" (--profile "
                     "rootless does; replacements are reported at exit), or run as root - refused",
                     path, hostpath, (unsigned) geteuid ());
}

/* At release: warn about each recorded unpinned host file that is not the inode it was (see
 * watch_new), then remove the record. */
static void
watch_release (int dirfd)
{
  cleanup_free char *raw = NULL;
  asbx_err_t e = NULL;
  size_t len;
  char *save = NULL;

  if (read_file_at (dirfd, WATCH_FILE, 1 << 20, &raw, &len, &e) < 0)
    {
      if (e->errnum != ENOENT)
        log_warning ("policy: read the record of unpinned files: %s", e->msg);
      asbx_error_free (&e);
      return;
    }
  for (char *l = strtok_r (raw, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      unsigned long long dev, ino;
      int off = 0;
      struct stat st;
      if (sscanf (l, "%llu %llu %n", &dev, &ino, &off) != 2 || off == 0 || l[off] != '/')
        continue;
      if (lstat (l + off, &st) == 0 && (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino)
        continue;
      log_warning ("policy: `%s` was replaced or removed on the host while the sandbox ran: a non-root caller's "
                   "sandbox cannot pin it, so from then on the agent could write the new file. Check it before "
                   "running git there (e.g. `git config --list --show-origin`, `ls -la .git/hooks`)",
                   l + off);
    }
  if (unlinkat (dirfd, WATCH_FILE, 0) < 0)
    log_warning ("policy: remove the record of unpinned files: %s", strerror (errno));
}

/* `*replaced` gains "DEV INO PATH" of a pin on another inode than the init noted (see
 * policy_pin_receive). */
static int
pin_try (const struct policy_pin_ctx *ctx, const char *path, unsigned long long dev, unsigned long long ino,
         char **replaced, asbx_err_t *err)
{
  cleanup_close int fd = -1;
  struct mnt_ids id;
  char hostpath[4096];

  if (host_open (ctx, path, &fd, err) < 0)
    return -1;
  if (fd < 0)
    return 0;
  cleanup_free char *self = xasprintf ("/proc/self/fd/%d", fd);
  ssize_t n = readlink (self, hostpath, sizeof hostpath - 1);
  if (n < 0 || n >= (ssize_t) sizeof hostpath - 1 || hostpath[0] != '/')
    return asbx_error (err, n < 0 ? errno : ENAMETOOLONG, "policy: pin `%s`: its host path", path);
  hostpath[n] = '\0';
  /* a non-root caller pins nothing: the inode is all it needs (no STATX_MNT_ID_UNIQUE, Linux < 6.8) */
  struct stat st;
  if (geteuid () != 0 && fstat (fd, &st) < 0)
    return asbx_error (err, errno, "policy: stat host `%s`", hostpath);
  if (geteuid () != 0)
    id = (struct mnt_ids){ .dev = st.st_dev, .ino = st.st_ino };
  else if (mnt_ids_of (fd, &id) < 0)
    return asbx_error (err, errno, "policy: pin `%s`: statx host `%s` (STATX_MNT_ID_UNIQUE needs Linux 6.8)", path,
                       hostpath);
  if ((unsigned long long) id.dev != dev || (unsigned long long) id.ino != ino)
    {
      /* replaced on the host since the init masked it, or another file than the container's:
       * pinned all the same, the init tells which (policy_apply.h policy_verify_pinned_masks) */
      char *more = xasprintf ("%s%ju %ju %s\n", *replaced ? *replaced : "", (uintmax_t) id.dev, (uintmax_t) id.ino,
                              path);
      free (*replaced);
      *replaced = more;
    }
  if (geteuid () != 0)
    return unpinned (ctx, &id, path, hostpath, err);
  if (id.root && recorded (ctx->state_rootfd, ctx->dirfd, id.unique, true))
    {
      /* already pinned (a second rule on this file, or another sandbox on this workspace):
       * share that pin; the last container recording it removes it */
      log_debug ("policy: `%s` already pinned (mount %" PRIu64 "), shared", path, id.unique);
      return record (ctx->dirfd, &id, hostpath, err);
    }
  return pin_new (ctx, fd, path, hostpath, err);
}

#define PIN_TRIES 5

/* pin_try, again while the host replaces the file under it: ENOENT (the file opened was replaced
 * before the pin went on: the kernel mounts on no removed file) or EXDEV (replaced while the pin
 * went on, undone by pin_new). A host rewriting the file in a loop wins a few times at most. */
static int
pin_one (const struct policy_pin_ctx *ctx, const char *path, unsigned long long dev, unsigned long long ino,
         char **replaced, asbx_err_t *err)
{
  for (int attempt = 1;; attempt++)
    {
      cleanup_free char *rep = NULL;
      asbx_err_t e = NULL;
      if (pin_try (ctx, path, dev, ino, &rep, &e) == 0)
        {
          char *more = xasprintf ("%s%s", *replaced ? *replaced : "", rep ? rep : "");
          free (*replaced);
          *replaced = more;
          return 0;
        }
      if (attempt >= PIN_TRIES || (e->errnum != ENOENT && e->errnum != EXDEV))
        {
          *err = e;
          return -1;
        }
      log_debug ("policy: pin `%s`: %s: again", path, e->msg);
      asbx_error_free (&e);
    }
}

int
policy_pin_receive (int psync, const struct policy_pin_ctx *ctx, asbx_err_t *err)
{
  cleanup_free struct sync_msg *m = xmalloc (sizeof *m);
  cleanup_free char *all = xstrdup ("");
  cleanup_free char *replaced = NULL;
  char *save = NULL;

  do
    {
      if (sync_recv (psync, SYNC_PINS, m, err) < 0)
        return -1;
      char *more = xasprintf ("%s%s", all, m->text);
      free (all);
      all = more;
    }
  while (m->value == 1);
  if (*all)
    {
      cleanup_close int lock = root_lock (ctx->state_rootfd);
      if (lock < 0)
        return asbx_error (err, errno, "policy: lock the state root for the pins");
      for (char *l = strtok_r (all, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
        {
          unsigned long long dev, ino;
          int off = 0;
          if (sscanf (l, "%llu %llu %n", &dev, &ino, &off) != 2 || off == 0 || l[off] != '/')
            return asbx_error (err, EPROTO, "policy: malformed pin note from the init: `%s`", l);
          if (pin_one (ctx, l + off, dev, ino, &replaced, err) < 0)
            return -1;
        }
    }
  if (replaced && strlen (replaced) >= sizeof m->text)
    return asbx_error (err, ENAMETOOLONG, "policy: too many pinned files replaced during create - refused");
  return sync_send (psync, SYNC_PINS_DONE, 0, replaced ? replaced : "", err);
}

/* ---- P: removing pins ---- */

/* The mount point of the mount whose reusable id is `old`, from our mountinfo (octal escapes
 * undone), or NULL. */
static char *
mountinfo_point (unsigned long long old)
{
  cleanup_fclose FILE *f = fopen ("/proc/self/mountinfo", "re");
  cleanup_free char *line = NULL;
  size_t cap = 0;

  while (f && getline (&line, &cap, f) > 0)
    {
      unsigned long long id;
      char point[4096];
      if (sscanf (line, "%llu %*u %*s %*s %4095s", &id, point) != 2 || id != old)
        continue;
      char *w = point;
      for (const char *r = point; *r; r++)
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7')
          *w++ = (char) ((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0')), r += 3;
        else
          *w++ = *r;
      *w = '\0';
      return xstrdup (point);
    }
  return NULL;
}

/* Unmount the pin `r` when `path` (followed through no symlink) reaches exactly it.
 * 1 done, 0 not reached there, -1 umount failed (errno). */
static int
unpin_at (const struct pin_rec *r, const char *path)
{
  struct mnt_ids id;
  cleanup_close int top = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  /* beneath "/" (the userspace fallback of pathsafe needs a scope; the path is absolute) */
  cleanup_close int fd = top < 0 ? -1
                                 : ps_openat2 (top, path + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd < 0 || mnt_ids_of (fd, &id) < 0 || !id.root || id.unique != r->unique)
    return 0;
  /* the fd is the pin itself: unmount it through the fd, not through a path */
  cleanup_free char *self = xasprintf ("/proc/self/fd/%d", fd);
  return umount2 (self, MNT_DETACH) < 0 ? -1 : 1;
}

static void
unpin (const struct pin_rec *r)
{
  int done = unpin_at (r, r->path);
  cleanup_free char *moved = NULL;

  if (done == 0 && (moved = mountinfo_point (r->old)) != NULL)
    done = unpin_at (r, moved); /* the pin's dentry was moved (an ancestor renamed) */
  if (done < 0)
    log_warning ("policy: remove the pin of `%s` (mount %llu): %s", r->path, r->unique, strerror (errno));
  else if (done == 0 && moved)
    log_warning ("policy: the pin of `%s` (mount %llu, now at `%s`) cannot be reached without a symlink or is "
                 "covered: left mounted; unmount it by hand",
                 r->path, r->unique, moved);
  else if (done == 0)
    log_debug ("policy: the pin of `%s` (mount %llu) is gone already", r->path, r->unique);
}

void
policy_pin_release (int state_rootfd, int dirfd)
{
  cleanup_free char *raw = NULL;
  asbx_err_t e = NULL;
  size_t len;
  char *save = NULL;

  watch_release (dirfd);
  if (faccessat (dirfd, PINS_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    return;
  cleanup_close int lock = root_lock (state_rootfd);
  if (lock < 0)
    log_warning ("policy: lock the state root to remove the pins: %s", strerror (errno));
  if (read_file_at (dirfd, PINS_FILE, 1 << 20, &raw, &len, &e) < 0)
    {
      log_warning ("policy: read the pins record: %s", e->msg);
      asbx_error_free (&e);
      return;
    }
  for (char *l = strtok_r (raw, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      struct pin_rec *r = xmalloc (sizeof *r);
      if (!rec_parse (l, r))
        log_warning ("policy: malformed pin record `%s`: left", l);
      else if (recorded (state_rootfd, dirfd, r->unique, false))
        log_debug ("policy: pin of `%s` kept: another container records it", r->path);
      else
        unpin (r);
      free (r);
    }
  /* a second line of this container for the same pin finds it gone: harmless */
  if (unlinkat (dirfd, PINS_FILE, 0) < 0)
    log_warning ("policy: remove the pins record: %s", strerror (errno));
}
