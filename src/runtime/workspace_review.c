/* workspace_review.c - create's part of the review workspace; see the header for where the
 * overlay is made and why. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/mountopts.h"
#include "linux/pathsafe.h"
#include "monitor/audit.h"
#include "runtime/policy_noexec.h"
#include "runtime/workspace_layout.h"
#include "runtime/workspace_review.h"
#include "spec/model.h"

/* the index of the mount at `path` (the last one: a later mount covers an earlier), or -1 */
static ssize_t
find_ws_mount (const struct oci_spec *spec, const char *path)
{
  ssize_t found = -1;
  for (size_t i = 0; i < spec->mounts_len; i++)
    {
      cleanup_free char *d = spec->mounts[i].destination ? ps_clean (spec->mounts[i].destination) : NULL;
      if (d && strcmp (d, path) == 0)
        found = (ssize_t) i;
    }
  return found;
}

/* the host ids of the container's root: overlayfs's mounter, who must own upper/ and work/ */
static void
root_host_ids (const struct oci_spec *spec, bool userns, uid_t *uid, gid_t *gid)
{
  const struct oci_linux *l = spec->linux_;
  *uid = geteuid ();
  *gid = getegid ();
  if (!userns || !l)
    return;
  for (size_t i = 0; i < l->uid_mappings_len; i++)
    if (l->uid_mappings[i].container_id == 0 && l->uid_mappings[i].size > 0)
      *uid = l->uid_mappings[i].host_id;
  for (size_t i = 0; i < l->gid_mappings_len; i++)
    if (l->gid_mappings[i].container_id == 0 && l->gid_mappings[i].size > 0)
      *gid = l->gid_mappings[i].host_id;
}

/* the workspace-relative paths of the policy's denyWrite rules inside the workspace */
static char **
protect_list (const struct policy_plan *plan, size_t *n)
{
  size_t wl = strlen (plan->ws_path);
  char **v = xmalloc0 (sizeof (char *));
  *n = 0;
  for (size_t i = 0; i < plan->mounts_len; i++)
    {
      const struct policy_mount *m = &plan->mounts[i];
      if (m->kind != POLICY_MOUNT_BIND_RO || m->each_child || strncmp (m->path, plan->ws_path, wl) != 0
          || m->path[wl] != '/' || m->path[wl + 1] == '\0')
        continue;
      v = xrealloc (v, (*n + 2) * sizeof (char *));
      v[(*n)++] = xstrdup (m->path + wl + 1);
      v[*n] = NULL;
    }
  return v;
}

/* the lower: the bind source's realpath, opened beneath "/" with no symlink in its path */
static int
open_lower (const struct oci_mount *m, const char *config_path, size_t idx, char *real, struct stat *st,
            asbx_err_t *err)
{
  cleanup_close int root = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fd;

  if (m->source == NULL || m->source[0] != '/')
    return asbx_error (err, EINVAL, "%s: mounts[%zu].source: a review workspace needs an absolute bind source",
                       config_path, idx);
  if (realpath (m->source, real) == NULL)
    return asbx_error (err, errno, "%s: mounts[%zu].source `%s` (review workspace)", config_path, idx, m->source);
  fd = root < 0 ? -1
                : ps_openat2 (root, real, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS);
  if (fd < 0 || fstat (fd, st) < 0)
    {
      int e = errno;
      if (fd >= 0)
        close (fd);
      return asbx_error (err, e, "%s: mounts[%zu].source `%s`: open the review workspace's lower", config_path, idx,
                         real);
    }
  return fd;
}

/* The lower (realpath `real`) must not be, contain or lie in the workspaces directory or the
 * secrets directory: both are hidden at their own paths only, and through the workspace the
 * agent read and rewrote every review workspace's meta.json and upper, whose apply then wrote
 * where the forged meta.json pointed (outside tester, attack 20). Judged before anything is
 * made; a directory not there yet is judged as written. 0 / -1 with *err. */
static int
refuse_runtime_dirs (const struct policy_plan *plan, const char *id, const char *real, const char *config_path,
                     size_t idx, asbx_err_t *err)
{
  const char *dirs[] = { plan->workspaces_dir, plan->secrets_dir };
  const char *names[] = { "the review workspaces directory", "the secrets directory" };
  char buf[PATH_MAX];

  for (size_t i = 0; i < ASBX_ARRAY_SIZE (dirs); i++)
    {
      if (!dirs[i] || dirs[i][0] != '/')
        continue;
      const char *d = realpath (dirs[i], buf) ? buf : dirs[i];
      /* this container's own seeded clone (sandbox --seed-git: <dir>/<id>/lower) is the lower
       * by design: the agent sees it through the overlay only, never <id>/'s upper or meta.json */
      cleanup_free char *own = i == 0 ? xasprintf ("%s/%s/lower", d, id) : NULL;
      if (own && strcmp (real, own) == 0)
        continue;
      if (policy_path_within (d, real) || policy_path_within (real, d))
        return asbx_error (err, EINVAL,
                           "%s: mounts[%zu].source `%s` (the review workspace) is, contains or lies in %s `%s`: "
                           "the agent would read and rewrite it through the workspace; bind a project directory",
                           config_path, idx, real, names[i], d);
    }
  return 0;
}

/* a new <id>/, or the stopped one of an earlier run over the same lower */
static int
layout_for (struct ws_review *r, int rootfd, const char *id, const char *real, const struct stat *st, uid_t uid,
            gid_t gid, bool userns, char **protect, size_t nprotect, asbx_err_t *err)
{
  cleanup_free char *where = xasprintf ("%s/%s", r->dir, id);
  struct ws_meta m = { 0 };
  int ret;

  r->dirfd = ws_create (rootfd, id, uid, gid, &r->lockfd, err);
  if (r->dirfd >= 0)
    {
      r->created = true;
      m.id = xstrdup (id);
      m.workspace = xstrdup (real);
      m.lower_dev = st->st_dev;
      m.lower_ino = st->st_ino;
      m.created = asbx_rfc3339_now ();
      /* before the init is spawned, so before its mount: a host file changed later than this
       * is a conflict for `workspace apply` (an early time only widens what counts as one) */
      struct timespec ts;
      clock_gettime (CLOCK_REALTIME, &ts);
      m.started_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
      m.xattr = xstrdup (userns ? "user" : "trusted");
      m.snapshots = xmalloc0 (sizeof (char *));
    }
  else
    {
      if (!*err || (*err)->errnum != EEXIST)
        return -1;
      asbx_error_free (err);
      r->dirfd = ws_open (rootfd, id, true, &r->lockfd, err);
      if (r->dirfd < 0 || ws_meta_read (r->dirfd, where, &m, err) < 0)
        return asbx_error_wrap (err, "review workspace");
      if (strcmp (m.state, "stopped") != 0 || m.lower_dev != (uint64_t) st->st_dev
          || m.lower_ino != (uint64_t) st->st_ino || strcmp (m.xattr, userns ? "user" : "trusted") != 0)
        {
          asbx_error (err, EEXIST,
                      "review workspace `%s` already exists (state %s, workspace %s, xattr %s): a run resumes it only "
                      "when it is stopped and over the same workspace with the same user namespace; `agentsbx "
                      "workspace discard %s` removes it",
                      where, m.state, m.workspace, m.xattr, id);
          ws_meta_clear (&m);
          return -1;
        }
      free (m.state);
    }
  m.state = xstrdup ("running");
  asbx_strv_free (m.protect);
  m.protect = protect;
  m.protect_len = nprotect;
  ret = ws_meta_write (r->dirfd, where, &m, err);
  r->meta_written = ret == 0;
  m.protect = NULL;
  ws_meta_clear (&m);
  return ret;
}

/* detached clones of the pinned lower and of <id>/ (linux/overlay.h says why clones), made here
 * as the caller: in a user namespace the container's root may not reach either */
static int
clone_layers (struct ws_review *r, int lower_fd, const char *real, const char *id, asbx_err_t *err)
{
  struct stat lst, dst;

  if (geteuid () != 0)
    {
      /* no clone without CAP_SYS_ADMIN here: the init resolves both, checked (linux/overlay.h) */
      if (fstat (lower_fd, &lst) < 0 || fstat (r->dirfd, &dst) < 0)
        return asbx_error (err, errno, "review workspace `%s/%s`: stat", r->dir, id);
      r->lower_path = xstrdup (real);
      r->layout_path = xasprintf ("%s/%s", r->dir, id);
      r->ovl.lower_path = r->lower_path;
      r->ovl.layout_path = r->layout_path;
      r->ovl.lower_dev = lst.st_dev, r->ovl.lower_ino = lst.st_ino;
      r->ovl.layout_dev = dst.st_dev, r->ovl.layout_ino = dst.st_ino;
      return 0;
    }
  r->ovl.lower_mnt = (int) open_tree (lower_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (r->ovl.lower_mnt < 0)
    return asbx_error (err, errno, "review workspace: clone the lower's mount");
  r->ovl.layout_mnt = (int) open_tree (r->dirfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (r->ovl.layout_mnt < 0)
    return asbx_error (err, errno, "review workspace `%s/%s`: clone its mount", r->dir, id);
  r->ovl.upper_fd = openat (r->ovl.layout_mnt, WS_UPPER, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  r->ovl.work_fd = openat (r->ovl.layout_mnt, WS_WORK, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (r->ovl.upper_fd < 0 || r->ovl.work_fd < 0)
    return asbx_error (err, errno, "review workspace `%s/%s`: open upper/ and work/", r->dir, id);
  return 0;
}

int
ws_review_prepare (const struct policy_plan *plan, const struct oci_spec *spec, const struct ns_plan *ns,
                   const char *id, const char *config_path, int state_dirfd, struct linux_mount_src **srcs,
                   struct ws_review *r, asbx_err_t *err)
{
  char real[PATH_MAX];
  struct stat st = { 0 };
  uid_t uid;
  gid_t gid;
  size_t nprotect = 0;
  bool userns = ((ns->new_flags | ns->join_flags) & CLONE_NEWUSER) != 0;

  *r = (struct ws_review){ .dirfd = -1,
                           .lockfd = -1,
                           .ovl = { .lower_mnt = -1, .layout_mnt = -1, .upper_fd = -1, .work_fd = -1 } };
  if (!plan->active || plan->ws_mode != POLICY_WS_REVIEW)
    return 0;
  ssize_t idx = find_ws_mount (spec, plan->ws_path);
  if (idx < 0)
    return asbx_error (err, EINVAL,
                       "%s: the policy's filesystem.workspace.mode is \"review\" but config.json has no mount at "
                       "filesystem.workspace.path `%s`",
                       config_path, plan->ws_path);
  const struct oci_mount *m = &spec->mounts[idx];
  if (!spec_mount_is_bind (m))
    return asbx_error (err, EINVAL,
                       "%s: mounts[%zd] (%s): filesystem.workspace.mode \"review\" needs a bind mount of the host "
                       "workspace there, not type `%s`",
                       config_path, idx, plan->ws_path, m->type ? m->type : "(none)");
  if (!((ns->new_flags | ns->join_flags) & CLONE_NEWNS))
    return asbx_error (err, EINVAL,
                       "%s: filesystem.workspace.mode \"review\" needs a mount namespace (linux.namespaces: mount)",
                       config_path);
  if (!plan->workspaces_dir)
    return asbx_error (err, EINVAL, "review workspace: no workspaces directory (workspacesDir, or HOME)");
  r->active = true;
  r->dir = xstrdup (plan->workspaces_dir);
  cleanup_close int lower_fd = open_lower (m, config_path, (size_t) idx, real, &st, err);
  if (lower_fd < 0 || refuse_runtime_dirs (plan, id, real, config_path, (size_t) idx, err) < 0)
    return -1;
  root_host_ids (spec, userns, &uid, &gid);
  r->ovl.userxattr = userns;
  cleanup_close int rootfd = ws_root_open (r->dir, true, err);
  if (rootfd < 0)
    return -1;
  char **protect = protect_list (plan, &nprotect);
  if (layout_for (r, rootfd, id, real, &st, uid, gid, userns, protect, nprotect, err) < 0)
    {
      asbx_strv_free (protect);
      return -1;
    }
  asbx_strv_free (protect);
  if (clone_layers (r, lower_fd, real, id, err) < 0)
    return -1;
  cleanup_free char *mark = xasprintf ("%s\n%s\n", r->dir, plan->audit_dir ? plan->audit_dir : "");
  cleanup_close int mfd = openat (state_dirfd, WS_REVIEW_MARK, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                                  0600);
  if (mfd < 0 || write_all (mfd, mark, strlen (mark)) < 0)
    return asbx_error (err, errno, "state directory: record the review workspace");
  if (*srcs == NULL)
    *srcs = linux_mount_srcs_new (spec->mounts_len);
  (*srcs)[idx] = (struct linux_mount_src){ .fd = -1, .kind = LINUX_MOUNT_SRC_OVERLAY, .ovl = &r->ovl };
  log_debug ("review workspace %s/%s: lower %s, %s xattrs", r->dir, id, real, userns ? "user" : "trusted");
  return 0;
}

void
ws_review_spawned (struct ws_review *r)
{
  int *fds[] = { &r->ovl.lower_mnt, &r->ovl.layout_mnt, &r->ovl.upper_fd, &r->ovl.work_fd, &r->dirfd, &r->lockfd };

  for (size_t i = 0; i < ASBX_ARRAY_SIZE (fds); i++)
    if (*fds[i] >= 0)
      {
        close (*fds[i]);
        *fds[i] = -1;
      }
}

void
ws_review_done (struct ws_review *r, const char *id, bool failed)
{
  asbx_err_t e = NULL;

  ws_review_spawned (r);
  if (failed && r->active)
    {
      /* the container never ran: a directory made for it goes, a resumed one is stopped again */
      cleanup_close int rootfd = ws_root_open (r->dir, false, &e);
      if (rootfd >= 0 && r->created)
        ws_remove_tree (rootfd, id, id, &e);
      else if (rootfd >= 0 && r->meta_written)
        ws_set_state (r->dir, id, "stopped", &e);
      if (e)
        log_warning ("cleanup after failed create: %s", e->msg);
      asbx_error_free (&e);
    }
  r->active = false;
  free (r->dir);
  free (r->lower_path);
  free (r->layout_path);
  r->dir = r->lower_path = r->layout_path = NULL;
}

void
ws_audit_record (const char *audit_dir, const struct ws_meta *m, const char *action, const char *snapshot,
                 uint64_t changed)
{
  asbx_err_t e = NULL;
  cleanup_close int fd = audit_open (audit_dir, m->id, &e);
  struct audit_rec *r;

  if (fd < 0)
    {
      log_warning ("workspace %s: audit record: %s", m->id, e->msg);
      asbx_error_free (&e);
      return;
    }
  r = audit_rec_new (m->id, "workspace");
  audit_rec_str (r, "action", action);
  if (snapshot)
    audit_rec_str (r, "snapshot", snapshot);
  audit_rec_str (r, "workspace", m->workspace);
  audit_rec_int (r, "changed", (int64_t) changed);
  audit_rec_strv (r, "snapshots", m->snapshots, m->snapshots_len);
  if (audit_rec_write (r, fd, &e) < 0)
    {
      log_warning ("workspace %s: audit record: %s", m->id, e->msg);
      asbx_error_free (&e);
    }
}

void
ws_review_stopped (int state_dirfd, const char *id)
{
  cleanup_free char *mark = NULL;
  asbx_err_t e = NULL;
  size_t len = 0;

  if (read_file_at (state_dirfd, WS_REVIEW_MARK, 2 * PATH_MAX + 2, &mark, &len, &e) < 0)
    {
      if (e->errnum != ENOENT)
        log_warning ("container %s: review workspace record: %s", id, e->msg);
      asbx_error_free (&e);
      return;
    }
  char *adir = strchr (mark, '\n');
  if (adir)
    {
      *adir++ = '\0';
      adir[strcspn (adir, "\n")] = '\0';
    }
  if (ws_set_state (mark, id, "stopped", &e) < 0)
    {
      log_warning ("container %s: review workspace: %s", id, e->msg);
      asbx_error_free (&e);
      return;
    }
  /* the session's last word on its workspace, in its audit log */
  cleanup_close int rootfd = adir && *adir ? ws_root_open (mark, false, &e) : -1;
  cleanup_close int dfd = -1, lk = -1;
  struct ws_meta m;
  cleanup_free char *where = xasprintf ("%s/%s", mark, id);
  if (rootfd >= 0 && (dfd = ws_open (rootfd, id, false, &lk, &e)) >= 0 && ws_meta_read (dfd, where, &m, &e) == 0)
    {
      ws_audit_record (adir, &m, "stopped", NULL, ws_upper_changed (dfd));
      ws_meta_clear (&m);
    }
  asbx_error_free (&e);
}
