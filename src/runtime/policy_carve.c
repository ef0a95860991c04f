/* policy_carve.c - Landlock read rights carved out around denyRead paths (policy_carve.h).
 *
 * Mechanism: Landlock decides an access from the rules on the opened object's inode and on the
 * inodes of its ancestors (walking dentries, across mount points to the mount point's parent),
 * never from the path string used to open it. A rule set on a directory's other entries, each
 * one, plus fs.read_dir on the directory, leaves no right to a new inode at the denied name.
 * Threat model: the host (trusted, but changing files while the sandbox runs) replaces or
 * creates credentials; the container has not run yet (this is built in the init before execve,
 * or in `exec` before the new process runs).
 * Decisions (docs/policy.md "Credentials created or replaced during a session"):
 * - a symlink among the entries gets no rule: a rule on the link's own inode is never consulted
 *   (Landlock checks the target's ancestry), and the target gets its rights where it lives;
 * - an entry that is a mount point gets its rule on the mounted root (what openat returns);
 * - an entry that is the same directory as a carved one (a bind mount of it) gets no rule, or the
 *   whole carved hierarchy would be readable again through that inode;
 * - a directory the init may not list (EACCES/EPERM, e.g. a 0700 home under a user namespace)
 *   gets no rights beneath it: the sandbox could not read it by DAC either. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "policy/doc.h"
#include "runtime/policy_carve.h"
#include "runtime/policy_carve_alias.h"
#include "runtime/policy_noexec.h"

#define CARVE_FILE_RIGHTS                                                                                              \
  (ASBX_LL_FS_EXECUTE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_READ_FILE | ASBX_LL_FS_TRUNCATE | ASBX_LL_FS_IOCTL_DEV)
#define CARVE_MAX_LINKS 40

struct policy_carve
{
  char **denied; /* resolved absolute paths */
  size_t n;
  size_t rules;
  struct
  {
    char *path, *real; /* a denied path's parent, as written and resolved (~80 rules share a home) */
    char **aliases;    /* the other names bind mounts give `real` (policy_carve_alias.h) */
    size_t naliases;
  } * parents;
  size_t nparents;
  const char **writable; /* borrowed from the plan, for the collect only */
  size_t nwritable;
  struct mountinfo_entry *mi; /* this root's mount table, for the collect only */
  size_t nmi;
};

struct cnode
{
  char *name;
  struct cnode **kids;
  size_t n;
  bool denied;
};

void
policy_homes_seen_free (struct policy_homes_seen *seen)
{
  for (size_t i = 0; i < seen->n; i++)
    free (seen->paths[i]);
  free (seen->paths);
  for (size_t i = 0; i < seen->naliases; i++)
    free (seen->aliases[i]);
  free (seen->aliases);
  free (seen->dir);
  memset (seen, 0, sizeof *seen);
}

void
policy_homes_seen_alias (struct policy_homes_seen *seen, const char *path)
{
  seen->aliases = xrealloc (seen->aliases, (seen->naliases + 1) * sizeof (*seen->aliases));
  seen->aliases[seen->naliases++] = xstrdup (path);
}

void
policy_homes_seen_set (struct policy_homes_seen *seen, const char *dir, const struct policy_home *v, int n)
{
  /* the aliases stay: they are noted as the denies go on, before or after the homes */
  char **keep = seen->aliases;
  size_t nkeep = seen->naliases;
  seen->aliases = NULL, seen->naliases = 0;
  policy_homes_seen_free (seen);
  seen->aliases = keep, seen->naliases = nkeep;
  seen->dir = xstrdup (dir);
  seen->n = n > 0 ? (size_t) n : 0;
  seen->paths = xmalloc0 ((seen->n + 1) * sizeof (char *));
  for (size_t i = 0; i < seen->n; i++)
    seen->paths[i] = xstrdup (v[i].path);
}

/* ---- resolution through fds ---- */

static void
path_push (char **done, const char *comp)
{
  char *n = xasprintf ("%s/%s", *done, comp);
  free (*done);
  *done = n;
}

static void
path_pop (char *done)
{
  char *s = strrchr (done, '/');
  if (s)
    *s = '\0';
}

/* `path` resolved beneath rootfd: symlinks of ancestors (and of the last component when
 * follow_last) followed inside the root, from the first missing (or unsearchable) component on
 * kept as written (lexically normalised). Heap "/a/b", or NULL with *err. */
static char *
resolve (int rootfd, const char *path, bool follow_last, asbx_err_t *err)
{
  cleanup_free char *rest = xstrdup (path);
  char *done = xstrdup ("");
  int cur = fcntl (rootfd, F_DUPFD_CLOEXEC, 0), links = 0;
  bool missing = false;

  while (cur >= 0)
    {
      char *p = rest + strspn (rest, "/");
      if (*p == '\0')
        break;
      size_t len = strcspn (p, "/");
      char comp[NAME_MAX + 1];
      if (len > NAME_MAX)
        {
          asbx_error (err, ENAMETOOLONG, "resolve `%s`: a component is longer than %d bytes", path, NAME_MAX);
          goto fail;
        }
      memcpy (comp, p, len);
      comp[len] = '\0';
      cleanup_free char *after = xstrdup (p + len);
      bool last = after[strspn (after, "/")] == '\0';
      free (rest);
      rest = steal_ptr (&after);
      if (strcmp (comp, ".") == 0)
        continue;
      if (strcmp (comp, "..") == 0 || missing)
        {
          if (strcmp (comp, "..") == 0)
            path_pop (done);
          else
            path_push (&done, comp);
          if (!missing)
            {
              close (cur);
              cur = *done ? ps_openat2 (rootfd, done, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS)
                          : fcntl (rootfd, F_DUPFD_CLOEXEC, 0);
            }
          continue;
        }
      int fd = openat (cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      struct stat st;
      /* missing, or beneath a directory the init may not search (a 0700 /root under a user
       * namespace: the sandbox may not either): the rest as written */
      if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == EPERM))
        {
          missing = true;
          path_push (&done, comp);
          continue;
        }
      if (fd < 0 || fstat (fd, &st) < 0)
        {
          asbx_error (err, errno, "resolve `%s`: open `%s/%s`", path, done, comp);
          if (fd >= 0)
            close (fd);
          goto fail;
        }
      if (S_ISLNK (st.st_mode) && (!last || follow_last))
        {
          char target[PATH_MAX];
          ssize_t n = readlinkat (fd, "", target, sizeof target - 1);
          close (fd);
          if (n < 0 || ++links > CARVE_MAX_LINKS)
            {
              asbx_error (err, n < 0 ? errno : ELOOP, "resolve `%s`: symlink `%s/%s`", path, done, comp);
              goto fail;
            }
          target[n] = '\0';
          char *r = xasprintf ("%s%s", target, rest);
          free (rest);
          rest = r;
          if (target[0] == '/')
            {
              done[0] = '\0';
              close (cur);
              cur = fcntl (rootfd, F_DUPFD_CLOEXEC, 0);
            }
          continue;
        }
      path_push (&done, comp);
      close (cur);
      cur = fd;
    }
  if (cur < 0)
    {
      asbx_error (err, errno, "resolve `%s`", path);
      goto fail;
    }
  close (cur);
  if (*done == '\0')
    {
      free (done);
      return xstrdup ("/");
    }
  return done;
fail:
  if (cur >= 0)
    close (cur);
  free (done);
  return NULL;
}

/* ---- the denied paths ---- */

static bool
covers (const char *outer, const char *inner)
{
  return pval_path_covers (outer, inner);
}

/* the writable grants of the plan (rules with a write right, rw binds, tmpfs), borrowed */
static void
list_writable (struct policy_carve *c, const struct policy_plan *plan)
{
  c->writable = xmalloc0 ((plan->fs_rules_len + plan->mounts_len + 1) * sizeof (char *));
  if (!plan->rootfs_readonly)
    c->writable[c->nwritable++] = "/";
  for (size_t i = 0; i < plan->fs_rules_len; i++)
    if (plan->fs_rules[i].rights & POLICY_FS_WRITE)
      c->writable[c->nwritable++] = plan->fs_rules[i].path;
  for (size_t i = 0; i < plan->mounts_len; i++)
    if (plan->mounts[i].kind == POLICY_MOUNT_BIND_RW || plan->mounts[i].kind == POLICY_MOUNT_TMPFS)
      c->writable[c->nwritable++] = plan->mounts[i].path;
}

static bool
under_writable (const struct policy_carve *c, const char *path)
{
  for (size_t i = 0; i < c->nwritable; i++)
    if (covers (c->writable[i], path))
      return true;
  return false;
}

/* A home in an allowExec path (Debian's bin:/bin, daemon:/usr/sbin, games:/usr/games): a system
 * account's, in a directory only the package manager writes. Carving it would make every
 * program a host upgrade replaces there unreadable and unexecutable until the sandbox restarts
 * (and cost a rule per program); its `~/x` paths keep the mount layer only (docs/policy.md). */
static bool
in_exec_area (const struct policy_plan *plan, const char *path)
{
  if (!policy_exec_restricted (plan))
    return false;
  for (size_t i = 0; i < plan->fs_rules_len; i++)
    if ((plan->fs_rules[i].rights & POLICY_FS_EXEC) && covers (plan->fs_rules[i].path, path))
      return true;
  return false;
}

/* duplicates are harmless (the trie merges them) and ~1500 paths make a dedup quadratic */
static void
add_denied (struct policy_carve *c, char *path)
{
  c->denied = xrealloc (c->denied, (c->n + 1) * sizeof (char *));
  c->denied[c->n++] = path;
}

/* `path` (a denied path's parent) resolved, once per create; borrowed from c */
static const char *
parent_real (struct policy_carve *c, int rootfd, const char *path, asbx_err_t *err)
{
  for (size_t i = 0; i < c->nparents; i++)
    if (strcmp (c->parents[i].path, path) == 0)
      return c->parents[i].real;
  char *real = resolve (rootfd, path, true, err);
  if (!real)
    return NULL;
  c->parents = xrealloc (c->parents, (c->nparents + 1) * sizeof (*c->parents));
  c->parents[c->nparents].path = xstrdup (path);
  c->parents[c->nparents].real = real;
  c->parents[c->nparents].aliases = policy_carve_aliases (rootfd, c->mi, c->nmi, real,
                                                          &c->parents[c->nparents].naliases);
  return c->parents[c->nparents++].real;
}

/* one denied path: at its name (ancestors resolved) and, when it is a symlink, at its target */
static int
deny_one (struct policy_carve *c, int rootfd, const struct policy_plan *plan, const char *path, asbx_err_t *err)
{
  if (under_writable (c, path) || strcmp (path, "/") == 0)
    return 0;
  cleanup_free char *parent = xstrdup (path);
  char *slash = strrchr (parent, '/');
  const char *base = path + (slash - parent) + 1;
  *slash = '\0';
  const char *rp = parent_real (c, rootfd, *parent ? parent : "/", err);
  if (!rp)
    return asbx_error_wrap (err, "policy filesystem.denyRead `%s`", path);
  char *named = xasprintf ("%s/%s", strcmp (rp, "/") ? rp : "", base);
  /* the resolved parent has no symlink (ELOOP otherwise: resolved again below); O_PATH with
   * O_NOFOLLOW opens a symlink at the denied name itself */
  struct stat st;
  cleanup_close int fd = ps_openat2 (rootfd, named, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                     RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if ((fd < 0 && errno == ELOOP) || (fd >= 0 && fstat (fd, &st) == 0 && S_ISLNK (st.st_mode)))
    {
      char *full = resolve (rootfd, path, true, err);
      if (!full)
        {
          free (named);
          return asbx_error_wrap (err, "policy filesystem.denyRead `%s`", path);
        }
      if (!under_writable (c, full))
        add_denied (c, full);
      else
        free (full);
    }
  /* the same name under every other name of its parent (a bind mount: a home bound from
   * /srv/homes/bob). The target's own other names (~/.aws bound from /srv/creds) come from the
   * mount layer, which saw them before its mask went on (policy_homes_seen.aliases): after it,
   * a file's mask is /dev/null and its "other names" would be every /dev/null bind. */
  for (size_t i = 0; i < c->nparents; i++)
    if (c->parents[i].real == rp)
      for (size_t k = 0; k < c->parents[i].naliases; k++)
        {
          char *alias = xasprintf ("%s/%s", strcmp (c->parents[i].aliases[k], "/") ? c->parents[i].aliases[k] : "",
                                   base);
          if (!under_writable (c, alias))
            add_denied (c, alias);
          else
            free (alias);
        }
  if (!under_writable (c, named))
    add_denied (c, named);
  else
    free (named);
  return 0;
}

struct policy_carve *
policy_carve_collect (int rootfd, const struct policy_plan *plan, const struct policy_homes_seen *seen, asbx_err_t *err)
{
  struct policy_carve *c = xmalloc0 (sizeof *c);
  list_writable (c, plan);
  if (mountinfo_read (&c->mi, &c->nmi, err) < 0)
    {
      policy_carve_free (c);
      return NULL;
    }
  for (size_t i = 0; i < plan->mounts_len; i++)
    {
      const struct policy_mount *m = &plan->mounts[i];
      if (m->kind != POLICY_MOUNT_MASK)
        continue;
      if (!m->each_child)
        {
          if (deny_one (c, rootfd, plan, m->path, err) < 0)
            goto fail;
          continue;
        }
      struct policy_home *v = NULL;
      int n = 0;
      bool own = !(seen && seen->dir && strcmp (seen->dir, m->path) == 0);
      if (own && (n = policy_homes_list (rootfd, m->path, 0, &v, err)) < 0)
        goto fail;
      size_t count = own ? (size_t) n : seen->n;
      for (size_t h = 0; h < count; h++)
        {
          const char *home = own ? v[h].path : seen->paths[h];
          cleanup_free char *p = xasprintf ("%s/%s", strcmp (home, "/") ? home : "", m->each_child);
          const char *real = in_exec_area (plan, home) ? NULL : parent_real (c, rootfd, home, err);
          if (in_exec_area (plan, home) || (real && in_exec_area (plan, real)))
            continue;
          if (!real || deny_one (c, rootfd, plan, p, err) < 0)
            {
              policy_homes_free (v, (size_t) n);
              goto fail;
            }
        }
      policy_homes_free (v, (size_t) n);
    }
  for (size_t i = 0; seen && i < seen->naliases; i++)
    if (deny_one (c, rootfd, plan, seen->aliases[i], err) < 0)
      goto fail;
  free (c->writable);
  c->writable = NULL;
  c->nwritable = 0;
  mountinfo_free (c->mi, c->nmi);
  c->mi = NULL;
  c->nmi = 0;
  return c;
fail:
  policy_carve_free (c);
  return NULL;
}

/* ---- the trie and the carve ---- */

static struct cnode *
kid (struct cnode *node, const char *name, size_t len, bool create)
{
  for (size_t i = 0; i < node->n; i++)
    if (strlen (node->kids[i]->name) == len && strncmp (node->kids[i]->name, name, len) == 0)
      return node->kids[i];
  if (!create)
    return NULL;
  struct cnode *k = xmalloc0 (sizeof *k);
  k->name = xmalloc (len + 1);
  memcpy (k->name, name, len);
  k->name[len] = '\0';
  node->kids = xrealloc (node->kids, (node->n + 1) * sizeof (struct cnode *));
  node->kids[node->n++] = k;
  return k;
}

/* `rel` ("a/b/c") beneath root; the last component is denied, and nothing beneath a denied node
 * needs a place in the trie */
static void
trie_insert (struct cnode *root, const char *rel)
{
  struct cnode *node = root;
  while (*rel && !node->denied)
    {
      size_t len = strcspn (rel, "/");
      node = kid (node, rel, len, true);
      rel += len + (rel[len] == '/');
    }
  node->denied = true;
}

static void
trie_free (struct cnode *node)
{
  for (size_t i = 0; i < node->n; i++)
    {
      trie_free (node->kids[i]);
      free (node->kids[i]);
    }
  free (node->kids);
  free (node->name);
}

struct carve_ctx
{
  struct policy_carve *c;
  struct linux_landlock *ll;
  uint64_t rights;
  const char *rule;
  struct stat *dirs; /* the carved directories, to refuse an alias of one among the entries */
  size_t ndirs;
};

static int
carve_add (struct carve_ctx *x, int fd, const char *what, uint64_t rights, asbx_err_t *err)
{
  if (++x->c->rules > POLICY_CARVE_MAX_RULES)
    return asbx_error (err, E2BIG,
                       "policy filesystem.denyRead: carving the read rights of `%s` around its denied paths "
                       "needs more than %d Landlock rules (at `%s`); refusing rather than granting the whole "
                       "hierarchy",
                       x->rule, POLICY_CARVE_MAX_RULES, what);
  if (linux_landlock_allow_fd (x->ll, fd, what, rights, err) == 0)
    return 0;
  /* a bind-mounted pseudo file (nsfs, pipefs) takes no rule: it stays without any, as a denied
   * name does (the entry only gets less) */
  if (*err && (*err)->errnum == EBADFD)
    {
      log_debug ("policy carve: `%s` takes no Landlock rule (EBADFD): left without a right", what);
      asbx_error_free (err);
      return 0;
    }
  return -1;
}

/* record the carved directories that exist (dev, ino) */
static void
trie_stat (struct carve_ctx *x, const struct cnode *node, int fd)
{
  struct stat st;
  if (fstat (fd, &st) < 0 || !S_ISDIR (st.st_mode))
    return;
  x->dirs = xrealloc (x->dirs, (x->ndirs + 1) * sizeof (*x->dirs));
  x->dirs[x->ndirs++] = st;
  for (size_t i = 0; i < node->n; i++)
    if (!node->kids[i]->denied)
      {
        cleanup_close int k = openat (fd, node->kids[i]->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (k >= 0)
          trie_stat (x, node->kids[i], k);
      }
}

static bool
is_carved_dir (const struct carve_ctx *x, const struct stat *st)
{
  for (size_t i = 0; i < x->ndirs; i++)
    if (x->dirs[i].st_dev == st->st_dev && x->dirs[i].st_ino == st->st_ino)
      return true;
  return false;
}

static int carve_dir (struct carve_ctx *x, const struct cnode *node, int fd, const char *path, asbx_err_t *err);

/* Whether `name` differs from a denied child of node only in ASCII case. A directory that
 * ignores case (ext4 casefold, FUSE, CIFS, vfat) lists the denied file under the spelling it was
 * created with, and the carve gave `.SSH` every right as "another entry" while `.ssh` was
 * denied (outside attack 13). Such an entry gets no rule either: on a case-sensitive directory
 * that denies a distinct file too (fail closed), never grants one. */
static bool
denied_but_for_case (const struct cnode *node, const char *name)
{
  for (size_t i = 0; i < node->n; i++)
    if (node->kids[i]->denied && strcasecmp (node->kids[i]->name, name) == 0)
      return true;
  return false;
}

static int
carve_entry (struct carve_ctx *x, const struct cnode *node, int dfd, const char *path, const char *name,
             unsigned char type, asbx_err_t *err)
{
  const struct cnode *k = kid ((struct cnode *) node, name, strlen (name), false);
  struct stat st = { 0 };
  if (k && k->denied)
    return 0; /* the denied name: no rule at all */
  if (!k && denied_but_for_case (node, name))
    return 0; /* `.SSH` beside a denied `.ssh`: on a case-insensitive directory the same file */
  cleanup_free char *sub = xasprintf ("%s/%s", strcmp (path, "/") ? path : "", name);
  cleanup_close int cfd = openat (dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (cfd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == EPERM))
    return 0; /* gone since readdir, or in a directory the init may list but not search: no rule */
  /* a known non-directory needs no fstat (nothing but a file can be mounted over a file) */
  bool file = !k && type != DT_UNKNOWN && type != DT_DIR && type != DT_LNK;
  if (cfd >= 0 && file)
    st.st_mode = S_IFREG;
  if (cfd < 0 || (!file && fstat (cfd, &st) < 0))
    return asbx_error (err, errno, "policy filesystem.denyRead: carve `%s`: open `%s`", x->rule, sub);
  if (S_ISLNK (st.st_mode))
    return 0; /* the target has its rights where it lives */
  if (k)
    return S_ISDIR (st.st_mode) ? carve_dir (x, k, cfd, sub, err) : 0;
  if (S_ISDIR (st.st_mode) && is_carved_dir (x, &st))
    {
      log_debug ("policy carve: `%s` is a carved directory under another name: no rule", sub);
      return 0;
    }
  return carve_add (x, cfd, sub, S_ISDIR (st.st_mode) ? x->rights : x->rights & CARVE_FILE_RIGHTS, err);
}

static int
carve_dir (struct carve_ctx *x, const struct cnode *node, int fd, const char *path, asbx_err_t *err)
{
  struct dirent *de;
  if (carve_add (x, fd, path, x->rights & ASBX_LL_FS_READ_DIR, err) < 0)
    return -1;
  int dfd = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 && (errno == EACCES || errno == EPERM))
    {
      log_debug ("policy carve: `%s` cannot be listed (%s): no rights beneath it", path, strerror (errno));
      return 0;
    }
  if (dfd < 0)
    return asbx_error (err, errno, "policy filesystem.denyRead: carve `%s`: list `%s`", x->rule, path);
  cleanup_closedir DIR *d = fdopendir (dfd);
  if (!d)
    {
      close (dfd);
      return asbx_error (err, errno, "policy filesystem.denyRead: carve `%s`: list `%s`", x->rule, path);
    }
  while ((errno = 0, de = readdir (d)))
    {
      if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
        continue;
      if (de->d_type == DT_LNK)
        continue; /* no rule on a symlink (carve_entry checks again for DT_UNKNOWN) */
      if (carve_entry (x, node, dirfd (d), path, de->d_name, de->d_type, err) < 0)
        return -1;
    }
  if (errno)
    return asbx_error (err, errno, "policy filesystem.denyRead: carve `%s`: list `%s`", x->rule, path);
  return 0;
}

int
policy_carve_rule (struct policy_carve *c, struct linux_landlock *ll, int rootfd, const char *path, uint64_t rights,
                   bool *carved, asbx_err_t *err)
{
  struct cnode root = { 0 };
  struct carve_ctx x = { .c = c, .ll = ll, .rights = rights, .rule = path };
  int r = 0;

  *carved = false;
  cleanup_close int fd = ps_openat2 (rootfd, path, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd < 0)
    return errno == ENOENT ? 0 : asbx_error (err, errno, "open `%s`", path);
  cleanup_free char *real = resolve (rootfd, path, true, err);
  if (!real)
    return -1;
  for (size_t i = 0; i < c->n; i++)
    if (strcmp (c->denied[i], real) == 0)
      root.denied = true;
    else if (covers (real, c->denied[i]))
      trie_insert (&root, c->denied[i] + (strcmp (real, "/") ? strlen (real) + 1 : 1));
  if (root.denied || root.n == 0)
    {
      *carved = root.denied;
      trie_free (&root);
      return 0;
    }
  *carved = true;
  size_t before = c->rules;
  trie_stat (&x, &root, fd);
  r = carve_dir (&x, &root, fd, real, err);
  if (r == 0)
    log_debug ("policy carve: `%s`: %zu rules", path, c->rules - before);
  free (x.dirs);
  trie_free (&root);
  return r;
}

size_t
policy_carve_rules (const struct policy_carve *c)
{
  return c ? c->rules : 0;
}

void
policy_carve_free (struct policy_carve *c)
{
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++)
    free (c->denied[i]);
  for (size_t i = 0; i < c->nparents; i++)
    {
      free (c->parents[i].path);
      free (c->parents[i].real);
      for (size_t k = 0; k < c->parents[i].naliases; k++)
        free (c->parents[i].aliases[k]);
      free (c->parents[i].aliases);
    }
  free (c->parents);
  free (c->writable);
  mountinfo_free (c->mi, c->nmi);
  free (c->denied);
  free (c);
}
