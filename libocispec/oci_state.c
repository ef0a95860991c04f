/* oci_state.c - JSON out: the container state (runtime-spec runtime.md "State") and the
 * features document (features.md, features-linux.md), written with yajl_gen.
 *
 * The strings come from our own state and from config.json (id, bundle, annotations), so they
 * may hold any bytes: yajl_gen validates UTF-8 and we fail rather than emit invalid JSON that an
 * engine would choke on. Output order follows the spec documents.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"

/* A generator whose first failure sticks, so the writers below need no error plumbing. */
struct gen
{
  yajl_gen g;
  yajl_gen_status st;
};

static void
gen_check (struct gen *o, yajl_gen_status st)
{
  if (o->st == yajl_gen_status_ok)
    o->st = st;
}

static void
gen_raw_string (struct gen *o, const char *s)
{
  gen_check (o, yajl_gen_string (o->g, (const unsigned char *) s, strlen (s)));
}

static void
gen_key_string (struct gen *o, const char *key, const char *val)
{
  if (val == NULL)
    return;
  gen_raw_string (o, key);
  gen_raw_string (o, val);
}

static void
gen_key_bool (struct gen *o, const char *key, bool val)
{
  gen_raw_string (o, key);
  gen_check (o, yajl_gen_bool (o->g, val));
}

/* NULL list = omitted, empty list = [] */
static void
gen_key_strv (struct gen *o, const char *key, const char *const *v)
{
  if (v == NULL)
    return;
  gen_raw_string (o, key);
  gen_check (o, yajl_gen_array_open (o->g));
  for (; *v; v++)
    gen_raw_string (o, *v);
  gen_check (o, yajl_gen_array_close (o->g));
}

static void
gen_key_map (struct gen *o, const char *key, const struct oci_map *m)
{
  if (m == NULL || m->len == 0)
    return;
  gen_raw_string (o, key);
  gen_check (o, yajl_gen_map_open (o->g));
  for (size_t i = 0; i < m->len; i++)
    {
      gen_raw_string (o, m->keys[i]);
      gen_raw_string (o, m->values[i] ? m->values[i] : "");
    }
  gen_check (o, yajl_gen_map_close (o->g));
}

/* {"enabled": b} under key */
static void
gen_key_enabled (struct gen *o, const char *key, bool enabled)
{
  gen_raw_string (o, key);
  gen_check (o, yajl_gen_map_open (o->g));
  gen_key_bool (o, "enabled", enabled);
  gen_check (o, yajl_gen_map_close (o->g));
}

static void
gen_open (struct gen *o, bool pretty, const char *indent)
{
  o->g = json_gen_new (JSON_GEN_VALIDATE_UTF8 | (pretty ? JSON_GEN_PRETTY : 0));
  o->st = yajl_gen_status_ok;
  /* `features` prints with its own indent (four spaces) */
  if (pretty && strcmp (indent, JSON_GEN_INDENT) != 0)
    yajl_gen_config (o->g, yajl_gen_indent_string, indent);
}

/* Take the text out (dropping yajl's final newline when asked) and free the generator. */
static char *
gen_finish (struct gen *o, bool keep_newline, const char *what, asbx_err_t *err)
{
  const unsigned char *buf = NULL;
  size_t len = 0;
  char *out = NULL;

  if (o->st == yajl_gen_status_ok)
    gen_check (o, yajl_gen_get_buf (o->g, &buf, &len));
  if (o->st != yajl_gen_status_ok)
    {
      if (o->st == yajl_gen_invalid_string)
        asbx_error (err, 0, "%s: a string is not valid UTF-8", what);
      else
        asbx_error (err, 0, "%s: JSON generator error %d", what, (int) o->st);
      if (err && *err)
        (*err)->errnum = EINVAL;
    }
  else
    {
      if (!keep_newline)
        while (len > 0 && buf[len - 1] == '\n')
          len--;
      out = xmalloc (len + 1);
      memcpy (out, buf, len);
      out[len] = '\0';
    }
  yajl_gen_free (o->g);
  return out;
}

char *
oci_state_to_json (const struct oci_state *st, bool pretty, asbx_err_t *err)
{
  struct gen o;

  gen_open (&o, pretty, "  ");
  gen_check (&o, yajl_gen_map_open (o.g));
  gen_key_string (&o, "ociVersion", st->oci_version);
  gen_key_string (&o, "id", st->id);
  gen_key_string (&o, "status", st->status);
  if (st->pid > 0)
    {
      gen_raw_string (&o, "pid");
      gen_check (&o, yajl_gen_integer (o.g, st->pid));
    }
  gen_key_string (&o, "bundle", st->bundle);
  gen_key_string (&o, "rootfs", st->rootfs);
  gen_key_string (&o, "created", st->created);
  gen_key_string (&o, "owner", st->owner);
  gen_key_map (&o, "annotations", st->annotations);
  gen_check (&o, yajl_gen_map_close (o.g));
  return gen_finish (&o, pretty, "state", err);
}

static void
gen_features_linux (struct gen *o, const struct oci_features_input *in)
{
  gen_raw_string (o, "linux");
  gen_check (o, yajl_gen_map_open (o->g));
  gen_key_strv (o, "namespaces", in->namespaces);
  gen_key_strv (o, "capabilities", in->capabilities);

  gen_raw_string (o, "cgroup");
  gen_check (o, yajl_gen_map_open (o->g));
  gen_key_bool (o, "v1", in->cgroup_v1);
  gen_key_bool (o, "v2", in->cgroup_v2);
  gen_key_bool (o, "systemd", in->cgroup_systemd);
  gen_key_bool (o, "systemdUser", in->cgroup_systemd_user);
  gen_key_bool (o, "rdma", in->cgroup_rdma);
  gen_check (o, yajl_gen_map_close (o->g));

  gen_raw_string (o, "seccomp");
  gen_check (o, yajl_gen_map_open (o->g));
  gen_key_bool (o, "enabled", in->seccomp_enabled);
  gen_key_strv (o, "actions", in->seccomp_actions);
  gen_key_strv (o, "operators", in->seccomp_operators);
  gen_key_strv (o, "archs", in->seccomp_archs);
  gen_key_strv (o, "knownFlags", in->seccomp_known_flags);
  gen_key_strv (o, "supportedFlags", in->seccomp_supported_flags);
  gen_check (o, yajl_gen_map_close (o->g));

  gen_key_enabled (o, "apparmor", in->apparmor_enabled);
  gen_key_enabled (o, "selinux", in->selinux_enabled);
  gen_key_enabled (o, "intelRdt", in->intel_rdt_enabled);

  if (in->memory_policy_modes)
    {
      gen_raw_string (o, "memoryPolicy");
      gen_check (o, yajl_gen_map_open (o->g));
      gen_key_strv (o, "modes", in->memory_policy_modes);
      gen_key_strv (o, "flags", in->memory_policy_flags);
      gen_check (o, yajl_gen_map_close (o->g));
    }

  gen_raw_string (o, "mountExtensions");
  gen_check (o, yajl_gen_map_open (o->g));
  gen_key_enabled (o, "idmap", in->mount_extensions_idmap);
  gen_check (o, yajl_gen_map_close (o->g));

  gen_check (o, yajl_gen_map_close (o->g));
}

char *
oci_features_to_json (const struct oci_features_input *in, asbx_err_t *err)
{
  struct gen o;

  gen_open (&o, true, "    ");
  gen_check (&o, yajl_gen_map_open (o.g));
  gen_key_string (&o, "ociVersionMin", in->oci_version_min);
  gen_key_string (&o, "ociVersionMax", in->oci_version_max);
  gen_key_strv (&o, "hooks", in->hooks);
  gen_key_strv (&o, "mountOptions", in->mount_options);
  gen_features_linux (&o, in);
  gen_key_map (&o, "annotations", in->annotations);
  gen_check (&o, yajl_gen_map_close (o.g));
  return gen_finish (&o, false, "features", err);
}
