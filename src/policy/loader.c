/* loader.c - where a container's policy comes from (POLICY.md §1): the host config, the ceiling
 * (--profile / --policy / defaultProfile / the sandbox default), the request (annotations), site
 * profiles. The only file in src/policy that reads files; the rest is pure and unit-tested.
 *
 * Threat model: the request (annotations) is untrusted. A profile name from an annotation is
 * validated before it becomes part of a path (no '/', no leading '.'), so it cannot name a
 * file outside the profiles directory. Files are read whole with a size bound. The host config
 * and --policy belong to the host admin, but are still strictly validated (unknown keys are
 * errors): a typo in a ceiling must not silently open a hole. */
#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"
#include "policy/compile.h"
#include "policy/doc.h"
#include "policy/policy.h"
#include "policy/profiles.h"
#include "policy/userconf.h"

#define POLICY_MAX_FILE (1u << 20)

const char *
policy_builtin_profile (const char *name)
{
  for (const struct policy_builtin *b = policy_builtins; b->name; b++)
    if (strcmp (b->name, name) == 0)
      return b->json;
  return NULL;
}

const char *
policy_builtin_name (size_t i)
{
  size_t n = 0;
  while (n < i && policy_builtins[n].name)
    n++;
  return policy_builtins[n].name;
}

/* pdoc_lookup_fn: site profile DIR/NAME.json first (the admin may redefine a built-in), then
 * the built-in. `name` was validated by the caller. */
static char *
lookup_profile (void *ud, const char *name, size_t *len, char **where, asbx_err_t *err)
{
  const char *dir = ud ? ud : POLICY_DEFAULT_PROFILES_DIR;
  cleanup_free char *path = xasprintf ("%s/%s.json", dir, name);
  asbx_err_t e = NULL;
  char *text = NULL;

  if (read_file_at (AT_FDCWD, path, POLICY_MAX_FILE, &text, len, &e) == 0)
    {
      *where = steal_ptr (&path);
      return text;
    }
  if (e && e->errnum != ENOENT)
    {
      asbx_error_move (err, &e);
      return NULL;
    }
  asbx_error_free (&e);
  for (const struct policy_builtin *b = policy_builtins; b->name; b++)
    if (strcmp (b->name, name) == 0)
      {
        *len = b->len;
        *where = xstrdup ("built-in");
        return xstrdup (b->json);
      }
  asbx_error (err, 0, "unknown profile \"%s\" (not built in, no %s)", name, path);
  if (*err)
    (*err)->errnum = EINVAL;
  return NULL;
}

struct host_config
{
  char *default_profile;
  bool clamp;
  char *audit_dir;
  char *workspaces_dir; /* workspacesDir (issue 18) */
  bool audit_syslog;
  bool enable_kernel_audit;
  /* "rootless": {"cgroupParent": ...} */
  char *rootless_cgroup_parent;
  char *secrets_dir;      /* "secretsDir": absolute, NULL = POLICY_DEFAULT_SECRETS_DIR */
  char *upstream_ca_file; /* "upstreamCaFile": absolute, NULL = none */
  char *path;             /* NULL when there is no host config */
};

static void
host_config_clear (struct host_config *h)
{
  free (h->default_profile);
  free (h->audit_dir);
  free (h->workspaces_dir);
  free (h->rootless_cgroup_parent);
  free (h->secrets_dir);
  free (h->upstream_ca_file);
  free (h->path);
}

/* "rootless": {"cgroupParent": "/abs/path"} - the cgroup an admin delegated to each non-root
 * caller (runtime/rootless_cgroup.h expands %u / %U). Unknown keys are errors. 0 / -1. */
static int
host_config_rootless (struct oci_ctx *c, yajl_val t, struct host_config *h)
{
  yajl_val r = NULL;
  int got = oci_get_object (c, t, "rootless", &r);
  size_t mark;

  if (got <= 0)
    return got;
  mark = oci_ctx_push_key (c, "rootless");
  for (size_t i = 0; i < r->u.object.len; i++)
    if (strcmp (r->u.object.keys[i], "cgroupParent") != 0)
      return oci_fail_key (c, r->u.object.keys[i], "unknown key (expected cgroupParent)");
  if (oci_get_string (c, r, "cgroupParent", &h->rootless_cgroup_parent) < 0)
    return -1;
  if (h->rootless_cgroup_parent && h->rootless_cgroup_parent[0] != '/')
    return oci_fail_key (c, "cgroupParent", "expected an absolute cgroup path such as \"/agentsbx-users/%%u\"");
  oci_ctx_pop (c, mark);
  return 0;
}

static int
host_config_parse (struct host_config *h, const char *text, size_t len, const char *path, asbx_err_t *err)
{
  static const char *const keys[] = { "defaultProfile", "onWiden",           "auditDir", "auditSyslog",
                                      "workspacesDir",  "enableKernelAudit", "rootless", "secretsDir",
                                      "upstreamCaFile", "$comment",          NULL };
  cleanup_free char *on_widen = NULL;
  struct oci_ctx c;
  yajl_val t;
  int r = 0;

  oci_ctx_init (&c, path, err);
  t = oci_json_load (&c, text, len);
  if (t == NULL)
    r = -1;
  for (size_t i = 0; r == 0 && i < t->u.object.len; i++)
    {
      bool ok = false;
      for (const char *const *k = keys; *k; k++)
        ok = ok || strcmp (*k, t->u.object.keys[i]) == 0;
      if (!ok)
        r = oci_fail_key (&c, t->u.object.keys[i],
                          "unknown key (expected defaultProfile, onWiden, auditDir, auditSyslog, "
                          "workspacesDir, enableKernelAudit, rootless, secretsDir, upstreamCaFile, $comment)");
      /* "$comment" (JSON Schema's comment keyword): text for the admin, ignored; a string or an
       * array of strings, so the commented example the package installs is a valid config */
      else if (strcmp (t->u.object.keys[i], "$comment") == 0)
        {
          yajl_val v = t->u.object.values[i];
          ok = YAJL_IS_STRING (v) || YAJL_IS_ARRAY (v);
          for (size_t j = 0; ok && YAJL_IS_ARRAY (v) && j < v->u.array.len; j++)
            ok = YAJL_IS_STRING (v->u.array.values[j]);
          if (!ok)
            r = oci_fail_key (&c, "$comment", "expected a string or an array of strings");
        }
    }
  if (r == 0)
    r = oci_get_string (&c, t, "defaultProfile", &h->default_profile) < 0
                || oci_get_string (&c, t, "onWiden", &on_widen) < 0
                || oci_get_string (&c, t, "auditDir", &h->audit_dir) < 0
                || oci_get_string (&c, t, "workspacesDir", &h->workspaces_dir) < 0
                || oci_get_bool (&c, t, "auditSyslog", &h->audit_syslog) < 0
                || oci_get_bool (&c, t, "enableKernelAudit", &h->enable_kernel_audit) < 0
                || host_config_rootless (&c, t, h) < 0 || oci_get_string (&c, t, "secretsDir", &h->secrets_dir) < 0
                || oci_get_string (&c, t, "upstreamCaFile", &h->upstream_ca_file) < 0
            ? -1
            : 0;
  if (r == 0 && h->default_profile && !pdoc_profile_name_ok (h->default_profile))
    r = oci_fail_key (&c, "defaultProfile", "invalid profile name");
  if (r == 0 && on_widen && strcmp (on_widen, "clamp") != 0 && strcmp (on_widen, "refuse") != 0)
    r = oci_fail_key (&c, "onWiden", "expected \"refuse\" or \"clamp\"");
  if (r == 0 && h->audit_dir && h->audit_dir[0] != '/')
    r = oci_fail_key (&c, "auditDir", "expected an absolute path");
  if (r == 0 && h->secrets_dir && h->secrets_dir[0] != '/')
    r = oci_fail_key (&c, "secretsDir", "expected an absolute path (a root-only directory, one file per secret)");
  if (r == 0 && h->upstream_ca_file && h->upstream_ca_file[0] != '/')
    r = oci_fail_key (&c, "upstreamCaFile", "expected an absolute path (a PEM file of CA certificates)");
  if (r == 0 && h->workspaces_dir && h->workspaces_dir[0] != '/')
    r = oci_fail_key (&c, "workspacesDir", "expected an absolute path");
  h->clamp = on_widen && strcmp (on_widen, "clamp") == 0;
  if (t)
    yajl_tree_free (t);
  oci_ctx_release (&c);
  return r;
}

static int
host_config_load (struct host_config *h, const char *path, asbx_err_t *err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  asbx_err_t e = NULL;
  const char *p = path ? path : POLICY_DEFAULT_CONFIG;

  if (read_file_at (AT_FDCWD, p, POLICY_MAX_FILE, &text, &len, &e) < 0)
    {
      /* the default location is optional; a file named with --config is not */
      if (path == NULL && e->errnum == ENOENT)
        {
          asbx_error_free (&e);
          return 0;
        }
      asbx_error_move (err, &e);
      return -1;
    }
  h->path = xstrdup (p);
  return host_config_parse (h, text, len, p, err);
}

/* The user config named by in->user_config (must exist), else the caller's own when it is not
 * root (absent = none); root reads none (docs/policy.md "User config"). */
static int
user_config_load (const struct policy_inputs *in, struct user_config *u, asbx_err_t *err)
{
  cleanup_free char *dflt = NULL;

  if (in->user_config)
    return *in->user_config ? userconf_load (u, in->user_config, true, lookup_profile, (void *) in->profiles_dir, err)
                            : 0;
  if (geteuid () == 0 || !(dflt = userconf_default_path ()))
    return 0;
  return userconf_load (u, dflt, false, lookup_profile, (void *) in->profiles_dir, err);
}

/* One side (ceiling or request) loaded, with how messages and `sources` name it. */
struct side
{
  struct pdoc *doc;
  char *name;   /* `profile "agent"`, `policy "/x.json"` - for widening messages */
  char *source; /* provenance line for plan->sources */
};

static void
side_clear (struct side *s)
{
  pdoc_free (s->doc);
  free (s->name);
  free (s->source);
}

static int
side_profile (struct side *s, const char *name, const char *why, const char *dir, asbx_err_t *err)
{
  s->doc = pdoc_load_profile (name, lookup_profile, (void *) dir, NULL, 0, err);
  if (s->doc == NULL)
    return asbx_error_wrap (err, "%s", why);
  s->name = xasprintf ("profile \"%s\"", name);
  s->source = xasprintf ("profile %s (%s)", name, why);
  return 0;
}

static int
side_file (struct side *s, const char *path, const char *dir, asbx_err_t *err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (read_file_at (AT_FDCWD, path, POLICY_MAX_FILE, &text, &len, err) < 0)
    return asbx_error_wrap (err, "--policy");
  s->doc = pdoc_load (text, len, path, lookup_profile, (void *) dir, err);
  if (s->doc == NULL)
    return -1;
  s->name = xasprintf ("policy \"%s\"", path);
  s->source = xasprintf ("policy %s (--policy)", path);
  return 0;
}

static const char *
map_get (const struct oci_map *m, const char *key)
{
  for (size_t i = 0; m && i < m->len; i++)
    if (strcmp (m->keys[i], key) == 0)
      return m->values[i];
  return NULL;
}

/* The user config's defaultProfile as the ceiling: it must narrow the host config's
 * defaultProfile when there is one (userconf.h); the built-in sandbox default `agent` is no
 * admin's choice and does not bound it (a --profile could name any profile anyway). */
static int
ceiling_user_default (const struct policy_inputs *in, const struct host_config *h, const struct user_config *u,
                      struct side *s, asbx_err_t *err)
{
  cleanup_free char *why = xasprintf ("defaultProfile in %s", u->path);
  struct side sys = { 0 };
  struct pdoc *narrowed = NULL;
  int r;

  if (side_profile (s, u->default_profile, why, in->profiles_dir, err) < 0 || !h->default_profile)
    return s->doc ? 0 : -1;
  cleanup_free char *sys_why = xasprintf ("defaultProfile in %s", h->path);
  r = side_profile (&sys, h->default_profile, sys_why, in->profiles_dir, err);
  if (r == 0)
    {
      cleanup_free char *sys_name = xasprintf ("%s (defaultProfile in %s)", sys.name, h->path);
      pdoc_normalize (sys.doc);
      r = userconf_narrow_default (u, sys.doc, sys_name, s->doc, &narrowed, err);
    }
  side_clear (&sys);
  if (r < 0)
    return -1;
  pdoc_free (s->doc);
  s->doc = narrowed;
  return 0;
}

static int
load_ceiling (const struct policy_inputs *in, const struct host_config *h, const struct user_config *u,
              bool have_request, struct side *s, asbx_err_t *err)
{
  const char *dir = in->profiles_dir;
  if (in->profile_flag && in->policy_flag)
    return asbx_error (err, 0, "--profile and --policy both set a ceiling: use one");
  if (in->profile_flag)
    return side_profile (s, in->profile_flag, "--profile", dir, err);
  if (in->policy_flag)
    return side_file (s, in->policy_flag, dir, err);
  if (u->default_profile)
    return ceiling_user_default (in, h, u, s, err);
  if (h->default_profile)
    {
      cleanup_free char *why = xasprintf ("defaultProfile in %s", h->path);
      return side_profile (s, h->default_profile, why, dir, err);
    }
  if (!have_request && in->sandbox_default_profile)
    return side_profile (s, in->sandbox_default_profile, "sandbox default", dir, err);
  return 0;
}

static int
load_request (const struct policy_inputs *in, struct side *s, asbx_err_t *err)
{
  const char *inline_ = map_get (in->annotations, POLICY_ANNOTATION_POLICY);
  const char *name = map_get (in->annotations, POLICY_ANNOTATION_PROFILE);
  if (inline_ && name)
    return asbx_error (err, 0, "annotations %s and %s both set a policy: use one", POLICY_ANNOTATION_POLICY,
                       POLICY_ANNOTATION_PROFILE);
  if (inline_)
    {
      s->doc = pdoc_load (inline_, strlen (inline_), "annotation " POLICY_ANNOTATION_POLICY, lookup_profile,
                          (void *) in->profiles_dir, err);
      if (s->doc == NULL)
        return -1;
      s->source = xstrdup ("annotation " POLICY_ANNOTATION_POLICY);
      return 0;
    }
  if (name)
    return side_profile (s, name, "annotation " POLICY_ANNOTATION_PROFILE, in->profiles_dir, err);
  return 0;
}

static void
add_source (struct policy_plan *p, char *line)
{
  p->sources = xrealloc (p->sources, (p->sources_len + 2) * sizeof (char *));
  p->sources[p->sources_len++] = line;
  p->sources[p->sources_len] = NULL;
}

static struct policy_plan *
merge_sides (struct side *ceil, struct side *req, const struct host_config *h, const struct user_config *u, bool review,
             bool isolation_vm, asbx_err_t *err)
{
  struct pdoc *eff = NULL;
  char **clamps = NULL;
  size_t nclamps = 0;
  if (ceil->doc && req->doc)
    {
      pdoc_normalize (ceil->doc);
      eff = pdoc_intersect (ceil->doc, req->doc, ceil->name, h->clamp, &clamps, &nclamps, err);
      if (eff == NULL)
        return NULL;
    }
  else if (req->doc && req->doc->credentials.len)
    {
      /* a credential sends a host secret to the host it names: only an admin's or the caller's
       * own ceiling may name one, never a request alone */
      asbx_error (err, 0,
                  "%s.host: a request cannot add credentials: they come only from a ceiling (--profile, --policy, "
                  "defaultProfile) that names them",
                  req->doc->credentials.v[0].origin);
      if (*err)
        (*err)->errnum = EINVAL;
      return NULL;
    }
  else
    {
      eff = steal_ptr (ceil->doc ? &ceil->doc : &req->doc);
      pdoc_normalize (eff);
    }
  if (u->restrict_doc)
    {
      struct pdoc *narrowed = NULL;
      cleanup_free char *name = xasprintf ("the policy in force (%s)", ceil->name ? ceil->name : "the request");
      if (userconf_narrow (u, eff, name, &narrowed, err) < 0)
        {
          pdoc_free (eff);
          asbx_strv_free (clamps);
          return NULL;
        }
      pdoc_free (eff);
      eff = narrowed;
    }
  if (pdoc_check_egress (eff, err) < 0)
    {
      pdoc_free (eff);
      asbx_strv_free (clamps);
      return NULL;
    }
  if (review)
    eff->ws_mode = POLICY_WS_REVIEW; /* review narrows direct: nothing to check against the ceiling */
  if (isolation_vm)
    eff->isolation = POLICY_ISOLATION_VM; /* vm narrows container: likewise */
  struct policy_plan *p = policy_compile (eff);
  pdoc_free (eff);
  p->clamps = clamps;
  p->clamps_len = nclamps;
  return p;
}

/* one host directory hidden from the container (plan.h hidden_paths), once */
static void
add_hidden (struct policy_plan *p, const char *path)
{
  if (path == NULL)
    return;
  for (size_t i = 0; i < p->hidden_paths_len; i++)
    if (strcmp (p->hidden_paths[i], path) == 0)
      return;
  p->hidden_paths = xrealloc (p->hidden_paths, (p->hidden_paths_len + 2) * sizeof (char *));
  p->hidden_paths[p->hidden_paths_len++] = xstrdup (path);
  p->hidden_paths[p->hidden_paths_len] = NULL;
}

void
policy_plan_hide (struct policy_plan *p, const char *const *dirs)
{
  for (size_t i = 0; p && p->active && dirs && dirs[i]; i++)
    add_hidden (p, dirs[i]);
}

struct policy_plan *
policy_resolve (const struct policy_inputs *in, asbx_err_t *err)
{
  struct host_config h = { 0 };
  struct user_config u = { 0 };
  struct side ceil = { 0 }, req = { 0 };
  struct policy_plan *p = NULL;

  if (host_config_load (&h, in->config_path, err) < 0 || user_config_load (in, &u, err) < 0
      || load_request (in, &req, err) < 0 || load_ceiling (in, &h, &u, req.doc != NULL, &ceil, err) < 0)
    goto out;
  if (ceil.doc == NULL && req.doc == NULL && in->isolation_vm)
    {
      /* `--isolation vm` of a runtime class with no policy: the tier alone, nothing else added
       * (an empty document: every field absent is as in plain OCI) */
      ceil.doc = pdoc_new ("--isolation vm");
      ceil.source = xstrdup ("--isolation vm");
    }
  if (ceil.doc == NULL && req.doc == NULL)
    p = xmalloc0 (sizeof *p); /* plain OCI: nothing added (a user config's restrict neither) */
  else if ((p = merge_sides (&ceil, &req, &h, &u, in->workspace_review, in->isolation_vm, err)) == NULL)
    goto out;
  if (ceil.source)
    add_source (p, xasprintf ("ceiling: %s", ceil.source));
  if (req.source)
    add_source (p, xasprintf ("request: %s", req.source));
  if (h.path)
    add_source (p, xasprintf ("host config: %s (onWiden %s)", h.path, h.clamp ? "clamp" : "refuse"));
  if (u.path)
    add_source (p, xasprintf ("user config: %s%s%s", u.path, u.default_profile ? " (defaultProfile)" : "",
                              u.restrict_doc ? " (restrict)" : ""));
  p->audit_dir = xstrdup (in->audit_dir_flag ? in->audit_dir_flag
                          : h.audit_dir      ? h.audit_dir
                                             : POLICY_DEFAULT_AUDIT_DIR);
  p->audit_syslog = h.audit_syslog;
  p->workspaces_dir = geteuid () != 0    ? policy_user_workspaces_dir ()
                      : h.workspaces_dir ? xstrdup (h.workspaces_dir)
                                         : xstrdup (POLICY_DEFAULT_WORKSPACES_DIR);
  /* the secrets a credential names: the host config's directory for root; a non-root caller's
   * own (its user config's secretsDir, else ~/.config/agentsbx/secrets), since the host's is
   * root-only */
  if (geteuid () == 0)
    p->secrets_dir = xstrdup (h.secrets_dir ? h.secrets_dir : POLICY_DEFAULT_SECRETS_DIR);
  else
    p->secrets_dir = u.secrets_dir ? xstrdup (u.secrets_dir) : userconf_default_secrets_dir ();
  p->upstream_ca_file = steal_ptr (&h.upstream_ca_file);
  if (p->active)
    {
      /* the secrets dirs and the review upper layers of every container (issue 18) too: no
       * container sees a secret or another's workspace layers */
      const char *hide[] = { p->audit_dir,
                             POLICY_DEFAULT_AUDIT_DIR,
                             in->state_root,
                             POLICY_DEFAULT_STATE_ROOT,
                             p->secrets_dir,
                             POLICY_DEFAULT_SECRETS_DIR,
                             h.secrets_dir,
                             p->workspaces_dir,
                             POLICY_DEFAULT_WORKSPACES_DIR };
      for (size_t i = 0; i < ASBX_ARRAY_SIZE (hide); i++)
        add_hidden (p, hide[i]);
    }
  p->enable_kernel_audit = h.enable_kernel_audit;
  p->rootless_cgroup_parent = steal_ptr (&h.rootless_cgroup_parent);
out:
  side_clear (&ceil);
  side_clear (&req);
  host_config_clear (&h);
  userconf_clear (&u);
  return p;
}

char *
policy_user_workspaces_dir (void)
{
  const char *xdg = getenv ("XDG_DATA_HOME"), *home = getenv ("HOME");
  struct passwd *pw;

  if (xdg && xdg[0] == '/')
    return xasprintf ("%s/agentsbx/workspaces", xdg);
  if (!home || home[0] != '/')
    {
      pw = getpwuid (geteuid ());
      home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
  return home ? xasprintf ("%s/.local/share/agentsbx/workspaces", home) : NULL;
}

char *
policy_workspaces_dir (const char *config_path, asbx_err_t *err)
{
  struct host_config h = { 0 };
  char *dir = NULL;

  if (geteuid () != 0)
    {
      dir = policy_user_workspaces_dir ();
      if (dir == NULL)
        asbx_error (err, 0, "workspaces directory: neither XDG_DATA_HOME nor HOME is set, and uid %u has no home",
                    (unsigned) geteuid ());
      return dir;
    }
  if (host_config_load (&h, config_path, err) == 0)
    dir = xstrdup (h.workspaces_dir ? h.workspaces_dir : POLICY_DEFAULT_WORKSPACES_DIR);
  host_config_clear (&h);
  return dir;
}

struct policy_plan *
policy_resolve_saved (const char *json, const char *source, asbx_err_t *err)
{
  /* no host config, no ceiling, no site profiles: the document is already the intersection
   * (and clamp) computed at create, with every `extends` expanded */
  struct pdoc *d = pdoc_load (json, strlen (json), source, lookup_profile, NULL, err);
  if (d == NULL)
    return NULL;
  pdoc_normalize (d);
  struct policy_plan *p = policy_compile (d);
  pdoc_free (d);
  add_source (p, xasprintf ("saved at create: %s", source));
  p->audit_dir = xstrdup (POLICY_DEFAULT_AUDIT_DIR);
  return p;
}

char *
policy_check (const char *json, size_t len, const char *source, const char *profiles_dir, asbx_err_t *err)
{
  struct pdoc *d = pdoc_load (json, len, source, lookup_profile, (void *) profiles_dir, err);
  if (d == NULL)
    return NULL;
  char *out = pdoc_to_json (d, true);
  pdoc_free (d);
  return out;
}
