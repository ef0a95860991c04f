/* policy_mounts.c - the agent policy's mount layer beneath the rootfs (policy_apply_mounts, see
 * policy_apply.h): writable grants, read-only denies and masks, the `~/x` homes, the runtime's
 * hidden directories.
 *
 * Threat model: the container's code controls the rootfs contents (symlinks, missing paths).
 * Every policy path is resolved with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS) beneath the
 * rootfs fd, and mounts go onto the fd that was resolved, never onto a re-resolved string. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/mount.h"
#include "linux/mountinfo.h"
#include "linux/pathsafe.h"
#include "runtime/policy_apply.h"
#include "runtime/policy_carve.h"
#include "runtime/policy_homes.h"
#include "runtime/policy_noexec.h"
#include "runtime/policy_pin.h"

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U /* include/uapi/linux/stat.h, 6.8 */
#endif

/* The unique (never reused) id of `fd`'s mount into *id when id is not NULL. 0 / -1 with *err. */
static int
mount_id (int fd, uint64_t *id, asbx_err_t *err)
{
  struct statx stx;
  if (!id)
    return 0;
  if (statx (fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID_UNIQUE, &stx) < 0)
    return asbx_error (err, errno, "statx (mount id)");
  if (!(stx.stx_mask & STATX_MNT_ID_UNIQUE))
    return asbx_error (err, ENOSYS, "statx: no unique mount id (Linux 6.8)");
  *id = stx.stx_mnt_id;
  return 0;
}

/* `id` (NULL: not wanted): the unique id of the mount made */
static int
bind_self (int fd, bool rw, bool noexec, uint64_t *id, asbx_err_t *err)
{
  cleanup_close int mfd = mnt_clone (fd, "", true, err);
  uint64_t set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY) | (noexec ? MOUNT_ATTR_NOEXEC : 0);
  uint64_t clr = rw ? MOUNT_ATTR_RDONLY : 0;
  if (mfd < 0 || mnt_attach (mfd, fd, err) < 0 || mount_id (mfd, id, err) < 0)
    return -1;
  /* a read-only deny receives no propagation: under rslave, a host mount on the file (the
   * runtime's own pin, runtime/policy_pin.h) would otherwise land on top of it, read-write */
  return mnt_setattr (mfd, true, set, clr, rw ? 0 : MS_PRIVATE, err);
}

static int
mask (int rootfd, int fd, uint64_t *id, asbx_err_t *err)
{
  struct stat st;
  cleanup_close int mfd = -1;
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "stat");
  if (S_ISDIR (st.st_mode))
    mfd = mnt_new_fs ("tmpfs", "tmpfs", "size=0,mode=500", 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC, err);
  else
    {
      cleanup_close int null = ps_open_in_root (rootfd, "/dev/null", O_PATH, err);
      struct stat ns;
      if (null < 0)
        return -1;
      if (fstat (null, &ns) < 0 || !S_ISCHR (ns.st_mode) || ns.st_rdev != (dev_t) makedev (1, 3))
        return asbx_error (err, EINVAL, "/dev/null in the container is not the null device");
      mfd = mnt_clone (null, "", false, err);
    }
  if (mfd < 0 || mnt_attach (mfd, fd, err) < 0 || mount_id (mfd, id, err) < 0)
    return -1;
  return mnt_setattr (mfd, false, 0, 0, MS_PRIVATE, err); /* as bind_self's read-only denies */
}

/* where fd is, as the init sees it (the host's root before pivot_root): heap, or NULL */
static char *
fd_place (int fd)
{
  char link[64], buf[PATH_MAX];
  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink (link, buf, sizeof buf - 1);
  if (n <= 0 || buf[0] != '/')
    return NULL;
  buf[n] = '\0';
  return xstrdup (buf);
}

/* mask the container path `at` when it shows the inode `want` (dev, ino): fstat decides, not
 * the path; 0 also when it does not (over-mounted, or not there) */
static int
mask_if_same (int rootfd, const char *at, const struct stat *want, struct policy_homes_seen *noted, asbx_err_t *err)
{
  cleanup_close int afd = ps_openat2 (rootfd, at, O_PATH | O_CLOEXEC, 0,
                                      RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS);
  struct stat st;
  if (afd < 0 || fstat (afd, &st) < 0 || st.st_dev != want->st_dev || st.st_ino != want->st_ino)
    return 0;
  log_debug ("policy: deny also at `%s` (a bind mount shows it there)", at);
  if (noted)
    policy_homes_seen_alias (noted, at);
  if (mask (rootfd, afd, NULL, err) < 0)
    {
      if ((*err)->errnum != ENOENT)
        return -1;
      asbx_error_free (err); /* removed since it was opened: nothing left to show */
    }
  return 0;
}

/* /proc/self/mountinfo as mask_aliases last read it, for one policy_apply_mounts: read at the
 * first deny, not again for each of the ~60 masks of a sandbox (each read costs 0.1-0.2 ms).
 * What the denies mount meanwhile does not change what the aliases are: a mask is a tmpfs or the
 * null device (another filesystem than any target), a read-only deny or a rename pin is a bind
 * of a path onto itself (it shows what that path showed, at the same place, and the old entry
 * below it names the same view). A target on a mount the list lacks (a deny below a read-only
 * deny made since) makes mask_aliases read it again. */
struct mi_cache
{
  struct mountinfo_entry *m; /* NULL: not read yet */
  size_t n;
};

static void
mi_cache_clear (struct mi_cache *c)
{
  if (c->m)
    mountinfo_free (c->m, c->n);
  *c = (struct mi_cache){ 0 };
}

/* A denyRead target is also visible wherever a bind mount shows it or a directory below it: a
 * ~/.aws bound from /srv/creds/aws, a home bound from /srv/homes/bob, /home bound at /mnt/h
 * (outside tester: read at the bind's source through the read-only host view). mountinfo names
 * the candidates (same device; a mount root at or above the target's place in its filesystem,
 * or inside it) and each is masked only when it shows the same inode (mask_if_same). fd: the
 * target, opened before its own mask. */
static int
mask_aliases (int rootfd, int fd, struct mi_cache *mc, struct policy_homes_seen *noted, asbx_err_t *err)
{
  struct mountinfo_view *v = NULL;
  const struct mountinfo_entry *own, *root;
  cleanup_free char *where = fd_place (fd);
  cleanup_free char *place = NULL;
  uint64_t id, root_id;
  struct stat want;
  size_t n = 0, nv = 0, pl;
  int r = 0;

  if (!where || fstat (fd, &want) < 0 || mountinfo_mount_id (fd, &id) < 0 || mountinfo_mount_id (rootfd, &root_id) < 0)
    return 0; /* nothing to compare with: the target itself is masked */
  for (int fresh = 0;; fresh = 1)
    {
      if (!mc->m || fresh)
        {
          mi_cache_clear (mc);
          if (mountinfo_read (&mc->m, &mc->n, err) < 0)
            return asbx_error_wrap (err, "policy: the mounts that show a denied path");
          fresh = 1;
        }
      own = mountinfo_find (mc->m, mc->n, id);
      root = mountinfo_find (mc->m, mc->n, root_id);
      if ((own && root) || fresh)
        break;
    }
  n = mc->n;
  const struct mountinfo_entry *m = mc->m;
  place = own && root ? mountinfo_place (own, where) : NULL;
  if (place)
    nv = mountinfo_views (m, n, own, place, &v);
  /* views are named in this namespace; the container's paths are below the rootfs's point */
  pl = root && strcmp (root->point, "/") != 0 ? strlen (root->point) : 0;
  for (size_t i = 0; i < nv && r == 0; i++)
    {
      if (!policy_path_within (root->point, v[i].mount->point) || !policy_path_within (root->point, v[i].at))
        continue;
      const char *in_root = v[i].mount->point[pl] ? v[i].mount->point + pl : "/";
      if (strcmp (in_root, "/") == 0)
        continue; /* the container's root itself (a rootfs inside the hidden state root) */
      if (v[i].whole)
        /* the mount shows the target itself */
        r = mask_if_same (rootfd, v[i].at[pl] ? v[i].at + pl : "/", &want, noted, err);
      else if (S_ISDIR (want.st_mode))
        {
          /* the mount shows a directory below the target: mask its point when it is that directory */
          struct stat sub;
          cleanup_close int sfd = openat (fd, v[i].sub, O_PATH | O_NOFOLLOW | O_CLOEXEC);
          if (sfd >= 0 && fstat (sfd, &sub) == 0)
            r = mask_if_same (rootfd, in_root, &sub, noted, err);
        }
    }
  mountinfo_views_free (v, nv);
  return r;
}

/* The writable grant (allowWrite bind or tmpfs) whose hierarchy strictly contains `path`, the
 * deepest one; NULL when none does. */
static const struct policy_mount *
covering_grant (const struct policy_plan *plan, const char *path)
{
  const struct policy_mount *best = NULL;
  for (size_t i = 0; i < plan->mounts_len; i++)
    {
      const struct policy_mount *g = &plan->mounts[i];
      size_t n = strlen (g->path);
      if (g->kind != POLICY_MOUNT_BIND_RW && g->kind != POLICY_MOUNT_TMPFS)
        continue;
      if (n == 1 && g->path[0] == '/')
        n = 0;
      if (strncmp (path, g->path, n) == 0 && path[n] == '/' && (!best || strlen (best->path) < strlen (g->path)))
        best = g;
    }
  return best;
}

/* A deny under a writable grant (denyWrite /workspace/.git/hooks) holds on the path only while
 * the path keeps its name: renaming an ancestor away (`mv .git g2`) and recreating the path would
 * leave a fresh, writable .git/hooks. Each ancestor between the grant and the denied path becomes
 * a mount point (an rw bind onto itself with the grant's flags), which rename(2) and rmdir(2)
 * refuse with EBUSY. Found by tests/integration/test_policy_fs.py. */
static int
pin_ancestors (int rootfd, const struct policy_plan *plan, const char *path, asbx_err_t *err)
{
  const struct policy_mount *g = covering_grant (plan, path);
  cleanup_free char *p = xstrdup (path);
  size_t start = g ? strlen (g->path) : 0;

  if (!g)
    return 0;
  for (char *slash = p + start + 1; (slash = strchr (slash, '/')) != NULL; *slash++ = '/')
    {
      struct statx stx;
      *slash = '\0';
      cleanup_close int fd = ps_openat2 (rootfd, p, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
      if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
        return 0; /* the rest does not exist: nothing to pin (the deny itself decides) */
      if (fd < 0)
        return asbx_error (err, errno, "open `%s`", p);
      if (statx (fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) < 0)
        return asbx_error (err, errno, "statx `%s`", p);
      if (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT && stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
        continue; /* already a mount point (pinned for another rule) */
      if (bind_self (fd, true, g->noexec, NULL, err) < 0)
        return asbx_error_wrap (err, "pin `%s`", p);
    }
  return 0;
}

/* The denies P pins on the host (policy_pin.h): checked once the pins are in place
 * (policy_verify_pinned_masks). */
struct policy_pinned_mask
{
  char *path;
  enum policy_mount_kind kind; /* POLICY_MOUNT_BIND_RO or POLICY_MOUNT_MASK */
  uint64_t id;                 /* the unique id of the deny's mount */
  dev_t dev;                   /* the inode it covers */
  ino_t ino;
};
static int
remember_pinned (struct policy_mount_result *res, const struct policy_mount *m, int fd, uint64_t id, asbx_err_t *err)
{
  struct stat st;
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "stat");
  /* a second deny on one path lies over the first: the top one is what the container sees */
  for (size_t i = 0; i < res->pinned_len; i++)
    if (strcmp (res->pinned[i].path, m->path) == 0)
      {
        res->pinned[i].kind = m->kind, res->pinned[i].id = id;
        return 0;
      }
  res->pinned = xrealloc (res->pinned, (res->pinned_len + 1) * sizeof *res->pinned);
  res->pinned[res->pinned_len++] = (struct policy_pinned_mask){ xstrdup (m->path), m->kind, id, st.st_dev, st.st_ino };
  return 0;
}

/* The inode P pinned at `path` when it was not the noted one: from PINS_DONE's "DEV INO PATH"
 * lines. false: P pinned the noted inode (or nothing: no host file). */
static bool
pinned_instead (const char *report, const char *path, dev_t *dev, ino_t *ino)
{
  for (const char *l = report; l && *l;)
    {
      const char *end = strchr (l, '\n');
      size_t n = end ? (size_t) (end - l) : strlen (l);
      unsigned long long d, i;
      int off = 0;
      if (sscanf (l, "%llu %llu %n", &d, &i, &off) == 2 && off > 0 && n >= (size_t) off && n - off == strlen (path)
          && strncmp (l + off, path, n - off) == 0)
        {
          *dev = (dev_t) d, *ino = (ino_t) i;
          return true;
        }
      l = end ? end + 1 : l + n;
    }
  return false;
}

/* Check one pinned deny, re-applying it once when its mount is gone. 0 / -1 with *err. */
static int
verify_pinned (int rootfd, struct policy_pinned_mask *p, const char *report, asbx_err_t *err)
{
  dev_t dev = p->dev;
  ino_t ino = p->ino;
  bool other = pinned_instead (report, p->path, &dev, &ino);

  for (int attempt = 0;; attempt++)
    {
      struct stat st;
      uint64_t now = 0;
      cleanup_close int fd = ps_openat2 (rootfd, p->path, O_PATH | O_CLOEXEC, 0,
                                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
      if (fd < 0)
        return asbx_error (err, errno, "open `%s` after the pins", p->path);
      if (mount_id (fd, &now, err) < 0 || fstat (fd, &st) < 0)
        return asbx_error_wrap (err, "`%s`", p->path);
      if (now == p->id && other && attempt == 0)
        return asbx_error (err, EXDEV,
                           "pin `%s`: the host's file there (inode %ju) is not the file the container masks (inode "
                           "%ju): a different mount or symlink on the host's side - refused",
                           p->path, (uintmax_t) ino, (uintmax_t) p->ino);
      if (now == p->id)
        return 0;
      /* the host replaced the file between our mask and P's pin: the kernel dropped the mask
       * (and a new file may have reused the inode number P checked). P's pin now holds the file
       * there, and nothing of the container has run: mask it again. */
      if (attempt > 0 || st.st_dev != dev || st.st_ino != ino)
        return asbx_error (err, EXDEV,
                           "`%s`: the deny's mount is gone (the host replaced the file during create) and the "
                           "file there is not the pinned one - refused",
                           p->path);
      log_debug ("policy: `%s`: the deny's mount was dropped during create (host replacement): re-applied", p->path);
      int r = p->kind == POLICY_MOUNT_MASK ? mask (rootfd, fd, &p->id, err) : bind_self (fd, false, false, &p->id, err);
      if (r < 0)
        return asbx_error_wrap (err, "re-apply the deny on `%s`", p->path);
    }
}

int
policy_verify_pinned_masks (struct policy_mount_result *res, int rootfd, const char *replaced, asbx_err_t *err)
{
  for (size_t i = 0; i < res->pinned_len; i++)
    if (verify_pinned (rootfd, &res->pinned[i], replaced, err) < 0)
      return asbx_error_wrap (err, "policy: deny inside a writable bind grant");
  return 0;
}

void
policy_mount_result_free (struct policy_mount_result *res)
{
  for (size_t i = 0; i < res->pinned_len; i++)
    free (res->pinned[i].path);
  free (res->pinned);
  free (res->pin_notes);
  free (res->missing_grants);
  policy_homes_seen_free (&res->homes);
  memset (res, 0, sizeof *res);
}

/* add m to *missing: "origin\tpath\n" lines of the allowWrite grants whose path did not exist
 * (policy_apply_mounts) */
static void
note_missing_grant (char **missing, const struct policy_mount *m)
{
  char *line = xasprintf ("%s%s\t%s\n", *missing ? *missing : "", m->origin, m->path);
  free (*missing);
  *missing = line;
}

/* The caller is in a user namespace that maps exactly one uid and one gid (quick mode's): every
 * process of the container then has the init's ids (nothing else can be switched to). */
/* The caller is in a user namespace other than the initial one (uid_map is not 0 0 4294967295). */
static bool
in_user_namespace (void)
{
  cleanup_fclose FILE *f = fopen ("/proc/self/uid_map", "re");
  unsigned long long in, out, count;
  return f && fscanf (f, "%llu %llu %llu", &in, &out, &count) == 3 && !(in == 0 && out == 0 && count == 4294967295ULL);
}

static bool
single_id_userns (void)
{
  static const char *const maps[] = { "/proc/self/uid_map", "/proc/self/gid_map" };
  for (size_t i = 0; i < 2; i++)
    {
      cleanup_fclose FILE *f = fopen (maps[i], "re");
      unsigned long long in, out, count;
      int lines = 0;
      while (f && fscanf (f, "%llu %llu %llu", &in, &out, &count) == 3)
        if (++lines > 1 || count != 1)
          return false;
      if (lines != 1)
        return false;
    }
  return true;
}

/* A deny rule's path the init cannot even reach (EACCES: a user namespace's root has no
 * capability over host-owned inodes, e.g. /root/.aws under a 0700 /root). In a single-id user
 * namespace no process of the container, with the init's uid and gid and fewer capabilities, can
 * reach it either: nothing to mask. Elsewhere (another uid could pass where root cannot, e.g.
 * NFS root_squash) EACCES stays an error. */
static bool
unreachable (int rootfd, const char *path)
{
  cleanup_close int fd = ps_openat2 (rootfd, path, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  return fd < 0 && errno == EACCES && single_id_userns ();
}

/* m's path does not exist (ENOENT/ENOTDIR, or policy_home_may_hold said so) */
static int
apply_missing (const struct policy_mount *m, struct policy_mount_result *res, asbx_err_t *err)
{
  if (m->optional || m->kind == POLICY_MOUNT_BIND_RW)
    {
      /* `?` rule, or a grant on a path that does not exist: nothing to enforce or create; a
       * grant that silently leaves its path read-only is reported at create (issue 15) */
      log_debug ("policy %s (%s): path does not exist, not enforced", m->origin, m->path);
      if (m->kind == POLICY_MOUNT_BIND_RW && !m->optional)
        note_missing_grant (&res->missing_grants, m);
      return 0;
    }
  if (m->writable_parent)
    return asbx_error (err, 0,
                       "policy %s: `%s` does not exist and its parent is writable: the rule cannot be "
                       "enforced (write it as \"?%s\" to make it optional)",
                       m->origin, m->path, m->path);
  return 0; /* nothing there, and nothing can create it: the deny holds by itself */
}

static int
apply_one_mount (int rootfd, const struct policy_plan *plan, const struct policy_mount *m, struct mi_cache *mc,
                 struct policy_mount_result *res, asbx_err_t *err)
{
  if ((m->kind == POLICY_MOUNT_BIND_RO || m->kind == POLICY_MOUNT_MASK) && unreachable (rootfd, m->path))
    {
      log_debug ("policy %s (%s): not reachable by the container's root (EACCES): nothing to mask", m->origin, m->path);
      return 0;
    }
  /* pinned before the path is opened: the deny must land on the pinned mount, not under it */
  if ((m->kind == POLICY_MOUNT_BIND_RO || m->kind == POLICY_MOUNT_MASK)
      && pin_ancestors (rootfd, plan, m->path, err) < 0)
    return asbx_error_wrap (err, "policy %s (%s)", m->origin, m->path);
  cleanup_close int fd = ps_openat2 (rootfd, m->path, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  /* ENOTDIR: a component is a file (~/.config a file, rule ~/.config/gh): the path is missing */
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
    return apply_missing (m, res, err);
  if (fd < 0)
    return asbx_error (err, errno, "policy %s: open `%s`", m->origin, m->path);
  int r = 0;
  uint64_t id = 0;
  switch (m->kind)
    {
    case POLICY_MOUNT_BIND_RW: r = bind_self (fd, true, m->noexec, NULL, err); break;
    case POLICY_MOUNT_BIND_RO: r = bind_self (fd, false, false, &id, err); break;
    case POLICY_MOUNT_MASK: r = mask (rootfd, fd, &id, err); break;
    case POLICY_MOUNT_TMPFS:
      {
        cleanup_close int mfd = mnt_new_fs ("tmpfs", "tmpfs", "mode=1777", 0,
                                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (m->noexec ? MOUNT_ATTR_NOEXEC : 0),
                                            err);
        r = mfd < 0 ? -1 : mnt_attach (mfd, fd, err);
        break;
      }
    }
  /* the same file or directory shown elsewhere by a bind mount is masked there too */
  if (r == 0 && m->kind == POLICY_MOUNT_MASK)
    r = mask_aliases (rootfd, fd, mc, &res->homes, err);
  /* a deny inside a writable bind grant: P pins the file in the host's namespace (policy_pin.h).
   * Not inside a review workspace: the mask lies on an overlay dentry of the container's own
   * namespace, which no host-side rename or unlink of the lower file reaches (the detach that
   * pins prevent happens only to mounts on the host filesystem's dentries), and the host file
   * is not the file masked (another device), so there is nothing to pin */
  bool in_review = plan->ws_mode == POLICY_WS_REVIEW && plan->ws_path
                   && strncmp (m->path, plan->ws_path, strlen (plan->ws_path)) == 0
                   && (m->path[strlen (plan->ws_path)] == '/' || m->path[strlen (plan->ws_path)] == '\0');
  if (r == 0 && !in_review && (m->kind == POLICY_MOUNT_BIND_RO || m->kind == POLICY_MOUNT_MASK))
    r = policy_pin_note (&res->pin_notes, covering_grant (plan, m->path), m->path, fd, err);
  if (r == 1)
    r = remember_pinned (res, m, fd, id, err);
  return r < 0 ? asbx_error_wrap (err, "policy %s (%s)", m->origin, m->path) : 0;
}

/* The `~/x` form: the rule applies to <home>/<each_child> for every home of the container's
 * rootfs at create (runtime/policy_homes.h): each directory entry of <path> ("/home"), symlinked
 * ones as the directory they name inside the rootfs, and every home of the rootfs's /etc/passwd
 * (issue 13 §3: a service user's /var/lib/postgresql/.pgpass). A home without the credential
 * holds the deny unless the home is writable; a missing file in a writable passwd home is not
 * an error for a mask (what the agent writes there is its own), for a read-only bind it is. */
struct homes_cache
{
  char *dir; /* the each_child rules' path ("/home"); NULL = not listed yet */
  struct policy_home *v;
  int n;
};

static void
homes_cache_clear (struct homes_cache *c)
{
  policy_homes_free (c->v, c->n > 0 ? (size_t) c->n : 0);
  free (c->dir);
  *c = (struct homes_cache){ 0 };
}

/* the homes for `dir`, listed once per create: before any deny mount (a denyRead of /etc/passwd
 * must not hide the homes it names) and not again for each of the ~60 `~/` rules */
static int
homes_cache_fill (struct homes_cache *c, int rootfd, const char *dir, asbx_err_t *err)
{
  if (c->dir && strcmp (c->dir, dir) == 0)
    return 0;
  homes_cache_clear (c);
  c->n = policy_homes_list (rootfd, dir, POLICY_HOMES_ENTRIES, &c->v, err);
  if (c->n < 0)
    return -1;
  c->dir = xstrdup (dir);
  return 0;
}

static int
apply_each_child (int rootfd, const struct policy_plan *plan, const struct policy_mount *m, struct homes_cache *hc,
                  struct mi_cache *mc, struct policy_mount_result *res, asbx_err_t *err)
{
  int r = 0;

  if (homes_cache_fill (hc, rootfd, m->path, err) < 0)
    return asbx_error_wrap (err, "policy %s", m->origin);
  const struct policy_home *homes = hc->v;
  for (int i = 0; i < hc->n && r == 0; i++)
    {
      cleanup_free char *path = xasprintf ("%s/%s", strcmp (homes[i].path, "/") ? homes[i].path : "", m->each_child);
      struct policy_mount one = *m;
      one.path = path;
      one.each_child = NULL;
      if (homes[i].from_passwd)
        one.writable_parent = covering_grant (plan, path) != NULL;
      one.optional = m->optional || !one.writable_parent || (homes[i].from_passwd && m->kind == POLICY_MOUNT_MASK);
      /* a deny whose first component the home does not hold: missing, without the lookups
       * (apply_one_mount's EACCES probe and open); under a grant the ancestors' pins come first */
      bool deny = m->kind == POLICY_MOUNT_MASK || m->kind == POLICY_MOUNT_BIND_RO;
      if (deny && !policy_home_may_hold (&homes[i], m->each_child) && !covering_grant (plan, path))
        r = apply_missing (&one, res, err);
      else
        r = apply_one_mount (rootfd, plan, &one, mc, res, err);
    }
  return r;
}

/* A hidden directory inside the container's rootfs (`--rootfs R` with a workspacesDir R/wsd) is
 * shown at its place below the rootfs (/wsd), not at its host path, and mask_aliases leaves the
 * container's root mount out (outside tester, attack 03: another run's review upper and meta.json
 * read and written at /wsd). The deepest host ancestor of `real` that is the rootfs's own
 * directory (device and inode of rootfd) names that place; it is masked only when it shows the
 * hidden directory itself (mask_if_same). 0 also when `real` is not below the rootfs. */
static int
mask_below_rootfs (int rootfd, const char *real, const struct stat *want, asbx_err_t *err)
{
  cleanup_free char *buf = xstrdup (real);
  struct stat rst;

  if (fstat (rootfd, &rst) < 0)
    return 0;
  for (char *slash = strrchr (buf, '/'); slash && slash != buf; slash = strrchr (buf, '/'))
    {
      struct stat pst;
      *slash = '\0';
      cleanup_close int pfd = open (buf, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (pfd >= 0 && fstat (pfd, &pst) == 0 && pst.st_dev == rst.st_dev && pst.st_ino == rst.st_ino)
        return mask_if_same (rootfd, real + (slash - buf), want, NULL, err);
    }
  return 0;
}

/* One host directory of plan->hidden_paths: masked where the container's view shows that same
 * directory (device and inode) at its path (or at its real path), e.g. the audit directory
 * through the sandbox's /var bind. A directory the container sees elsewhere under another name
 * (an explicit bind of /var/log to /logs) is the bind's author's choice, see docs/security.md. */
static int
apply_hidden (int rootfd, const char *path, struct mi_cache *mc, asbx_err_t *err)
{
  char real[PATH_MAX];
  struct stat hst;

  if (realpath (path, real) == NULL || stat (real, &hst) < 0)
    {
      /* gone, or out of reach of the container's root in its user namespace: its owner is not
       * mapped there (root's DAC override would pass otherwise), so no process of the container
       * can become it, and the runtime's own hidden directories are 0700 (a user's audit dir in
       * a 0700 home) */
      if (errno == ENOENT || errno == ENOTDIR || (errno == EACCES && in_user_namespace ()))
        return 0;
      return asbx_error (err, errno, "policy: hide `%s`", path);
    }
  const char *cand[] = { real, path[0] == '/' && strcmp (path, real) != 0 ? path : NULL };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (cand) && cand[i]; i++)
    {
      struct stat cst;
      cleanup_close int fd = ps_openat2 (rootfd, cand[i], O_PATH | O_CLOEXEC, 0,
                                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
      if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || (errno == EACCES && in_user_namespace ())))
        continue;
      if (fd < 0 || fstat (fd, &cst) < 0)
        return asbx_error (err, errno, "policy: hide `%s`", cand[i]);
      if (cst.st_dev != hst.st_dev || cst.st_ino != hst.st_ino)
        continue; /* the image's own directory of that name, not the host's */
      if (mask (rootfd, fd, NULL, err) < 0)
        {
          /* removed since it was opened (a user's registered directory deleted while root's
           * sandbox starts): nothing left to hide, and no way for a user to fail root's create */
          if ((*err)->errnum == ENOENT)
            {
              asbx_error_free (err);
              continue;
            }
          return asbx_error_wrap (err, "policy: hide the host's `%s`", cand[i]);
        }
      log_debug ("policy: host directory `%s` hidden", cand[i]);
    }
  /* and wherever a bind mount of the container shows it (a bundle binding / at /hostroot, a
   * host bind of /var/log elsewhere: other sandboxes' logs were read there, outside retest):
   * the host's directory, opened here before pivot_root, is what mask_aliases compares with */
  cleanup_close int hfd = open (real, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat now;
  if (hfd < 0 || fstat (hfd, &now) < 0 || now.st_dev != hst.st_dev || now.st_ino != hst.st_ino)
    return 0; /* replaced since: what is there now is not ours to hide */
  if (mask_below_rootfs (rootfd, real, &hst, err) < 0)
    return asbx_error_wrap (err, "policy: hide the host's `%s` where the rootfs shows it", real);
  return mask_aliases (rootfd, hfd, mc, NULL, err);
}

int
policy_apply_mounts (int rootfd, const struct policy_plan *plan, bool root_readonly, struct policy_mount_result *res,
                     asbx_err_t *err)
{
  struct homes_cache hc = { 0 };
  struct mi_cache mc = { 0 };
  int r = 0;

  if (!plan || !plan->active)
    return 0;
  /* grants first, then denies on top: deny wins over allow (POLICY.md §2) */
  for (int pass = 0; pass < 2 && r == 0; pass++)
    for (size_t i = 0; i < plan->mounts_len && r == 0; i++)
      {
        const struct policy_mount *m = &plan->mounts[i];
        bool grant = m->kind == POLICY_MOUNT_BIND_RW || m->kind == POLICY_MOUNT_TMPFS;
        if (pass == 1 && i == 0)
          for (size_t j = 0; j < plan->mounts_len && r == 0; j++)
            if (plan->mounts[j].each_child)
              r = homes_cache_fill (&hc, rootfd, plan->mounts[j].path, err);
        if ((pass == 0) != grant || r < 0)
          continue;
        r = m->each_child ? apply_each_child (rootfd, plan, m, &hc, &mc, res, err)
                          : apply_one_mount (rootfd, plan, m, &mc, res, err);
      }
  if (hc.dir) /* listed before any deny mount: the Landlock carve (policy_carve.h) uses the same homes */
    policy_homes_seen_set (&res->homes, hc.dir, hc.v, hc.n);
  homes_cache_clear (&hc);
  /* the runtime's own state and audit, last: over whatever grant shows them */
  for (size_t i = 0; r == 0 && i < plan->hidden_paths_len; i++)
    r = apply_hidden (rootfd, plan->hidden_paths[i], &mc, err);
  /* allowExec: no mount outside it executes, for mmap(PROT_EXEC) as for execve */
  mi_cache_clear (&mc);
  if (r == 0)
    r = policy_apply_noexec (rootfd, plan, root_readonly, err);
  return r < 0 ? -1 : 0;
}
