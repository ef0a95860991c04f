/* workspace_meta.c - open a review workspace's directory and read its meta.json (yajl). */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/state.h"
#include "policy/policy.h"
#include "runtime/workspace_meta.h"
#include "runtime/workspace_walk.h"

#define META_MAX (1u << 20)

char *
ws_workspaces_dir (const char *config_path, asbx_err_t *err)
{
  return policy_workspaces_dir (config_path, err);
}

static int
get_u64 (yajl_val root, const char *key, const char *file, uint64_t *out, asbx_err_t *err)
{
  const char *path[] = { key, NULL };
  yajl_val v = yajl_tree_get (root, path, yajl_t_number);
  if (!v || !YAJL_IS_INTEGER (v) || YAJL_GET_INTEGER (v) < 0)
    return asbx_error (err, EINVAL, "%s: `%s`: expected a non-negative integer", file, key);
  *out = (uint64_t) YAJL_GET_INTEGER (v);
  return 0;
}

static const char *
get_str (yajl_val root, const char *key, const char *file, asbx_err_t *err)
{
  const char *path[] = { key, NULL };
  yajl_val v = yajl_tree_get (root, path, yajl_t_string);
  if (!v)
    asbx_error (err, EINVAL, "%s: `%s`: expected a string", file, key);
  return v ? YAJL_GET_STRING (v) : NULL;
}

int
ws_meta_parse (const char *text, const char *file, struct ws_meta *m, asbx_err_t *err)
{
  char ebuf[256] = "";
  yajl_val root = yajl_tree_parse (text, ebuf, sizeof ebuf);
  const char *s;
  uint64_t u = 0;
  int ret = -1;

  memset (m, 0, sizeof *m);
  if (!root || !YAJL_IS_OBJECT (root))
    {
      asbx_error (err, EINVAL, "%s: expected a JSON object%s%s", file, *ebuf ? ": " : "", ebuf);
      goto out;
    }
  if (!(s = get_str (root, "id", file, err)))
    goto out;
  m->id = xstrdup (s);
  if (!(s = get_str (root, "workspace", file, err)))
    goto out;
  if (*s != '/')
    {
      asbx_error (err, EINVAL, "%s: `workspace`: expected an absolute path, got `%s`", file, s);
      goto out;
    }
  m->workspace = xstrdup (s);
  if (get_u64 (root, "lowerDev", file, &u, err) < 0)
    goto out;
  m->lower_dev = (dev_t) u;
  if (get_u64 (root, "lowerIno", file, &u, err) < 0)
    goto out;
  m->lower_ino = (ino_t) u;
  if (get_u64 (root, "startedNs", file, &u, err) < 0)
    goto out;
  m->started_ns = (int64_t) u;
  if (!(s = get_str (root, "xattr", file, err)))
    goto out;
  if (strcmp (s, "trusted") != 0 && strcmp (s, "user") != 0)
    {
      asbx_error (err, EINVAL, "%s: `xattr`: expected \"trusted\" or \"user\", got `%s`", file, s);
      goto out;
    }
  snprintf (m->xattr, sizeof m->xattr, "%s", s);
  if (!(s = get_str (root, "state", file, err)))
    goto out;
  if (strcmp (s, "running") != 0 && strcmp (s, "stopped") != 0)
    {
      asbx_error (err, EINVAL, "%s: `state`: expected \"running\" or \"stopped\", got `%s`", file, s);
      goto out;
    }
  m->running = strcmp (s, "running") == 0;
  {
    const char *path[] = { "protect", NULL };
    yajl_val p = yajl_tree_get (root, path, yajl_t_any);
    if (p && !YAJL_IS_NULL (p))
      {
        if (!YAJL_IS_ARRAY (p))
          {
            asbx_error (err, EINVAL, "%s: `protect`: expected an array of paths", file);
            goto out;
          }
        m->protect = xmalloc0 ((YAJL_GET_ARRAY (p)->len + 1) * sizeof *m->protect);
        for (size_t i = 0; i < YAJL_GET_ARRAY (p)->len; i++)
          {
            yajl_val e = YAJL_GET_ARRAY (p)->values[i];
            const char *v = YAJL_IS_STRING (e) ? YAJL_GET_STRING (e) : NULL;
            size_t wl = strlen (m->workspace);
            /* relative to the workspace root; a host path inside the workspace is taken as well */
            if (v && strncmp (v, m->workspace, wl) == 0 && (v[wl] == '/' || v[wl] == '\0'))
              v += wl;
            char *c = v ? ws_clean_rel (v) : NULL;
            if (!c)
              {
                asbx_error (err, EINVAL, "%s: `protect[%zu]`: expected a path inside the workspace", file, i);
                goto out;
              }
            m->protect[m->protect_len++] = c;
          }
      }
  }
  ret = 0;
out:
  if (root)
    yajl_tree_free (root);
  if (ret < 0)
    ws_meta_free (m);
  return ret;
}

int
ws_handle_open (const char *config_path, const char *id, struct ws_handle *h, asbx_err_t *err)
{
  cleanup_free char *base = NULL;
  cleanup_free char *text = NULL;
  cleanup_free char *file = NULL;
  size_t len;

  memset (h, 0, sizeof *h);
  h->dirfd = h->upperfd = -1;
  if (asbx_id_validate (id, err) < 0)
    return -1;
  if (!(base = ws_workspaces_dir (config_path, err)))
    return -1;
  h->dir = xasprintf ("%s/%s", base, id);
  h->dirfd = open (h->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (h->dirfd < 0)
    {
      asbx_error (err, errno, "workspace `%s`: open %s", id, h->dir);
      if (errno == ENOENT)
        asbx_error_wrap (err, "no review workspace of that id (see `agentsbx workspace list`)");
      goto fail;
    }
  file = xasprintf ("%s/meta.json", h->dir);
  if (read_file_at (h->dirfd, "meta.json", META_MAX, &text, &len, err) < 0
      || ws_meta_parse (text, file, &h->meta, err) < 0)
    goto fail;
  /* trusted.* xattrs are invisible without CAP_SYS_ADMIN (xattr(7)): the whiteouts and opaque
   * marks would read as plain empty files and directories, a wrong diff - fail instead */
  if (strcmp (h->meta.xattr, "trusted") == 0 && geteuid () != 0)
    {
      asbx_error (err, EPERM, "workspace `%s`: %s: its overlay keeps trusted.* xattrs, which only root can read", id,
                  file);
      goto fail;
    }
  h->upperfd = openat (h->dirfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (h->upperfd < 0)
    {
      asbx_error (err, errno, "workspace `%s`: open %s/upper", id, h->dir);
      goto fail;
    }
  return 0;
fail:
  ws_handle_free (h);
  return -1;
}

static bool
snapshot_name_ok (const char *n)
{
  size_t l = strlen (n);
  if (l == 0 || l > 64 || n[0] == '.')
    return false;
  return strspn (n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == l;
}

int
ws_open_snapshot (const struct ws_handle *h, const char *name, asbx_err_t *err)
{
  if (!snapshot_name_ok (name))
    return asbx_error (err, EINVAL, "snapshot name `%s`: expected [A-Za-z0-9._-]{1,64}, not starting with '.'", name);
  cleanup_close int s = openat (h->dirfd, "snapshots", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_close int d = s < 0 ? -1 : openat (s, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int fd = d < 0 ? -1 : openat (d, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "workspace `%s`: snapshot `%s` (%s/snapshots/%s/upper)", h->meta.id, name, h->dir,
                       name);
  return fd;
}

int
ws_open_lower (const struct ws_handle *h, asbx_err_t *err)
{
  struct stat st;
  int fd = open (h->meta.workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "workspace `%s`: open the host workspace %s", h->meta.id, h->meta.workspace);
  if (fstat (fd, &st) < 0 || st.st_dev != h->meta.lower_dev || st.st_ino != h->meta.lower_ino)
    {
      close (fd);
      return asbx_error (err, ESTALE,
                         "workspace `%s`: %s is not the directory the run started on (lowerDev/lowerIno differ)",
                         h->meta.id, h->meta.workspace);
    }
  return fd;
}

void
ws_meta_free (struct ws_meta *m)
{
  free (m->id);
  free (m->workspace);
  for (size_t i = 0; i < m->protect_len; i++)
    free (m->protect[i]);
  free (m->protect);
  memset (m, 0, sizeof *m);
}

void
ws_handle_free (struct ws_handle *h)
{
  if (h->dirfd >= 0)
    close (h->dirfd);
  if (h->upperfd >= 0)
    close (h->upperfd);
  free (h->dir);
  ws_meta_free (&h->meta);
  h->dirfd = h->upperfd = -1;
  h->dir = NULL;
}
