/* cgroup.c - the container's cgroup: resolve linux.cgroupsPath, create/join it in every mounted
 * hierarchy, place processes, signal them, remove what we created.
 *
 * Mechanism: cgroups(7) filesystems; a process is moved by writing its pid to cgroup.procs.
 * Threat model: cgroupsPath is untrusted text: ".." is refused before any filesystem access, and
 * every access goes through directory fds walked one component at a time from the hierarchy's
 * mount fd (checked with fstatfs) with O_NOFOLLOW, never through concatenated path strings.
 * Ordering: enter = mkdir in every hierarchy first, then write the pid everywhere; if anything
 * fails the pid is moved back to our own cgroup and the leaf directories we made are removed,
 * so bad input leaves no cgroup behind. remove only touches leaves recorded in the created mask
 * (directories that existed before are joined, not owned, as runc does). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/pathlex.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"
#include "linux/cgroup_systemd.h"

#define CGROUP_PARENT_DEFAULT "/agentsbx"

/* runc's systemd form "slice:prefix:name": exactly two ':' and not an absolute path. */
static bool
is_systemd_form (const char *p)
{
  const char *c1 = p ? strchr (p, ':') : NULL, *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
  return p && p[0] != '/' && c2 && strchr (c2 + 1, ':') == NULL;
}

/* Normalise a cgroupsPath to "/a/b" (empty and "." components dropped); ".." and control
 * characters are refused. NULL with *err. */
static char *
normalize (const char *in, const char *field, asbx_err_t *err)
{
  char *out;

  for (const char *p = in; *p; p++)
    if ((unsigned char) *p < ' ' || *p == 0x7f)
      {
        asbx_error (err, EINVAL, "%s: `%s` contains a control character", field, in);
        return NULL;
      }
  out = asbx_path_lexical (in, true);
  if (!out)
    {
      asbx_error (err, EINVAL, "%s: `%s` must not contain \"..\"", field, in);
      return NULL;
    }
  if (strcmp (out, "/") == 0)
    {
      free (out);
      asbx_error (err, EINVAL, "%s: `%s` names the root cgroup", field, in);
      return NULL;
    }
  return out;
}

static char *
join_rel (const char *own, const char *rel)
{
  /* own is absolute ("/" or "/a/b"); rel is normalised ("/x/y") */
  return xasprintf ("%s%s", strcmp (own, "/") == 0 ? "" : own, rel);
}

/* Relative cgroupsPath: below our own cgroup, per hierarchy (runc resolves it the same way). */
static char *
resolve_relative (const struct cgroup_layout_info *info, const char *in, const char *rel, asbx_err_t *err)
{
  cleanup_free char *first = NULL;
  bool uniform = true;
  size_t cap = 1;
  char *list;

  if (strchr (in, ';') || strchr (in, ':'))
    {
      asbx_error (err, EINVAL, "linux.cgroupsPath: relative path `%s` must not contain ';' or ':'", in);
      return NULL;
    }
  for (size_t i = 0; i < info->n; i++)
    {
      cleanup_free char *p = NULL;
      if (info->h[i].own == NULL)
        {
          asbx_error (err, ENOENT,
                      "linux.cgroupsPath: cannot resolve `%s`: our own cgroup in hierarchy `%s` is "
                      "not listed in /proc/self/cgroup",
                      in, info->h[i].key[0] ? info->h[i].key : "cgroup2");
          return NULL;
        }
      p = join_rel (info->h[i].own, rel);
      cap += strlen (info->h[i].key) + strlen (p) + 2;
      if (first == NULL)
        first = steal_ptr (&p);
      else if (strcmp (first, p) != 0)
        uniform = false;
    }
  if (uniform)
    return steal_ptr (&first);
  list = xmalloc0 (cap);
  for (size_t i = 0; i < info->n; i++)
    {
      cleanup_free char *p = join_rel (info->h[i].own, rel);
      if (i)
        strcat (list, ";");
      strcat (list, info->h[i].key);
      strcat (list, ":");
      strcat (list, p);
    }
  return list;
}

char *
cgroup_resolve_path_in (const struct cgroup_layout_info *info, const char *cgroups_path, const char *id, bool systemd,
                        bool systemd_running, struct cgroup_systemd_unit *unit, asbx_err_t *err)
{
  cleanup_free char *norm = NULL;

  /* the systemd driver (cgroup_systemd.c): the unit's computed path, started by cgroup_enter */
  if (systemd || is_systemd_form (cgroups_path))
    return cgroup_systemd_prepare (cgroups_path, id, systemd_running, unit, err);
  if (cgroups_path == NULL || cgroups_path[0] == '\0')
    {
      if (id == NULL || id[0] == '\0' || strchr (id, '/') || strcmp (id, ".") == 0 || strcmp (id, "..") == 0)
        {
          asbx_error (err, EINVAL, "invalid container id `%s` for a cgroup name", id ? id : "(null)");
          return NULL;
        }
      return xasprintf ("%s/%s", CGROUP_PARENT_DEFAULT, id);
    }
  norm = normalize (cgroups_path, "linux.cgroupsPath", err);
  if (norm == NULL)
    return NULL;
  if (cgroups_path[0] == '/')
    return steal_ptr (&norm);
  return resolve_relative (info, cgroups_path, norm, err);
}

char *
cgroup_resolve_path (const char *cgroups_path, const char *id, bool systemd, struct cgroup_systemd_unit *unit,
                     asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);
  bool running = access ("/run/systemd/system", F_OK) == 0;

  if (info == NULL)
    return NULL;
  return cgroup_resolve_path_in (info, cgroups_path, id, systemd, running, unit, err);
}

char *
cgroup_path_in_hier (const char *path, const struct cgroup_hier *h, asbx_err_t *err)
{
  const char *p = path;
  size_t klen = strlen (h->key);

  if (path[0] == '/')
    return xstrdup (path);
  while (p && *p)
    {
      const char *end = strchr (p, ';');
      if (strncmp (p, h->key, klen) == 0 && p[klen] == ':')
        {
          char *r = xstrdup (p + klen + 1);
          if (end)
            r[end - p - (ptrdiff_t) klen - 1] = '\0';
          return r;
        }
      p = end ? end + 1 : NULL;
    }
  asbx_error (err, ENOENT, "cgroup path `%s` has no entry for hierarchy `%s`", path, h->key[0] ? h->key : "cgroup2");
  return NULL;
}

bool
cgroup_path_covers (const char *path, const struct cgroup_hier *h)
{
  size_t klen = strlen (h->key);

  if (path[0] == '/')
    return true;
  for (const char *p = path; p && *p;)
    {
      if (strncmp (p, h->key, klen) == 0 && p[klen] == ':')
        return true;
      p = strchr (p, ';');
      p = p ? p + 1 : NULL;
    }
  return false;
}

/* The part of hierarchy path `p` below the mount's root, without leading '/'. NULL when the
 * mount does not show that part of the hierarchy, or p is the mount root itself. */
static const char *
below_mount (const char *p, const struct cgroup_hier *h, asbx_err_t *err)
{
  size_t rl = strlen (h->mount_root);

  if (strcmp (h->mount_root, "/") == 0)
    rl = 0;
  else if (strncmp (p, h->mount_root, rl) != 0 || (p[rl] != '/' && p[rl] != '\0'))
    {
      asbx_error (err, ENOENT, "cgroup `%s` is outside the part `%s` of the hierarchy mounted at `%s`", p,
                  h->mount_root, h->mountpoint);
      return NULL;
    }
  if (p[rl] == '\0' || p[rl + 1] == '\0')
    {
      asbx_error (err, EINVAL, "cgroup `%s` is the root of the mount `%s`", p, h->mountpoint);
      return NULL;
    }
  return p + rl + 1;
}

/* Walk `rel` ("a/b/c") from the hierarchy root fd one component at a time (O_NOFOLLOW), creating
 * missing directories when `create`. *created_leaf tells whether this call made the last one.
 * Returns an O_PATH fd of the leaf, or -1 with *err (errno ENOENT when !create and missing). */
static int
walk (int rootfd, const struct cgroup_hier *h, const char *rel, bool create, bool *created_leaf, asbx_err_t *err)
{
  cleanup_free char *copy = xstrdup (rel);
  cleanup_close int cur = fcntl (rootfd, F_DUPFD_CLOEXEC, 3);
  char *save = NULL, *next_c;

  if (cur < 0)
    return asbx_error (err, errno, "dup");
  if (created_leaf)
    *created_leaf = false;
  for (char *c = strtok_r (copy, "/", &save); c; c = next_c)
    {
      bool made = false;
      int fd;

      next_c = strtok_r (NULL, "/", &save);
      if (create)
        {
          if (mkdirat (cur, c, 0755) == 0)
            made = true;
          else if (errno != EEXIST)
            return asbx_error (err, errno, "mkdir cgroup `%s/%s` (component `%s`)", h->mountpoint, rel, c);
        }
      fd = openat (cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        return asbx_error (err, errno, "open cgroup `%s/%s`", h->mountpoint, rel);
      if (create && h->cpuset && cgroup_v1_cpuset_fill (cur, fd, c, err) < 0)
        {
          close (fd);
          return -1;
        }
      close (cur);
      cur = fd;
      if (next_c == NULL && created_leaf)
        *created_leaf = made;
    }
  return steal_fd (&cur);
}

/* Open path's leaf in hierarchy h. 0 with *fd, or -1 with *err. */
int
cgroup_open_in_hier (const struct cgroup_hier *h, const char *path, bool create, bool *created, int *fd,
                     asbx_err_t *err)
{
  cleanup_free char *p = cgroup_path_in_hier (path, h, err);
  cleanup_close int root = -1;
  const char *rel;

  if (p == NULL || (rel = below_mount (p, h, err)) == NULL)
    return -1;
  root = cgroup_open_hier_root (h, err);
  if (root < 0)
    return -1;
  *fd = walk (root, h, rel, create, created, err);
  return *fd < 0 ? -1 : 0;
}

static int
write_pid (int dirfd, pid_t pid, const struct cgroup_hier *h, const char *path, asbx_err_t *err)
{
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%d", (int) pid);
  cleanup_close int fd = openat (dirfd, "cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOCTTY);

  if (fd < 0 || write_all (fd, buf, (size_t) n) < 0)
    return asbx_error (err, errno, "move pid %d into cgroup `%s` (%s)", (int) pid, path, h->mountpoint);
  return 0;
}

/* Undo of a move: back into our own cgroup, where the pid (our child) came from. The leaf's
 * parent is not always a legal place: cgroup2's "no internal processes" rule refuses members
 * (EBUSY) in a cgroup with controllers in its cgroup.subtree_control, e.g. the hybrid
 * /sys/fs/cgroup/unified/agentsbx with hugetlb on; the pid then pinned the leaf, which
 * survived the undo. The parent stays the fallback when our own cgroup is unknown. */
static int
move_back (const struct cgroup_hier *h, int leaffd, pid_t pid, asbx_err_t *err)
{
  size_t rl = strcmp (h->mount_root, "/") == 0 ? 0 : strlen (h->mount_root);
  cleanup_close int root = -1, fd = -1;

  /* our own cgroup may be the mount's root (cgroup_open_in_hier refuses that for containers) */
  if (h->own && strncmp (h->own, h->mount_root, rl) == 0 && (h->own[rl] == '/' || h->own[rl] == '\0'))
    {
      root = cgroup_open_hier_root (h, err);
      if (root >= 0)
        fd = walk (root, h, h->own + rl, false, NULL, err);
      if (fd >= 0)
        return write_pid (fd, pid, h, h->own, err);
      asbx_error_free (err);
    }
  fd = openat (leaffd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "open the parent of the container's cgroup in %s", h->mountpoint);
  return write_pid (fd, pid, h, "..", err);
}

int
cgroup_enter (const char *path, const struct cgroup_systemd_unit *unit, pid_t pid, unsigned long *created_mask,
              asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);
  int fds[CGROUP_MAX_HIERARCHIES];
  unsigned long created = 0;
  size_t i, moved = 0;
  int ret = -1;
  /* systemd driver: systemd creates the cgroup and moves pid (30 s for its job, runc's bound);
   * the walk below then joins it and creates what systemd did not (v1 hierarchies) */
  bool sd = cgroup_systemd_is_pending (unit, path);

  if (info == NULL)
    return -1;
  if (sd && cgroup_systemd_start (unit, path, pid, 30000, err) < 0)
    return -1;
  for (i = 0; i < info->n; i++)
    fds[i] = -1;
  /* phase 1: directories everywhere (nothing moved yet, so undo is just rmdir) */
  for (i = 0; i < info->n; i++)
    {
      bool made = false;
      if (!cgroup_path_covers (path, &info->h[i]))
        continue; /* a list naming only some hierarchies (a non-root caller's delegated ones) */
      if (cgroup_open_in_hier (&info->h[i], path, true, &made, &fds[i], err) < 0)
        goto out;
      if (made)
        created |= 1ul << i;
    }
  /* phase 2: the pid */
  for (moved = 0; moved < info->n; moved++)
    if (fds[moved] >= 0 && write_pid (fds[moved], pid, &info->h[moved], path, err) < 0)
      goto out;
  *created_mask = created | (sd ? CGROUP_MASK_SYSTEMD : 0);
  ret = 0;
out:
  if (ret < 0)
    {
      asbx_err_t ignored = NULL;
      /* undo: back to our own cgroup in each hierarchy, then remove the leaves we made */
      for (i = 0; i < moved; i++)
        {
          if (fds[i] < 0)
            continue;
          if (move_back (&info->h[i], fds[i], pid, &ignored) < 0)
            log_debug ("cgroup undo: cannot move pid %d back in %s: %s", (int) pid, info->h[i].mountpoint,
                       ignored->msg);
          asbx_error_free (&ignored);
        }
      if (created && cgroup_remove (path, created, 100, &ignored) < 0)
        log_debug ("cgroup undo: %s", ignored->msg);
      asbx_error_free (&ignored);
      if (sd && cgroup_systemd_stop (path, 30000, &ignored) < 0)
        log_debug ("cgroup undo: %s", ignored->msg);
      asbx_error_free (&ignored);
    }
  for (i = 0; i < info->n; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  return ret;
}

int
cgroup_join (const char *path, pid_t pid, asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);

  if (info == NULL)
    return -1;
  for (size_t i = 0; i < info->n; i++)
    {
      cleanup_close int fd = -1;
      if (!cgroup_path_covers (path, &info->h[i]))
        continue;
      if (cgroup_open_in_hier (&info->h[i], path, false, NULL, &fd, err) < 0
          || write_pid (fd, pid, &info->h[i], path, err) < 0)
        return -1;
    }
  return 0;
}

/* The first hierarchy (sorted order: cgroup2 first) in which the cgroup exists. fd / -1. */
static int
first_existing (const char *path, const struct cgroup_hier **hp, asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);

  if (info == NULL)
    return -1;
  for (size_t i = 0; i < info->n; i++)
    {
      asbx_err_t e = NULL;
      int fd = -1;
      if (cgroup_open_in_hier (&info->h[i], path, false, NULL, &fd, &e) == 0)
        {
          *hp = &info->h[i];
          return fd;
        }
      if (e == NULL || e->errnum != ENOENT)
        {
          asbx_error_move (err, &e);
          return -1;
        }
      asbx_error_free (&e);
    }
  /* asbx_error is always -1; spelled out for clang-analyzer (make lint) */
  asbx_error (err, ENOENT, "cgroup `%s` does not exist in any hierarchy", path);
  return -1;
}

static int
read_pids (int dirfd, pid_t **pids, size_t *n, asbx_err_t *err)
{
  cleanup_free char *buf = NULL;
  size_t cnt = 0;
  pid_t *v;
  char *save = NULL;

  if (read_file_at (dirfd, "cgroup.procs", 64 << 20, &buf, NULL, err) < 0)
    return -1;
  v = xmalloc (sizeof (pid_t) * (strlen (buf) / 2 + 1));
  for (char *l = strtok_r (buf, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      int64_t x;
      if (parse_i64 (l, &x) == 0 && x > 0)
        v[cnt++] = (pid_t) x;
    }
  *pids = v;
  *n = cnt;
  return 0;
}

int
cgroup_pids (const char *path, pid_t **pids, size_t *n, asbx_err_t *err)
{
  const struct cgroup_hier *h = NULL;
  cleanup_close int fd = first_existing (path, &h, err);

  if (fd < 0)
    return -1;
  if (read_pids (fd, pids, n, err) < 0)
    return asbx_error_wrap (err, "cgroup `%s` in %s", path, h->mountpoint);
  return 0;
}

int
cgroup_kill_all (const char *path, int sig, asbx_err_t *err)
{
  const struct cgroup_hier *h = NULL;
  cleanup_close int fd = first_existing (path, &h, err);

  if (fd < 0)
    return -1;
  if (sig == SIGKILL && h->version == 2)
    {
      int r = cgroup_v2_kill (fd, err);
      if (r <= 0)
        return r < 0 ? asbx_error_wrap (err, "cgroup `%s`", path) : 0;
    }
  /* Without cgroup.kill a process can fork between our read and our kill; for SIGKILL repeat
   * until a round finds nobody new (bounded: a fork bomb is the pids controller's job). */
  for (int round = 0; round < (sig == SIGKILL ? 20 : 1); round++)
    {
      cleanup_free pid_t *pids = NULL;
      size_t n = 0, signalled = 0;
      if (read_pids (fd, &pids, &n, err) < 0)
        return asbx_error_wrap (err, "cgroup `%s`", path);
      for (size_t i = 0; i < n; i++)
        {
          if (kill (pids[i], sig) == 0)
            signalled++;
          else if (errno != ESRCH)
            return asbx_error (err, errno, "kill pid %d in cgroup `%s`", (int) pids[i], path);
        }
      if (signalled == 0)
        break;
      if (sig == SIGKILL)
        nanosleep (&(struct timespec){ 0, 5L * 1000 * 1000 }, NULL);
    }
  return 0;
}

/* rmdir parentfd/name, first removing sub-cgroups the container made (depth first); EBUSY while
 * processes are still exiting is retried until `deadline` (now_ns() clock). */
static int
rmdir_tree (int parentfd, const char *name, uint64_t deadline, asbx_err_t *err)
{
  for (;;)
    {
      cleanup_close int fd = -1;
      cleanup_closedir DIR *d = NULL;
      struct dirent *de;

      if (unlinkat (parentfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
      if (errno != EBUSY && errno != ENOTEMPTY)
        return asbx_error (err, errno, "rmdir cgroup `%s`", name);
      fd = openat (parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0 && (d = fdopendir (fd)) != NULL)
        {
          int dfd = steal_fd (&fd);
          while ((de = readdir (d)) != NULL)
            if (de->d_type == DT_DIR && strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0
                && rmdir_tree (dfd, de->d_name, deadline, err) < 0)
              return asbx_error_wrap (err, "in `%s`", name);
        }
      if (unlinkat (parentfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
      if (errno != EBUSY && errno != ENOTEMPTY)
        return asbx_error (err, errno, "rmdir cgroup `%s`", name);
      if (now_ns () >= deadline)
        return asbx_error (err, errno, "rmdir cgroup `%s` (still busy after the timeout)", name);
      nanosleep (&(struct timespec){ 0, 10L * 1000 * 1000 }, NULL);
    }
}

static int
remove_in_hier (const struct cgroup_hier *h, const char *path, uint64_t deadline, asbx_err_t *err)
{
  cleanup_free char *p = cgroup_path_in_hier (path, h, err);
  cleanup_free char *parent_rel = NULL;
  cleanup_close int root = -1, parent = -1;
  const char *rel, *leaf;

  if (p == NULL || (rel = below_mount (p, h, err)) == NULL)
    return -1;
  parent_rel = xstrdup (rel);
  leaf = strrchr (rel, '/') ? strrchr (rel, '/') + 1 : rel;
  parent_rel[leaf - rel] = '\0';
  root = cgroup_open_hier_root (h, err);
  if (root < 0)
    return -1;
  if (parent_rel[0] == '\0')
    parent = steal_fd (&root);
  else
    {
      asbx_err_t e = NULL;
      parent = walk (root, h, parent_rel, false, NULL, &e);
      if (parent < 0)
        {
          if (e->errnum == ENOENT)
            {
              asbx_error_free (&e);
              return 0; /* already gone */
            }
          asbx_error_move (err, &e);
          return -1;
        }
    }
  if (rmdir_tree (parent, leaf, deadline, err) < 0)
    return asbx_error_wrap (err, "remove cgroup `%s` in %s", p, h->mountpoint);
  return 0;
}

int
cgroup_remove (const char *path, unsigned long created_mask, int timeout_ms, asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);
  uint64_t deadline = now_ns () + (uint64_t) (timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
  int ret = 0;

  if (info == NULL)
    return -1;
  /* a unit we started: systemd removes its cgroup; then what we made ourselves (v1) */
  if ((created_mask & CGROUP_MASK_SYSTEMD)
      && cgroup_systemd_stop (path, timeout_ms > 30000 ? timeout_ms : 30000, err) < 0)
    return -1;
  /* try every hierarchy even after a failure, report the first error */
  for (size_t i = 0; i < info->n; i++)
    {
      asbx_err_t e = NULL;
      if (!(created_mask & (1ul << i)))
        continue;
      if (remove_in_hier (&info->h[i], path, deadline, &e) < 0)
        {
          if (ret == 0)
            asbx_error_move (err, &e);
          asbx_error_free (&e);
          ret = -1;
        }
    }
  return ret;
}
