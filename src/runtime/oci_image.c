/* oci_image.c - the OCI image layout reader (image-spec v1.1: image-layout.md, image-index.md,
 * manifest.md, descriptor.md). Pure reading: the unpacking is runtime/oci_unpack.c, the cache
 * runtime/oci_cache.c. Every JSON document is verified against the digest and size of the
 * descriptor that names it before it is parsed (index.json, the root, has none). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/oci_image.h"

#define OCI_JSON_MAX (4u << 20) /* index, manifest, config: 4 MiB is far beyond real ones */
#define OCI_INDEX_DEPTH 4
#define RESOLVE_LAYOUT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

void
oci_hash_init (struct oci_hash *h)
{
  /* the verbs load OpenSSL with a clear error first (oci_image_open, oci_export_workspace);
   * reaching here without it is a programming error */
  if (openssl_load ("sha256", NULL) < 0)
    abort ();
  h->ctx = EVP_MD_CTX_new ();
  if (!h->ctx || EVP_DigestInit_ex (h->ctx, EVP_sha256 (), NULL) != 1)
    abort (); /* out of memory, as xmalloc */
  h->bytes = 0;
}

void
oci_hash_update (struct oci_hash *h, const void *data, size_t len)
{
  if (EVP_DigestUpdate (h->ctx, data, len) != 1)
    abort ();
  h->bytes += len;
}

void
oci_hash_final (struct oci_hash *h, char out[65])
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  static const char hexd[] = "0123456789abcdef";

  if (EVP_DigestFinal_ex (h->ctx, md, &n) != 1 || n != 32)
    abort ();
  for (size_t i = 0; i < 32; i++)
    out[2 * i] = hexd[md[i] >> 4], out[2 * i + 1] = hexd[md[i] & 15];
  out[64] = '\0';
  EVP_MD_CTX_free (h->ctx);
  h->ctx = NULL;
}

bool
oci_digest_valid (const char *digest, char hex_out[65])
{
  if (strncmp (digest, "sha256:", 7) != 0 || strlen (digest) != 7 + 64)
    return false;
  for (const char *p = digest + 7; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  if (hex_out)
    memcpy (hex_out, digest + 7, 65);
  return true;
}

static bool
ref_name_valid (const char *t)
{
  size_t n = strlen (t);
  if (n == 0 || n > 128)
    return false;
  for (; *t; t++)
    if (!((*t >= 'A' && *t <= 'Z') || (*t >= 'a' && *t <= 'z') || (*t >= '0' && *t <= '9') || strchr ("._:@/+-", *t)))
      return false;
  return true;
}

int
oci_image_parse_ref (const char *ref, char **dir, char **tag, asbx_err_t *err)
{
  struct stat st;
  const char *slash = strrchr (ref, '/');
  const char *colon = strrchr (slash ? slash : ref, ':');

  *dir = *tag = NULL;
  if (!colon || (stat (ref, &st) == 0 && S_ISDIR (st.st_mode)))
    {
      *dir = xstrdup (ref);
      return 0;
    }
  if (!ref_name_valid (colon + 1) || colon == ref)
    return asbx_error (err, 0, "--image `%s`: expected DIR[:TAG] (TAG: 1-128 of A-Z a-z 0-9 . _ - : @ / +)", ref);
  *dir = xasprintf ("%.*s", (int) (colon - ref), ref);
  *tag = xstrdup (colon + 1);
  return 0;
}

static void
desc_clear (struct oci_descriptor *d)
{
  free (d->media_type);
  free (d->digest);
  memset (d, 0, sizeof *d);
}

void
oci_image_free (struct oci_image *img)
{
  if (img->layout_fd >= 0)
    close (img->layout_fd);
  free (img->layout);
  free (img->tag);
  desc_clear (&img->manifest);
  desc_clear (&img->config);
  for (size_t i = 0; i < img->n_layers; i++)
    desc_clear (&img->layers[i]);
  free (img->layers);
  memset (img, 0, sizeof *img);
  img->layout_fd = -1;
}

int
oci_blob_open (int layout_fd, const struct oci_descriptor *d, asbx_err_t *err)
{
  char path[96];
  struct stat st;

  snprintf (path, sizeof path, "blobs/sha256/%s", d->hex);
  int fd = ps_openat2 (layout_fd, path, O_RDONLY | O_NOCTTY | O_NOFOLLOW, 0, RESOLVE_LAYOUT);
  if (fd < 0)
    return asbx_error (err, errno, "blob %s: open `%s`", d->digest, path);
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      return asbx_error (err, errno, "blob %s: `%s` is not a regular file", d->digest, path);
    }
  if (st.st_size != d->size)
    {
      close (fd);
      return asbx_error (err, 0, "blob %s: size mismatch: the descriptor says %lld bytes, `%s` has %lld", d->digest,
                         (long long) d->size, path, (long long) st.st_size);
    }
  return fd;
}

int
oci_blob_verify (int fd, const struct oci_descriptor *d, asbx_err_t *err)
{
  struct oci_hash h;
  char buf[1 << 16], hex[65];
  off_t off = 0;
  ssize_t n;

  oci_hash_init (&h);
  while ((n = pread (fd, buf, sizeof buf, off)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          oci_hash_final (&h, hex);
          return asbx_error (err, errno, "blob %s: read", d->digest);
        }
      oci_hash_update (&h, buf, (size_t) n);
      off += n;
    }
  oci_hash_final (&h, hex);
  if ((int64_t) off != d->size)
    return asbx_error (err, 0, "blob %s: size mismatch: the descriptor says %lld bytes, the blob has %lld", d->digest,
                       (long long) d->size, (long long) off);
  if (strcmp (hex, d->hex) != 0)
    return asbx_error (err, 0, "blob %s: digest mismatch (the content hashes to sha256:%s): the layout is corrupt",
                       d->digest, hex);
  return 0;
}

int
oci_blob_read (int layout_fd, const struct oci_descriptor *d, char **out, asbx_err_t *err)
{
  cleanup_close int fd = -1;
  size_t len;

  if (d->size > (int64_t) OCI_JSON_MAX)
    return asbx_error (err, 0, "blob %s: %lld bytes, more than the %u a JSON document may have", d->digest,
                       (long long) d->size, OCI_JSON_MAX);
  fd = oci_blob_open (layout_fd, d, err);
  if (fd < 0)
    return -1;
  if (read_all_fd (fd, OCI_JSON_MAX, out, &len) < 0)
    return asbx_error (err, errno, "blob %s: read", d->digest);
  struct oci_hash h;
  char hex[65];
  oci_hash_init (&h);
  oci_hash_update (&h, *out, len);
  oci_hash_final (&h, hex);
  /* the bytes parsed are the bytes hashed: a file changed after oci_blob_open cannot slip in */
  if ((int64_t) len != d->size || strcmp (hex, d->hex) != 0)
    {
      free (*out);
      *out = NULL;
      if ((int64_t) len != d->size)
        return asbx_error (err, 0, "blob %s: size mismatch: the descriptor says %lld bytes, the blob has %zu",
                           d->digest, (long long) d->size, len);
      return asbx_error (err, 0, "blob %s: digest mismatch (the content hashes to sha256:%s): the layout is corrupt",
                         d->digest, hex);
    }
  return 0;
}

static yajl_val
parse_json (const char *text, const char *what, asbx_err_t *err)
{
  char ebuf[256] = "";
  yajl_val v = yajl_tree_parse (text, ebuf, sizeof ebuf);
  if (!v)
    {
      ebuf[strcspn (ebuf, "\n")] = '\0';
      asbx_error (err, 0, "%s: not valid JSON: %s", what, ebuf);
      return NULL;
    }
  if (!YAJL_IS_OBJECT (v))
    {
      yajl_tree_free (v);
      asbx_error (err, 0, "%s: expected a JSON object", what);
      return NULL;
    }
  return v;
}

static yajl_val
get (yajl_val obj, const char *key, yajl_type t)
{
  const char *path[] = { key, NULL };
  return yajl_tree_get (obj, path, t);
}

static const char *
get_str (yajl_val obj, const char *key)
{
  yajl_val v = get (obj, key, yajl_t_string);
  return v ? YAJL_GET_STRING (v) : NULL;
}

/* the string at path, "" when absent or not a string */
static const char *
str_at (yajl_val obj, const char **path)
{
  yajl_val v = yajl_tree_get (obj, path, yajl_t_string);
  const char *s = v ? YAJL_GET_STRING (v) : NULL;
  return s ? s : "";
}

/* a descriptor object at JSON path `jpath` of `what` */
static int
desc_parse (yajl_val v, const char *what, const char *jpath, struct oci_descriptor *d, asbx_err_t *err)
{
  memset (d, 0, sizeof *d);
  if (!v || !YAJL_IS_OBJECT (v))
    return asbx_error (err, 0, "%s: %s: expected a descriptor object", what, jpath);
  const char *mt = get_str (v, "mediaType");
  const char *dg = get_str (v, "digest");
  yajl_val sz = get (v, "size", yajl_t_number);
  if (!mt)
    return asbx_error (err, 0, "%s: %s.mediaType: expected a string", what, jpath);
  if (!dg)
    return asbx_error (err, 0, "%s: %s.digest: expected a string", what, jpath);
  if (!oci_digest_valid (dg, d->hex))
    return asbx_error (err, 0,
                       "%s: %s.digest `%s`: expected sha256:<64 lowercase hex digits> (no other algorithm is "
                       "accepted)",
                       what, jpath, dg);
  if (!sz || !YAJL_IS_INTEGER (sz) || YAJL_GET_INTEGER (sz) < 0)
    return asbx_error (err, 0, "%s: %s.size: expected a non-negative integer", what, jpath);
  d->media_type = xstrdup (mt);
  d->digest = xstrdup (dg);
  d->size = YAJL_GET_INTEGER (sz);
  return 0;
}

const char *
oci_host_arch (void)
{
  struct utsname u;
  static const struct
  {
    const char *machine, *oci;
  } map[] = { { "x86_64", "amd64" },    { "aarch64", "arm64" }, { "armv7l", "arm" },     { "i686", "386" },
              { "ppc64le", "ppc64le" }, { "s390x", "s390x" },   { "riscv64", "riscv64" } };
  if (uname (&u) == 0)
    for (size_t i = 0; i < ASBX_ARRAY_SIZE (map); i++)
      if (strcmp (u.machine, map[i].machine) == 0)
        return map[i].oci;
  return "amd64";
}

/* Choose from the manifests[] of an index: by ref name (top level, tag given), by platform
 * (nested index, or a top-level index entry that is itself an index), or the only one. */
static int
index_pick (yajl_val idx, const char *what, const char *tag, bool by_platform, struct oci_descriptor *out,
            asbx_err_t *err)
{
  yajl_val m = get (idx, "manifests", yajl_t_array);
  const char *arch = oci_host_arch ();
  char jpath[64];
  ssize_t found = -1;

  if (!m || !YAJL_IS_ARRAY (m))
    return asbx_error (err, 0, "%s: manifests: expected an array", what);
  yajl_val *vals = m->u.array.values;
  for (size_t i = 0; i < m->u.array.len; i++)
    {
      yajl_val e = vals[i];
      if (!YAJL_IS_OBJECT (e))
        return asbx_error (err, 0, "%s: manifests[%zu]: expected a descriptor object", what, i);
      if (tag)
        {
          const char *path[] = { "annotations", OCI_ANNOT_REF_NAME, NULL };
          if (strcmp (str_at (e, path), tag) != 0)
            continue;
        }
      else if (by_platform)
        {
          const char *os_path[] = { "platform", "os", NULL }, *arch_path[] = { "platform", "architecture", NULL };
          if (strcmp (str_at (e, os_path), "linux") != 0 || strcmp (str_at (e, arch_path), arch) != 0)
            continue;
        }
      if (found >= 0 && (tag || !by_platform))
        return asbx_error (err, 0, "%s: manifests[%zd] and manifests[%zu] both match%s%s%s: ambiguous", what, found, i,
                           tag ? " the tag `" : "", tag ? tag : "", tag ? "`" : "");
      if (found < 0)
        found = (ssize_t) i;
    }
  if (found < 0 && tag)
    return asbx_error (err, 0, "%s: no manifest has the annotation %s = `%s`", what, OCI_ANNOT_REF_NAME, tag);
  if (found < 0 && by_platform)
    return asbx_error (err, 0, "%s: no manifest for the platform linux/%s", what, arch);
  if (found < 0)
    return asbx_error (err, 0, "%s: manifests: empty", what);
  snprintf (jpath, sizeof jpath, "manifests[%zd]", found);
  return desc_parse (vals[found], what, jpath, out, err);
}

static bool
layer_type_known (const char *mt)
{
  static const char *const known[] = {
    OCI_MT_LAYER_TAR,
    OCI_MT_LAYER_GZIP,
    OCI_MT_LAYER_ZSTD,
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
  };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (known); i++)
    if (strcmp (mt, known[i]) == 0)
      return true;
  return false;
}

static int
manifest_parse (struct oci_image *img, const char *text, asbx_err_t *err)
{
  cleanup_free char *what = xasprintf ("manifest %s", img->manifest.digest);
  yajl_val m = parse_json (text, what, err);
  char jpath[48];
  int ret = -1;

  if (!m)
    return -1;
  yajl_val sv = get (m, "schemaVersion", yajl_t_number);
  if (!sv || !YAJL_IS_INTEGER (sv) || YAJL_GET_INTEGER (sv) != 2)
    {
      asbx_error (err, 0, "%s: schemaVersion: expected 2", what);
      goto out;
    }
  if (desc_parse (get (m, "config", yajl_t_object), what, "config", &img->config, err) < 0)
    goto out;
  if (strcmp (img->config.media_type, OCI_MT_CONFIG) != 0
      && strcmp (img->config.media_type, "application/vnd.docker.container.image.v1+json") != 0)
    {
      asbx_error (err, 0, "%s: config.mediaType `%s`: expected %s", what, img->config.media_type, OCI_MT_CONFIG);
      goto out;
    }
  yajl_val layers = get (m, "layers", yajl_t_array);
  if (!layers || !YAJL_IS_ARRAY (layers))
    {
      asbx_error (err, 0, "%s: layers: expected an array", what);
      goto out;
    }
  size_t n = layers->u.array.len;
  if (n > OCI_MAX_LAYERS)
    {
      asbx_error (err, 0, "%s: layers: %zu layers, more than %d", what, n, OCI_MAX_LAYERS);
      goto out;
    }
  img->layers = xmalloc0 ((n ? n : 1) * sizeof *img->layers);
  for (size_t i = 0; i < n; i++)
    {
      snprintf (jpath, sizeof jpath, "layers[%zu]", i);
      if (desc_parse (layers->u.array.values[i], what, jpath, &img->layers[i], err) < 0)
        goto out;
      img->n_layers = i + 1;
      if (!layer_type_known (img->layers[i].media_type))
        {
          asbx_error (err, 0, "%s: %s.mediaType `%s`: expected a tar layer (%s, %s or %s)", what, jpath,
                      img->layers[i].media_type, OCI_MT_LAYER_TAR, OCI_MT_LAYER_GZIP, OCI_MT_LAYER_ZSTD);
          goto out;
        }
    }
  ret = 0;
out:
  yajl_tree_free (m);
  return ret;
}

/* oci-layout must say imageLayoutVersion 1.0.0 (image-layout.md) */
static int
check_oci_layout (int fd, const char *dir, asbx_err_t *err)
{
  cleanup_close int lf = ps_openat2 (fd, "oci-layout", O_RDONLY | O_NOCTTY, 0, RESOLVE_LAYOUT);
  cleanup_free char *text = NULL;
  cleanup_free char *what = xasprintf ("%s/oci-layout", dir);
  size_t len;

  if (lf < 0)
    return asbx_error (err, errno, "not an OCI image layout: open `%s`", what);
  if (read_all_fd (lf, 4096, &text, &len) < 0)
    return asbx_error (err, errno, "read `%s`", what);
  yajl_val v = parse_json (text, what, err);
  if (!v)
    return -1;
  const char *ver = get_str (v, "imageLayoutVersion");
  int ret = ver && strcmp (ver, "1.0.0") == 0 ? 0 : -1;
  if (ret < 0)
    asbx_error (err, 0, "%s: imageLayoutVersion: expected \"1.0.0\"", what);
  yajl_tree_free (v);
  return ret;
}

int
oci_image_open (const char *dir, const char *tag, struct oci_image *img, asbx_err_t *err)
{
  cleanup_free char *text = NULL, *what = NULL;
  struct oci_image im = { .layout_fd = -1 };
  struct oci_descriptor d = { 0 };
  yajl_val v = NULL;
  size_t len;

  if (openssl_load ("an OCI image (sha256 digests)", err) < 0)
    return -1;

  memset (img, 0, sizeof *img);
  img->layout_fd = -1;
  im.layout = xstrdup (dir);
  im.tag = xstrdup (tag);
  im.layout_fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (im.layout_fd < 0)
    {
      asbx_error (err, errno, "open the layout `%s`", dir);
      goto fail;
    }
  if (check_oci_layout (im.layout_fd, dir, err) < 0)
    goto fail;
  what = xasprintf ("%s/index.json", dir);
  {
    cleanup_close int fd = ps_openat2 (im.layout_fd, "index.json", O_RDONLY | O_NOCTTY, 0, RESOLVE_LAYOUT);
    if (fd < 0 || read_all_fd (fd, OCI_JSON_MAX, &text, &len) < 0)
      {
        asbx_error (err, errno, "read `%s`", what);
        goto fail;
      }
  }
  v = parse_json (text, what, err);
  if (!v || index_pick (v, what, tag, false, &d, err) < 0)
    goto fail;
  /* follow image indexes down to a manifest */
  for (int depth = 0; d.media_type; depth++)
    {
      if (strcmp (d.media_type, OCI_MT_MANIFEST) == 0
          || strcmp (d.media_type, "application/vnd.docker.distribution.manifest.v2+json") == 0)
        break;
      if (strcmp (d.media_type, OCI_MT_INDEX) != 0
          && strcmp (d.media_type, "application/vnd.docker.distribution.manifest.list.v2+json") != 0)
        {
          asbx_error (err, 0, "%s: descriptor %s: mediaType `%s`: expected %s or %s", what, d.digest, d.media_type,
                      OCI_MT_MANIFEST, OCI_MT_INDEX);
          goto fail;
        }
      if (depth >= OCI_INDEX_DEPTH)
        {
          asbx_error (err, 0, "%s: image indexes nested more than %d deep", what, OCI_INDEX_DEPTH);
          goto fail;
        }
      yajl_tree_free (v);
      v = NULL;
      free (text);
      text = NULL;
      if (oci_blob_read (im.layout_fd, &d, &text, err) < 0)
        goto fail;
      free (what);
      what = xasprintf ("image index %s", d.digest);
      desc_clear (&d);
      v = parse_json (text, what, err);
      if (!v || index_pick (v, what, NULL, true, &d, err) < 0)
        goto fail;
    }
  yajl_tree_free (v);
  v = NULL;
  free (text);
  text = NULL;
  im.manifest = d;
  memset (&d, 0, sizeof d);
  if (oci_blob_read (im.layout_fd, &im.manifest, &text, err) < 0 || manifest_parse (&im, text, err) < 0)
    goto fail;
  free (text);
  text = NULL;
  /* the config is not used for the rootfs, but a layout whose config blob is missing or corrupt
   * is a broken image: refuse it here rather than cache it */
  if (oci_blob_read (im.layout_fd, &im.config, &text, err) < 0)
    goto fail;
  *img = im;
  return 0;
fail:
  if (v)
    yajl_tree_free (v);
  desc_clear (&d);
  oci_image_free (&im);
  return asbx_error_wrap (err, "--image `%s%s%s`", dir, tag ? ":" : "", tag ? tag : "");
}
