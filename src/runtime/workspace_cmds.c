/* workspace_cmds.c - list, discard, snapshot, rollback of review workspaces; see the header. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "policy/policy.h"
#include "runtime/container_cgroup.h"
#include "monitor/audit.h"
#include "runtime/state.h"
#include "runtime/userdirs.h"
#include "runtime/workspace_review.h"
#include "runtime/workspace_cmds.h"
#include "runtime/workspace_layout.h"
#include "runtime/workspace_snap.h"

/* the container of that id in g->root: its status, or STOPPED when there is none */
static enum asbx_status
container_status (const struct asbx_global *g, const char *id)
{
  struct asbx_opened o;
  asbx_err_t e = NULL;
  enum asbx_status s = ASBX_STATUS_STOPPED;

  if (asbx_container_open (g->root, id, &o, &e) == 0)
    s = o.has_state ? asbx_state_status (o.dirfd, &o.st) : ASBX_STATUS_CREATING;
  asbx_error_free (&e);
  asbx_container_close (&o);
  return s;
}

/* one workspace opened and locked for a verb: dirs, lock, meta */
struct ws_open
{
  char *dir;   /* the workspaces directory */
  char *where; /* <dir>/<id> */
  int rootfd, dirfd, lockfd;
  struct ws_meta meta;
};

static void
ws_open_close (struct ws_open *w)
{
  free (w->dir);
  free (w->where);
  if (w->rootfd >= 0)
    close (w->rootfd);
  if (w->dirfd >= 0)
    close (w->dirfd);
  if (w->lockfd >= 0)
    close (w->lockfd);
  ws_meta_clear (&w->meta);
}

static int
ws_open_id (const struct asbx_global *g, const char *id, struct ws_open *w, asbx_err_t *err)
{
  *w = (struct ws_open){ .rootfd = -1, .dirfd = -1, .lockfd = -1 };
  if (ws_id_check (id, err) < 0 || (w->dir = policy_workspaces_dir (g->config_path, err)) == NULL)
    return -1;
  w->where = xasprintf ("%s/%s", w->dir, id);
  w->rootfd = ws_root_open (w->dir, false, err);
  if (w->rootfd < 0 || (w->dirfd = ws_open (w->rootfd, id, true, &w->lockfd, err)) < 0)
    {
      if (*err && (*err)->errnum == ENOENT)
        {
          asbx_error_free (err);
          return asbx_error (err, ENOENT, "workspace `%s` does not exist (in %s)", id, w->dir);
        }
      return -1;
    }
  return ws_meta_read (w->dirfd, w->where, &w->meta, err);
}

static const char *
shown_state (const struct asbx_global *g, const struct ws_meta *m)
{
  if (m->state && strcmp (m->state, "running") == 0 && container_status (g, m->id) == ASBX_STATUS_STOPPED)
    return "stopped";
  return m->state;
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

int
asbx_workspace_list (const struct asbx_global *g, bool json, asbx_err_t *err)
{
  cleanup_free char *dir = policy_workspaces_dir (g->config_path, err);
  asbx_err_t e = NULL;
  char **ids = NULL;
  size_t n = 0;

  if (!dir)
    return -1;
  cleanup_close int rootfd = ws_root_open (dir, false, &e);
  if (rootfd >= 0)
    {
      int fd = openat (rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      DIR *d = fd < 0 ? NULL : fdopendir (fd);
      struct dirent *de;
      while (d && (de = readdir (d)) != NULL)
        if (de->d_name[0] != '.' && de->d_type == DT_DIR)
          {
            ids = xrealloc (ids, (n + 1) * sizeof (char *));
            ids[n++] = xstrdup (de->d_name);
          }
      if (d)
        closedir (d);
      else if (fd >= 0)
        close (fd);
    }
  else if (e->errnum != ENOENT)
    {
      asbx_error_move (err, &e);
      return -1;
    }
  asbx_error_free (&e);
  if (n)
    qsort (ids, n, sizeof (char *), cmp_str);
  yajl_gen gen = json ? json_gen_new (JSON_GEN_PRETTY) : NULL;
  if (gen)
    yajl_gen_array_open (gen);
  else
    printf ("%-24s %-8s %-9s %-8s %s\n", "ID", "STATE", "SNAPSHOTS", "CHANGED", "WORKSPACE");
  for (size_t i = 0; i < n; i++)
    {
      struct ws_open w;
      if (ws_open_id (g, ids[i], &w, &e) < 0)
        {
          /* another verb holds it, or it is not a workspace: say so in its row, go on */
          if (!gen)
            printf ("%-24s %-8s %-9s %-8s (%s)\n", ids[i], "?", "-", "-", e->msg);
          asbx_error_free (&e);
          ws_open_close (&w);
          continue;
        }
      uint64_t changed = ws_upper_changed (w.dirfd);
      const char *state = shown_state (g, &w.meta);
      if (gen)
        {
          char num[24];
          yajl_gen_map_open (gen);
          json_gen_kv (gen, "id", w.meta.id);
          json_gen_kv (gen, "state", state);
          json_gen_kv (gen, "workspace", w.meta.workspace);
          json_gen_kv (gen, "created", w.meta.created);
          json_gen_str (gen, "snapshots");
          yajl_gen_array_open (gen);
          for (size_t j = 0; j < w.meta.snapshots_len; j++)
            json_gen_str (gen, w.meta.snapshots[j]);
          yajl_gen_array_close (gen);
          json_gen_str (gen, "changed");
          snprintf (num, sizeof num, "%llu", (unsigned long long) changed);
          yajl_gen_number (gen, num, strlen (num));
          yajl_gen_map_close (gen);
        }
      else
        printf ("%-24s %-8s %-9zu %-8llu %s\n", w.meta.id, state, w.meta.snapshots_len, (unsigned long long) changed,
                w.meta.workspace);
      ws_open_close (&w);
    }
  if (gen)
    {
      yajl_gen_array_close (gen);
      cleanup_free char *text = json_gen_finish (gen, true, NULL);
      fputs (text, stdout);
    }
  for (size_t i = 0; i < n; i++)
    free (ids[i]);
  free (ids);
  return 0;
}

static int
refuse_running (const struct asbx_global *g, const char *id, const char *verb, asbx_err_t *err)
{
  enum asbx_status s = container_status (g, id);
  if (s != ASBX_STATUS_STOPPED)
    return asbx_error (err, EBUSY, "workspace %s `%s`: its container is %s (stop and delete it first)", verb, id,
                       asbx_status_name (s));
  return 0;
}

int
asbx_workspace_discard (const struct asbx_global *g, const char *id, asbx_err_t *err)
{
  struct ws_open w;
  int r = -1;

  if (ws_open_id (g, id, &w, err) == 0 && refuse_running (g, id, "discard", err) == 0)
    r = ws_remove_tree (w.rootfd, id, w.where, err);
  ws_open_close (&w);
  return r;
}

static bool
has_snapshot (const struct ws_meta *m, const char *name)
{
  for (size_t i = 0; i < m->snapshots_len; i++)
    if (strcmp (m->snapshots[i], name) == 0)
      return true;
  return false;
}

/* the copy of upper/ into snapshots/<name>/ (created here), counted */
static int
snapshot_copy (struct ws_open *w, const char *name, asbx_err_t *err)
{
  cleanup_close int sdir = -1, ndir = -1;
  uint64_t files = 0, bytes = 0;
  cleanup_free char *what = xasprintf ("%s/" WS_UPPER, w->where);

  if (mkdirat (w->dirfd, WS_SNAPSHOTS, 0700) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "workspace `%s`: create snapshots/", w->where);
  sdir = openat (w->dirfd, WS_SNAPSHOTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sdir < 0)
    return asbx_error (err, errno, "workspace `%s`: open snapshots/", w->where);
  if (mkdirat (sdir, name, 0700) < 0)
    return asbx_error (err, errno, "workspace `%s`: create snapshots/%s", w->where, name);
  ndir = openat (sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ndir < 0 || ws_copy_tree (w->dirfd, WS_UPPER, ndir, WS_UPPER, what, &files, &bytes, err) < 0
      || ws_snap_meta_write (ndir, name, files, bytes, err) < 0)
    {
      if (ndir < 0)
        asbx_error (err, errno, "workspace `%s`: open snapshots/%s", w->where, name);
      asbx_err_t e = NULL;
      ws_remove_tree (sdir, name, name, &e);
      asbx_error_free (&e);
      return -1;
    }
  return 0;
}

int
asbx_workspace_snapshot (const struct asbx_global *g, const char *id, const char *name, char **name_out,
                         asbx_err_t *err)
{
  struct ws_open w;
  cleanup_free char *chosen = NULL;
  bool frozen = false;
  int r = -1;

  if (ws_open_id (g, id, &w, err) < 0)
    goto out;
  if (name)
    chosen = xstrdup (name);
  for (size_t k = w.meta.snapshots_len + 1; !chosen || has_snapshot (&w.meta, chosen); k++)
    {
      if (name && chosen)
        {
          asbx_error (err, EEXIST, "workspace `%s`: snapshot `%s` already exists", id, name);
          goto out;
        }
      free (chosen);
      chosen = xasprintf ("snap-%zu", k);
    }
  if (ws_name_check (chosen, err) < 0)
    goto out;
  /* a running container is frozen while its upper is copied: a consistent cut of its writes */
  if (container_status (g, id) == ASBX_STATUS_RUNNING)
    {
      if (asbx_container_pause (g, id, true, err) < 0)
        {
          asbx_error_wrap (err, "workspace snapshot `%s`: freeze the container", id);
          goto out;
        }
      frozen = true;
    }
  r = snapshot_copy (&w, chosen, err);
  if (frozen)
    {
      asbx_err_t e = NULL;
      if (asbx_container_pause (g, id, false, &e) < 0)
        {
          if (r == 0)
            asbx_error_move (err, &e);
          r = -1;
        }
      asbx_error_free (&e);
    }
  if (r == 0)
    {
      w.meta.snapshots = xrealloc (w.meta.snapshots, (w.meta.snapshots_len + 2) * sizeof (char *));
      w.meta.snapshots[w.meta.snapshots_len++] = xstrdup (chosen);
      w.meta.snapshots[w.meta.snapshots_len] = NULL;
      r = ws_meta_write (w.dirfd, w.where, &w.meta, err);
    }
  if (r == 0)
    {
      /* the audit log of the container's id: the snapshot is part of its session's record */
      asbx_err_t e = NULL;
      char *adir = asbx_uses_user_dirs () ? asbx_user_audit_dir (&e)
                                          : audit_dir_resolve (g->audit_dir, g->config_path, &e);
      if (adir)
        ws_audit_record (adir, &w.meta, "snapshot", chosen, ws_upper_changed (w.dirfd));
      asbx_error_free (&e);
      free (adir);
    }
  if (r == 0 && name_out)
    *name_out = steal_ptr (&chosen);
out:
  ws_open_close (&w);
  return r;
}

int
asbx_workspace_rollback (const struct asbx_global *g, const char *id, const char *name, asbx_err_t *err)
{
  struct ws_open w;
  cleanup_close int sdir = -1, ndir = -1;
  cleanup_free char *what = NULL;
  struct stat work_st;
  asbx_err_t e = NULL;
  int r = -1;

  if (ws_open_id (g, id, &w, err) < 0 || refuse_running (g, id, "rollback", err) < 0 || ws_name_check (name, err) < 0)
    goto out;
  if (!has_snapshot (&w.meta, name))
    {
      asbx_error (err, ENOENT, "workspace `%s`: no snapshot `%s`", id, name);
      goto out;
    }
  sdir = openat (w.dirfd, WS_SNAPSHOTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ndir = sdir < 0 ? -1 : openat (sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ndir < 0 || fstatat (w.dirfd, WS_WORK, &work_st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      asbx_error (err, errno, "workspace `%s`: open snapshots/%s", w.where, name);
      goto out;
    }
  /* the copy beside upper/, then swapped in: a failure leaves the old upper as it was */
  what = xasprintf ("%s/" WS_SNAPSHOTS "/%s/" WS_UPPER, w.where, name);
  if (ws_remove_tree (w.dirfd, "upper.new", "upper.new", err) < 0
      || ws_remove_tree (w.dirfd, "upper.old", "upper.old", err) < 0
      || ws_copy_tree (ndir, WS_UPPER, w.dirfd, "upper.new", what, NULL, NULL, err) < 0)
    {
      ws_remove_tree (w.dirfd, "upper.new", "upper.new", &e);
      goto out;
    }
  if (renameat (w.dirfd, WS_UPPER, w.dirfd, "upper.old") < 0 || renameat (w.dirfd, "upper.new", w.dirfd, WS_UPPER) < 0)
    {
      asbx_error (err, errno, "workspace `%s`: swap in the snapshot's upper", w.where);
      goto out;
    }
  /* the overlay's scratch directory holds nothing of value once it is unmounted: a fresh one */
  if (ws_remove_tree (w.dirfd, "upper.old", "upper.old", err) < 0 || ws_remove_tree (w.dirfd, WS_WORK, WS_WORK, err) < 0
      || mkdirat (w.dirfd, WS_WORK, 0755) < 0
      || fchownat (w.dirfd, WS_WORK, work_st.st_uid, work_st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
    {
      if (!*err)
        asbx_error (err, errno, "workspace `%s`: recreate work/", w.where);
      goto out;
    }
  r = 0;
out:
  asbx_error_free (&e);
  ws_open_close (&w);
  return r;
}
