/* policy_alias.c - under filesystem.allowExec, no executable mount shows what the agent can
 * write: see the header. Found by an outside tester (docs/security.md): a host bind of the
 * workspace under /usr, a /usr directory bound elsewhere and given as the workspace, an OCI
 * bundle that mounts one host directory read-write at /workspace and read-only under /usr/local;
 * a path check on the workspace sees none of them, mountinfo shows all.
 *
 * Threat model: as policy_noexec.c - nothing of the container runs yet; mount points are
 * re-opened beneath the rootfs fd and must be the mount mountinfo listed (STATX_MNT_ID). The
 * host's mounts are the bundle author's (trusted); what changes after create is the agent's
 * writing, and host mounts propagating in, which the rprivate step stops. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <linux/openat2.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/mount.h"
#include "linux/pathsafe.h"
#include "linux/mountinfo.h"
#include "runtime/policy_alias.h"
#include "runtime/policy_noexec.h"

static const char *const why = "filesystem.allowExec";

struct amnt
{
  uint64_t id;
  unsigned maj, min;
  char *root;  /* the mount's root inside its filesystem (mountinfo field 4) */
  char *point; /* mount point in our namespace */
  char *rel;   /* mount point in the container, or NULL: not beneath the rootfs */
  int fd;      /* O_PATH fd of the mount as visible at rel, or -1: not visible */
  bool ro, noexec;
};

struct aregion
{
  unsigned maj, min;
  char *root; /* the subtree of the filesystem the agent can write */
  dev_t dev;  /* that directory's identity (fstat) */
  ino_t ino;
  char *grant;       /* the grant's resolved path in the container */
  const char *wname; /* container path of the mount it is written through */
};

struct ainfo
{
  struct amnt *m;
  size_t n;
  struct aregion *g;
  size_t gn;
};

static void
ainfo_clear (struct ainfo *a)
{
  for (size_t i = 0; i < a->n; i++)
    {
      free (a->m[i].root);
      free (a->m[i].point);
      free (a->m[i].rel);
      if (a->m[i].fd >= 0)
        close (a->m[i].fd);
    }
  for (size_t i = 0; i < a->gn; i++)
    {
      free (a->g[i].root);
      free (a->g[i].grant);
    }
  free (a->m);
  free (a->g);
}

/* rel, fd, ro, noexec of one mount: visible when its mount point, opened beneath the rootfs,
 * is that very mount */
static int
look_at (int rootfd, const char *prefix, struct amnt *m, asbx_err_t *err)
{
  size_t plen = strcmp (prefix, "/") != 0 ? strlen (prefix) : 0;
  const char *rel = m->point + plen;
  struct statvfs sv;
  uint64_t id;

  if (strncmp (m->point, prefix, plen) != 0 || (rel[0] != '\0' && rel[0] != '/'))
    return 0;
  m->rel = xstrdup (rel[0] ? rel : "/");
  int fd = m->rel[1] == '\0'
               ? dup (rootfd)
               : ps_openat2 (rootfd, m->rel, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd < 0 || mountinfo_mount_id (fd, &id) < 0 || id != m->id)
    {
      if (fd >= 0)
        close (fd);
      return 0; /* overmounted or not reachable by its name: not part of the container's view */
    }
  m->fd = fd;
  if (fstatvfs (fd, &sv) < 0)
    return asbx_error (err, errno, "%s: statvfs `%s`", why, m->rel);
  m->ro = sv.f_flag & ST_RDONLY;
  m->noexec = sv.f_flag & ST_NOEXEC;
  return 0;
}

static int
read_mounts (int rootfd, struct ainfo *a, asbx_err_t *err)
{
  struct mountinfo_entry *v = NULL;
  const char *prefix = NULL;
  uint64_t root_id;
  size_t n = 0;

  if (mountinfo_mount_id (rootfd, &root_id) < 0)
    return asbx_error (err, errno, "%s: statx the rootfs", why);
  if (mountinfo_read (&v, &n, err) < 0)
    return asbx_error_wrap (err, "%s", why);
  a->m = xmalloc0 ((n ? n : 1) * sizeof (*a->m));
  for (size_t i = 0; i < n; i++, a->n++)
    {
      /* the strings move to a->m, which frees them */
      a->m[i] = (struct amnt){
        .id = v[i].id, .maj = v[i].maj, .min = v[i].min, .root = v[i].root, .point = v[i].point, .fd = -1
      };
      v[i].root = v[i].point = NULL;
    }
  mountinfo_free (v, n);
  for (size_t i = 0; i < a->n; i++)
    if (a->m[i].id == root_id)
      prefix = a->m[i].point;
  if (!prefix)
    return asbx_error (err, ENOENT, "%s: the rootfs mount is not in /proc/self/mountinfo", why);
  for (size_t i = 0; i < a->n; i++)
    if (look_at (rootfd, prefix, &a->m[i], err) < 0)
      return -1;
  return 0;
}

static const struct amnt *
find_visible (const struct ainfo *a, uint64_t id)
{
  for (size_t i = 0; i < a->n; i++)
    if (a->m[i].id == id && a->m[i].fd >= 0)
      return &a->m[i];
  return NULL;
}

static void
add_region (struct ainfo *a, const struct amnt *m, char *root, int fd, const char *grant)
{
  struct stat st;
  if (fstat (fd, &st) < 0)
    st.st_dev = 0, st.st_ino = 0; /* then no place matches it: covered where reachable, else refused */
  a->g = xrealloc (a->g, (a->gn + 1) * sizeof (*a->g));
  a->g[a->gn++] = (struct aregion){ .maj = m->maj,
                                    .min = m->min,
                                    .root = root,
                                    .dev = st.st_dev,
                                    .ino = st.st_ino,
                                    .grant = xstrdup (grant),
                                    .wname = m->rel };
}

/* "/a" + "b/c" without doubling the slash */
static char *
join (const char *a, const char *b)
{
  while (*b == '/')
    b++;
  if (!*b)
    return xstrdup (a);
  return xasprintf ("%s%s%s", a, strcmp (a, "/") == 0 ? "" : "/", b);
}

/* the regions one writable grant opens: where its path resolves (on a read-write mount), and
 * every read-write mount below it */
static int
grant_regions (int rootfd, struct ainfo *a, const struct policy_fs_rule *r, asbx_err_t *err)
{
  char link[4096], proc[64];
  uint64_t id;
  ssize_t len;

  cleanup_close int fd = ps_openat2 (rootfd, r->path, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
    return 0; /* a grant on a missing path opens nothing */
  if (fd < 0 || mountinfo_mount_id (fd, &id) < 0)
    return asbx_error (err, errno, "%s: open the grant `%s`", why, r->path);
  const struct amnt *m = find_visible (a, id);
  snprintf (proc, sizeof proc, "/proc/self/fd/%d", fd);
  len = readlink (proc, link, sizeof link - 1);
  if (!m || len <= 0 || (size_t) len >= sizeof link - 1)
    return asbx_error (err,
                       !m        ? ENOENT
                       : len < 0 ? errno
                                 : ENAMETOOLONG,
                       "%s: the mount of the grant `%s` is not in the container's view", why, r->path);
  link[len] = '\0';
  size_t pl = strcmp (m->point, "/") == 0 ? 0 : strlen (m->point);
  if (strncmp (link, m->point, pl) != 0 || (link[pl] != '\0' && link[pl] != '/'))
    return asbx_error (err, EXDEV, "%s: the grant `%s` resolves to `%s`, not below its mount `%s`", why, r->path, link,
                       m->point);
  /* the grant in the container: its mount's place there + the rest */
  cleanup_free char *grant = join (m->rel, link + pl);
  if (!m->ro)
    add_region (a, m, join (m->root, link + pl), fd, grant);
  for (size_t i = 0, n = a->n; i < n; i++)
    if (a->m[i].fd >= 0 && !a->m[i].ro && &a->m[i] != m && policy_path_within (grant, a->m[i].rel))
      add_region (a, &a->m[i], xstrdup (a->m[i].root), a->m[i].fd, grant);
  return 0;
}

/* the region's root is strictly below x's: cover the place inside x that shows it */
static int
cover_inside (struct amnt *x, const struct aregion *g, asbx_err_t *err)
{
  const char *sub = g->root + (strcmp (x->root, "/") == 0 ? 1 : strlen (x->root) + 1);
  struct stat st;

  cleanup_free char *place = join (x->rel, sub);
  if (policy_path_within (g->grant, place))
    return 0; /* the grant itself on its own mount: policy_noexec and allowExec decide there */
  /* from x's root, by the names of the filesystem (a symlink there is not the region's path);
   * landing on another mount means one lies on the way: that place of x is not visible (and
   * that mount is judged on its own). Not RESOLVE_NO_XDEV: pathsafe's fallback has none. */
  uint64_t id = 0;
  cleanup_close int fd = ps_openat2 (x->fd, sub, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd >= 0 && mountinfo_mount_id (fd, &id) == 0 && id != x->id)
    return 0;
  if (fd < 0 || id != x->id || fstat (fd, &st) < 0 || st.st_dev != g->dev || st.st_ino != g->ino)
    return asbx_error (err, fd < 0 ? errno : ESTALE,
                       "%s: the writable mount `%s` (`%s` of device %u:%u) is also below the executable mount "
                       "`%s` (root `%s`), at `%s`, and that place cannot be %s to make it noexec; do not mount a "
                       "writable directory below an executable one",
                       why, g->wname, g->root, g->maj, g->min, x->rel, x->root, sub,
                       fd < 0 ? "reached" : "verified (it is another directory)");
  cleanup_close int mfd = mnt_clone (fd, "", true, err);
  if (mfd < 0 || mnt_setattr (mfd, true, MOUNT_ATTR_NOEXEC, 0, 0, err) < 0 || mnt_attach (mfd, fd, err) < 0)
    return asbx_error_wrap (err, "%s: cover `%s/%s` (the writable `%s` seen through the executable `%s`) noexec", why,
                            x->rel, sub, g->wname, x->rel);
  log_info ("%s: `%s/%s` shows the writable `%s`: covered noexec", why, x->rel, sub, g->wname);
  return 0;
}

static int
judge_pair (struct amnt *x, const struct aregion *g, asbx_err_t *err)
{
  if (x->fd < 0 || x->noexec || x->maj != g->maj || x->min != g->min)
    return 0;
  if (policy_path_within (g->grant, x->rel))
    return 0; /* inside the grant itself: policy_noexec and allowExec decide there */
  if (policy_path_within (g->root, x->root))
    {
      if (mnt_setattr (x->fd, false, MOUNT_ATTR_NOEXEC, 0, 0, err) < 0)
        return asbx_error_wrap (err, "%s: make `%s` noexec (it shows the writable `%s`)", why, x->rel, g->wname);
      x->noexec = true;
      log_info ("%s: `%s` shows the writable `%s`: made noexec", why, x->rel, g->wname);
      return 0;
    }
  if (policy_path_within (x->root, g->root))
    return cover_inside (x, g, err);
  return 0;
}

int
policy_noexec_aliases (int rootfd, const struct policy_plan *plan, asbx_err_t *err)
{
  struct ainfo a = { 0 };
  struct timespec t0, t1;
  int r = 0;

  if (!policy_exec_restricted (plan))
    return 0;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  /* a mount the host makes later must not propagate in (an exec alias after this pass) */
  if (mnt_setattr (rootfd, true, 0, 0, MS_PRIVATE, err) < 0)
    return asbx_error_wrap (err, "%s: make the container's mounts rprivate", why);
  if (read_mounts (rootfd, &a, err) < 0)
    r = -1;
  for (size_t i = 0; r == 0 && i < plan->fs_rules_len; i++)
    if (plan->fs_rules[i].rights & POLICY_FS_WRITE)
      r = grant_regions (rootfd, &a, &plan->fs_rules[i], err);
  /* and every other read-write mount, whole (the rootfs's top aside: root.readonly makes it
   * read-only at finalize, else only the grants above write it): what Landlock would refuse to
   * write there matters where Landlock was degraded away; its own place is its `grant` */
  for (size_t i = 0, n = a.n; r == 0 && i < n; i++)
    if (a.m[i].fd >= 0 && !a.m[i].ro && strcmp (a.m[i].rel, "/") != 0)
      add_region (&a, &a.m[i], xstrdup (a.m[i].root), a.m[i].fd, a.m[i].rel);
  for (size_t i = 0; r == 0 && i < a.n; i++)
    for (size_t j = 0; r == 0 && j < a.gn; j++)
      r = judge_pair (&a.m[i], &a.g[j], err);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  log_debug ("%s: aliases checked: %zu mounts x %zu writable regions in %ld us", why, a.n, a.gn,
             (long) ((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000));
  ainfo_clear (&a);
  return r;
}
