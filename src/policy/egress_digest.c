/* egress_digest.c - one digest per egress field of a compiled plan; see egress_digest.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/sha256.h"
#include "core/util.h"
#include "policy/egress_digest.h"

/* a growing text: each value ends with '\n', so ["a","b"] and ["a\nb"] differ in length */
struct text
{
  char *s;
  size_t len, cap;
};

static void
put (struct text *t, const char *v)
{
  size_t n = strlen (v);
  if (t->len + n + 2 > t->cap)
    {
      t->cap = (t->len + n + 2) * 2;
      t->s = xrealloc (t->s, t->cap);
    }
  memcpy (t->s + t->len, v, n);
  t->len += n;
  t->s[t->len++] = '\n';
  t->s[t->len] = '\0';
}

static void
put_u (struct text *t, unsigned long long v)
{
  char b[24];
  snprintf (b, sizeof b, "%llu", v);
  put (t, b);
}

static void
put_list (struct text *t, char *const *v, size_t n)
{
  put_u (t, n);
  for (size_t i = 0; i < n; i++)
    put (t, v[i]);
}

/* append "NAME HEX\n" for the text t to out, and empty t */
static void
field (struct text *out, const char *name, struct text *t)
{
  char hex[65];
  sha256_hex (t->s ? t->s : "", t->len, hex);
  cleanup_free char *line = xasprintf ("%s %s", name, hex);
  put (out, line);
  t->len = 0;
  if (t->s)
    t->s[0] = '\0';
}

char *
policy_egress_fields (const struct policy_plan *p)
{
  struct text out = { 0 }, t = { 0 };

  put (&t, policy_net_mode_names[p->net_mode]);
  field (&out, "network.mode", &t);
  put_u (&t, p->allow_local_binding);
  field (&out, "network.allowLocalBinding", &t);
  put_list (&t, p->allowed_domains, p->allowed_domains_len);
  field (&out, "network.allowedDomains", &t);
  put_list (&t, p->denied_domains, p->denied_domains_len);
  field (&out, "network.deniedDomains", &t);
  put_list (&t, p->allowed_cidrs, p->allowed_cidrs_len);
  field (&out, "network.allowedCIDRs", &t);
  put_u (&t, p->ports_len);
  for (size_t i = 0; i < p->ports_len; i++)
    put_u (&t, p->ports[i]);
  field (&out, "network.ports", &t);
  put_u (&t, p->credentials_len);
  for (size_t i = 0; i < p->credentials_len; i++)
    {
      put (&t, p->credentials[i].host);
      put (&t, p->credentials[i].header);
      put (&t, p->credentials[i].value); /* the template: ${secret:NAME}, never a value */
    }
  field (&out, "network.credentials", &t);
  put_u (&t, p->http_hosts_len);
  for (size_t i = 0; i < p->http_hosts_len; i++)
    {
      const struct policy_http_host *h = &p->http_hosts[i];
      put (&t, h->host);
      put_u (&t, h->max_body_bytes);
      put_u (&t, h->allow_len);
      for (size_t j = 0; j < h->allow_len; j++)
        {
          put_list (&t, h->allow[j].methods, h->allow[j].methods_len);
          put_list (&t, h->allow[j].paths, h->allow[j].paths_len);
        }
    }
  field (&out, "network.http", &t);
  put (&t, p->secrets_dir ? p->secrets_dir : "");
  field (&out, "secretsDir", &t);
  put (&t, p->upstream_ca_file ? p->upstream_ca_file : "");
  field (&out, "upstreamCaFile", &t);
  put (&t, policy_approval_names[p->approvals_network]);
  put_u (&t, p->approvals_timeout_seconds);
  put_u (&t, p->approvals_on_timeout_allow);
  field (&out, "approvals.network", &t);
  put_u (&t, p->audit_events & (POLICY_AUDIT_NETWORK | POLICY_AUDIT_DNS));
  field (&out, "audit.events (network, dns)", &t);
  free (t.s);
  return out.s;
}
