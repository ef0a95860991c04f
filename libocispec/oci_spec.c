/* oci_spec.c - config.json top level (runtime-spec config.md): ociVersion, root, mounts,
 * process, hostname, domainname, hooks, annotations, linux; file loading; freeing.
 *
 * The parse is all-or-nothing: the first error frees everything built so far and returns NULL
 * with one message naming the document and JSON path. Nothing here touches the host.
 * Order: JSON load (depth, duplicates, syntax) -> ociVersion -> objects in document-independent
 * order, so the first error reported for a given document is always the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"

#define OCI_MAX_FILE_SIZE (16u * 1024 * 1024)

static size_t
span_digits (const char *s)
{
  size_t n = 0;
  while (s[n] >= '0' && s[n] <= '9')
    n++;
  return n;
}

/* semver MAJOR.MINOR.PATCH[-pre][+build]; supported: every 1.y.z, including pre-releases
 * ("1.0.0-rc5", "1.0.2-dev") and builds ("1.1.0+dev"), as engines emit those. Minor versions of
 * the runtime spec are backward compatible (semver), so a config a newer engine wrote with a
 * newer minor version is accepted; fields this build does not know are ignored as before, and
 * the fields it knows are validated. Other majors are refused. */
static int
check_version (struct oci_ctx *c, const char *v)
{
  const char *p = v;
  size_t n;
  unsigned long major;
  cleanup_free char *q = oci_quote (v);

  n = span_digits (p);
  if (n == 0 || n > 9 || p[n] != '.')
    return oci_fail_key (c, "ociVersion", "%s is not a version (1.y.z)", q);
  major = strtoul (p, NULL, 10);
  p += n + 1;
  n = span_digits (p);
  if (n == 0 || n > 9 || p[n] != '.')
    return oci_fail_key (c, "ociVersion", "%s is not a version (1.y.z)", q);
  p += n + 1;
  n = span_digits (p);
  if (n == 0)
    return oci_fail_key (c, "ociVersion", "%s is not a version (1.y.z)", q);
  p += n;
  if (*p == '-' || *p == '+')
    {
      const char *s = p + 1;
      if (*s == '\0' || s[strspn (s, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-+")] != '\0')
        return oci_fail_key (c, "ociVersion", "%s is not a version (1.y.z)", q);
    }
  else if (*p != '\0')
    return oci_fail_key (c, "ociVersion", "%s is not a version (1.y.z)", q);
  /* any minor: minor versions are backward compatible, a newer engine's 1.4.0 is fine */
  if (major != 1)
    return oci_fail_key (c, "ociVersion", "%s not supported (major version 1: 1.y.z)", v);
  return 0;
}

static void
root_clear (void *elem)
{
  struct oci_root *r = elem;
  free (r->path);
}

static int
root_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_root *r = elem;
  OCI_TRY (oci_required (c, "path", oci_get_string (c, v, "path", &r->path)));
  OCI_TRY (oci_get_bool (c, v, "readonly", &r->readonly));
  return 0;
}

static void
mount_clear (void *elem)
{
  struct oci_mount *m = elem;
  free (m->destination);
  free (m->source);
  free (m->type);
  asbx_strv_free (m->options);
  free (m->uid_mappings);
  free (m->gid_mappings);
}

/* config.md "Mounts": destination REQUIRED (relative is allowed for compatibility, read as
 * relative to "/"); source, type, options optional; uid/gidMappings for idmapped mounts (1.2). */
static int
mount_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_mount *m = elem;
  void *arr = NULL;
  OCI_TRY (oci_required (c, "destination", oci_get_string (c, v, "destination", &m->destination)));
  OCI_TRY (oci_get_string (c, v, "source", &m->source));
  OCI_TRY (oci_get_string (c, v, "type", &m->type));
  OCI_TRY (oci_get_strv (c, v, "options", &m->options, &m->options_len));
  OCI_TRY (oci_get_array_of (c, v, "uidMappings", sizeof (struct oci_id_mapping), oci_fill_id_mapping,
                             oci_id_mapping_clear, &arr, &m->uid_mappings_len));
  m->uid_mappings = arr;
  arr = NULL;
  OCI_TRY (oci_get_array_of (c, v, "gidMappings", sizeof (struct oci_id_mapping), oci_fill_id_mapping,
                             oci_id_mapping_clear, &arr, &m->gid_mappings_len));
  m->gid_mappings = arr;
  return 0;
}

static void
hook_clear (void *elem)
{
  struct oci_hook *h = elem;
  free (h->path);
  asbx_strv_free (h->args);
  asbx_strv_free (h->env);
}

/* config.md "POSIX-platform Hooks": path REQUIRED and absolute; timeout, if set, > 0. */
static int
hook_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_hook *h = elem;
  int r;
  OCI_TRY (oci_required (c, "path", oci_get_string (c, v, "path", &h->path)));
  if (h->path[0] != '/')
    {
      cleanup_free char *q = oci_quote (h->path);
      return oci_fail_key (c, "path", "%s is not an absolute path", q);
    }
  OCI_TRY (oci_get_strv (c, v, "args", &h->args, &h->args_len));
  OCI_TRY (oci_get_strv (c, v, "env", &h->env, &h->env_len));
  OCI_TRY (r = oci_get_i64 (c, v, "timeout", &h->timeout));
  h->has_timeout = r > 0;
  if (h->has_timeout && h->timeout <= 0)
    return oci_fail_key (c, "timeout", "must be greater than zero");
  return 0;
}

static void
hooks_clear (void *elem)
{
  struct oci_hooks *h = elem;
  struct
  {
    struct oci_hook *v;
    size_t n;
  } lists[] = { { h->prestart, h->prestart_len },
                { h->create_runtime, h->create_runtime_len },
                { h->create_container, h->create_container_len },
                { h->start_container, h->start_container_len },
                { h->poststart, h->poststart_len },
                { h->poststop, h->poststop_len } };
  for (size_t l = 0; l < ASBX_ARRAY_SIZE (lists); l++)
    {
      for (size_t i = 0; i < lists[l].n; i++)
        hook_clear (&lists[l].v[i]);
      free (lists[l].v);
    }
}

static int
hook_list (struct oci_ctx *c, yajl_val v, const char *key, struct oci_hook **out, size_t *len)
{
  void *arr = NULL;
  int r = oci_get_array_of (c, v, key, sizeof (struct oci_hook), hook_fill, hook_clear, &arr, len);
  if (r > 0)
    *out = arr;
  return r;
}

static int
hooks_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_hooks *h = elem;
  OCI_TRY (hook_list (c, v, "prestart", &h->prestart, &h->prestart_len));
  OCI_TRY (hook_list (c, v, "createRuntime", &h->create_runtime, &h->create_runtime_len));
  OCI_TRY (hook_list (c, v, "createContainer", &h->create_container, &h->create_container_len));
  OCI_TRY (hook_list (c, v, "startContainer", &h->start_container, &h->start_container_len));
  OCI_TRY (hook_list (c, v, "poststart", &h->poststart, &h->poststart_len));
  OCI_TRY (hook_list (c, v, "poststop", &h->poststop, &h->poststop_len));
  return 0;
}

static int
process_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  return oci_parse_process (c, v, elem);
}

static void
process_clear (void *elem)
{
  oci_process_clear (elem);
}

static int
linux_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  return oci_parse_linux (c, v, elem);
}

static int
spec_fill (struct oci_ctx *c, yajl_val v, struct oci_spec *s)
{
  void *p = NULL;

  OCI_TRY (oci_required (c, "ociVersion", oci_get_string (c, v, "ociVersion", &s->oci_version)));
  OCI_TRY (check_version (c, s->oci_version));
  OCI_TRY (oci_get_sub (c, v, "root", sizeof (struct oci_root), root_fill, root_clear, &p));
  s->root = p;
  p = NULL;
  OCI_TRY (oci_get_array_of (c, v, "mounts", sizeof (struct oci_mount), mount_fill, mount_clear, &p, &s->mounts_len));
  s->mounts = p;
  p = NULL;
  OCI_TRY (oci_get_sub (c, v, "process", sizeof (struct oci_process), process_fill, process_clear, &p));
  s->process = p;
  p = NULL;
  OCI_TRY (oci_get_string (c, v, "hostname", &s->hostname));
  OCI_TRY (oci_get_string (c, v, "domainname", &s->domainname));
  OCI_TRY (oci_get_sub (c, v, "hooks", sizeof (struct oci_hooks), hooks_fill, hooks_clear, &p));
  s->hooks = p;
  p = NULL;
  OCI_TRY (oci_get_map (c, v, "annotations", &s->annotations));
  OCI_TRY (oci_get_sub (c, v, "linux", sizeof (struct oci_linux), linux_fill, oci_linux_clear, &p));
  s->linux_ = p;
  return 0;
}

struct oci_spec *
oci_spec_parse (const char *json, size_t len, const char *name, asbx_err_t *err)
{
  struct oci_ctx c;
  struct oci_spec *s = NULL;
  yajl_val tree;

  oci_ctx_init (&c, name, err);
  tree = oci_json_load (&c, json, len);
  if (tree)
    {
      s = xmalloc0 (sizeof (*s));
      if (spec_fill (&c, tree, s) < 0)
        {
          oci_spec_free (s);
          s = NULL;
        }
      yajl_tree_free (tree);
    }
  oci_ctx_release (&c);
  return s;
}

struct oci_spec *
oci_spec_parse_file (const char *path, asbx_err_t *err)
{
  cleanup_close int fd = -1;
  cleanup_free char *buf = NULL;
  size_t len = 0;
  struct stat st;

  fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    {
      asbx_error (err, errno, "open `%s`", path);
      return NULL;
    }
  /* a FIFO or device would block or never end; config.json is a regular file */
  if (fstat (fd, &st) < 0)
    {
      asbx_error (err, errno, "stat `%s`", path);
      return NULL;
    }
  if (!S_ISREG (st.st_mode))
    {
      asbx_error (err, EINVAL, "`%s` is not a regular file", path);
      return NULL;
    }
  /* max + 1 so that a file of exactly the limit still reads to EOF */
  if (read_all_fd (fd, OCI_MAX_FILE_SIZE + 1, &buf, &len) < 0)
    {
      if (errno == E2BIG)
        asbx_error (err, EFBIG, "%s: larger than 16 MiB", path);
      else
        asbx_error (err, errno, "read `%s`", path);
      return NULL;
    }
  return oci_spec_parse (buf, len, path, err);
}

void
oci_spec_free (struct oci_spec *s)
{
  if (s == NULL)
    return;
  free (s->oci_version);
  oci_process_free (s->process);
  if (s->root)
    root_clear (s->root);
  free (s->root);
  free (s->hostname);
  free (s->domainname);
  for (size_t i = 0; i < s->mounts_len; i++)
    mount_clear (&s->mounts[i]);
  free (s->mounts);
  if (s->hooks)
    hooks_clear (s->hooks);
  free (s->hooks);
  oci_map_clear (&s->annotations);
  oci_linux_free (s->linux_);
  free (s);
}

const char *
oci_map_get (const struct oci_map *m, const char *key)
{
  if (m == NULL || key == NULL)
    return NULL;
  for (size_t i = 0; i < m->len; i++)
    if (strcmp (m->keys[i], key) == 0)
      return m->values[i];
  return NULL;
}
