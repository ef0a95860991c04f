/* workspace_meta.c - a review workspace's meta.json, the one reader (yajl) and writer, and the
 * handle the change engine opens; see the header. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "libocispec/oci_json.h"
#include "policy/policy.h"
#include "runtime/state.h"
#include "runtime/workspace_meta.h"
#include "runtime/workspace_walk.h"

#define META_MAX (1u << 20)
#define META_TMP "meta.json.tmp"

char *
ws_workspaces_dir (const char *config_path, asbx_err_t *err)
{
  return policy_workspaces_dir (config_path, err);
}

void
ws_meta_clear (struct ws_meta *m)
{
  free (m->id);
  free (m->workspace);
  free (m->created);
  free (m->xattr);
  free (m->state);
  asbx_strv_free (m->snapshots);
  free (m->image);
  free (m->seed_repo);
  free (m->seed_rev);
  asbx_strv_free (m->protect);
  memset (m, 0, sizeof *m);
}

static int
meta_parse (struct oci_ctx *c, yajl_val t, struct ws_meta *m)
{
  yajl_val seed = NULL;
  int r;

  OCI_TRY (oci_required (c, "id", oci_get_string (c, t, "id", &m->id)));
  OCI_TRY (oci_required (c, "workspace", oci_get_string (c, t, "workspace", &m->workspace)));
  OCI_TRY (oci_required (c, "lowerDev", oci_get_u64 (c, t, "lowerDev", &m->lower_dev)));
  OCI_TRY (oci_required (c, "lowerIno", oci_get_u64 (c, t, "lowerIno", &m->lower_ino)));
  OCI_TRY (oci_required (c, "created", oci_get_string (c, t, "created", &m->created)));
  OCI_TRY (oci_required (c, "startedNs", oci_get_u64 (c, t, "startedNs", &m->started_ns)));
  OCI_TRY (oci_required (c, "xattr", oci_get_string (c, t, "xattr", &m->xattr)));
  OCI_TRY (oci_required (c, "state", oci_get_string (c, t, "state", &m->state)));
  OCI_TRY (oci_get_strv (c, t, "snapshots", &m->snapshots, &m->snapshots_len));
  OCI_TRY (oci_get_string (c, t, "image", &m->image));
  OCI_TRY (oci_get_strv (c, t, "protect", &m->protect, &m->protect_len));
  OCI_TRY (r = oci_get_object (c, t, "seed", &seed));
  if (r > 0)
    {
      size_t mark = oci_ctx_push_key (c, "seed");
      r = oci_required (c, "repo", oci_get_string (c, seed, "repo", &m->seed_repo));
      if (r >= 0)
        r = oci_required (c, "rev", oci_get_string (c, seed, "rev", &m->seed_rev));
      oci_ctx_pop (c, mark);
      OCI_TRY (r);
    }
  if (m->workspace[0] != '/')
    return oci_fail_key (c, "workspace", "expected an absolute path, got `%s`", m->workspace);
  /* protect: relative to the workspace root, cleaned (ws_clean_rel); a host path inside the
   * workspace is taken as well (what `apply` compares with the changes' paths) */
  for (size_t i = 0; i < m->protect_len; i++)
    {
      const char *v = m->protect[i];
      size_t wl = strlen (m->workspace);
      if (strncmp (v, m->workspace, wl) == 0 && (v[wl] == '/' || v[wl] == '\0'))
        v += wl;
      char *clean = ws_clean_rel (v);
      if (!clean)
        {
          size_t mark = oci_ctx_push_key (c, "protect");
          oci_ctx_push_index (c, i);
          r = oci_fail (c, "expected a path inside the workspace, got `%s`", m->protect[i]);
          oci_ctx_pop (c, mark);
          return r;
        }
      free (m->protect[i]);
      m->protect[i] = clean;
    }
  if (strcmp (m->xattr, "trusted") != 0 && strcmp (m->xattr, "user") != 0)
    return oci_fail_key (c, "xattr", "expected \"trusted\" or \"user\"");
  if (strcmp (m->state, "running") != 0 && strcmp (m->state, "stopped") != 0)
    return oci_fail_key (c, "state", "expected \"running\" or \"stopped\"");
  if (m->snapshots == NULL)
    m->snapshots = xmalloc0 (sizeof (char *));
  if (m->protect == NULL)
    m->protect = xmalloc0 (sizeof (char *));
  return 0;
}

/* parse `text` (len bytes), `name` in messages */
static int
meta_load (const char *text, size_t len, const char *name, struct ws_meta *m, asbx_err_t *err)
{
  struct oci_ctx c;
  yajl_val t;
  int r = -1;

  memset (m, 0, sizeof *m);
  oci_ctx_init (&c, name, err);
  t = oci_json_load (&c, text, len);
  if (t)
    {
      r = meta_parse (&c, t, m);
      yajl_tree_free (t);
    }
  oci_ctx_release (&c);
  if (r < 0)
    {
      ws_meta_clear (m);
      if (*err)
        (*err)->errnum = EINVAL;
    }
  return r;
}

int
ws_meta_parse (const char *text, const char *file, struct ws_meta *m, asbx_err_t *err)
{
  return meta_load (text, strlen (text), file, m, err);
}

int
ws_meta_read (int dirfd, const char *where, struct ws_meta *m, asbx_err_t *err)
{
  cleanup_free char *text = NULL, *name = xasprintf ("%s/" WS_META, where);
  size_t len = 0;

  memset (m, 0, sizeof *m);
  if (read_file_at (dirfd, WS_META, META_MAX, &text, &len, err) < 0)
    return asbx_error_wrap (err, "workspace `%s`", where);
  return meta_load (text, len, name, m, err);
}

static void
gen_strv (yajl_gen g, const char *key, char *const *v, size_t n)
{
  json_gen_str (g, key);
  yajl_gen_array_open (g);
  for (size_t i = 0; i < n; i++)
    json_gen_str (g, v[i]);
  yajl_gen_array_close (g);
}

static void
gen_u64 (yajl_gen g, const char *key, uint64_t v)
{
  char num[24];
  json_gen_str (g, key);
  snprintf (num, sizeof num, "%llu", (unsigned long long) v);
  yajl_gen_number (g, num, strlen (num)); /* a uint64 may exceed long long */
}

static char *
meta_json (const struct ws_meta *m)
{
  yajl_gen g = json_gen_new (JSON_GEN_PRETTY);
  yajl_gen_map_open (g);
  json_gen_kv (g, "id", m->id);
  json_gen_kv (g, "workspace", m->workspace);
  gen_u64 (g, "lowerDev", m->lower_dev);
  gen_u64 (g, "lowerIno", m->lower_ino);
  json_gen_kv (g, "created", m->created);
  gen_u64 (g, "startedNs", m->started_ns);
  json_gen_kv (g, "xattr", m->xattr);
  json_gen_kv (g, "state", m->state);
  gen_strv (g, "snapshots", m->snapshots, m->snapshots_len);
  json_gen_str (g, "image");
  if (m->image)
    json_gen_str (g, m->image);
  else
    yajl_gen_null (g);
  json_gen_str (g, "seed");
  if (m->seed_repo)
    {
      yajl_gen_map_open (g);
      json_gen_kv (g, "repo", m->seed_repo);
      json_gen_kv (g, "rev", m->seed_rev);
      yajl_gen_map_close (g);
    }
  else
    yajl_gen_null (g);
  gen_strv (g, "protect", m->protect, m->protect_len);
  yajl_gen_map_close (g);
  return json_gen_finish (g, true, NULL);
}

int
ws_meta_write (int dirfd, const char *where, const struct ws_meta *m, asbx_err_t *err)
{
  cleanup_free char *text = meta_json (m);
  cleanup_close int fd = -1;

  if (unlinkat (dirfd, META_TMP, 0) < 0 && errno != ENOENT)
    return asbx_error (err, errno, "workspace `%s`: remove a stale %s", where, META_TMP);
  fd = openat (dirfd, META_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || write_all (fd, text, strlen (text)) < 0 || fsync (fd) < 0)
    {
      int e = errno;
      unlinkat (dirfd, META_TMP, 0);
      return asbx_error (err, e, "workspace `%s`: write %s", where, META_TMP);
    }
  if (renameat (dirfd, META_TMP, dirfd, WS_META) < 0)
    {
      int e = errno;
      unlinkat (dirfd, META_TMP, 0);
      return asbx_error (err, e, "workspace `%s`: rename %s to %s", where, META_TMP, WS_META);
    }
  return 0;
}

int
ws_handle_open (const char *config_path, const char *id, struct ws_handle *h, asbx_err_t *err)
{
  cleanup_free char *base = NULL;
  cleanup_free char *file = NULL;

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
  file = xasprintf ("%s/" WS_META, h->dir);
  if (ws_meta_read (h->dirfd, h->dir, &h->meta, err) < 0)
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
ws_handle_free (struct ws_handle *h)
{
  if (h->dirfd >= 0)
    close (h->dirfd);
  if (h->upperfd >= 0)
    close (h->upperfd);
  free (h->dir);
  ws_meta_clear (&h->meta);
  h->dirfd = h->upperfd = -1;
  h->dir = NULL;
}
