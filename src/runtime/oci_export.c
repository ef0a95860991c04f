/* oci_export.c - `workspace export`: the layout side (oci_export.h). The layer itself is
 * oci_export_layer.c. Until the shared walker and layout helpers of issue 18 are merged
 * (runtime/workspace_layout.h), the workspace directory is opened here directly: <dir>/<id>
 * must be a directory of the caller's, not a symlink, and meta.json is read for "xattr" and
 * "state" only. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "core/log.h"
#include "linux/pathsafe.h"
#include "monitor/audit.h"
#include "policy/policy.h"
#include "runtime/oci_export.h"
#include "runtime/oci_image.h"

#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define META_MAX (1u << 20)

static void
gstr (yajl_gen g, const char *s)
{
  yajl_gen_string (g, (const unsigned char *) s, strlen (s));
}

static void
gdesc (yajl_gen g, const char *media_type, const char *digest, int64_t size)
{
  yajl_gen_map_open (g);
  json_gen_kv (g, "mediaType", media_type);
  json_gen_kv (g, "digest", digest);
  gstr (g, "size");
  yajl_gen_integer (g, size);
}

/* A new name in dirfd for a temp file: O_CREAT|O_EXCL, random suffix. Returns the fd and the
 * name in buf. */
static int
tmp_open (int dirfd, const char *stem, char *buf, size_t size)
{
  for (int i = 0; i < 64; i++)
    {
      unsigned r = (unsigned) rand () ^ (unsigned) getpid () << 8 ^ (unsigned) i;
      snprintf (buf, size, ".tmp-%s-%d-%08x", stem, (int) getpid (), r);
      int fd = openat (dirfd, buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd >= 0 || errno != EEXIST)
        return fd;
    }
  errno = EEXIST;
  return -1;
}

/* write data as blobs/sha256/<hex> (temp + rename); *hex_out gets the hex */
static int
put_blob (int blobs, const void *data, size_t len, char hex_out[65], asbx_err_t *err)
{
  struct oci_hash h;
  char tmp[96];

  oci_hash_init (&h);
  oci_hash_update (&h, data, len);
  oci_hash_final (&h, hex_out);
  cleanup_close int fd = tmp_open (blobs, "blob", tmp, sizeof tmp);
  if (fd < 0 || write_all (fd, data, len) < 0 || fsync (fd) < 0 || renameat (blobs, tmp, blobs, hex_out) < 0)
    {
      int e = errno;
      if (fd >= 0)
        unlinkat (blobs, tmp, 0);
      return asbx_error (err, e, "write the blob sha256:%s", hex_out);
    }
  return 0;
}

/* copy a verified blob of another layout into blobs (unless it is there with its size) */
static int
copy_blob (int src_layout, int blobs, const struct oci_descriptor *d, asbx_err_t *err)
{
  struct stat st;
  char tmp[96], buf[1 << 16], hex[65];
  ssize_t n;

  if (fstatat (blobs, d->hex, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG (st.st_mode) && st.st_size == d->size)
    {
      cleanup_close int fd = ps_openat2 (blobs, d->hex, O_RDONLY, 0, RESOLVE_STRICT);
      if (fd >= 0 && oci_blob_verify (fd, d, NULL) == 0)
        return 0; /* the same layout, or a blob shared by both */
    }
  cleanup_close int in = oci_blob_open (src_layout, d, err);
  if (in < 0)
    return -1;
  cleanup_close int out = tmp_open (blobs, "blob", tmp, sizeof tmp);
  if (out < 0)
    return asbx_error (err, errno, "copy the blob %s", d->digest);
  struct oci_hash h;
  oci_hash_init (&h);
  while ((n = read (in, buf, sizeof buf)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 || write_all (out, buf, (size_t) n) < 0)
        {
          int e = errno;
          oci_hash_final (&h, hex);
          unlinkat (blobs, tmp, 0);
          return asbx_error (err, e, "copy the blob %s", d->digest);
        }
      oci_hash_update (&h, buf, (size_t) n);
    }
  oci_hash_final (&h, hex);
  /* the bytes copied are the bytes checked */
  if ((int64_t) h.bytes != d->size || strcmp (hex, d->hex) != 0)
    {
      unlinkat (blobs, tmp, 0);
      return asbx_error (err, 0, "base blob %s: digest mismatch (the content hashes to sha256:%s)", d->digest, hex);
    }
  if (fsync (out) < 0 || renameat (blobs, tmp, blobs, d->hex) < 0)
    {
      int e = errno;
      unlinkat (blobs, tmp, 0);
      return asbx_error (err, e, "copy the blob %s", d->digest);
    }
  return 0;
}

/* The config: the base's (every key kept, rootfs.diff_ids and history extended) or a new one */
static char *
make_config (const char *base_text, const struct oci_image *base, const char *diff_id, const char *id, asbx_err_t *err)
{
  yajl_gen g = json_gen_new (0);
  yajl_val b = NULL;
  cleanup_free char *created_by = xasprintf ("agentsbx workspace export %s", id);

  if (base_text)
    {
      char ebuf[128];
      b = yajl_tree_parse (base_text, ebuf, sizeof ebuf);
      if (!b || !YAJL_IS_OBJECT (b))
        {
          yajl_gen_free (g);
          if (b)
            yajl_tree_free (b);
          asbx_error (err, 0, "base config %s: expected a JSON object", base->config.digest);
          return NULL;
        }
      const char *p[] = { "rootfs", "diff_ids", NULL };
      yajl_val ids = yajl_tree_get (b, p, yajl_t_array);
      if (!ids || ids->u.array.len != base->n_layers)
        {
          yajl_gen_free (g);
          yajl_tree_free (b);
          asbx_error (err, 0, "base config %s: rootfs.diff_ids: expected %zu entries (one per layer)",
                      base->config.digest, base->n_layers);
          return NULL;
        }
    }
  yajl_gen_map_open (g);
  if (!b)
    {
      json_gen_kv (g, "architecture", oci_host_arch ());
      json_gen_kv (g, "os", "linux");
      gstr (g, "config");
      yajl_gen_map_open (g);
      yajl_gen_map_close (g);
    }
  for (size_t i = 0; b && i < b->u.object.len; i++)
    {
      const char *k = b->u.object.keys[i];
      if (strcmp (k, "rootfs") == 0 || strcmp (k, "history") == 0)
        continue;
      gstr (g, k);
      json_gen_value (g, b->u.object.values[i]);
    }
  gstr (g, "rootfs");
  yajl_gen_map_open (g);
  json_gen_kv (g, "type", "layers");
  gstr (g, "diff_ids");
  yajl_gen_array_open (g);
  if (b)
    {
      const char *p[] = { "rootfs", "diff_ids", NULL };
      yajl_val ids = yajl_tree_get (b, p, yajl_t_array);
      for (size_t i = 0; ids && i < ids->u.array.len; i++)
        json_gen_value (g, ids->u.array.values[i]);
    }
  gstr (g, diff_id);
  yajl_gen_array_close (g);
  yajl_gen_map_close (g);
  gstr (g, "history");
  yajl_gen_array_open (g);
  if (b)
    {
      const char *p[] = { "history", NULL };
      yajl_val h = yajl_tree_get (b, p, yajl_t_array);
      for (size_t i = 0; h && i < h->u.array.len; i++)
        json_gen_value (g, h->u.array.values[i]);
    }
  yajl_gen_map_open (g);
  json_gen_kv (g, "created_by", created_by);
  json_gen_kv (g, "comment", "the review workspace's changes (upper layer)");
  yajl_gen_map_close (g);
  yajl_gen_array_close (g);
  yajl_gen_map_close (g);
  if (b)
    yajl_tree_free (b);
  return json_gen_finish (g, false, NULL);
}

static char *
make_manifest (const struct oci_image *base, const char *config_hex, size_t config_len, const struct oci_layer_out *l)
{
  yajl_gen g = json_gen_new (0);
  cleanup_free char *cdig = xasprintf ("sha256:%s", config_hex), *ldig = xasprintf ("sha256:%s", l->digest_hex);

  yajl_gen_map_open (g);
  gstr (g, "schemaVersion");
  yajl_gen_integer (g, 2);
  json_gen_kv (g, "mediaType", OCI_MT_MANIFEST);
  gstr (g, "config");
  gdesc (g, OCI_MT_CONFIG, cdig, (int64_t) config_len);
  yajl_gen_map_close (g);
  gstr (g, "layers");
  yajl_gen_array_open (g);
  for (size_t i = 0; base && i < base->n_layers; i++)
    {
      gdesc (g, base->layers[i].media_type, base->layers[i].digest, base->layers[i].size);
      yajl_gen_map_close (g);
    }
  gdesc (g, OCI_MT_LAYER_GZIP, ldig, l->size);
  yajl_gen_map_close (g);
  yajl_gen_array_close (g);
  if (base)
    {
      /* image-spec annotations.md: the base this image was built on */
      gstr (g, "annotations");
      yajl_gen_map_open (g);
      json_gen_kv (g, "org.opencontainers.image.base.digest", base->manifest.digest);
      yajl_gen_map_close (g);
    }
  yajl_gen_map_close (g);
  return json_gen_finish (g, false, NULL);
}

/* index.json: the old entries but those tagged `tag`, then ours */
static char *
make_index (const char *old, const char *where, const char *tag, const char *mdigest, size_t mlen, asbx_err_t *err)
{
  yajl_gen g = json_gen_new (0);
  yajl_val v = NULL;
  char ebuf[128];

  if (old)
    {
      v = yajl_tree_parse (old, ebuf, sizeof ebuf);
      const char *p[] = { "manifests", NULL };
      if (!v || !YAJL_IS_OBJECT (v) || !yajl_tree_get (v, p, yajl_t_array))
        {
          if (v)
            yajl_tree_free (v);
          yajl_gen_free (g);
          asbx_error (err, 0, "%s/index.json: manifests: expected an array", where);
          return NULL;
        }
    }
  yajl_gen_map_open (g);
  gstr (g, "schemaVersion");
  yajl_gen_integer (g, 2);
  json_gen_kv (g, "mediaType", OCI_MT_INDEX);
  gstr (g, "manifests");
  yajl_gen_array_open (g);
  if (v)
    {
      const char *p[] = { "manifests", NULL }, *rp[] = { "annotations", OCI_ANNOT_REF_NAME, NULL };
      yajl_val m = yajl_tree_get (v, p, yajl_t_array);
      for (size_t i = 0; i < m->u.array.len; i++)
        {
          yajl_val r = yajl_tree_get (m->u.array.values[i], rp, yajl_t_string);
          const char *rs = r ? YAJL_GET_STRING (r) : NULL;
          if (rs && strcmp (rs, tag) == 0)
            continue;
          json_gen_value (g, m->u.array.values[i]);
        }
    }
  gdesc (g, OCI_MT_MANIFEST, mdigest, (int64_t) mlen);
  gstr (g, "annotations");
  yajl_gen_map_open (g);
  json_gen_kv (g, OCI_ANNOT_REF_NAME, tag);
  yajl_gen_map_close (g);
  yajl_gen_map_close (g);
  yajl_gen_array_close (g);
  yajl_gen_map_close (g);
  if (v)
    yajl_tree_free (v);
  return json_gen_finish (g, false, NULL);
}

/* a small file of the layout written by temp + rename */
static int
put_file (int dirfd, const char *name, const char *where, const char *text, asbx_err_t *err)
{
  char tmp[96];
  cleanup_close int fd = tmp_open (dirfd, name, tmp, sizeof tmp);
  if (fd < 0 || write_all (fd, text, strlen (text)) < 0 || fsync (fd) < 0 || renameat (dirfd, tmp, dirfd, name) < 0)
    {
      int e = errno;
      if (fd >= 0)
        unlinkat (dirfd, tmp, 0);
      return asbx_error (err, e, "write `%s/%s`", where, name);
    }
  return 0;
}

/* the output layout: created (0755) when missing; an existing directory must be empty or hold
 * oci-layout. *index_text: the current index.json (NULL when none). Returns the layout's fd. */
static int
open_out (const char *dir, char **index_text, asbx_err_t *err)
{
  struct stat st;
  size_t len;

  *index_text = NULL;
  if (mkdir (dir, 0755) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "--oci `%s`: create", dir);
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "--oci `%s`: open (a directory, not a symlink)", dir);
  if (fstatat (fd, "oci-layout", &st, AT_SYMLINK_NOFOLLOW) == 0)
    {
      cleanup_close int ix = ps_openat2 (fd, "index.json", O_RDONLY | O_NOCTTY, 0, RESOLVE_STRICT);
      if (ix >= 0 && read_all_fd (ix, 4u << 20, index_text, &len) < 0)
        {
          close (fd);
          return asbx_error (err, errno, "read `%s/index.json`", dir);
        }
      return fd;
    }
  cleanup_close int dup = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  DIR *d = dup >= 0 ? fdopendir (dup) : NULL;
  struct dirent *de;
  bool empty = true;
  if (d)
    {
      dup = -1;
      while ((de = readdir (d)) != NULL)
        if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
          empty = false;
      closedir (d);
    }
  if (!empty)
    {
      close (fd);
      return asbx_error (err, 0, "--oci `%s`: exists, is not empty and holds no oci-layout: not an OCI image layout",
                         dir);
    }
  return fd;
}

/* <workspaces_dir>/<id>: ours, locked; *xattr_ns from meta.json */
static int
open_workspace (const struct oci_export_opts *o, int *lockfd, char **xattr_ns, asbx_err_t *err)
{
  cleanup_free char *where = xasprintf ("%s/%s", o->workspaces_dir, o->id);
  cleanup_free char *text = NULL;
  cleanup_close int root = open (o->workspaces_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  size_t len;

  if (!o->id[0] || o->id[0] == '.' || strchr (o->id, '/'))
    return asbx_error (err, EINVAL, "workspace export: `%s` is not a workspace id", o->id);
  if (root < 0)
    return asbx_error (err, errno, "workspace export: open the workspaces directory `%s`", o->workspaces_dir);
  int fd = openat (root, o->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "workspace export: no workspace `%s` (open `%s`)", o->id, where);
  if (fstat (fd, &st) < 0 || st.st_uid != geteuid ())
    {
      close (fd);
      return asbx_error (err, 0, "workspace export: `%s` is not the caller's", where);
    }
  *lockfd = openat (fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (*lockfd < 0 || flock (*lockfd, LOCK_EX | LOCK_NB) < 0)
    {
      int e = errno;
      close (fd);
      return asbx_error (err, e,
                         "workspace export: `%s` is in use (its container runs, or another workspace verb holds "
                         "its lock)",
                         where);
    }
  cleanup_close int mf = openat (fd, "meta.json", O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  if (mf < 0 || read_all_fd (mf, META_MAX, &text, &len) < 0)
    {
      int e = errno;
      close (fd);
      return asbx_error (err, e, "workspace export: read `%s/meta.json`", where);
    }
  char ebuf[128];
  yajl_val v = yajl_tree_parse (text, ebuf, sizeof ebuf);
  const char *xp[] = { "xattr", NULL }, *sp[] = { "state", NULL };
  yajl_val x = v ? yajl_tree_get (v, xp, yajl_t_string) : NULL;
  yajl_val s = v ? yajl_tree_get (v, sp, yajl_t_string) : NULL;
  const char *xs = x ? YAJL_GET_STRING (x) : NULL, *ss = s ? YAJL_GET_STRING (s) : NULL;
  int ret = fd;
  if (!xs || (strcmp (xs, "trusted") != 0 && strcmp (xs, "user") != 0))
    ret = asbx_error (err, 0, "%s/meta.json: xattr: expected \"trusted\" or \"user\"", where);
  else if (ss && strcmp (ss, "running") == 0)
    ret = asbx_error (err, EBUSY, "workspace export: `%s` is running: stop its container first", o->id);
  else
    *xattr_ns = xstrdup (xs);
  if (v)
    yajl_tree_free (v);
  if (ret < 0)
    close (fd);
  return ret;
}

static void
audit_export (const struct oci_export_opts *o, const char *tag, const struct oci_export_result *r)
{
  asbx_err_t e = NULL;
  cleanup_free char *adir = audit_dir_resolve (o->audit_flag, o->config_path, &e);
  cleanup_free char *layer = xasprintf ("sha256:%s", r->layer.digest_hex);
  cleanup_close int fd = adir ? audit_open (adir, o->id, &e) : -1;
  if (fd >= 0)
    {
      struct audit_rec *a = audit_rec_new (o->id, "workspace");
      audit_rec_str (a, "op", "export");
      audit_rec_str (a, "oci", o->out);
      audit_rec_str (a, "tag", tag);
      audit_rec_str (a, "manifest", r->manifest_digest);
      audit_rec_str (a, "layer", layer);
      audit_rec_int (a, "files", (int64_t) r->layer.files);
      audit_rec_int (a, "deleted", (int64_t) r->layer.whiteouts);
      audit_rec_int (a, "opaque", (int64_t) r->layer.opaque);
      audit_rec_int (a, "bytes", r->layer.size);
      if (audit_rec_write (a, fd, &e) == 0)
        return;
    }
  log_warning ("workspace export %s: the audit record was not written: %s", o->id, e ? e->msg : "?");
  asbx_error_free (&e);
}

static char *
clean_prefix (const char *path)
{
  cleanup_free char *c = ps_clean (path ? path : "/workspace");
  return xstrdup (c + 1); /* relative: "workspace", or "" for "/" */
}

int
oci_export_workspace (const struct oci_export_opts *o, struct oci_export_result *r, asbx_err_t *err)
{
  cleanup_close int wsfd = -1, lockfd = -1, outfd = -1, blobs = -1, upper = -1, layer_fd = -1;
  cleanup_free char *ns = NULL, *index_old = NULL, *prefix = clean_prefix (o->path);
  cleanup_free char *base_dir = NULL, *base_tag = NULL, *base_config = NULL;
  cleanup_free char *config = NULL, *manifest = NULL, *index = NULL, *mdig = NULL, *diff_id = NULL;
  const char *tag = o->tag ? o->tag : o->id;
  struct oci_image base = { .layout_fd = -1 };
  bool have_base = false;
  char tmp[96] = "", config_hex[65], manifest_hex[65];

  if (openssl_load ("workspace export (sha256 digests)", err) < 0)
    return -1;
  int ret = -1;

  memset (r, 0, sizeof *r);
  cleanup_free char *wsdir = o->workspaces_dir ? xstrdup (o->workspaces_dir)
                                               : policy_workspaces_dir (o->config_path, err);
  if (!wsdir)
    return -1;
  struct oci_export_opts oo = *o;
  oo.workspaces_dir = wsdir;
  o = &oo;
  wsfd = open_workspace (o, &lockfd, &ns, err);
  if (wsfd < 0)
    return -1;
  upper = openat (wsfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (upper < 0)
    return asbx_error (err, errno, "workspace export: open `%s/%s/upper`", wsdir, o->id);
  if (o->base)
    {
      if (oci_image_parse_ref (o->base, &base_dir, &base_tag, err) < 0
          || oci_image_open (base_dir, base_tag, &base, err) < 0)
        return asbx_error_wrap (err, "--base");
      have_base = true;
      if (oci_blob_read (base.layout_fd, &base.config, &base_config, err) < 0)
        goto out;
    }
  outfd = open_out (o->out, &index_old, err);
  if (outfd < 0)
    goto out;
  if ((mkdirat (outfd, "blobs", 0755) < 0 && errno != EEXIST)
      || (blobs = ps_openat2 (outfd, "blobs", O_PATH | O_DIRECTORY, 0, RESOLVE_STRICT)) < 0
      || (mkdirat (blobs, "sha256", 0755) < 0 && errno != EEXIST))
    {
      asbx_error (err, errno, "--oci `%s`: create blobs/sha256", o->out);
      goto out;
    }
  {
    int b2 = ps_openat2 (blobs, "sha256", O_RDONLY | O_DIRECTORY, 0, RESOLVE_STRICT);
    close (blobs);
    blobs = b2;
  }
  if (blobs < 0)
    {
      asbx_error (err, errno, "--oci `%s`: open blobs/sha256 (a directory, not a symlink)", o->out);
      goto out;
    }
  layer_fd = tmp_open (blobs, "layer", tmp, sizeof tmp);
  if (layer_fd < 0)
    {
      asbx_error (err, errno, "--oci `%s`: create the layer blob", o->out);
      goto out;
    }
  if (oci_layer_from_upper (upper, ns, prefix, layer_fd, &r->layer, err) < 0)
    {
      asbx_error_wrap (err, "workspace export %s", o->id);
      goto out;
    }
  if (fsync (layer_fd) < 0 || renameat (blobs, tmp, blobs, r->layer.digest_hex) < 0)
    {
      asbx_error (err, errno, "--oci `%s`: write the layer blob", o->out);
      goto out;
    }
  tmp[0] = '\0';
  for (size_t i = 0; have_base && i < base.n_layers; i++)
    if (copy_blob (base.layout_fd, blobs, &base.layers[i], err) < 0)
      goto out;
  diff_id = xasprintf ("sha256:%s", r->layer.diff_id_hex);
  config = make_config (base_config, have_base ? &base : NULL, diff_id, o->id, err);
  if (!config || put_blob (blobs, config, strlen (config), config_hex, err) < 0)
    goto out;
  manifest = make_manifest (have_base ? &base : NULL, config_hex, strlen (config), &r->layer);
  if (put_blob (blobs, manifest, strlen (manifest), manifest_hex, err) < 0)
    goto out;
  mdig = xasprintf ("sha256:%s", manifest_hex);
  index = make_index (index_old, o->out, tag, mdig, strlen (manifest), err);
  if (!index || put_file (outfd, "oci-layout", o->out, "{\"imageLayoutVersion\":\"1.0.0\"}", err) < 0
      || put_file (outfd, "index.json", o->out, index, err) < 0)
    goto out;
  r->manifest_digest = steal_ptr (&mdig);
  audit_export (o, tag, r);
  ret = 0;
out:
  if (tmp[0] && blobs >= 0)
    unlinkat (blobs, tmp, 0);
  if (have_base)
    oci_image_free (&base);
  return ret;
}
