/* workspace_walk.c - compare two overlay views of one lower layer (workspace_walk.h).
 *
 * At each directory level each side has an upper dir fd (or -1) and sees the lower dir or not
 * (an opaque directory hides it). A name is resolved per side as the overlay resolves it: the
 * upper entry when there is one (a whiteout = absent), else the lower entry when visible. Names
 * come from both uppers; the lower's own names are read only when one side sees the lower and
 * the other does not (then they differ): a name that both sides take from the lower is the same
 * inode on both, so nothing below it needs to be read. That keeps a diff proportional to the
 * upper, not to the workspace.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/openssl_dl.h"
#include "core/cleanup.h"
#include "core/sha256.h"
#include "core/util.h"
#include "runtime/workspace_diff.h"
#include "runtime/workspace_walk.h"

#define WS_TARGET_MAX 4096

/* one side of one directory level */
struct level
{
  int up;         /* upper dir fd or -1 */
  bool lo_vis;    /* does this side see the lower dir at this level */
  bool in_opaque; /* an ancestor directory of this side's upper is opaque */
};

/* a name resolved on one side */
struct ent
{
  bool present;
  bool from_up; /* else from the lower */
  bool opaque;  /* directory from the upper that hides the lower */
  bool origin;
  struct stat st;
};

struct walk
{
  const char *ns;
  struct ws_changes *out;
  asbx_err_t *err;
};

const char *
ws_op_name (enum ws_op op)
{
  switch (op)
    {
    case WS_ADDED: return "added";
    case WS_MODIFIED: return "modified";
    case WS_MODE: return "mode";
    case WS_DELETED: return "deleted";
    case WS_RENAMED: return "renamed";
    }
  return "?";
}

const char *
ws_type_name (mode_t mode)
{
  switch (mode & S_IFMT)
    {
    case S_IFREG: return "file";
    case S_IFDIR: return "dir";
    case S_IFLNK: return "symlink";
    case S_IFCHR: return "char";
    case S_IFBLK: return "block";
    case S_IFIFO: return "fifo";
    case S_IFSOCK: return "socket";
    default: return "unknown";
    }
}

bool
ws_path_under (const char *path, const char *prefix)
{
  size_t n = strlen (prefix);
  if (n == 0)
    return true;
  return strncmp (path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

char *
ws_clean_rel (const char *path)
{
  char *out = xmalloc (strlen (path) + 1);
  size_t o = 0;
  const char *p = path;
  while (*p)
    {
      while (*p == '/')
        p++;
      const char *e = strchrnul (p, '/');
      size_t l = (size_t) (e - p);
      if (l == 0 || (l == 1 && p[0] == '.'))
        {
          p = e;
          continue;
        }
      if (l == 2 && p[0] == '.' && p[1] == '.')
        {
          free (out);
          errno = EINVAL;
          return NULL;
        }
      if (o)
        out[o++] = '/';
      memcpy (out + o, p, l);
      o += l;
      p = e;
    }
  out[o] = '\0';
  return out;
}

int
ws_sha256_fd (int fd, char out[65])
{
  static const char hex[] = "0123456789abcdef";
  unsigned char buf[65536], md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  EVP_MD_CTX *ctx;
  ssize_t r;

  if (openssl_load ("sha256", NULL) < 0)
    {
      errno = ELIBACC; /* the walk loads it with a clear error first (ws_walk) */
      return -1;
    }
  ctx = EVP_MD_CTX_new ();
  if (!ctx || EVP_DigestInit_ex (ctx, EVP_sha256 (), NULL) != 1)
    abort (); /* allocation failure, as xmalloc */
  while ((r = read (fd, buf, sizeof buf)) != 0)
    {
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        {
          int e = errno;
          EVP_MD_CTX_free (ctx);
          errno = e;
          return -1;
        }
      EVP_DigestUpdate (ctx, buf, (size_t) r);
    }
  EVP_DigestFinal_ex (ctx, md, &mdlen);
  EVP_MD_CTX_free (ctx);
  for (size_t i = 0; i < mdlen && i < 32; i++)
    {
      out[2 * i] = hex[md[i] >> 4];
      out[2 * i + 1] = hex[md[i] & 15];
    }
  out[64] = '\0';
  return 0;
}

static char *
join (const char *dir, const char *name)
{
  return *dir ? xasprintf ("%s/%s", dir, name) : xstrdup (name);
}

/* Open name (one component, never followed) for reading its content or xattrs; the fd is checked
 * to be the inode fstatat saw (a swap between the two calls is an error, EAGAIN). */
static int
open_entry (int dirfd, const char *name, const struct stat *st)
{
  int flags = O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
  struct stat st2;
  if (S_ISDIR (st->st_mode))
    flags |= O_DIRECTORY;
  int fd = openat (dirfd, name, flags);
  if (fd < 0)
    return -1;
  if (fstat (fd, &st2) < 0 || st2.st_ino != st->st_ino || st2.st_dev != st->st_dev)
    {
      close (fd);
      errno = EAGAIN;
      return -1;
    }
  return fd;
}

static int
has_xattr (int fd, const char *ns, const char *what, char *val, size_t vlen)
{
  char name[64];
  snprintf (name, sizeof name, "%s.overlay.%s", ns, what);
  ssize_t r = fgetxattr (fd, name, val, vlen);
  if (r < 0)
    return errno == ENODATA || errno == ENOTSUP ? 0 : -1;
  if (val && (size_t) r < vlen)
    val[r] = '\0';
  return 1;
}

/* Resolve `name` on side `l` (lofd: the lower dir at this level, or -1). 0 / -1 with *err. */
static int
resolve (struct walk *w, const struct level *l, int lofd, const char *name, const char *rel, struct ent *e)
{
  memset (e, 0, sizeof *e);
  if (l->up >= 0)
    {
      if (fstatat (l->up, name, &e->st, AT_SYMLINK_NOFOLLOW) == 0)
        {
          if (S_ISCHR (e->st.st_mode) && e->st.st_rdev == makedev (0, 0))
            return 0; /* whiteout */
          if (S_ISREG (e->st.st_mode) || S_ISDIR (e->st.st_mode))
            {
              char v[8] = "";
              cleanup_close int fd = open_entry (l->up, name, &e->st);
              int r;
              if (fd < 0)
                return ws_error_path (w->err, errno, "workspace upper `%s`: open", rel);
              if (S_ISREG (e->st.st_mode) && e->st.st_size == 0)
                {
                  if ((r = has_xattr (fd, w->ns, "whiteout", NULL, 0)) < 0)
                    return ws_error_path (w->err, errno, "workspace upper `%s`: fgetxattr", rel);
                  if (r)
                    return 0; /* xattr whiteout */
                }
              if (S_ISDIR (e->st.st_mode))
                {
                  if ((r = has_xattr (fd, w->ns, "opaque", v, sizeof v - 1)) < 0)
                    return ws_error_path (w->err, errno, "workspace upper `%s`: fgetxattr", rel);
                  /* "y" = opaque; "x" only marks a directory holding xattr whiteouts */
                  e->opaque = r && strcmp (v, "y") == 0;
                }
              if ((r = has_xattr (fd, w->ns, "origin", NULL, 0)) < 0)
                return ws_error_path (w->err, errno, "workspace upper `%s`: fgetxattr", rel);
              e->origin = r;
            }
          e->present = e->from_up = true;
          return 0;
        }
      if (errno != ENOENT)
        return ws_error_path (w->err, errno, "workspace upper `%s`: fstatat", rel);
    }
  if (l->lo_vis && lofd >= 0)
    {
      if (fstatat (lofd, name, &e->st, AT_SYMLINK_NOFOLLOW) == 0)
        {
          e->present = true;
          return 0;
        }
      if (errno != ENOENT)
        return ws_error_path (w->err, errno, "workspace lower `%s`: fstatat", rel);
    }
  return 0;
}

/* Content digest of a regular file or symlink; "" for other types. */
static int
digest (struct walk *w, int dirfd, const char *name, const struct stat *st, const char *rel, char sha[65],
        char **target)
{
  sha[0] = '\0';
  if (S_ISREG (st->st_mode))
    {
      if (openssl_load ("the workspace review (sha256 of the changed files)", w->err) < 0)
        return -1;
      cleanup_close int fd = open_entry (dirfd, name, st);
      if (fd < 0 || ws_sha256_fd (fd, sha) < 0)
        return ws_error_path (w->err, errno, "workspace `%s`: read", rel);
    }
  else if (S_ISLNK (st->st_mode))
    {
      char buf[WS_TARGET_MAX];
      ssize_t n = readlinkat (dirfd, name, buf, sizeof buf);
      if (n < 0 || (size_t) n >= sizeof buf)
        return ws_error_path (w->err, n < 0 ? errno : ENAMETOOLONG, "workspace `%s`: readlinkat", rel);
      buf[n] = '\0';
      sha256_hex (buf, (size_t) n, sha);
      if (target)
        *target = xstrdup (buf);
    }
  return 0;
}

static struct ws_change *
push (struct ws_changes *c)
{
  if (c->n == c->cap)
    {
      c->cap = c->cap ? 2 * c->cap : 64;
      c->v = xrealloc (c->v, c->cap * sizeof *c->v);
    }
  struct ws_change *ch = &c->v[c->n++];
  memset (ch, 0, sizeof *ch);
  return ch;
}

static int compare_level (struct walk *w, const struct level *o, const struct level *n, int lofd, const char *dir);

/* The fd a side's entry `e` is read from at this level */
static int
ent_dirfd (const struct level *l, int lofd, const struct ent *e)
{
  return e->from_up ? l->up : lofd;
}

/* Fill the new-side fields of ch from entry e (read from dirfd) */
static int
fill_new (struct walk *w, struct ws_change *ch, const struct level *l, int dirfd, const char *name, const struct ent *e)
{
  ch->opaque = e->opaque;
  ch->in_opaque = l->in_opaque;
  ch->mode = e->st.st_mode;
  ch->size = S_ISREG (e->st.st_mode) || S_ISLNK (e->st.st_mode) ? (uint64_t) e->st.st_size : 0;
  ch->nlink = e->st.st_nlink;
  ch->rdev = e->st.st_rdev;
  ch->origin = e->origin;
  ch->new_up = e->from_up;
  return digest (w, dirfd, name, &e->st, ch->path, ch->sha256, &ch->target);
}

static int
fill_old (struct walk *w, struct ws_change *ch, int dirfd, const char *name, const struct ent *e, char **target)
{
  ch->has_old = true;
  ch->old_up = e->from_up;
  ch->old_mode = e->st.st_mode;
  ch->old_size = S_ISREG (e->st.st_mode) || S_ISLNK (e->st.st_mode) ? (uint64_t) e->st.st_size : 0;
  ch->old_ctime_ns = (int64_t) e->st.st_ctim.tv_sec * 1000000000 + e->st.st_ctim.tv_nsec;
  ch->old_dev = e->st.st_dev;
  ch->old_ino = e->st.st_ino;
  return digest (w, dirfd, name, &e->st, ch->path, ch->old_sha256, target);
}

/* The child level of a directory entry on one side; *fd receives the upper child fd to close */
static int
child_level (struct walk *w, const struct level *l, int lofd_child, const struct ent *e, const char *name,
             const char *rel, struct level *out, int *fd)
{
  out->up = -1;
  out->lo_vis = false;
  out->in_opaque = l->in_opaque || e->opaque;
  *fd = -1;
  if (!e->present)
    return 0;
  if (e->from_up)
    {
      *fd = openat (l->up, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (*fd < 0)
        return ws_error_path (w->err, errno, "workspace upper `%s`: open", rel);
      out->up = *fd;
      out->lo_vis = l->lo_vis && !e->opaque && lofd_child >= 0;
    }
  else
    out->lo_vis = lofd_child >= 0;
  return 0;
}

/* Emit the deletion of old entry e (a directory: its contents first) */
static int
emit_deleted (struct walk *w, const struct level *o, int lofd, int lofd_child, const char *name, const char *rel,
              const struct ent *e)
{
  if (S_ISDIR (e->st.st_mode))
    {
      struct level oc, none = { -1, false, false };
      cleanup_close int fd = -1;
      if (child_level (w, o, lofd_child, e, name, rel, &oc, &fd) < 0
          || compare_level (w, &oc, &none, lofd_child, rel) < 0)
        return -1;
    }
  struct ws_change *ch = push (w->out);
  ch->op = WS_DELETED;
  ch->path = xstrdup (rel);
  if (fill_old (w, ch, ent_dirfd (o, lofd, e), name, e, &ch->target) < 0)
    return -1;
  ch->mode = ch->old_mode;
  ch->size = ch->old_size;
  ch->new_up = ch->old_up;
  memcpy (ch->sha256, ch->old_sha256, sizeof ch->sha256);
  ch->nlink = e->st.st_nlink;
  return 0;
}

static int
emit_added (struct walk *w, const struct level *n, int lofd, int lofd_child, const char *name, const char *rel,
            const struct ent *e)
{
  struct ws_change *ch = push (w->out);
  ch->op = WS_ADDED;
  ch->path = xstrdup (rel);
  if (fill_new (w, ch, n, ent_dirfd (n, lofd, e), name, e) < 0)
    return -1;
  if (S_ISDIR (e->st.st_mode))
    {
      struct level nc, none = { -1, false, false };
      cleanup_close int fd = -1;
      if (child_level (w, n, lofd_child, e, name, rel, &nc, &fd) < 0
          || compare_level (w, &none, &nc, lofd_child, rel) < 0)
        return -1;
    }
  return 0;
}

/* Both sides have the name and neither is a directory, or both are */
static int
emit_compare (struct walk *w, const struct level *o, const struct level *n, int lofd, int lofd_child, const char *name,
              const char *rel, const struct ent *eo, const struct ent *en)
{
  bool dir = S_ISDIR (eo->st.st_mode);
  struct ws_change tmp = { .path = (char *) rel };
  cleanup_free char *ot = NULL;

  if (fill_new (w, &tmp, n, ent_dirfd (n, lofd, en), name, en) < 0
      || fill_old (w, &tmp, ent_dirfd (o, lofd, eo), name, eo, &ot) < 0)
    {
      free (tmp.target);
      return -1;
    }
  bool same_type = (eo->st.st_mode & S_IFMT) == (en->st.st_mode & S_IFMT);
  bool same_content = same_type && strcmp (tmp.sha256, tmp.old_sha256) == 0 && tmp.size == tmp.old_size
                      && (!(S_ISCHR (en->st.st_mode) || S_ISBLK (en->st.st_mode)) || eo->st.st_rdev == en->st.st_rdev);
  bool same_mode = (eo->st.st_mode & 07777) == (en->st.st_mode & 07777);
  if (!same_content || !same_mode)
    {
      struct ws_change *ch = push (w->out);
      *ch = tmp;
      ch->op = same_content ? WS_MODE : WS_MODIFIED;
      ch->path = xstrdup (rel);
      /* a symlink's permission bits mean nothing (symlink(7)) */
      if (same_content && S_ISLNK (en->st.st_mode))
        {
          free (ch->path);
          free (ch->target);
          w->out->n--;
        }
    }
  else
    free (tmp.target);
  if (dir)
    {
      struct level oc, nc;
      cleanup_close int ofd = -1;
      cleanup_close int nfd = -1;
      if (child_level (w, o, lofd_child, eo, name, rel, &oc, &ofd) < 0
          || child_level (w, n, lofd_child, en, name, rel, &nc, &nfd) < 0
          || compare_level (w, &oc, &nc, lofd_child, rel) < 0)
        return -1;
    }
  return 0;
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* Append the names of directory fd (dup'ed: the caller's offset is untouched) */
static int
list_names (struct walk *w, int fd, const char *dir, char ***names, size_t *n, size_t *cap)
{
  int d = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0)
    return ws_error_path (w->err, errno, "workspace `%s`: open", *dir ? dir : ".");
  cleanup_closedir DIR *dp = fdopendir (d);
  struct dirent *de;
  if (!dp)
    {
      close (d);
      return ws_error_path (w->err, errno, "workspace `%s`: fdopendir", *dir ? dir : ".");
    }
  errno = 0;
  while ((de = readdir (dp)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (*n == *cap)
        {
          *cap = *cap ? 2 * *cap : 32;
          *names = xrealloc (*names, *cap * sizeof **names);
        }
      (*names)[(*n)++] = xstrdup (de->d_name);
    }
  if (errno)
    return ws_error_path (w->err, errno, "workspace `%s`: readdir", *dir ? dir : ".");
  return 0;
}

static int
compare_level (struct walk *w, const struct level *o, const struct level *n, int lofd, const char *dir)
{
  char **names = NULL;
  size_t nn = 0, cap = 0;
  int ret = -1;

  if (o->up >= 0 && list_names (w, o->up, dir, &names, &nn, &cap) < 0)
    goto out;
  if (n->up >= 0 && list_names (w, n->up, dir, &names, &nn, &cap) < 0)
    goto out;
  if (lofd >= 0 && o->lo_vis != n->lo_vis && list_names (w, lofd, dir, &names, &nn, &cap) < 0)
    goto out;
  if (nn)
    qsort (names, nn, sizeof *names, cmp_str);
  for (size_t i = 0; i < nn; i++)
    {
      if (i > 0 && strcmp (names[i], names[i - 1]) == 0)
        continue;
      cleanup_free char *rel = join (dir, names[i]);
      struct ent eo, en;
      if (resolve (w, o, lofd, names[i], rel, &eo) < 0 || resolve (w, n, lofd, names[i], rel, &en) < 0)
        goto out;
      if (!eo.present && !en.present)
        continue;
      if (eo.present && en.present && !eo.from_up && !en.from_up)
        continue; /* the same lower inode on both sides */
      /* the lower's directory of this name, for the sides that see it */
      cleanup_close int lofd_child = -1;
      struct stat lst;
      if (lofd >= 0 && fstatat (lofd, names[i], &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (lst.st_mode))
        {
          lofd_child = openat (lofd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (lofd_child < 0)
            {
              ws_error_path (w->err, errno, "workspace lower `%s`: open", rel);
              goto out;
            }
        }
      int r;
      if (!eo.present)
        r = emit_added (w, n, lofd, lofd_child, names[i], rel, &en);
      else if (!en.present)
        r = emit_deleted (w, o, lofd, lofd_child, names[i], rel, &eo);
      else if (S_ISDIR (eo.st.st_mode) != S_ISDIR (en.st.st_mode))
        r = emit_deleted (w, o, lofd, lofd_child, names[i], rel, &eo) < 0
                ? -1
                : emit_added (w, n, lofd, lofd_child, names[i], rel, &en);
      else
        r = emit_compare (w, o, n, lofd, lofd_child, names[i], rel, &eo, &en);
      if (r < 0)
        goto out;
    }
  ret = 0;
out:
  for (size_t i = 0; i < nn; i++)
    free (names[i]);
  free (names);
  return ret;
}

int
ws_walk (const struct ws_view *old, const struct ws_view *new, const char *xattr_ns, struct ws_changes *out,
         asbx_err_t *err)
{
  struct walk w = { .ns = xattr_ns, .out = out, .err = err };
  struct level o = { old->upper, old->lower >= 0, false }, n = { new->upper, new->lower >= 0, false };
  int lofd = old->lower >= 0 ? old->lower : new->lower;
  return compare_level (&w, &o, &n, lofd, "");
}

void
ws_find_renames (struct ws_changes *c)
{
  for (size_t i = 0; i < c->n; i++)
    {
      struct ws_change *a = &c->v[i];
      if (a->op != WS_ADDED || !S_ISREG (a->mode))
        continue;
      for (size_t j = 0; j < c->n; j++)
        {
          struct ws_change *d = &c->v[j];
          if (d->op != WS_DELETED || d->renamed || !S_ISREG (d->mode) || strcmp (d->sha256, a->sha256) != 0)
            continue;
          d->renamed = true;
          a->op = WS_RENAMED;
          a->old_path = xstrdup (d->path);
          a->has_old = true;
          a->old_mode = d->mode;
          a->old_size = d->size;
          memcpy (a->old_sha256, d->sha256, sizeof a->old_sha256);
          break;
        }
    }
}

void
ws_changes_free (struct ws_changes *c)
{
  for (size_t i = 0; i < c->n; i++)
    {
      free (c->v[i].path);
      free (c->v[i].old_path);
      free (c->v[i].target);
    }
  free (c->v);
  c->v = NULL;
  c->n = c->cap = 0;
}
