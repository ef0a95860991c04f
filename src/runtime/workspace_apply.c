/* workspace_apply.c - `agentsbx workspace apply` (workspace_apply.h).
 *
 * The changes are those of ws_walk (lower = the host workspace, new = lower + upper), applied in
 * the walker's order (parents before children, deletions children first), each one atomically:
 * a regular file is written to an unnamed O_TMPFILE in the target's own directory (a named
 * ".agentsbx-apply.*" temporary where O_TMPFILE is not supported), made durable (one syncfs per
 * BATCH files, before any of them is linked: one fsync per file cost 2.6 ms each on a loaded disk,
 * 26 s for 10,000 files), then linked or renamed over the target, so the host path holds the old
 * or the new content at every moment, whatever kills us (rename(2): "atomically"), power cuts
 * included. The host directories are fsync'ed once per run of changes in them. Every host
 * directory is reached from the workspace's fd with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
 * RESOLVE_NO_MAGICLINKS (ps_openat2, which falls back to a walk with O_NOFOLLOW per component
 * when openat2 is off), every final component is acted on with *at() calls that do not follow
 * it. What is refused before anything is written: workspace_refuse.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/workspace_apply.h"
#include "runtime/workspace_audit.h"
#include "runtime/workspace_diff.h"
#include "runtime/workspace_refuse.h"

#define RESOLVE_HOST (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define BATCH 128 /* regular files written before one syncfs and their links/renames */

/* a regular file written to its temporary, not yet in place */
struct staged
{
  size_t idx;   /* in the change list */
  int fd;       /* the temporary (O_TMPFILE, or the named one) */
  int parent;   /* the host directory */
  char tmp[64]; /* the named temporary's name, "" for O_TMPFILE */
  dev_t dev;    /* the temporary's file system, for syncfs */
};

struct apply
{
  const struct ws_apply_opts *o;
  struct ws_handle *h;
  int lowerfd;
  uid_t uid; /* the host workspace's owner: every file written gets it */
  gid_t gid;
  FILE *out;
  unsigned tmp_seq;
  int dirty_dir; /* the host directory changed last, fsync'ed when the next change is in another
                    one and at the end (one fsync per directory run, not per file) */
  dev_t dirty_dev;
  ino_t dirty_ino;
  struct staged batch[BATCH];
  size_t nbatch;
};

/* Remember parent as changed; fsync the directory changed before it when it is another one */
static void
dir_changed (struct apply *a, int parent)
{
  struct stat st;
  if (fstat (parent, &st) < 0)
    {
      fsync (parent);
      return;
    }
  if (a->dirty_dir >= 0 && a->dirty_dev == st.st_dev && a->dirty_ino == st.st_ino)
    return;
  if (a->dirty_dir >= 0)
    {
      fsync (a->dirty_dir);
      close (a->dirty_dir);
    }
  a->dirty_dir = fcntl (parent, F_DUPFD_CLOEXEC, 3);
  a->dirty_dev = st.st_dev;
  a->dirty_ino = st.st_ino;
}

static void
dir_flush (struct apply *a)
{
  if (a->dirty_dir >= 0)
    {
      fsync (a->dirty_dir);
      close (a->dirty_dir);
      a->dirty_dir = -1;
    }
}

/* Show a conflict as a merge conflict: both sides' sha256 and a unified diff host vs agent */
static void
show_conflict (struct apply *a, const struct ws_change *c)
{
  cleanup_close int hfd = ws_open_rel (a->lowerfd, c->path);
  cleanup_close int ufd = c->op == WS_DELETED ? -1 : ws_open_rel (a->h->upperfd, c->path);
  char hsha[65] = "";
  cleanup_free char *p = ws_escape (c->path);
  if (hfd >= 0 && ws_sha256_fd (hfd, hsha) < 0)
    hsha[0] = '\0';
  fprintf (a->out, "<<<<<<< host   %s sha256:%s\n", p, *hsha ? hsha : "(absent or not a regular file)");
  fprintf (a->out, ">>>>>>> agent  %s sha256:%s\n", p,
           c->op == WS_DELETED ? "(deleted)" : (*c->sha256 ? c->sha256 : "-"));
  if ((hfd >= 0 || ufd >= 0) && ws_is_text (hfd) && ws_is_text (ufd))
    {
      asbx_err_t e = NULL;
      cleanup_free char *l1 = xasprintf ("host/%s", p);
      cleanup_free char *l2 = xasprintf ("agent/%s", p);
      if (ws_unified_diff (a->out, hfd, ufd, l1, l2, &e) < 0)
        asbx_error_free (&e);
    }
}

/* Copy everything of src into dst (both regular files, dst at offset 0) */
static int
copy_data (int src, int dst)
{
  off_t off = 0;
  for (;;)
    {
      ssize_t n = copy_file_range (src, &off, dst, NULL, 1 << 30, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
        n = sendfile (dst, src, &off, 1 << 30);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -1;
      if (n == 0)
        return 0;
    }
}

/* Copy a ref file (ws_git_ref_kind) of the upper into dst: read once into memory, validated
 * (ws_git_ref_invalid), and those very bytes written, so what reaches the host is what was
 * checked even when the agent still runs (apply --running). -1 with errno (EINVAL: not a ref). */
static int
copy_ref (int src, int dst, const char *path)
{
  enum ws_git_ref kind = ws_git_ref_kind (path);
  cleanup_free char *buf = NULL;
  size_t n, off = 0;
  if (ws_read_small (src, ws_git_ref_max (kind), &buf, &n) < 0)
    return -1;
  cleanup_free char *why = ws_git_ref_invalid (kind, buf, n);
  if (why)
    {
      errno = EINVAL;
      return -1;
    }
  while (off < n)
    {
      ssize_t w = write (dst, buf + off, n - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        return -1;
      off += (size_t) w;
    }
  return 0;
}

/* A fresh named temporary in the parent (O_EXCL, never followed) */
static int
named_tmp (struct apply *a, int parent, char *name, size_t len)
{
  for (int i = 0; i < 100; i++)
    {
      snprintf (name, len, ".agentsbx-apply.%d.%u", (int) getpid (), a->tmp_seq++);
      int fd = openat (parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0 || errno != EEXIST)
        return fd;
    }
  errno = EEXIST;
  return -1;
}

/* Put the temporary `tmp` (a name in parent) at `base`: NOREPLACE when the path must be absent */
static int
put_in_place (int parent, const char *tmp, const char *base, bool must_be_absent)
{
  int r = must_be_absent ? renameat2 (parent, tmp, parent, base, RENAME_NOREPLACE)
                         : renameat (parent, tmp, parent, base);
  if (r < 0)
    {
      int e = errno;
      unlinkat (parent, tmp, 0);
      errno = e;
    }
  return r;
}

/* Re-check, just before replacing or removing it, that the host entry is the one checked */
static int
still_same (int parent, const char *base, const struct ws_change *c, const struct ws_meta *m)
{
  struct stat st;
  if (fstatat (parent, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return -1;
  if (st.st_dev != c->old_dev || st.st_ino != c->old_ino
      || (!S_ISDIR (st.st_mode) && ws_ctime_ns (&st) > (int64_t) m->started_ns))
    {
      errno = ESTALE;
      return -1;
    }
  return 0;
}

/* Write change c's content to a temporary in its host directory (unnamed until linked: a kill
 * before the link leaves nothing there), owner and mode set, and queue it in a->batch.
 * 0 / -1 with errno (nothing queued). */
static int
stage_file (struct apply *a, size_t idx, const struct ws_change *c)
{
  const char *base;
  struct staged *b = &a->batch[a->nbatch];
  struct stat st;
  cleanup_close int parent = ws_host_parent (a->lowerfd, c->path, &base);
  cleanup_close int src = parent < 0 ? -1 : ws_open_rel (a->h->upperfd, c->path);
  if (parent < 0 || src < 0)
    return -1;
  b->tmp[0] = '\0';
  int fd = openat (parent, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0 && (fd = named_tmp (a, parent, b->tmp, sizeof b->tmp)) < 0)
    return -1;
  if ((ws_git_ref_kind (c->path) != WS_GIT_NOT_REF ? copy_ref (src, fd, c->path) : copy_data (src, fd)) < 0
      || fchown (fd, a->uid, a->gid) < 0 || fchmod (fd, c->mode & 0777) < 0 || fstat (fd, &st) < 0)
    {
      int e = errno;
      if (b->tmp[0])
        unlinkat (parent, b->tmp, 0);
      close (fd);
      errno = e;
      return -1;
    }
  b->idx = idx;
  b->fd = fd;
  b->dev = st.st_dev;
  b->parent = parent;
  parent = -1; /* owned by the batch now */
  a->nbatch++;
  return 0;
}

/* Put one staged file in place: linked at its name when the path must be absent (EEXIST if one
 * appeared), else linked to a temporary name and renamed over the host file, after checking
 * that the host file is still the one the refusal checks saw. 0 / -1 with errno. */
static int
commit_staged (struct apply *a, struct staged *b, const struct ws_change *c)
{
  const char *base = strrchr (c->path, '/') ? strrchr (c->path, '/') + 1 : c->path;
  bool must_be_absent = c->op != WS_MODIFIED;
  if (!b->tmp[0])
    {
      char proc[64];
      snprintf (proc, sizeof proc, "/proc/self/fd/%d", b->fd);
      if (must_be_absent)
        return linkat (AT_FDCWD, proc, b->parent, base, AT_SYMLINK_FOLLOW);
      snprintf (b->tmp, sizeof b->tmp, ".agentsbx-apply.%d.%u", (int) getpid (), a->tmp_seq++);
      if (linkat (AT_FDCWD, proc, b->parent, b->tmp, AT_SYMLINK_FOLLOW) < 0)
        {
          b->tmp[0] = '\0';
          return -1;
        }
    }
  if (!must_be_absent && still_same (b->parent, base, c, &a->h->meta) < 0)
    return -1; /* the temporary is removed by drop_staged */
  int r = put_in_place (b->parent, b->tmp, base, must_be_absent);
  b->tmp[0] = '\0'; /* renamed, or removed by put_in_place */
  return r;
}

static void
drop_staged (struct staged *b)
{
  if (b->tmp[0])
    unlinkat (b->parent, b->tmp, 0);
  close (b->fd);
  close (b->parent);
  b->tmp[0] = '\0';
}

static int
write_symlink (struct apply *a, int parent, const char *base, const struct ws_change *c, bool must_be_absent)
{
  char tmp[64];
  snprintf (tmp, sizeof tmp, ".agentsbx-apply.%d.%u", (int) getpid (), a->tmp_seq++);
  if (symlinkat (c->target, parent, tmp) < 0)
    return -1;
  if (fchownat (parent, tmp, a->uid, a->gid, AT_SYMLINK_NOFOLLOW) < 0
      || (!must_be_absent && still_same (parent, base, c, &a->h->meta) < 0))
    {
      int e = errno;
      unlinkat (parent, tmp, 0);
      errno = e;
      return -1;
    }
  return put_in_place (parent, tmp, base, must_be_absent);
}

static int
set_mode (struct apply *a, int parent, const char *base, const struct ws_change *c)
{
  int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (S_ISDIR (c->mode) ? O_DIRECTORY : 0);
  struct stat st;
  cleanup_close int fd = openat (parent, base, flags);
  if (fd < 0 || fstat (fd, &st) < 0)
    return -1;
  if (st.st_dev != c->old_dev || st.st_ino != c->old_ino)
    {
      errno = ESTALE;
      return -1;
    }
  return fchmod (fd, c->mode & 0777);
}

/* Apply one change to the host. 0 / -1 with errno. */
static int
apply_one (struct apply *a, const struct ws_change *c)
{
  const char *base;
  cleanup_close int parent = ws_host_parent (a->lowerfd, c->path, &base);
  int r;
  if (parent < 0)
    return -1;
  switch (c->op)
    {
    case WS_DELETED:
      if (still_same (parent, base, c, &a->h->meta) < 0)
        return -1;
      r = unlinkat (parent, base, S_ISDIR (c->mode) ? AT_REMOVEDIR : 0);
      break;
    case WS_MODE: r = set_mode (a, parent, base, c); break;
    case WS_ADDED:
    case WS_RENAMED:
    case WS_MODIFIED:
      {
        bool absent = c->op != WS_MODIFIED;
        if (S_ISDIR (c->mode))
          {
            if (mkdirat (parent, base, 0700) < 0)
              return -1;
            cleanup_close int d = openat (parent, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            r = d < 0 || fchown (d, a->uid, a->gid) < 0 || fchmod (d, c->mode & 0777) < 0 ? -1 : 0;
          }
        else if (S_ISLNK (c->mode))
          r = write_symlink (a, parent, base, c, absent);
        else
          {
            errno = EINVAL; /* regular files go through stage_file */
            return -1;
          }
        break;
      }
    default: errno = EINVAL; return -1;
    }
  if (r == 0)
    dir_changed (a, parent);
  return r;
}

/* Remove what apply wrote from upper/ (PATH mode), in reverse order. An entry below an opaque
 * directory stays (removing it would let the opaque directory hide the host's new copy); an
 * entry that equals the host shows no change anyway. */
static void
drop_from_upper (struct apply *a, const struct ws_changes *ch, const bool *done)
{
  for (size_t i = ch->n; i-- > 0;)
    {
      const struct ws_change *c = &ch->v[i];
      const char *slash = strrchr (c->path, '/'), *base = slash ? slash + 1 : c->path;
      cleanup_free char *dir = slash ? xasprintf ("%.*s", (int) (slash - c->path), c->path) : xstrdup (".");
      struct stat st;
      if (!done[i] || c->in_opaque)
        continue;
      cleanup_close int p = ps_openat2 (a->h->upperfd, dir, O_RDONLY | O_DIRECTORY, 0, RESOLVE_HOST);
      if (p < 0 || fstatat (p, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (S_ISDIR (st.st_mode))
        unlinkat (p, base, AT_REMOVEDIR); /* ENOTEMPTY: something below was not applied */
      else
        unlinkat (p, base, 0);
    }
}

/* rm -rf of name in dfd, through fds, never following a symlink */
static int
remove_tree (int dfd, const char *name)
{
  struct stat st;
  if (fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : -1;
  if (S_ISDIR (st.st_mode))
    {
      int fd = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 && errno == EACCES)
        {
          /* overlayfs leaves work/work at mode 0: a caller without CAP_DAC_OVERRIDE makes it its
           * own first, through an O_PATH fd of that very directory */
          cleanup_close int pfd = openat (dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          char proc[64];
          snprintf (proc, sizeof proc, "/proc/self/fd/%d", pfd);
          if (pfd < 0 || chmod (proc, 0700) < 0)
            return -1;
          fd = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
      if (fd < 0)
        return -1;
      cleanup_closedir DIR *d = fdopendir (fd);
      struct dirent *de;
      if (!d)
        {
          close (fd);
          return -1;
        }
      while ((de = readdir (d)))
        if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0 && remove_tree (dirfd (d), de->d_name) < 0)
          return -1;
      return unlinkat (dfd, name, AT_REMOVEDIR);
    }
  return unlinkat (dfd, name, 0);
}

static bool
selected (const struct ws_change *c, char **paths, size_t n)
{
  /* a rename by its new path (what it writes); its deletion of the old one follows it
   * (select_changes). By the old path it wrote outside the selection (outside attack 09: `apply
   * ID docs/` created `run-me.sh` from `docs/a.md`). */
  if (n && c->op == WS_DELETED && c->renamed)
    return false; /* the old side of a rename: only with the rename itself */
  bool in = n == 0, old_in = n == 0 || !(c->op == WS_RENAMED && c->old_path);
  for (size_t i = 0; i < n; i++)
    {
      in = in || ws_path_under (c->path, paths[i]);
      old_in = old_in || ws_path_under (c->old_path, paths[i]);
    }
  /* a rename writes its new path and removes its old one: both must be selected (outside
   * attack 10: `apply ID docs/` of src/main.c -> docs/main.c removed src/main.c) */
  return in && old_in;
}

/* The selection: the PATHs, the added directories above a selected entry, the deletion behind a
 * selected rename */
static void
select_changes (const struct ws_changes *ch, const struct ws_apply_opts *o, bool *sel)
{
  for (size_t i = 0; i < ch->n; i++)
    sel[i] = selected (&ch->v[i], o->paths, o->paths_len);
  if (o->paths_len == 0)
    return;
  for (size_t i = 0; i < ch->n; i++)
    {
      const struct ws_change *c = &ch->v[i];
      if (!sel[i])
        continue;
      for (size_t j = 0; j < ch->n; j++)
        {
          const struct ws_change *d = &ch->v[j];
          if (sel[j])
            continue;
          if (d->op == WS_ADDED && S_ISDIR (d->mode) && ws_path_under (c->path, d->path))
            sel[j] = true;
          if (c->op == WS_RENAMED && d->op == WS_DELETED && d->renamed && strcmp (d->path, c->old_path) == 0)
            sel[j] = true;
        }
    }
}

static void
print_applied (FILE *out, const struct ws_change *c, const char *verb)
{
  cleanup_free char *p = ws_escape (c->path);
  cleanup_free char *op = c->old_path ? ws_escape (c->old_path) : NULL;
  if (!c->renamed)
    fprintf (out, "%s %-8s %s%s%s\n", verb, ws_op_name (c->op), p, op ? " <- " : "", op ? op : "");
}

/* Make the queued files durable (one syncfs per file system: their data is on disk before any
 * of them is linked, so even a power cut leaves each host file old or new), then put them in
 * place in order. 0, or -1 with errno and *failed = the change that failed (the queue is
 * emptied either way; what was put in place is marked in done[]). */
static int
flush_batch (struct apply *a, const struct ws_changes *ch, bool *done, size_t *napplied, size_t *failed)
{
  size_t n = a->nbatch, k = 0;
  int ret = 0;
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n && ret == 0; i++)
    {
      bool seen = false;
      for (size_t j = 0; j < i; j++)
        seen = seen || a->batch[j].dev == a->batch[i].dev;
      if (!seen && syncfs (a->batch[i].fd) < 0)
        {
          *failed = a->batch[i].idx;
          ret = -1;
        }
    }
  for (; k < n && ret == 0; k++)
    {
      struct staged *b = &a->batch[k];
      const struct ws_change *c = &ch->v[b->idx];
      if (commit_staged (a, b, c) < 0)
        {
          *failed = b->idx;
          ret = -1;
          break;
        }
      dir_changed (a, b->parent);
      print_applied (a->out, c, "applied ");
      done[b->idx] = true;
      (*napplied)++;
      drop_staged (b);
    }
  {
    int e = errno;
    for (; k < n; k++)
      drop_staged (&a->batch[k]);
    errno = e;
  }
  a->nbatch = 0;
  return ret;
}

static int
take_lock (struct ws_handle *h, asbx_err_t *err)
{
  int fd = openat (h->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return asbx_error (err, errno, "workspace `%s`: open %s/lock", h->meta.id, h->dir);
  if (flock (fd, LOCK_EX | LOCK_NB) < 0)
    {
      int e = errno;
      close (fd);
      return asbx_error (err, e, "workspace `%s`: %s/lock is held (another workspace command, or the run)", h->meta.id,
                         h->dir);
    }
  return fd;
}

int
ws_apply (const struct ws_apply_opts *o, FILE *out, asbx_err_t *err)
{
  struct ws_handle h;
  struct ws_changes ch = { 0 };
  cleanup_close int lockfd = -1;
  cleanup_close int lowerfd = -1;
  cleanup_close int auditfd = -1;
  cleanup_free bool *sel = NULL;
  cleanup_free bool *refused = NULL;
  cleanup_free bool *done = NULL;
  size_t nref = 0, nsel = 0, napplied = 0, nkept_git = 0;
  struct stat st;
  int ret = -1;

  if (ws_handle_open (o->config_path, o->id, &h, err) < 0)
    return -1;
  struct apply a = { .o = o, .h = &h, .out = out, .dirty_dir = -1 };
  if ((lockfd = take_lock (&h, err)) < 0)
    goto out;
  if (ws_meta_running (&h.meta) && !o->running)
    {
      asbx_error (err, EBUSY,
                  "workspace `%s`: its container is still running (meta.json \"state\"); stop it first, or pass "
                  "--running to apply what its upper layer holds now",
                  o->id);
      goto out;
    }
  {
    /* a seeded workspace (sandbox --seed-git): the lower is the layout's own clone, which the
     * removal of <id>/ at the end of apply would take with it; the changes go to the user's
     * repository as a patch (workspace diff) or a layer (workspace export) instead */
    cleanup_free char *own = xasprintf ("%s/lower", h.dir);
    if (strcmp (h.meta.workspace, own) == 0)
      {
        asbx_error (err, EINVAL,
                    "workspace `%s`: its workspace is the seeded clone `%s` (sandbox --seed-git), which apply would "
                    "remove with the rest: take the changes with `agentsbx workspace diff %s` (a patch for the "
                    "repository) or `workspace export`, then `workspace discard %s`",
                    o->id, own, o->id, o->id);
        goto out;
      }
  }
  if ((lowerfd = ws_open_lower (&h, err)) < 0)
    goto out;
  if (fstat (lowerfd, &st) < 0)
    {
      asbx_error (err, errno, "fstat %s", h.meta.workspace);
      goto out;
    }
  a.lowerfd = lowerfd;
  a.uid = st.st_uid;
  a.gid = st.st_gid;
  if (!o->dry_run && (auditfd = workspace_audit_open (o->audit_dir, o->config_path, o->id, err)) < 0)
    goto out;
  {
    struct ws_view ov = { -1, lowerfd }, nv = { h.upperfd, lowerfd };
    if (ws_walk (&ov, &nv, h.meta.xattr, &ch, err) < 0)
      goto out;
  }
  ws_find_renames (&ch);
  sel = xmalloc0 ((ch.n + 1) * sizeof *sel);
  refused = xmalloc0 ((ch.n + 1) * sizeof *refused);
  done = xmalloc0 ((ch.n + 1) * sizeof *done);
  select_changes (&ch, o, sel);

  /* every refusal first: by default nothing is applied when anything is refused */
  for (size_t i = 0; i < ch.n; i++)
    {
      const struct ws_change *c = &ch.v[i];
      bool conflict;
      if (!sel[i])
        continue;
      if (!o->git_data && ws_in_host_repository (c->path, lowerfd))
        {
          sel[i] = false;
          nkept_git++;
          continue;
        }
      /* the workspace's own git index: every git command the agent ran rewrote it (a commit, an
       * add, even a status), and it is never applied (a list of paths git writes into the
       * worktree: outside attack 06 planted hooks through one). Not a refusal, which would stop
       * a plain apply of every agent that touched git: it stays the host's, and the reviewer's
       * `git reset` rebuilds it from the applied commit through git's own path checks. */
      if (strcmp (c->path, ".git/index") == 0 && c->op != WS_DELETED && S_ISREG (c->mode))
        {
          sel[i] = false;
          fprintf (out,
                   "kept     %-8s .git/index: git's index is not applied (after applying commits, `git reset` "
                   "rebuilds it)\n",
                   ws_op_name (c->op));
          continue;
        }
      nsel++;
      cleanup_free char *why = ws_refusal (c, &h.meta, h.upperfd, lowerfd, &conflict);
      if (!why)
        continue;
      refused[i] = true;
      nref++;
      cleanup_free char *p = ws_escape (c->path);
      fprintf (out, "refused  %-8s %s: %s\n", ws_op_name (c->op), p, why);
      if (conflict)
        show_conflict (&a, c);
    }
  if (nkept_git)
    fprintf (
        out,
        "kept     %zu change%s in git repositories: the agent's git data (its commits, refs, logs) is not applied, its "
        "file changes are (--git-data applies it; the trees of its commits are not checked)\n",
        nkept_git, nkept_git == 1 ? "" : "s");
  /* what depends on a refused entry: the contents of a refused directory, the directories whose
   * deletion needs a refused deletion below them */
  for (size_t i = 0; i < ch.n; i++)
    {
      if (!refused[i])
        continue;
      const struct ws_change *r = &ch.v[i];
      for (size_t j = 0; j < ch.n; j++)
        {
          const struct ws_change *c = &ch.v[j];
          if (!sel[j] || refused[j] || j == i)
            continue;
          bool below = r->op != WS_DELETED && S_ISDIR (r->mode) && ws_path_under (c->path, r->path);
          bool above = r->op == WS_DELETED && c->op == WS_DELETED && S_ISDIR (c->mode)
                       && ws_path_under (r->path, c->path);
          if (!below && !above)
            continue;
          refused[j] = true;
          nref++;
          cleanup_free char *p = ws_escape (c->path);
          cleanup_free char *rp = ws_escape (r->path);
          fprintf (out, "refused  %-8s %s: depends on the refused `%s`\n", ws_op_name (c->op), p, rp);
        }
    }
  if (nref && !o->skip_refused)
    {
      fprintf (out, "nothing applied: %zu of %zu changes refused (--skip-refused applies the rest)\n", nref, nsel);
      ret = WS_APPLY_REFUSED;
      goto audit;
    }
  for (size_t i = 0; i < ch.n; i++)
    {
      const struct ws_change *c = &ch.v[i];
      size_t failed = i;
      bool file = c->op != WS_DELETED && c->op != WS_MODE && S_ISREG (c->mode);
      if (!sel[i] || refused[i])
        continue;
      if (o->dry_run)
        {
          print_applied (out, c, "would   ");
          continue;
        }
      /* the order of the list is kept: queued files go in place before any other kind of change */
      if ((!file || a.nbatch == BATCH) && flush_batch (&a, &ch, done, &napplied, &failed) < 0)
        goto write_failed;
      if (file ? stage_file (&a, i, c) < 0 : apply_one (&a, c) < 0)
        goto write_failed;
      if (!file)
        {
          print_applied (out, c, "applied ");
          done[i] = true;
          napplied++;
        }
      continue;
    write_failed:
      {
        int e = errno;
        cleanup_free char *fp = ws_escape (ch.v[failed].path);
        for (size_t k = 0; k < a.nbatch; k++)
          drop_staged (&a.batch[k]);
        a.nbatch = 0;
        asbx_error (err, e, "workspace `%s`: apply %s `%s` to %s (the %zu changes printed as applied are applied)",
                    o->id, ws_op_name (ch.v[failed].op), fp, h.meta.workspace, napplied);
        goto audit;
      }
    }
  {
    size_t failed = 0;
    if (!o->dry_run && flush_batch (&a, &ch, done, &napplied, &failed) < 0)
      {
        int e = errno;
        cleanup_free char *fp = ws_escape (ch.v[failed].path);
        asbx_error (err, e, "workspace `%s`: apply %s `%s` to %s (the %zu changes printed as applied are applied)",
                    o->id, ws_op_name (ch.v[failed].op), fp, h.meta.workspace, napplied);
        goto audit;
      }
  }
  ret = nref ? WS_APPLY_PARTIAL : WS_APPLY_OK;
  if (nref)
    fprintf (out, "%zu applied, %zu refused and skipped\n", napplied, nref);
audit:
  dir_flush (&a);
  if (!o->dry_run)
    {
      asbx_err_t e = NULL;
      if (audit_rec_write (workspace_audit_record (o->id, "apply", &ch, done), auditfd, &e) < 0)
        {
          if (ret >= 0)
            {
              asbx_error_move (err, &e);
              ret = -1;
            }
          asbx_error_free (&e);
        }
    }
  if (o->dry_run || ret < 0)
    goto out;
  if (o->paths_len)
    drop_from_upper (&a, &ch, done);
  else if (ret == WS_APPLY_OK)
    {
      /* nothing is left: the whole <id>/ goes (the lock fd stays valid while we unlink it) */
      cleanup_free char *base = ws_workspaces_dir (o->config_path, err);
      cleanup_close int wd = base ? open (base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
      if (wd < 0 || remove_tree (wd, o->id) < 0)
        {
          asbx_error (err, errno, "workspace `%s`: applied, but removing %s failed", o->id, h.dir);
          ret = -1;
        }
    }
out:
  ws_changes_free (&ch);
  ws_handle_free (&h);
  return ret;
}
