/* docjson.c - a policy document as canonical JSON: fixed key order, normalised values, only the
 * fields that are set. The output is itself a valid version-1 policy (no `extends`: it is
 * already applied), so `policy explain` output can be saved and used as a `--policy` file, and
 * its SHA-256 is the digest recorded in the audit log. Pure. */
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "policy/doc.h"
#include "policy/plan.h"
#include "policy/syscall_groups.h"

#define S(g, s) yajl_gen_string (g, (const unsigned char *) (s), strlen (s))

static void
gen_paths (yajl_gen g, const char *key, const struct pdoc_paths *p)
{
  if (!p->set)
    return;
  S (g, key);
  yajl_gen_array_open (g);
  for (size_t i = 0; i < p->len; i++)
    {
      cleanup_free char *t = xasprintf ("%s%s%s", p->v[i].optional ? "?" : "", p->v[i].each_home ? "~/" : "",
                                        p->v[i].path);
      S (g, t);
    }
  yajl_gen_array_close (g);
}

static void
gen_strs (yajl_gen g, const char *key, const struct pdoc_strs *s)
{
  if (!s->set)
    return;
  S (g, key);
  yajl_gen_array_open (g);
  for (size_t i = 0; i < s->len; i++)
    S (g, s->v[i]);
  yajl_gen_array_close (g);
}

/* network.credentials and network.http, only when set: older documents keep their digest */
static void
gen_egress (yajl_gen g, const struct pdoc *d)
{
  if (d->credentials.set)
    {
      S (g, "credentials");
      yajl_gen_array_open (g);
      for (size_t i = 0; i < d->credentials.len; i++)
        {
          yajl_gen_map_open (g);
          S (g, "host");
          S (g, d->credentials.v[i].host);
          S (g, "header");
          S (g, d->credentials.v[i].header);
          S (g, "value");
          S (g, d->credentials.v[i].value); /* the template: ${secret:NAME}, never a secret */
          yajl_gen_map_close (g);
        }
      yajl_gen_array_close (g);
    }
  if (!d->http.set)
    return;
  S (g, "http");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < d->http.len; i++)
    {
      const struct pdoc_http *h = &d->http.v[i];
      yajl_gen_map_open (g);
      S (g, "host");
      S (g, h->host);
      if (h->allow_set)
        {
          S (g, "allow");
          yajl_gen_array_open (g);
          for (size_t j = 0; j < h->allow_len; j++)
            {
              yajl_gen_map_open (g);
              gen_strs (g, "methods", &h->allow[j].methods);
              gen_strs (g, "paths", &h->allow[j].paths);
              yajl_gen_map_close (g);
            }
          yajl_gen_array_close (g);
        }
      if (h->max_body_bytes)
        {
          S (g, "maxBodyBytes");
          yajl_gen_integer (g, (long long) h->max_body_bytes); /* <= INT64_MAX at parse */
        }
      yajl_gen_map_close (g);
    }
  yajl_gen_array_close (g);
}

static void
gen_net (yajl_gen g, const struct pdoc *d)
{
  S (g, "network");
  yajl_gen_map_open (g);
  if (d->net_mode >= 0)
    {
      S (g, "mode");
      S (g, policy_net_mode_names[d->net_mode]);
    }
  gen_strs (g, "allowedDomains", &d->allowed_domains);
  gen_strs (g, "deniedDomains", &d->denied_domains);
  gen_strs (g, "allowedCidrs", &d->allowed_cidrs);
  gen_strs (g, "allowUnixSockets", &d->allow_unix_sockets);
  gen_egress (g, d);
  if (d->ports_set)
    {
      S (g, "ports");
      yajl_gen_array_open (g);
      for (size_t i = 0; i < d->ports_len; i++)
        yajl_gen_integer (g, d->ports[i]);
      yajl_gen_array_close (g);
    }
  if (d->allow_local_binding >= 0)
    {
      S (g, "allowLocalBinding");
      yajl_gen_bool (g, d->allow_local_binding);
    }
  yajl_gen_map_close (g);
}

static void
gen_limits (yajl_gen g, const struct pdoc *d)
{
  bool any = d->cpus_set;
  for (int i = 0; i < PDOC_LIMITS; i++)
    any = any || d->limits[i].set;
  if (!any)
    return;
  S (g, "limits");
  yajl_gen_map_open (g);
  for (int i = 0; i < PDOC_LIMITS; i++)
    if (d->limits[i].set)
      {
        S (g, pdoc_limit_names[i]);
        yajl_gen_integer (g, (long long) d->limits[i].v); /* validated <= INT64_MAX at parse */
      }
  if (d->cpus_set)
    {
      S (g, "cpus");
      yajl_gen_double (g, d->cpus);
    }
  yajl_gen_map_close (g);
}

static void
gen_approvals (yajl_gen g, const struct pdoc *d)
{
  if (d->approvals_network < 0 && !d->approvals_timeout.set && d->on_timeout_allow < 0)
    return;
  S (g, "approvals");
  yajl_gen_map_open (g);
  if (d->approvals_network >= 0)
    {
      S (g, "network");
      S (g, policy_approval_names[d->approvals_network]);
    }
  if (d->approvals_timeout.set)
    {
      S (g, "timeoutSeconds");
      yajl_gen_integer (g, (long long) d->approvals_timeout.v);
    }
  if (d->on_timeout_allow >= 0)
    {
      S (g, "onTimeout");
      S (g, policy_on_timeout_names[d->on_timeout_allow]);
    }
  yajl_gen_map_close (g);
}

static void
gen_small (yajl_gen g, const struct pdoc *d)
{
  if (d->deny_groups_set || d->deny_wx_memory >= 0)
    {
      S (g, "syscalls");
      yajl_gen_map_open (g);
      if (d->deny_groups_set)
        {
          S (g, "deny");
          yajl_gen_array_open (g);
          for (size_t i = 0; i < policy_syscall_groups_len; i++)
            if (d->deny_groups & policy_syscall_groups[i].bit)
              S (g, policy_syscall_groups[i].name);
          yajl_gen_array_close (g);
        }
      if (d->deny_wx_memory >= 0)
        {
          S (g, "denyWriteExecMemory");
          yajl_gen_bool (g, d->deny_wx_memory);
        }
      yajl_gen_map_close (g);
    }
  if (d->caps_allow.set)
    {
      S (g, "capabilities");
      yajl_gen_map_open (g);
      gen_strs (g, "allow", &d->caps_allow);
      yajl_gen_map_close (g);
    }
  gen_limits (g, d);
  gen_approvals (g, d);
  if (d->audit_set)
    {
      S (g, "audit");
      yajl_gen_map_open (g);
      S (g, "events");
      yajl_gen_array_open (g);
      for (unsigned i = 0; i < 8; i++)
        if (d->audit_events & (1u << i))
          S (g, pdoc_audit_names[i]);
      yajl_gen_array_close (g);
      if (d->audit_on_full >= 0)
        {
          S (g, "onFull");
          S (g, policy_on_full_names[d->audit_on_full]);
        }
      yajl_gen_map_close (g);
    }
  gen_strs (g, "degrade", &d->degrade);
}

/* the caller's yajl_gen: emit the document as one JSON object */
void
pdoc_gen (void *gen, const struct pdoc *d)
{
  yajl_gen g = gen;
  yajl_gen_map_open (g);
  S (g, "version");
  yajl_gen_integer (g, 1);
  if (d->isolation >= 0)
    {
      S (g, "isolation");
      S (g, policy_isolation_names[d->isolation]);
    }
  if (d->has_fs || d->ws_mode >= 0 || d->ws_path)
    {
      S (g, "filesystem");
      yajl_gen_map_open (g);
      for (int i = 0; d->has_fs && i < PDOC_FS_LISTS; i++)
        gen_paths (g, pdoc_fs_names[i], &d->fs[i]);
      if (d->ws_mode >= 0 || d->ws_path)
        {
          S (g, "workspace");
          yajl_gen_map_open (g);
          if (d->ws_path)
            {
              S (g, "path");
              S (g, d->ws_path);
            }
          if (d->ws_mode >= 0)
            {
              S (g, "mode");
              S (g, policy_ws_mode_names[d->ws_mode]);
            }
          yajl_gen_map_close (g);
        }
      yajl_gen_map_close (g);
    }
  if (d->has_net)
    gen_net (g, d);
  gen_small (g, d);
  yajl_gen_map_close (g);
}

char *
pdoc_to_json (const struct pdoc *d, bool pretty)
{
  yajl_gen g = json_gen_new (pretty ? JSON_GEN_PRETTY : 0);
  pdoc_gen (g, d);
  return json_gen_finish (g, false, NULL);
}
