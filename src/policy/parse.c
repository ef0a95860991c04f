/* parse.c - policy document JSON -> struct pdoc, validated (POLICY.md §2).
 *
 * Threat model: a request is untrusted input (an annotation anyone starting a container can
 * set). Loading reuses libocispec's safe loader (depth bound, duplicate keys, NUL, comments
 * refused). Unlike config.json, an unknown key is an error at every level: a typo must never
 * silently drop a rule. Every message names the source and the JSON path
 * ("annotation io.agentsbx.policy: filesystem.denyRead[2]: ..."). `extends` is applied last,
 * through a lookup callback, so this file never touches the filesystem. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"
#include "policy/doc.h"
#include "policy/parse_internal.h"
#include "policy/plan.h"
#include "policy/syscall_groups.h"

#define PDOC_MAX_EXTENDS 8

/* Refuse keys outside `allowed` (NULL-terminated), naming the first unknown one. */
int
pparse_keys (struct oci_ctx *c, yajl_val obj, const char *const *allowed)
{
  for (size_t i = 0; i < obj->u.object.len; i++)
    {
      const char *k = obj->u.object.keys[i];
      bool ok = false;
      for (const char *const *a = allowed; *a && !ok; a++)
        ok = strcmp (*a, k) == 0;
      if (!ok)
        {
          cleanup_free char *list = NULL;
          size_t n = 0;
          for (const char *const *a = allowed; *a; a++)
            n += strlen (*a) + 2;
          list = xmalloc0 (n + 1);
          for (const char *const *a = allowed; *a; a++)
            {
              if (a != allowed)
                strcat (list, ", ");
              strcat (list, *a);
            }
          return oci_fail_key (c, k, "unknown key (expected one of: %s)", list);
        }
    }
  return 0;
}

/* Walk an array member `key`, calling fn on each element with the path at the element. */
int
pparse_each (struct oci_ctx *c, yajl_val obj, const char *key, elem_fn fn, void *ud, bool *set)
{
  yajl_val a = NULL;
  int r = oci_get_array (c, obj, key, &a);
  if (r <= 0)
    return r;
  if (set)
    *set = true;
  size_t mark = oci_ctx_push_key (c, key);
  for (size_t i = 0; i < a->u.array.len; i++)
    {
      size_t m2 = oci_ctx_push_index (c, i);
      r = fn (c, a->u.array.values[i], ud);
      oci_ctx_pop (c, m2);
      if (r < 0)
        break;
    }
  oci_ctx_pop (c, mark);
  return r < 0 ? -1 : 1;
}

int
pparse_string (struct oci_ctx *c, yajl_val v, const char **out)
{
  if (!YAJL_IS_STRING (v) || v->u.string == NULL)
    {
      oci_fail (c, "expected string");
      return -1; /* (oci_fail's -1 is in another file: the analyzer would not see it) */
    }
  *out = v->u.string;
  return 0;
}

/* one message shape for every rejected value: `"value": why` */
int
pparse_fail_value (struct oci_ctx *c, const char *value, char *why)
{
  cleanup_free char *q = oci_quote (value);
  cleanup_free char *w = why;
  return oci_fail (c, "%s: %s", q, w);
}

/* ---- filesystem ----------------------------------------------------------------------------- */

struct path_ud
{
  struct pdoc_paths *list;
  bool home_ok;
};

static int
elem_path (struct oci_ctx *c, yajl_val v, void *ud_)
{
  struct path_ud *ud = ud_;
  struct pdoc_path p = { 0 };
  const char *s = NULL;
  char *why = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  if (pval_path (s, &p, ud->home_ok, &why) < 0)
    return pparse_fail_value (c, s, why);
  p.origin = xasprintf ("%s: %s", c->name, c->path);
  pdoc_paths_add (ud->list, &p);
  free (p.path);
  free (p.origin);
  return 0;
}

static int get_enum (struct oci_ctx *c, yajl_val obj, const char *key, const char *const *names, int *out);

/* filesystem.workspace {path, mode}: path absolute, normalised, not `/` (the workspace is a mount
 * of its own), no `?` or `~/` form (it names one mount exactly) */
static int
parse_workspace (struct oci_ctx *c, yajl_val fs, struct pdoc *d)
{
  static const char *const keys[] = { "path", "mode", NULL };
  cleanup_free char *path = NULL;
  yajl_val ws = NULL;
  int r = oci_get_object (c, fs, "workspace", &ws);
  if (r <= 0)
    return r;
  size_t mark = oci_ctx_push_key (c, "workspace");
  r = pparse_keys (c, ws, keys) < 0 ? -1 : get_enum (c, ws, "mode", policy_ws_mode_names, &d->ws_mode);
  if (r >= 0)
    r = oci_get_string (c, ws, "path", &path);
  if (r > 0)
    {
      struct pdoc_path p = { 0 };
      char *why = NULL;
      size_t m2 = oci_ctx_push_key (c, "path");
      if (path[0] == '?' || path[0] == '~')
        r = pparse_fail_value (c, path,
                               xstrdup ("expected the absolute container path of the workspace mount (no `?` or "
                                        "`~/` form)"));
      else if (pval_path (path, &p, false, &why) < 0)
        r = pparse_fail_value (c, path, why);
      else if (strcmp (p.path, "/") == 0)
        r = pparse_fail_value (c, path, xstrdup ("the workspace is a mount of its own, not `/`"));
      else
        {
          free (d->ws_path);
          d->ws_path = steal_ptr (&p.path);
        }
      free (p.path);
      oci_ctx_pop (c, m2);
    }
  oci_ctx_pop (c, mark);
  return r < 0 ? -1 : 0;
}

static int
parse_fs (struct oci_ctx *c, yajl_val fs, struct pdoc *d)
{
  static const char *const keys[] = { "allowRead", "denyRead", "allowWrite", "denyWrite",
                                      "allowExec", "tmpfs",    "workspace",  NULL };
  OCI_TRY (pparse_keys (c, fs, keys));
  /* a section holding only `workspace` restricts no path: the lists stay unset (a review
   * workspace from an engine's profile must not make the whole filesystem read-only) */
  d->has_fs = d->has_fs || fs->u.object.len != 1 || oci_get (fs, "workspace") == NULL;
  OCI_TRY (parse_workspace (c, fs, d));
  for (int i = 0; i < PDOC_FS_LISTS; i++)
    {
      struct path_ud ud = { &d->fs[i], i == PDOC_DENY_READ || i == PDOC_DENY_WRITE };
      OCI_TRY (pparse_each (c, fs, pdoc_fs_names[i], elem_path, &ud, &d->fs[i].set));
    }
  return 0;
}

/* ---- network -------------------------------------------------------------------------------- */

static int
elem_domain (struct oci_ctx *c, yajl_val v, void *ud)
{
  const char *s = NULL;
  char *norm = NULL, *why = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  if (pval_domain (s, &norm, &why) < 0)
    return pparse_fail_value (c, s, why);
  pdoc_strs_add (ud, norm);
  free (norm);
  return 0;
}

/* network.allowUnixSockets[i]: the path of one pathname unix socket in the container's view,
 * absolute and normalized (no `?`, no `~/`: a socket is named exactly); compared by inode at
 * connect time, so a symlink in the path is allowed */
static int
elem_unix_socket (struct oci_ctx *c, yajl_val v, void *ud)
{
  struct pdoc_path p = { 0 };
  const char *s = NULL;
  char *why = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  if (s[0] == '?' || s[0] == '~')
    return pparse_fail_value (c, s, xstrdup ("expected the absolute path of a socket (no `?` or `~/` form)"));
  if (pval_path (s, &p, false, &why) < 0)
    return pparse_fail_value (c, s, why);
  if (strcmp (p.path, "/") == 0)
    {
      free (p.path);
      return pparse_fail_value (c, s, xstrdup ("expected the path of a socket, not `/`"));
    }
  pdoc_strs_add (ud, p.path);
  free (p.path);
  return 0;
}

static int
elem_cidr (struct oci_ctx *c, yajl_val v, void *ud)
{
  const char *s = NULL;
  char *norm = NULL, *why = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  if (pval_cidr (s, &norm, &why) < 0)
    return pparse_fail_value (c, s, why);
  pdoc_strs_add (ud, norm);
  free (norm);
  return 0;
}

static int
elem_port (struct oci_ctx *c, yajl_val v, void *ud)
{
  struct pdoc *d = ud;
  int64_t p;
  OCI_TRY (oci_val_i64 (c, v, 1, 65535, &p));
  for (size_t i = 0; i < d->ports_len; i++)
    if (d->ports[i] == p)
      return 0;
  d->ports = xrealloc (d->ports, (d->ports_len + 1) * sizeof (*d->ports));
  d->ports[d->ports_len++] = (uint16_t) p;
  return 0;
}

/* `key`'s string value must be one of `names` (NULL-terminated); *out = its index */
static int
get_enum (struct oci_ctx *c, yajl_val obj, const char *key, const char *const *names, int *out)
{
  cleanup_free char *s = NULL;
  int r = oci_get_string (c, obj, key, &s);
  if (r <= 0)
    return r;
  for (int i = 0; names[i]; i++)
    if (names[i][0] && strcmp (names[i], s) == 0)
      {
        *out = i;
        return 1;
      }
  cleanup_free char *q = oci_quote (s);
  return oci_fail_key (c, key, "%s: unknown value", q);
}

static int
parse_net (struct oci_ctx *c, yajl_val net, struct pdoc *d)
{
  static const char *const keys[] = { "mode",
                                      "allowedDomains",
                                      "deniedDomains",
                                      "allowedCidrs",
                                      "ports",
                                      "allowLocalBinding",
                                      "allowUnixSockets",
                                      "credentials",
                                      "http",
                                      NULL };
  /* indexed by enum policy_net_mode */
  bool b;
  int r;
  OCI_TRY (pparse_keys (c, net, keys));
  d->has_net = true;
  OCI_TRY (get_enum (c, net, "mode", policy_net_mode_names, &d->net_mode));
  OCI_TRY (pparse_each (c, net, "allowedDomains", elem_domain, &d->allowed_domains, &d->allowed_domains.set));
  OCI_TRY (pparse_each (c, net, "deniedDomains", elem_domain, &d->denied_domains, &d->denied_domains.set));
  OCI_TRY (pparse_each (c, net, "allowedCidrs", elem_cidr, &d->allowed_cidrs, &d->allowed_cidrs.set));
  OCI_TRY (pparse_each (c, net, "ports", elem_port, d, &d->ports_set));
  OCI_TRY (
      pparse_each (c, net, "allowUnixSockets", elem_unix_socket, &d->allow_unix_sockets, &d->allow_unix_sockets.set));
  OCI_TRY (pparse_egress (c, net, d));
  OCI_TRY (r = oci_get_bool (c, net, "allowLocalBinding", &b));
  if (r > 0)
    d->allow_local_binding = b;
  return 0;
}

/* ---- syscalls, capabilities, audit, degrade --------------------------------------------------- */

static int
elem_group (struct oci_ctx *c, yajl_val v, void *ud)
{
  struct pdoc *d = ud;
  const char *s = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  const struct policy_sysgroup *g = policy_syscall_group_by_name (s);
  if (g == NULL)
    {
      cleanup_free char *q = oci_quote (s);
      return oci_fail (c, "%s: unknown syscall group (see docs/policy.md)", q);
    }
  d->deny_groups |= g->bit;
  return 0;
}

static int
elem_cap (struct oci_ctx *c, yajl_val v, void *ud)
{
  const char *s = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  for (size_t i = 0; pdoc_caps[i]; i++)
    if (strcmp (pdoc_caps[i], s) == 0)
      {
        pdoc_strs_add (ud, s);
        return 0;
      }
  cleanup_free char *q = oci_quote (s);
  return oci_fail (c, "%s: unknown capability (names are written CAP_XXX)", q);
}

static int
elem_audit (struct oci_ctx *c, yajl_val v, void *ud)
{
  struct pdoc *d = ud;
  const char *s = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  for (unsigned i = 0; i < ASBX_ARRAY_SIZE (pdoc_audit_names); i++)
    if (strcmp (pdoc_audit_names[i], s) == 0)
      {
        d->audit_events |= 1u << i;
        return 0;
      }
  cleanup_free char *q = oci_quote (s);
  return oci_fail (c, "%s: unknown audit event", q);
}

static int
elem_degrade (struct oci_ctx *c, yajl_val v, void *ud)
{
  const char *s = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  for (size_t i = 0; pdoc_degrade_names[i]; i++)
    if (strcmp (pdoc_degrade_names[i], s) == 0)
      {
        if (!pdoc_strs_has (ud, s))
          pdoc_strs_add (ud, s);
        return 0;
      }
  cleanup_free char *q = oci_quote (s);
  return oci_fail (c, "%s: unknown mechanism (landlock, seccomp, nftables, cgroup, pin)", q);
}

static int
parse_small_sections (struct oci_ctx *c, yajl_val top, struct pdoc *d)
{
  static const char *const sys_keys[] = { "deny", "denyWriteExecMemory", NULL };
  static const char *const cap_keys[] = { "allow", NULL };
  static const char *const audit_keys[] = { "events", "onFull", NULL };
  yajl_val o = NULL;
  size_t mark;
  int r;

  OCI_TRY (r = oci_get_object (c, top, "syscalls", &o));
  if (r > 0)
    {
      mark = oci_ctx_push_key (c, "syscalls");
      r = pparse_keys (c, o, sys_keys) < 0 ? -1 : pparse_each (c, o, "deny", elem_group, d, &d->deny_groups_set);
      if (r >= 0)
        {
          bool b;
          r = oci_get_bool (c, o, "denyWriteExecMemory", &b);
          if (r > 0)
            d->deny_wx_memory = b;
        }
      oci_ctx_pop (c, mark);
      OCI_TRY (r);
    }
  OCI_TRY (r = oci_get_object (c, top, "capabilities", &o));
  if (r > 0)
    {
      mark = oci_ctx_push_key (c, "capabilities");
      r = pparse_keys (c, o, cap_keys) < 0 ? -1
                                           : pparse_each (c, o, "allow", elem_cap, &d->caps_allow, &d->caps_allow.set);
      oci_ctx_pop (c, mark);
      OCI_TRY (r);
    }
  OCI_TRY (r = oci_get_object (c, top, "audit", &o));
  if (r > 0)
    {
      mark = oci_ctx_push_key (c, "audit");
      r = pparse_keys (c, o, audit_keys) < 0 ? -1 : pparse_each (c, o, "events", elem_audit, d, &d->audit_set);
      if (r >= 0)
        r = get_enum (c, o, "onFull", policy_on_full_names, &d->audit_on_full);
      if (r > 0)
        d->audit_set = true;
      oci_ctx_pop (c, mark);
      OCI_TRY (r);
    }
  OCI_TRY (pparse_each (c, top, "degrade", elem_degrade, &d->degrade, &d->degrade.set));
  return 0;
}

/* ---- limits and approvals ------------------------------------------------------------------- */

/* A size, duration or count at obj.key: integer, or (sizes/durations) a string with a unit.
 * `positive`: 0 is refused (a limit of 0 is a typo for "no limit", which is omission). */
int
pparse_quantity (struct oci_ctx *c, yajl_val obj, const char *key, enum vkind kind, bool positive, struct pdoc_u64 *out)
{
  yajl_val v = oci_get (obj, key);
  uint64_t x = 0;
  int64_t i;
  char *why = NULL;
  int r = 0;
  if (v == NULL)
    return 0;
  size_t mark = oci_ctx_push_key (c, key);
  if (YAJL_IS_STRING (v) && kind != V_COUNT)
    r = (kind == V_SIZE ? pval_size : pval_duration) (v->u.string, &x, &why) < 0
            ? pparse_fail_value (c, v->u.string, why)
            : 0;
  else if (YAJL_IS_NUMBER (v))
    {
      r = oci_val_i64 (c, v, INT64_MIN, INT64_MAX, &i);
      if (r == 0 && i < 0)
        r = oci_fail (c, "%lld: must not be negative", (long long) i);
      x = (uint64_t) i;
    }
  else
    r = oci_fail (c, kind == V_COUNT ? "expected integer"
                                     : (kind == V_SIZE ? "expected integer (bytes) or string with a unit (\"2GiB\")"
                                                       : "expected integer (seconds) or string with a unit (\"90s\")"));
  if (r == 0 && positive && x == 0)
    r = oci_fail (c, "a limit must be positive (omit the key for no limit)");
  oci_ctx_pop (c, mark);
  if (r < 0)
    return -1;
  out->set = true;
  out->v = x;
  return 1;
}

static int
parse_limits (struct oci_ctx *c, yajl_val lim, struct pdoc *d)
{
  static const char *const keys[] = {
    "memoryBytes", "pids", "openFiles", "fileSizeBytes", "wallClockSeconds", "cpuSeconds", "failedExecs", "cpus", NULL
  };
  static const enum vkind kinds[PDOC_LIMITS] = { V_SIZE, V_COUNT, V_COUNT, V_SIZE, V_DURATION, V_DURATION, V_COUNT };
  OCI_TRY (pparse_keys (c, lim, keys));
  for (int i = 0; i < PDOC_LIMITS; i++)
    OCI_TRY (pparse_quantity (c, lim, pdoc_limit_names[i], kinds[i], true, &d->limits[i]));
  yajl_val v = oci_get (lim, "cpus");
  if (v)
    {
      size_t mark = oci_ctx_push_key (c, "cpus");
      int r = 0;
      if (!YAJL_IS_NUMBER (v) || !isfinite (YAJL_GET_DOUBLE (v)))
        r = oci_fail (c, "expected number (a fraction of one CPU, e.g. 1.5)");
      else if (YAJL_GET_DOUBLE (v) <= 0 || YAJL_GET_DOUBLE (v) > 65536)
        r = oci_fail (c, "a limit must be positive (omit the key for no limit)");
      oci_ctx_pop (c, mark);
      OCI_TRY (r);
      d->cpus_set = true;
      d->cpus = YAJL_GET_DOUBLE (v);
    }
  return 0;
}

static int
parse_approvals (struct oci_ctx *c, yajl_val ap, struct pdoc *d)
{
  static const char *const keys[] = { "network", "timeoutSeconds", "onTimeout", NULL };
  OCI_TRY (pparse_keys (c, ap, keys));
  OCI_TRY (get_enum (c, ap, "network", policy_approval_names, &d->approvals_network));
  OCI_TRY (pparse_quantity (c, ap, "timeoutSeconds", V_DURATION, false, &d->approvals_timeout));
  OCI_TRY (get_enum (c, ap, "onTimeout", policy_on_timeout_names, &d->on_timeout_allow));
  return 0;
}

/* ---- the document --------------------------------------------------------------------------- */

static int
parse_section (struct oci_ctx *c, yajl_val top, const char *key, int (*fn) (struct oci_ctx *, yajl_val, struct pdoc *),
               struct pdoc *d)
{
  yajl_val o = NULL;
  int r = oci_get_object (c, top, key, &o);
  if (r <= 0)
    return r;
  size_t mark = oci_ctx_push_key (c, key);
  r = fn (c, o, d);
  oci_ctx_pop (c, mark);
  return r;
}

static int
parse_top (struct oci_ctx *c, yajl_val top, struct pdoc *d)
{
  static const char *const keys[] = { "version",  "extends",      "description", "filesystem", "network",
                                      "syscalls", "capabilities", "limits",      "approvals",  "audit",
                                      "degrade",  "isolation",    NULL };
  cleanup_free char *desc = NULL;
  uint32_t version = 0;
  OCI_TRY (pparse_keys (c, top, keys));
  OCI_TRY (oci_required (c, "version", oci_get_u32 (c, top, "version", &version)));
  if (version != 1)
    return oci_fail_key (c, "version", "unsupported version %u (this agentsbx reads version 1)", version);
  OCI_TRY (oci_get_string (c, top, "extends", &d->extends));
  OCI_TRY (oci_get_string (c, top, "description", &desc));
  if (d->extends && !pdoc_profile_name_ok (d->extends))
    {
      cleanup_free char *q = oci_quote (d->extends);
      return oci_fail_key (c, "extends", "%s: invalid profile name", q);
    }
  OCI_TRY (get_enum (c, top, "isolation", policy_isolation_names, &d->isolation));
  OCI_TRY (parse_section (c, top, "filesystem", parse_fs, d));
  OCI_TRY (parse_section (c, top, "network", parse_net, d));
  OCI_TRY (parse_section (c, top, "limits", parse_limits, d));
  OCI_TRY (parse_section (c, top, "approvals", parse_approvals, d));
  OCI_TRY (parse_small_sections (c, top, d));
  return 0;
}

bool
pdoc_profile_name_ok (const char *name)
{
  if (name[0] == '\0' || name[0] == '.' || strlen (name) > 64)
    return false;
  for (const char *p = name; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'
          || *p == '.'))
      return false;
  return true;
}

struct pdoc *
pdoc_load_chain (const char *json, size_t len, const char *source, pdoc_lookup_fn lookup, void *ud, const char **chain,
                 size_t depth, asbx_err_t *err)
{
  struct oci_ctx c;
  struct pdoc *d = pdoc_new (source);
  yajl_val tree;
  int r = -1;

  oci_ctx_init (&c, source, err);
  tree = oci_json_load (&c, json, len);
  if (tree)
    {
      r = parse_top (&c, tree, d);
      yajl_tree_free (tree);
    }
  oci_ctx_release (&c);
  if (r == 0 && d->extends)
    {
      struct pdoc *base = pdoc_load_profile (d->extends, lookup, ud, chain, depth, err);
      if (base == NULL)
        r = asbx_error_wrap (err, "%s: extends", source);
      else
        {
          pdoc_inherit (d, base);
          pdoc_free (base);
        }
    }
  if (r < 0)
    {
      pdoc_free (d);
      return NULL;
    }
  return d;
}

struct pdoc *
pdoc_load (const char *json, size_t len, const char *source, pdoc_lookup_fn lookup, void *ud, asbx_err_t *err)
{
  return pdoc_load_chain (json, len, source, lookup, ud, NULL, 0, err);
}

struct pdoc *
pdoc_load_profile (const char *name, pdoc_lookup_fn lookup, void *ud, const char **chain, size_t depth, asbx_err_t *err)
{
  const char *sub[PDOC_MAX_EXTENDS + 1];
  cleanup_free char *text = NULL, *where = NULL, *source = NULL;
  size_t len = 0;

  if (!pdoc_profile_name_ok (name))
    {
      cleanup_free char *q = oci_quote (name);
      asbx_error (err, 0, "invalid profile name %s (letters, digits, '-', '_', '.')", q);
      return NULL;
    }
  for (size_t i = 0; i < depth; i++)
    if (strcmp (chain[i], name) == 0)
      {
        cleanup_free char *cycle = xstrdup (chain[i]);
        for (size_t j = i + 1; j <= depth; j++)
          {
            char *n = xasprintf ("%s -> %s", cycle, j < depth ? chain[j] : name);
            free (cycle);
            cycle = n;
          }
        asbx_error (err, 0, "extends cycle: %s", cycle);
        return NULL;
      }
  if (depth >= PDOC_MAX_EXTENDS)
    {
      asbx_error (err, 0, "profile %s: extends chain deeper than %d", name, PDOC_MAX_EXTENDS);
      return NULL;
    }
  for (size_t i = 0; i < depth; i++)
    sub[i] = chain[i];
  sub[depth] = name;
  text = lookup (ud, name, &len, &where, err);
  if (text == NULL)
    return NULL;
  source = xasprintf ("profile %s", name);
  struct pdoc *d = pdoc_load_chain (text, len, source, lookup, ud, sub, depth + 1, err);
  (void) where;
  return d;
}
