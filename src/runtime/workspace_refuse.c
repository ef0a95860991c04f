/* workspace_refuse.c - what `workspace apply` refuses and why (workspace_refuse.h): the types
 * and modes that must not reach a host workspace, the protected paths, and the conflicts with
 * host changes made since the run started. Host paths are looked at through the workspace's fd
 * (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, ps_openat2 and its fallback). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/workspace_diff.h"
#include "runtime/workspace_refuse.h"

#define RESOLVE_HOST (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/* What apply may write below a directory named ".git" (at any depth: a nested repository is as
 * dangerous as the top one): git's data, never its configuration. Git reads configuration and
 * runs programs from far more than .git/config and .git/hooks: commondir, gitdir and
 * worktrees/ point it at another (agent-written) git directory, config.worktree and
 * modules/<name>/config are config files, info/attributes and info/exclude change what it does
 * with files, objects/info/alternates points its object store elsewhere, the rebase-merge/ and
 * sequencer/ to-do lists hold `exec` lines. So the rule is an allow list: the object store
 * (objects/ but objects/info/), refs/, logs/, and the files git writes as a commit, merge, fetch
 * or rebase records its state (below); everything else under .git, and anything there that is
 * neither a regular file nor a directory, is refused. A submodule's git directory (modules/)
 * is refused as a whole: where in modules/a/b/... a git directory starts is ambiguous. */
static const char *const git_data_dirs[] = { "objects", "refs", "logs" };
/* Not on the list (outside attack 06): `index` (a list of paths git writes into the worktree at
 * the next `git checkout -- .`: `.git/hooks/post-checkout`, `sub/../../x`; the reviewer runs
 * `git reset` after applying, and git rebuilds it from the applied commit, checking every path),
 * FETCH_HEAD (free text after the hash; the reviewer does not need the agent's fetch state). */
static const char *const git_data_files[] = { "HEAD",        "ORIG_HEAD",        "MERGE_HEAD",  "MERGE_MSG",
                                              "MERGE_MODE",  "CHERRY_PICK_HEAD", "REVERT_HEAD", "COMMIT_EDITMSG",
                                              "packed-refs", "shallow" };

#define GIT_RULE                                                                                                       \
  "below a `.git` directory only git's data is written: objects/ (not objects/info/), refs/, logs/, HEAD, "            \
  "ORIG_HEAD, MERGE_HEAD, CHERRY_PICK_HEAD, REVERT_HEAD, MERGE_MSG, MERGE_MODE, COMMIT_EDITMSG, packed-refs, shallow " \
  "(never index: run `git reset` after applying)"

/* The names git takes for a repository's own files when it looks at a directory (setup.c
 * is_git_directory: a valid HEAD; read_gitfile: a `.git` file; commondir, gitdir and
 * config.worktree redirect or configure it). Outside a `.git` directory an agent-written entry
 * with one of these names is refused (ws_refusal): with no agent-written HEAD there, no
 * directory can become a repository, whatever the upper holds at any moment. Compared
 * case-insensitively: the reviewer's checkout may live on a case-insensitive file system. */
static const char *const git_markers[] = { "HEAD", "commondir", "gitdir", "config.worktree", ".git" };

bool
ws_git_marker (const char *name)
{
  for (size_t i = 0; i < sizeof git_markers / sizeof *git_markers; i++)
    if (strcasecmp (name, git_markers[i]) == 0)
      return true;
  return false;
}

/* Is path below a component named exactly ".git" (git_refused's rules apply there)? */
bool
ws_below_dot_git (const char *path)
{
  if (!path)
    return false;
  for (const char *p = path;;)
    {
      if (strncmp (p, ".git/", 5) == 0)
        return true;
      const char *slash = strchr (p, '/');
      if (!slash)
        return false;
      p = slash + 1;
    }
}

/* Is rest (what follows "/.git/" or ".git/") git's data by the allow list above? is_dir: the
 * entry is a directory (a data directory itself or one below it) */
static bool
git_data (const char *rest, bool is_dir)
{
  size_t l = strcspn (rest, "/");
  for (size_t i = 0; i < sizeof git_data_dirs / sizeof *git_data_dirs; i++)
    if (strlen (git_data_dirs[i]) == l && strncmp (rest, git_data_dirs[i], l) == 0)
      {
        if (rest[l] == '\0')
          return is_dir;
        return !(i == 0 && strncmp (rest + l, "/info", 5) == 0 && (rest[l + 5] == '\0' || rest[l + 5] == '/'));
      }
  if (rest[l] != '\0' || is_dir)
    return false;
  for (size_t i = 0; i < sizeof git_data_files / sizeof *git_data_files; i++)
    if (strcmp (rest, git_data_files[i]) == 0)
      return true;
  return false;
}

enum ws_git_ref
ws_git_ref_kind (const char *path)
{
  if (!path)
    return WS_GIT_NOT_REF;
  for (const char *p = path;;)
    {
      if (strncmp (p, ".git/", 5) == 0)
        {
          const char *rest = p + 5;
          size_t l = strlen (rest);
          if (strncmp (rest, "refs/", 5) == 0)
            return WS_GIT_REF;
          if (!strchr (rest, '/') && (strcmp (rest, "HEAD") == 0 || (l > 5 && strcmp (rest + l - 5, "_HEAD") == 0)))
            return WS_GIT_REF;
          if (strcmp (rest, "packed-refs") == 0)
            return WS_GIT_PACKED_REFS;
        }
      const char *slash = strchr (p, '/');
      if (!slash)
        return WS_GIT_NOT_REF;
      p = slash + 1;
    }
}

/* Is name[0..n) a full ref name git's check-ref-format accepts (refs.c check_refname_component):
 * components not empty, not starting with '.', not ending with ".lock"; no "..", no "@{", no
 * control byte, space, DEL, ~ ^ : ? * [ \; not ending with '.' or '/' */
static bool
refname_ok (const char *name, size_t n)
{
  size_t comp = 0; /* length of the current component */
  if (n == 0 || name[n - 1] == '.' || name[n - 1] == '/' || (n == 1 && name[0] == '@'))
    return false;
  for (size_t i = 0; i < n; i++)
    {
      unsigned char ch = (unsigned char) name[i];
      if (ch < 0x20 || ch == 0x7f || strchr (" ~^:?*[\\", ch))
        return false;
      if (ch == '.' && (comp == 0 || (i > 0 && name[i - 1] == '.')))
        return false;
      if (ch == '{' && i > 0 && name[i - 1] == '@')
        return false;
      if (ch == '/')
        {
          if (comp == 0 || (comp >= 5 && strncmp (name + i - 5, ".lock", 5) == 0))
            return false;
          comp = 0;
          continue;
        }
      comp++;
    }
  return !(comp >= 5 && strncmp (name + n - 5, ".lock", 5) == 0);
}

/* Are b[0..n) lowercase hex digits, 40 (SHA-1) or 64 (SHA-256) of them? */
static bool
hex_oid (const char *b, size_t n)
{
  if (n != 40 && n != 64)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f')))
      return false;
  return true;
}

/* One ref file's line (without its newline): `ref: refs/NAME` or an object id */
static bool
ref_line_ok (const char *b, size_t n)
{
  if (n > 10 && strncmp (b, "ref: refs/", 10) == 0)
    return refname_ok (b + 5, n - 5);
  return hex_oid (b, n);
}

char *
ws_git_ref_invalid (enum ws_git_ref kind, const char *buf, size_t n)
{
  if (kind == WS_GIT_NOT_REF)
    return NULL;
  if (kind == WS_GIT_REF)
    {
      if (n == 0 || buf[n - 1] != '\n' || memchr (buf, '\n', n - 1) || !ref_line_ok (buf, n - 1))
        return xstrdup ("its content is not a ref git accepts (`ref: refs/NAME` or a 40 or 64 digit lowercase hex "
                        "object id, and a newline)");
      return NULL;
    }
  if (n && buf[n - 1] != '\n')
    return xstrdup ("packed-refs: its last line has no newline");
  size_t lineno = 0;
  for (size_t i = 0; i < n; lineno++)
    {
      const char *l = buf + i, *e = memchr (l, '\n', n - i);
      size_t len = (size_t) (e - l);
      const char *sp = memchr (l, ' ', len);
      i += len + 1;
      if (len && l[0] == '#' && !memchr (l, '\0', len))
        continue;
      if (len && l[0] == '^' && hex_oid (l + 1, len - 1))
        continue;
      if (sp && hex_oid (l, (size_t) (sp - l)) && (size_t) (l + len - sp) > 6 && strncmp (sp + 1, "refs/", 5) == 0
          && refname_ok (sp + 1, (size_t) (l + len - sp - 1)))
        continue;
      return xasprintf ("packed-refs line %zu is none of `# comment`, `<hex> refs/NAME`, `^<hex>`", lineno + 1);
    }
  return NULL;
}

int
ws_read_small (int fd, size_t max, char **buf, size_t *len)
{
  size_t cap = 4096, n = 0;
  char *b = xmalloc (cap + 1);
  for (;;)
    {
      if (n == cap)
        {
          if (cap > max)
            {
              free (b);
              errno = EFBIG;
              return -1;
            }
          cap *= 2;
          b = xrealloc (b, cap + 1);
        }
      ssize_t r = read (fd, b + n, cap - n);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        {
          int e = errno;
          free (b);
          errno = e;
          return -1;
        }
      if (r == 0)
        break;
      n += (size_t) r;
    }
  if (n > max)
    {
      free (b);
      errno = EFBIG;
      return -1;
    }
  b[n] = '\0';
  *buf = b;
  *len = n;
  return 0;
}

size_t
ws_git_ref_max (enum ws_git_ref kind)
{
  return kind == WS_GIT_PACKED_REFS ? (size_t) 64 << 20 : 4096;
}

/* The content rule for a ref file change (ws_git_ref_kind), read from the upper: NULL or a heap
 * reason. apply validates again the bytes it copies (stage_file): this is the early report. */
static char *
ref_content_refused (const struct ws_change *c, int upperfd)
{
  enum ws_git_ref kind = ws_git_ref_kind (c->path);
  cleanup_free char *buf = NULL;
  size_t n;
  if (kind == WS_GIT_NOT_REF)
    return NULL;
  cleanup_close int fd = ws_open_rel (upperfd, c->path);
  if (fd < 0 || ws_read_small (fd, ws_git_ref_max (kind), &buf, &n) < 0)
    return xasprintf ("cannot read it to check it is a ref: %s", strerror (errno));
  return ws_git_ref_invalid (kind, buf, n);
}

/* Is path below a component named ".git" and not git's data (git_data)? mode: the entry's type
 * (0 for a deletion or a symlink's target: only the name counts; a deleted or pointed-at
 * directory is judged by its name as a directory would be) */
static bool
git_refused (const char *path, mode_t mode)
{
  const char *p = path;
  for (;;)
    {
      if (strncmp (p, ".git/", 5) == 0)
        {
          const char *rest = p + 5;
          /* the entry itself is the last component: a directory or a file as mode says */
          if (mode && !S_ISDIR (mode) && !S_ISREG (mode))
            return true;
          if (!git_data (rest, mode ? S_ISDIR (mode) : false) && !(mode == 0 && git_data (rest, true)))
            return true;
        }
      const char *slash = strchr (p, '/');
      if (!slash)
        return false;
      p = slash + 1;
    }
}

/* Where symlink `target`, placed at `path` (relative), points, lexically: a heap relative path
 * ("" = the root), or NULL when it is absolute, empty or ".." climbs above the root. */
static char *
link_resolve (const char *path, const char *target)
{
  if (!path || !target || *target == '/' || *target == '\0')
    return NULL;
  const char *slash = strrchr (path, '/');
  cleanup_free char *joined = slash ? xasprintf ("%.*s/%s", (int) (slash - path), path, target) : xstrdup (target);
  char *out = xmalloc (strlen (joined) + 1);
  size_t o = 0;
  const char *p = joined;
  while (*p)
    {
      const char *e = strchrnul (p, '/');
      size_t l = (size_t) (e - p);
      if (l == 2 && p[0] == '.' && p[1] == '.')
        {
          if (o == 0)
            {
              free (out);
              return NULL;
            }
          while (o > 0 && out[o - 1] != '/')
            o--;
          if (o > 0)
            o--; /* the '/' before the dropped component */
        }
      else if (l > 0 && !(l == 1 && p[0] == '.'))
        {
          if (o)
            out[o++] = '/';
          memcpy (out + o, p, l);
          o += l;
        }
      p = *e ? e + 1 : e;
    }
  out[o] = '\0';
  return out;
}

/* Is rel (walker path, "" = the root) a symlink below dirfd? 1 yes, 0 no or absent, -1 when a
 * directory on the way is a symlink (ELOOP/EXDEV) or it cannot be looked at */
static int
is_symlink_at (int dirfd, const char *rel)
{
  const char *base;
  struct stat st;
  if (dirfd < 0 || *rel == '\0')
    return 0;
  cleanup_close int p = ws_host_parent (dirfd, rel, &base);
  if (p < 0)
    return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
  if (fstatat (p, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
  return S_ISLNK (st.st_mode) ? 1 : 0;
}

/* The kernel resolves a symlink's target component by component, following each symlink on the
 * way, and ".." after a symlink climbs from where that symlink points, not lexically: `s1 ->
 * s2/../../..` with `s2 -> ../..` stays inside on paper and leaves the workspace when resolved.
 * So (decision, conservative): walking `target` lexically from the directory of `path`, no
 * component but the last may be a symlink, neither in the upper (upperfd) nor on the host
 * (lowerfd); the last may be one in the upper (a change, checked by its own rules) but not a
 * host symlink the upper leaves in place (nothing checked it). Returns NULL when that holds,
 * else a heap reason (caller frees). */
static char *
link_through_symlink (const char *path, const char *target, int upperfd, int lowerfd)
{
  const char *slash = strrchr (path, '/');
  size_t cap = strlen (path) + strlen (target) + 2, o = slash ? (size_t) (slash - path) : 0;
  cleanup_free char *cur = xmalloc (cap);
  memcpy (cur, path, o);
  cur[o] = '\0';
  bool named = false; /* a name component seen: a ".." after it is refused */
  for (const char *p = target; *p;)
    {
      const char *e = strchrnul (p, '/');
      size_t l = (size_t) (e - p);
      bool last = *e == '\0';
      if (l == 2 && p[0] == '.' && p[1] == '.')
        {
          /* `x/..` means "back from where x points": when x is absent now and a link later
           * (another session's apply, outside retest), `s1 -> s2/../../../..` left the
           * workspace. Targets of the form (../)*name/name... compose: a chain of links each
           * pointing inside from its own directory stays inside */
          if (named)
            return xstrdup ("has `..` after a name (`x/..`): where it points changes when `x` becomes a "
                            "symlink");
          if (o == 0)
            return xstrdup ("climbs above the workspace");
          while (o > 0 && cur[o - 1] != '/')
            o--;
          if (o > 0)
            o--;
          cur[o] = '\0';
        }
      else if (l > 0 && !(l == 1 && p[0] == '.'))
        {
          named = true;
          if (o)
            cur[o++] = '/';
          memcpy (cur + o, p, l);
          o += l;
          cur[o] = '\0';
          int up = is_symlink_at (upperfd, cur), host = is_symlink_at (lowerfd, cur);
          cleanup_free char *ec = ws_escape (cur);
          if (up < 0 || host < 0)
            return xasprintf ("cannot look at `%s` on its way (a directory there is a symlink)", ec);
          if (!last && (up || host))
            return xasprintf ("goes through the symlink `%s` (%s)", ec, up ? "agent's" : "host's");
          if (last && host && !up)
            {
              struct stat st;
              const char *base;
              cleanup_close int pd = ws_host_parent (upperfd, cur, &base);
              /* the upper replaces the host's symlink with something else: fine */
              if (pd < 0 || fstatat (pd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return xasprintf ("ends at the host's symlink `%s`", ec);
            }
        }
      p = last ? e : e + 1;
    }
  return NULL;
}

/* Is `path` or something above it a protected path (git's, meta.json "protect")? */
static const char *
protected_by (const char *path, const struct ws_meta *m)
{
  if (git_refused (path, 0))
    return GIT_RULE;
  for (size_t i = 0; i < m->protect_len; i++)
    if (ws_path_under (path, m->protect[i]))
      return "a meta.json \"protect\" path";
  return NULL;
}

/* the last component */
static const char *
base_name (const char *path)
{
  const char *s = path ? strrchr (path, '/') : NULL;
  return s ? s + 1 : path ? path : "";
}

int
ws_host_parent (int lowerfd, const char *rel, const char **base)
{
  if (!rel)
    {
      errno = EINVAL;
      return -1;
    }
  const char *slash = strrchr (rel, '/');
  cleanup_free char *dir = slash ? xasprintf ("%.*s", (int) (slash - rel), rel) : xstrdup (".");
  *base = slash ? slash + 1 : rel;
  return ps_openat2 (lowerfd, dir, O_RDONLY | O_DIRECTORY, 0, RESOLVE_HOST);
}

/* The host's entry at rel now: 1 present (st filled), 0 absent, -1 with errno (ELOOP: a symlink
 * on the way) */
static int
host_stat (int lowerfd, const char *rel, struct stat *st)
{
  const char *base;
  cleanup_close int p = ws_host_parent (lowerfd, rel, &base);
  if (p < 0)
    return errno == ENOENT ? 0 : -1;
  if (fstatat (p, base, st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : -1;
  return 1;
}

int64_t
ws_ctime_ns (const struct stat *st)
{
  return (int64_t) st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

/* The conflict reason for the host side of `rel`, which the walk saw as `c`'s old side when
 * had_old; NULL when there is none */
static char *
host_conflict (const struct ws_meta *m, int lowerfd, const char *rel, const struct ws_change *c, bool had_old)
{
  struct stat st;
  int r = host_stat (lowerfd, rel, &st);
  if (r < 0)
    return errno == ELOOP || errno == EXDEV ? xstrdup ("a directory on the host path is a symlink")
                                            : xasprintf ("cannot look at the host path: %s", strerror (errno));
  if (!had_old)
    {
      if (r)
        return xstrdup ("conflict: the path appeared on the host since the run started");
      /* copied up from a host file, absent on the host now: moved inside the container (the
       * host directory is as it was), or removed on the host (its directory changed) */
      if (c->origin)
        {
          const char *base;
          struct stat pst;
          cleanup_close int p = ws_host_parent (lowerfd, rel, &base);
          if (p >= 0 && fstat (p, &pst) == 0 && ws_ctime_ns (&pst) > (int64_t) m->started_ns)
            return xstrdup ("conflict: copied up from a host file that vanished on the host since the run started");
        }
      return NULL;
    }
  if (!r)
    return xstrdup ("conflict: the path vanished on the host since the run started");
  if (st.st_dev != c->old_dev || st.st_ino != c->old_ino)
    return xstrdup ("conflict: the host path was replaced since the diff was taken");
  if (ws_ctime_ns (&st) > (int64_t) m->started_ns)
    return xstrdup ("conflict: changed on the host since the run started");
  return NULL;
}

/* Does rel (a walker path) exist below dirfd, in either layer's sense: any type, a whiteout
 * included (conservative: a whited-out HEAD still counts) */
static bool
exists_at (int dirfd, const char *rel)
{
  const char *base;
  struct stat st;
  if (dirfd < 0)
    return false;
  cleanup_close int p = ws_host_parent (dirfd, rel, &base);
  return p >= 0 && fstatat (p, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Does directory dir ("" = the root) look like a git directory to git (is_git_directory():
 * HEAD and objects/ and refs/), in the upper or on the host? Git uses such a directory as a
 * repository when run inside it whatever its name (outside retest: `src/HEAD`, `src/objects`,
 * `src/refs` and a `src/config` with core.fsmonitor ran the agent's command on the host's `git
 * status` in src/; a bare `remote.git/hooks/post-receive` ran on the host's push). */
static bool
looks_like_gitdir (int upperfd, int lowerfd, const char *dir)
{
  static const char *const need[] = { "HEAD", "objects", "refs" };
  for (size_t i = 0; i < sizeof need / sizeof *need; i++)
    {
      cleanup_free char *rel = *dir ? xasprintf ("%s/%s", dir, need[i]) : xstrdup (need[i]);
      if (!exists_at (upperfd, rel) && !exists_at (lowerfd, rel))
        return false;
    }
  return true;
}

/* The git-directory rule for directories not named `.git`: below one that looks like a git
 * directory (looks_like_gitdir) only git's data is written (git_data), as below `.git`; and
 * no change may make a directory look like one that did not on the host (a repository outside
 * `.git` the agent made: HEAD, objects, refs, its config and hooks its own). NULL, or a heap
 * reason. */
static char *
gitdir_refused (const char *path, mode_t mode, int upperfd, int lowerfd)
{
  cleanup_free char *dir = xstrdup (path);
  char *cut = dir + strlen (dir);
  for (;;)
    {
      /* dir = an ancestor of path ("" = the root), rest = what follows it */
      while (cut > dir && *cut != '/')
        cut--;
      *cut = '\0';
      const char *rest = path + (cut == dir ? 0 : (size_t) (cut - dir) + 1);
      const char *name = strrchr (dir, '/') ? strrchr (dir, '/') + 1 : dir;
      if (strcmp (name, ".git") != 0 && looks_like_gitdir (upperfd, lowerfd, dir))
        {
          cleanup_free char *e = ws_escape (*dir ? dir : ".");
          if (!looks_like_gitdir (-1, lowerfd, dir))
            return xasprintf ("it makes `%s` a git repository (HEAD, objects/, refs/): git would use the agent's "
                              "config and hooks there",
                              e);
          bool is_dir = mode ? S_ISDIR (mode) : false;
          if ((mode && !S_ISDIR (mode) && !S_ISREG (mode))
              || (!git_data (rest, is_dir) && !(mode == 0 && git_data (rest, true))))
            return xasprintf ("it lies in `%s`, a git repository (HEAD, objects/, refs/): %s", e,
                              "only git's data is written there (objects/, refs/, logs/, HEAD...)");
        }
      if (cut == dir)
        return NULL;
    }
}

bool
ws_in_host_repository (const char *path, int lowerfd)
{
  if (ws_below_dot_git (path))
    return true;
  cleanup_free char *dir = xstrdup (path);
  char *cut = dir + strlen (dir);
  while (cut > dir)
    {
      while (cut > dir && *cut != '/')
        cut--;
      *cut = '\0';
      if (looks_like_gitdir (-1, lowerfd, dir))
        return true;
    }
  return false;
}

char *
ws_refusal (const struct ws_change *c, const struct ws_meta *m, int upperfd, int lowerfd, bool *conflict)
{
  const char *paths[2] = { c->path, c->op == WS_RENAMED ? c->old_path : NULL };
  mode_t md = c->mode;
  *conflict = false;
  if (!c->path)
    return xstrdup ("a change without a path"); /* never made by ws_walk */

  for (size_t k = 0; k < 2 && paths[k]; k++)
    {
      if (git_refused (paths[k], k == 0 && c->op != WS_DELETED ? md : 0))
        {
          cleanup_free char *e = ws_escape (paths[k]);
          return xasprintf ("`%s` is protected: %s", e, GIT_RULE);
        }
      char *why = gitdir_refused (paths[k], k == 0 && c->op != WS_DELETED ? md : 0, upperfd, lowerfd);
      if (why)
        {
          cleanup_free char *e = ws_escape (paths[k]);
          cleanup_free char *w = why;
          return xasprintf ("`%s`: %s", e, w);
        }
      for (size_t i = 0; i < m->protect_len; i++)
        if (ws_path_under (paths[k], m->protect[i]))
          {
            cleanup_free char *e = ws_escape (paths[k]);
            cleanup_free char *ep = ws_escape (m->protect[i]);
            return xasprintf ("`%s` is under the protected path `%s` (meta.json \"protect\")", e, ep);
          }
    }
  if (c->op != WS_DELETED && !ws_below_dot_git (c->path) && ws_git_marker (base_name (c->path)))
    {
      /* the workspace's own top-level .git directory stays (its mode may change) */
      bool top_git = strcmp (c->path, ".git") == 0 && S_ISDIR (md) && c->has_old && S_ISDIR (c->old_mode);
      /* a `.git` that is not a directory has its own reason below */
      bool dot_git_file = strcmp (base_name (c->path), ".git") == 0 && !S_ISDIR (md);
      if (!top_git && !dot_git_file)
        {
          cleanup_free char *e = ws_escape (base_name (c->path));
          return xasprintf (
              "an entry named `%s` outside `.git` (HEAD, commondir, gitdir, config.worktree, .git, in any "
              "case): git would take its directory for a repository with the agent's config and hooks",
              e);
        }
    }
  if (c->op != WS_DELETED && S_ISLNK (md) && c->target)
    {
      cleanup_free char *t = xstrdup (c->target);
      /* the name the target ends at: trailing "/" and "/." dropped (outside attack 09: `.git/.`
       * passed as a target ending in "."); a target ending in ".." is refused elsewhere */
      for (bool again = true; again;)
        {
          size_t l = strlen (t);
          again = false;
          if (l > 1 && t[l - 1] == '/')
            t[l - 1] = '\0', again = true;
          else if (l > 2 && t[l - 1] == '.' && t[l - 2] == '/')
            t[l - 2] = '\0', again = true;
        }
      if (ws_git_marker (base_name (t)))
        {
          cleanup_free char *et = ws_escape (c->target);
          return xasprintf ("a symlink whose target `%s` ends in a git repository marker (HEAD, commondir, gitdir, "
                            "config.worktree, .git)",
                            et);
        }
    }
  if (c->op != WS_DELETED && c->op != WS_MODE && S_ISREG (md))
    {
      char *why = ref_content_refused (c, upperfd);
      if (why)
        return why;
    }
  if (c->op != WS_DELETED)
    {
      /* a .git file ("gitdir: DIR") or symlink would point git at a directory the agent wrote,
       * hooks and config included */
      if (strcmp (base_name (c->path), ".git") == 0 && !S_ISDIR (md))
        return xasprintf ("a `.git` that is not a directory (%s): git would follow it to agent-written hooks",
                          ws_type_name (md));
      if (S_ISLNK (md))
        {
          cleanup_free char *to = link_resolve (c->path, c->target);
          const char *why;
          cleanup_free char *et = ws_escape (c->target ? c->target : "");
          if (!to)
            return xasprintf ("a symlink whose target `%s` leaves the workspace", et);
          cleanup_free char *via = link_through_symlink (c->path, c->target, upperfd, lowerfd);
          if (via)
            return xasprintf ("a symlink whose target `%s` %s: resolved through links it could leave the workspace", et,
                              via);
          if ((why = protected_by (to, m)))
            {
              cleanup_free char *eto = ws_escape (to);
              return xasprintf ("a symlink to the protected `%s` (%s)", eto, why);
            }
        }
      if (S_ISREG (md) && c->nlink > 1)
        return xasprintf ("a hard link (%lu links in the upper layer)", (unsigned long) c->nlink);
      if (S_ISCHR (md) || S_ISBLK (md))
        return xstrdup ("a device node");
      if (S_ISFIFO (md))
        return xstrdup ("a fifo");
      if (S_ISSOCK (md))
        return xstrdup ("a socket");
      if (!S_ISLNK (md) && (md & (S_ISUID | S_ISGID | S_ISVTX)))
        return xasprintf ("mode %04o has setuid, setgid or sticky bits", md & 07777);
      if (!S_ISLNK (md) && (md & S_IWOTH))
        return xasprintf ("mode %04o is world-writable", md & 07777);
    }
  /* a rename's new path must be absent on the host; its source is checked by its own deletion
   * entry, which stays in the list */
  char *why = host_conflict (m, lowerfd, c->path, c, c->has_old && c->op != WS_RENAMED);
  if (why)
    *conflict = strncmp (why, "conflict", 8) == 0;
  return why;
}
