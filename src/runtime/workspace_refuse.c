/* workspace_refuse.c - what `workspace apply` refuses and why (workspace_refuse.h): the types
 * and modes that must not reach a host workspace, the protected paths, and the conflicts with
 * host changes made since the run started. Host paths are looked at through the workspace's fd
 * (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, ps_openat2 and its fallback). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/workspace_refuse.h"

#define RESOLVE_HOST (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/* ".git/hooks" or ".git/config" as consecutive components anywhere in path (a nested
 * repository's are as dangerous as the top one's) */
static bool
git_protected (const char *path)
{
  const char *p = path;
  for (;;)
    {
      if (strncmp (p, ".git/", 5) == 0)
        {
          const char *r = p + 5;
          if ((strncmp (r, "hooks", 5) == 0 && (r[5] == '\0' || r[5] == '/'))
              || (strncmp (r, "config", 6) == 0 && (r[6] == '\0' || r[6] == '/')))
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

/* Is `path` or something above it a protected path (git's, meta.json "protect")? */
static const char *
protected_by (const char *path, const struct ws_meta *m)
{
  if (git_protected (path))
    return ".git/hooks and .git/config are never written";
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
          if (p >= 0 && fstat (p, &pst) == 0 && ws_ctime_ns (&pst) > m->started_ns)
            return xstrdup ("conflict: copied up from a host file that vanished on the host since the run started");
        }
      return NULL;
    }
  if (!r)
    return xstrdup ("conflict: the path vanished on the host since the run started");
  if (st.st_dev != c->old_dev || st.st_ino != c->old_ino)
    return xstrdup ("conflict: the host path was replaced since the diff was taken");
  if (ws_ctime_ns (&st) > m->started_ns)
    return xstrdup ("conflict: changed on the host since the run started");
  return NULL;
}

char *
ws_refusal (const struct ws_change *c, const struct ws_meta *m, int lowerfd, bool *conflict)
{
  const char *paths[2] = { c->path, c->op == WS_RENAMED ? c->old_path : NULL };
  mode_t md = c->mode;
  *conflict = false;

  for (size_t k = 0; k < 2 && paths[k]; k++)
    {
      if (git_protected (paths[k]))
        return xasprintf ("`%s` is protected (.git/hooks and .git/config are never written)", paths[k]);
      for (size_t i = 0; i < m->protect_len; i++)
        if (ws_path_under (paths[k], m->protect[i]))
          return xasprintf ("`%s` is under the protected path `%s` (meta.json \"protect\")", paths[k], m->protect[i]);
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
          if (!to)
            return xasprintf ("a symlink whose target `%s` leaves the workspace", c->target ? c->target : "");
          if ((why = protected_by (to, m)))
            return xasprintf ("a symlink to the protected `%s` (%s)", to, why);
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
