/* plan.c - freeing a compiled plan and writing it as JSON (golden tests, `policy explain`,
 * the audit log's policy record). Pure. Key order is fixed and every field is written (also
 * defaults), so a golden file shows the whole contract with the enforcement. */
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "policy/doc.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "policy/syscall_groups.h"

const char *const policy_net_mode_names[] = { "open", "none", "filtered", NULL };
const char *const policy_approval_names[] = { "deny", "ask", NULL };
const char *const policy_on_timeout_names[] = { "deny", "allow", NULL };
const char *const policy_on_full_names[] = { "kill", "continue", NULL };
const char *const policy_ws_mode_names[] = { "direct", "review", NULL };
const char *const policy_isolation_names[] = { "container", "vm", NULL };

static void
strv_free_n (char **v, size_t n)
{
  for (size_t i = 0; v && i < n; i++)
    free (v[i]);
  free (v);
}

void
policy_plan_free (struct policy_plan *p)
{
  if (p == NULL)
    return;
  free (p->digest);
  free (p->effective_json);
  strv_free_n (p->sources, p->sources_len);
  for (size_t i = 0; i < p->mounts_len; i++)
    {
      free (p->mounts[i].path);
      free (p->mounts[i].origin);
      free (p->mounts[i].each_child);
    }
  free (p->mounts);
  for (size_t i = 0; i < p->fs_rules_len; i++)
    {
      free (p->fs_rules[i].path);
      free (p->fs_rules[i].origin);
    }
  free (p->fs_rules);
  strv_free_n (p->caps_allow, p->caps_allow_len);
  strv_free_n (p->allowed_domains, p->allowed_domains_len);
  strv_free_n (p->allow_unix_sockets, p->allow_unix_sockets_len);
  strv_free_n (p->denied_domains, p->denied_domains_len);
  strv_free_n (p->allowed_cidrs, p->allowed_cidrs_len);
  free (p->ports);
  for (size_t i = 0; i < p->credentials_len; i++)
    {
      free (p->credentials[i].host);
      free (p->credentials[i].header);
      free (p->credentials[i].value);
    }
  free (p->credentials);
  for (size_t i = 0; i < p->http_hosts_len; i++)
    {
      for (size_t j = 0; j < p->http_hosts[i].allow_len; j++)
        {
          strv_free_n (p->http_hosts[i].allow[j].methods, p->http_hosts[i].allow[j].methods_len);
          strv_free_n (p->http_hosts[i].allow[j].paths, p->http_hosts[i].allow[j].paths_len);
        }
      free (p->http_hosts[i].allow);
      free (p->http_hosts[i].host);
    }
  free (p->http_hosts);
  free (p->secrets_dir);
  free (p->upstream_ca_file);
  free (p->ws_path);
  free (p->workspaces_dir);
  free (p->audit_dir);
  free (p->rootless_cgroup_parent);
  strv_free_n (p->hidden_paths, p->hidden_paths_len);
  strv_free_n (p->degrade, p->degrade_len);
  strv_free_n (p->clamps, p->clamps_len);
  free (p);
}

#define S(g, s) yajl_gen_string (g, (const unsigned char *) (s), strlen (s))

/* key and string (NULL: null): the core helper under this file's kv_ names */
#define kv_str json_gen_kv

static void
kv_bool (yajl_gen g, const char *k, bool v)
{
  S (g, k);
  yajl_gen_bool (g, v);
}

static void
kv_u64 (yajl_gen g, const char *k, uint64_t v)
{
  S (g, k);
  yajl_gen_integer (g, (long long) v);
}

static void
kv_strv (yajl_gen g, const char *k, char **v, size_t n)
{
  S (g, k);
  yajl_gen_array_open (g);
  for (size_t i = 0; i < n; i++)
    S (g, v[i]);
  yajl_gen_array_close (g);
}

static void
gen_rights (yajl_gen g, unsigned r)
{
  S (g, "rights");
  yajl_gen_array_open (g);
  if (r & POLICY_FS_READ)
    S (g, "read");
  if (r & POLICY_FS_WRITE)
    S (g, "write");
  if (r & POLICY_FS_EXEC)
    S (g, "exec");
  yajl_gen_array_close (g);
}

static void
gen_fs (yajl_gen g, const struct policy_plan *p)
{
  static const char *const kinds[] = { "bind-rw", "bind-ro", "mask", "tmpfs" };
  kv_bool (g, "rootfsReadonly", p->rootfs_readonly);
  S (g, "mounts");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < p->mounts_len; i++)
    {
      const struct policy_mount *m = &p->mounts[i];
      yajl_gen_map_open (g);
      kv_str (g, "kind", kinds[m->kind]);
      kv_str (g, "path", m->path);
      if (m->each_child)
        kv_str (g, "eachChild", m->each_child);
      kv_bool (g, "noexec", m->noexec);
      kv_bool (g, "optional", m->optional);
      kv_bool (g, "writableParent", m->writable_parent);
      kv_str (g, "origin", m->origin);
      yajl_gen_map_close (g);
    }
  yajl_gen_array_close (g);
  kv_bool (g, "landlock", p->landlock);
  S (g, "fsRules");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < p->fs_rules_len; i++)
    {
      const struct policy_fs_rule *r = &p->fs_rules[i];
      yajl_gen_map_open (g);
      kv_str (g, "path", r->path);
      gen_rights (g, r->rights);
      kv_bool (g, "optional", r->optional);
      kv_str (g, "origin", r->origin);
      yajl_gen_map_close (g);
    }
  yajl_gen_array_close (g);
}

static void
gen_secret_name (void *ud, const char *name, size_t len)
{
  cleanup_free char *n = xasprintf ("%.*s", (int) len, name);
  S ((yajl_gen) ud, n);
}

/* network.credentials (host, header and the secrets' NAMES: the template is in `effective`),
 * network.http and the egress host files, only when something is intercepted: plans of older
 * policies stay byte-identical */
static void
gen_egress (yajl_gen g, const struct policy_plan *p)
{
  if (p->credentials_len == 0 && p->http_hosts_len == 0)
    return;
  S (g, "credentials");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < p->credentials_len; i++)
    {
      yajl_gen_map_open (g);
      kv_str (g, "host", p->credentials[i].host);
      kv_str (g, "header", p->credentials[i].header);
      S (g, "secrets");
      yajl_gen_array_open (g);
      policy_secret_refs (p->credentials[i].value, gen_secret_name, g);
      yajl_gen_array_close (g);
      yajl_gen_map_close (g);
    }
  yajl_gen_array_close (g);
  S (g, "http");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < p->http_hosts_len; i++)
    {
      const struct policy_http_host *h = &p->http_hosts[i];
      yajl_gen_map_open (g);
      kv_str (g, "host", h->host);
      S (g, "allow");
      yajl_gen_array_open (g);
      for (size_t j = 0; j < h->allow_len; j++)
        {
          yajl_gen_map_open (g);
          kv_strv (g, "methods", h->allow[j].methods, h->allow[j].methods_len);
          kv_strv (g, "paths", h->allow[j].paths, h->allow[j].paths_len);
          yajl_gen_map_close (g);
        }
      yajl_gen_array_close (g);
      kv_u64 (g, "maxBodyBytes", h->max_body_bytes);
      yajl_gen_map_close (g);
    }
  yajl_gen_array_close (g);
  kv_str (g, "secretsDir", p->secrets_dir);
  kv_str (g, "upstreamCaFile", p->upstream_ca_file);
}

static void
gen_net (yajl_gen g, const struct policy_plan *p)
{
  S (g, "network");
  yajl_gen_map_open (g);
  kv_str (g, "mode", policy_net_mode_names[p->net_mode]);
  kv_bool (g, "allowLocalBinding", p->allow_local_binding);
  kv_strv (g, "allowedDomains", p->allowed_domains, p->allowed_domains_len);
  kv_strv (g, "deniedDomains", p->denied_domains, p->denied_domains_len);
  kv_strv (g, "allowedCidrs", p->allowed_cidrs, p->allowed_cidrs_len);
  if (p->allow_unix_sockets_len) /* only when used: plans of older policies stay byte-identical */
    kv_strv (g, "allowUnixSockets", p->allow_unix_sockets, p->allow_unix_sockets_len);
  gen_egress (g, p);
  S (g, "ports");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < p->ports_len; i++)
    yajl_gen_integer (g, p->ports[i]);
  yajl_gen_array_close (g);
  yajl_gen_map_close (g);
}

static void
gen_limits (yajl_gen g, const struct policy_plan *p)
{
  S (g, "limits");
  yajl_gen_map_open (g);
  kv_u64 (g, "memoryBytes", p->memory_bytes);
  kv_u64 (g, "pids", p->pids);
  S (g, "cpus");
  yajl_gen_double (g, p->cpus);
  kv_u64 (g, "openFiles", p->open_files);
  kv_u64 (g, "fileSizeBytes", p->file_size_bytes);
  kv_u64 (g, "wallClockSeconds", p->wall_clock_seconds);
  kv_u64 (g, "cpuSeconds", p->cpu_seconds);
  kv_u64 (g, "failedExecs", p->failed_execs);
  yajl_gen_map_close (g);
}

static void
gen_rest (yajl_gen g, const struct policy_plan *p)
{
  S (g, "denyGroups");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < policy_syscall_groups_len; i++)
    if (p->deny_groups & policy_syscall_groups[i].bit)
      S (g, policy_syscall_groups[i].name);
  yajl_gen_array_close (g);
  kv_bool (g, "denyWriteExecMemory", p->deny_write_exec_memory);
  kv_bool (g, "restrictCaps", p->restrict_caps);
  kv_strv (g, "capsAllow", p->caps_allow, p->caps_allow_len);
  gen_net (g, p);
  gen_limits (g, p);
  S (g, "approvals");
  yajl_gen_map_open (g);
  kv_str (g, "network", policy_approval_names[p->approvals_network]);
  kv_u64 (g, "timeoutSeconds", p->approvals_timeout_seconds);
  kv_str (g, "onTimeout", policy_on_timeout_names[p->approvals_on_timeout_allow]);
  yajl_gen_map_close (g);
  S (g, "auditEvents");
  yajl_gen_array_open (g);
  for (unsigned i = 0; i < 8; i++)
    if (p->audit_events & (1u << i))
      S (g, pdoc_audit_names[i]);
  yajl_gen_array_close (g);
  if (p->audit_on_full_continue)
    kv_str (g, "auditOnFull", "continue"); /* only when not the default: the golden plans stay */
  kv_str (g, "auditDir", p->audit_dir);
  if (p->isolation == POLICY_ISOLATION_VM)
    kv_str (g, "isolation", "vm"); /* only when not the default: the golden plans stay */
  if (p->ws_mode == POLICY_WS_REVIEW)
    {
      /* only when not the default: the golden plans stay */
      kv_str (g, "workspaceMode", policy_ws_mode_names[p->ws_mode]);
      kv_str (g, "workspacePath", p->ws_path);
      kv_str (g, "workspacesDir", p->workspaces_dir);
    }
  kv_strv (g, "hiddenPaths", p->hidden_paths, p->hidden_paths_len);
  kv_strv (g, "degrade", p->degrade, p->degrade_len);
  kv_strv (g, "clamps", p->clamps, p->clamps_len);
}

/* the effective policy is embedded as an object, not a string, so goldens stay readable */
static void
gen_effective (yajl_gen g, const char *json)
{
  S (g, "effective");
  yajl_val v = json ? yajl_tree_parse (json, NULL, 0) : NULL;
  if (v == NULL)
    {
      yajl_gen_null (g);
      return;
    }
  json_gen_value (g, v); /* recursion bounded: we generated the text ourselves */
  yajl_tree_free (v);
}

char *
policy_plan_to_json (const struct policy_plan *p, bool pretty)
{
  yajl_gen g = json_gen_new (pretty ? JSON_GEN_PRETTY : 0);
  yajl_gen_map_open (g);
  kv_bool (g, "active", p->active);
  kv_strv (g, "sources", p->sources, p->sources_len);
  if (p->active)
    {
      kv_str (g, "digest", p->digest);
      gen_fs (g, p);
      gen_rest (g, p);
      gen_effective (g, p->effective_json);
    }
  yajl_gen_map_close (g);
  return json_gen_finish (g, false, NULL);
}
