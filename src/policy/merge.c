/* merge.c - effective policy = ceiling ∩ request (POLICY.md §1), monotone.
 *
 * Threat model: the ceiling is the host admin's (runtime flags, host config); the request is
 * whoever starts the container. The request may only narrow: fewer paths, domains, CIDRs,
 * ports and capabilities, lower limits, stricter approvals, more denies, more audit. Anything
 * wider is refused with one line per widened field naming the ceiling, or, under
 * `onWiden: clamp`, narrowed to the ceiling and listed for the audit log. A credential
 * (network.credentials) is widening unless the ceiling has the very same one. A field the request
 * does not set takes the ceiling's value; a field the ceiling does not set is unrestricted by it
 * (except `degrade`: accepting a missing layer is a widening, so an unset ceiling accepts none).
 * Both documents have had their `extends` applied; the ceiling is normalised (defaults of a
 * present section filled in) before this, the effective document after. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"
#include "policy/doc.h"
#include "policy/plan.h"

struct widen
{
  const char *ceiling; /* `profile "agent"` */
  bool clamp;
  char **lines; /* errors (refuse) or clamps */
  size_t len;
};

static void
widen_add (struct widen *w, char *line)
{
  w->lines = xrealloc (w->lines, (w->len + 2) * sizeof (char *));
  w->lines[w->len++] = line;
  w->lines[w->len] = NULL;
}

/* Report the offending values of one field (a list of quoted values or one number). `limit`
 * is the ceiling's value for scalar fields (NULL for lists, whose wide members are removed). */
static void
widen_report (struct widen *w, const char *field, const char *values, size_t count, const char *limit)
{
  const char *verb = count > 1 ? "are" : "is";
  if (w->clamp && limit)
    widen_add (w, xasprintf ("%s: %s %s not allowed by %s, clamped to %s", field, values, verb, w->ceiling, limit));
  else if (w->clamp)
    widen_add (w, xasprintf ("%s: %s %s not allowed by %s, removed", field, values, verb, w->ceiling));
  else if (limit)
    widen_add (w, xasprintf ("%s: %s %s not allowed by %s (at most %s)", field, values, verb, w->ceiling, limit));
  else
    widen_add (w, xasprintf ("%s: %s %s not allowed by %s", field, values, verb, w->ceiling));
}

static void
append_value (char **acc, const char *v, bool quote)
{
  cleanup_free char *q = quote ? oci_quote (v) : xstrdup (v);
  char *n = *acc ? xasprintf ("%s, %s", *acc, q) : xstrdup (q);
  free (*acc);
  *acc = n;
}

static char *
path_text (const struct pdoc_path *p)
{
  return xasprintf ("%s%s%s", p->optional ? "?" : "", p->each_home ? "~/" : "", p->path);
}

/* allow lists: keep request paths inside a ceiling hierarchy; a wider one is refused or
 * replaced by the ceiling paths it contains (the exact intersection of the two hierarchies). */
static void
intersect_allow (struct widen *w, const char *field, const struct pdoc_paths *c, const struct pdoc_paths *extra,
                 const struct pdoc_paths *r, struct pdoc_paths *out)
{
  cleanup_free char *bad = NULL;
  size_t nbad = 0;
  if (!r->set || !c->set)
    {
      pdoc_paths_copy (out, r->set ? r : c);
      return;
    }
  out->set = true;
  for (size_t i = 0; i < r->len; i++)
    {
      bool ok = false;
      for (size_t j = 0; j < c->len && !ok; j++)
        ok = pval_path_covers (c->v[j].path, r->v[i].path);
      for (size_t j = 0; extra && j < extra->len && !ok; j++)
        ok = pval_path_covers (extra->v[j].path, r->v[i].path);
      if (ok)
        {
          pdoc_paths_add (out, &r->v[i]);
          continue;
        }
      cleanup_free char *t = path_text (&r->v[i]);
      append_value (&bad, t, true);
      nbad++;
      for (size_t j = 0; j < c->len; j++)
        if (pval_path_covers (r->v[i].path, c->v[j].path))
          pdoc_paths_add (out, &c->v[j]);
    }
  if (nbad)
    widen_report (w, field, bad, nbad, NULL);
}

static void
union_paths (const struct pdoc_paths *a, const struct pdoc_paths *b, struct pdoc_paths *out)
{
  pdoc_paths_copy (out, a);
  for (size_t i = 0; i < b->len; i++)
    pdoc_paths_add (out, &b->v[i]);
  out->set = a->set || b->set;
}

/* filesystem.workspace: review is the narrower mode (the host directory is not written during
 * the run), so a request may turn direct into review, never review into direct. Under a review
 * ceiling the request may not move the workspace either: the overlay lies at the ceiling's path,
 * and the mount at that path would otherwise stay a plain read-write bind. */
static void
intersect_workspace (struct widen *w, const struct pdoc *c, const struct pdoc *r, struct pdoc *e)
{
  e->ws_mode = r->ws_mode >= 0 ? r->ws_mode : c->ws_mode;
  if (c->ws_mode == POLICY_WS_REVIEW && r->ws_mode == POLICY_WS_DIRECT)
    {
      widen_report (w, "filesystem.workspace.mode", "\"direct\"", 1, "\"review\"");
      e->ws_mode = POLICY_WS_REVIEW;
    }
  e->ws_path = xstrdup (r->ws_path ? r->ws_path : c->ws_path);
  if (c->ws_mode == POLICY_WS_REVIEW && r->ws_path && strcmp (r->ws_path, c->ws_path ? c->ws_path : "/workspace") != 0)
    {
      cleanup_free char *q = oci_quote (r->ws_path);
      cleanup_free char *cq = oci_quote (c->ws_path ? c->ws_path : "/workspace");
      if (w->clamp)
        widen_report (w, "filesystem.workspace.path", q, 1, cq);
      else
        widen_add (w, xasprintf ("filesystem.workspace.path: %s is not allowed by %s (its review workspace is at %s)",
                                 q, w->ceiling, cq));
      free (e->ws_path);
      e->ws_path = xstrdup (c->ws_path);
    }
}

/* isolation: vm is the narrower tier (the container's kernel is not the host's), so a request may
 * raise container to vm, never lower a vm ceiling */
static void
intersect_isolation (struct widen *w, const struct pdoc *c, const struct pdoc *r, struct pdoc *e)
{
  e->isolation = r->isolation >= 0 ? r->isolation : c->isolation;
  if (c->isolation == POLICY_ISOLATION_VM && r->isolation == POLICY_ISOLATION_CONTAINER)
    {
      widen_report (w, "isolation", "\"container\"", 1, "\"vm\"");
      e->isolation = POLICY_ISOLATION_VM;
    }
}

static void
intersect_fs (struct widen *w, const struct pdoc *c, const struct pdoc *r, struct pdoc *e)
{
  e->has_fs = c->has_fs || r->has_fs;
  intersect_allow (w, "filesystem.allowRead", &c->fs[PDOC_ALLOW_READ], NULL, &r->fs[PDOC_ALLOW_READ],
                   &e->fs[PDOC_ALLOW_READ]);
  intersect_allow (w, "filesystem.allowWrite", &c->fs[PDOC_ALLOW_WRITE], NULL, &r->fs[PDOC_ALLOW_WRITE],
                   &e->fs[PDOC_ALLOW_WRITE]);
  /* a fresh tmpfs is within any write grant over its path */
  intersect_allow (w, "filesystem.tmpfs", &c->fs[PDOC_TMPFS], c->fs[PDOC_TMPFS].set ? &c->fs[PDOC_ALLOW_WRITE] : NULL,
                   &r->fs[PDOC_TMPFS], &e->fs[PDOC_TMPFS]);
  intersect_allow (w, "filesystem.allowExec", &c->fs[PDOC_ALLOW_EXEC], NULL, &r->fs[PDOC_ALLOW_EXEC],
                   &e->fs[PDOC_ALLOW_EXEC]);
  union_paths (&c->fs[PDOC_DENY_READ], &r->fs[PDOC_DENY_READ], &e->fs[PDOC_DENY_READ]);
  union_paths (&c->fs[PDOC_DENY_WRITE], &r->fs[PDOC_DENY_WRITE], &e->fs[PDOC_DENY_WRITE]);
  intersect_workspace (w, c, r, e);
}

typedef bool (*covers_fn) (const char *outer, const char *inner);

static void
intersect_strs (struct widen *w, const char *field, const struct pdoc_strs *c, const struct pdoc_strs *r,
                covers_fn covers, struct pdoc_strs *out)
{
  cleanup_free char *bad = NULL;
  size_t nbad = 0;
  if (!r->set || !c->set)
    {
      pdoc_strs_copy (out, r->set ? r : c);
      return;
    }
  out->set = true;
  for (size_t i = 0; i < r->len; i++)
    {
      bool ok = false;
      for (size_t j = 0; j < c->len && !ok; j++)
        ok = covers ? covers (c->v[j], r->v[i]) : strcmp (c->v[j], r->v[i]) == 0;
      if (ok)
        {
          pdoc_strs_add (out, r->v[i]);
          continue;
        }
      append_value (&bad, r->v[i], true);
      nbad++;
      for (size_t j = 0; covers && j < c->len; j++)
        if (covers (r->v[i], c->v[j]))
          pdoc_strs_add (out, c->v[j]);
    }
  if (nbad)
    widen_report (w, field, bad, nbad, NULL);
}

static void
union_strs (const struct pdoc_strs *a, const struct pdoc_strs *b, struct pdoc_strs *out)
{
  pdoc_strs_copy (out, a);
  for (size_t i = 0; i < b->len; i++)
    pdoc_strs_add (out, b->v[i]);
  out->set = a->set || b->set;
}

/* none < filtered < open */
static int
mode_rank (int mode)
{
  return mode == POLICY_NET_NONE ? 0 : mode == POLICY_NET_FILTERED ? 1 : 2;
}

static void
intersect_ports (struct widen *w, const struct pdoc *c, const struct pdoc *r, struct pdoc *e)
{
  const struct pdoc *src = r->ports_set ? r : c;
  cleanup_free char *bad = NULL;
  size_t nbad = 0;
  e->ports = xmalloc (src->ports_len * sizeof (*e->ports) + 1);
  e->ports_set = src->ports_set;
  for (size_t i = 0; i < src->ports_len; i++)
    {
      bool ok = true;
      if (r->ports_set && c->ports_set && c->net_mode != POLICY_NET_OPEN)
        {
          ok = false;
          for (size_t j = 0; j < c->ports_len && !ok; j++)
            ok = c->ports[j] == r->ports[i];
        }
      if (ok)
        e->ports[e->ports_len++] = src->ports[i];
      else
        {
          char num[8];
          snprintf (num, sizeof num, "%u", src->ports[i]);
          append_value (&bad, num, false);
          nbad++;
        }
    }
  if (nbad)
    widen_report (w, "network.ports", bad, nbad, NULL);
}

/* network.credentials: each one hands a host secret to a host, so a request may only keep some
 * of the ceiling's (the same host, header and value); an unset ceiling grants none. An unset
 * request keeps the ceiling's. network.http only restricts: every entry of both applies. */
static void
intersect_egress (struct widen *w, const struct pdoc *c, const struct pdoc *r, struct pdoc *e)
{
  cleanup_free char *bad = NULL;
  size_t nbad = 0;

  if (!r->credentials.set)
    pdoc_creds_copy (&e->credentials, &c->credentials);
  else
    {
      e->credentials.set = true;
      for (size_t i = 0; i < r->credentials.len; i++)
        {
          const struct pdoc_cred *rc = &r->credentials.v[i];
          bool ok = false;
          for (size_t j = 0; j < c->credentials.len && !ok; j++)
            ok = strcmp (c->credentials.v[j].host, rc->host) == 0
                 && strcmp (c->credentials.v[j].header, rc->header) == 0
                 && strcmp (c->credentials.v[j].value, rc->value) == 0;
          if (ok)
            {
              pdoc_creds_add (&e->credentials, rc);
              continue;
            }
          cleanup_free char *t = xasprintf ("%s (%s: %s)", rc->host, rc->header, rc->value);
          append_value (&bad, t, true);
          nbad++;
        }
      if (nbad)
        widen_report (w, "network.credentials", bad, nbad, NULL);
    }
  pdoc_https_copy (&e->http, &c->http);
  for (size_t i = 0; i < r->http.len; i++)
    pdoc_https_add (&e->http, &r->http.v[i]);
  e->http.set = c->http.set || r->http.set;
}

static void
intersect_net (struct widen *w, const struct pdoc *c, const struct pdoc *r, struct pdoc *e)
{
  /* an unset ceiling mode is unrestricted: it does not filter anything the request lists */
  bool c_open = c->net_mode < 0 || c->net_mode == POLICY_NET_OPEN;
  e->has_net = c->has_net || r->has_net;
  e->net_mode = r->net_mode >= 0 ? r->net_mode : c->net_mode;
  if (r->net_mode >= 0 && c->net_mode >= 0 && mode_rank (r->net_mode) > mode_rank (c->net_mode))
    {
      cleanup_free char *q = oci_quote (policy_net_mode_names[r->net_mode]);
      cleanup_free char *cq = oci_quote (policy_net_mode_names[c->net_mode]);
      widen_report (w, "network.mode", q, 1, cq);
      e->net_mode = c->net_mode;
    }
  if (e->net_mode == POLICY_NET_NONE)
    {
      /* nothing leaves the netns: an allowlist means nothing, whatever either side lists */
      e->allowed_domains.set = r->allowed_domains.set || c->allowed_domains.set;
      e->allowed_cidrs.set = r->allowed_cidrs.set || c->allowed_cidrs.set;
    }
  else if (c_open)
    {
      pdoc_strs_copy (&e->allowed_domains, r->allowed_domains.set ? &r->allowed_domains : &c->allowed_domains);
      pdoc_strs_copy (&e->allowed_cidrs, r->allowed_cidrs.set ? &r->allowed_cidrs : &c->allowed_cidrs);
    }
  else
    {
      intersect_strs (w, "network.allowedDomains", &c->allowed_domains, &r->allowed_domains, pval_domain_covers,
                      &e->allowed_domains);
      intersect_strs (w, "network.allowedCidrs", &c->allowed_cidrs, &r->allowed_cidrs, pval_cidr_covers,
                      &e->allowed_cidrs);
    }
  union_strs (&c->denied_domains, &r->denied_domains, &e->denied_domains);
  /* allowUnixSockets opens a hole in the socket confinement of `none`/`filtered`: like `degrade`,
   * an unset list of a confining ceiling accepts none; an open ceiling confines no socket */
  if (c_open)
    pdoc_strs_copy (&e->allow_unix_sockets,
                    r->allow_unix_sockets.set ? &r->allow_unix_sockets : &c->allow_unix_sockets);
  else
    {
      static const struct pdoc_strs none = { .set = true };
      intersect_strs (w, "network.allowUnixSockets", c->allow_unix_sockets.set ? &c->allow_unix_sockets : &none,
                      &r->allow_unix_sockets, NULL, &e->allow_unix_sockets);
      if (!r->allow_unix_sockets.set)
        pdoc_strs_copy (&e->allow_unix_sockets, &c->allow_unix_sockets);
    }
  intersect_egress (w, c, r, e);
  intersect_ports (w, c, r, e);
  e->allow_local_binding = r->allow_local_binding >= 0 ? r->allow_local_binding : c->allow_local_binding;
  if (r->allow_local_binding == 1 && c->allow_local_binding == 0)
    {
      widen_report (w, "network.allowLocalBinding", "true", 1, "false");
      e->allow_local_binding = 0;
    }
}

static void
intersect_u64 (struct widen *w, const char *field, struct pdoc_u64 c, struct pdoc_u64 r, struct pdoc_u64 *out)
{
  *out = r.set ? r : c;
  if (r.set && c.set && r.v > c.v)
    {
      char num[24], det[48];
      snprintf (num, sizeof num, "%" PRIu64, r.v);
      snprintf (det, sizeof det, "%" PRIu64, c.v);
      widen_report (w, field, num, 1, det);
      *out = c;
    }
}

/* an enum where a higher value is wider (approvals); -1 = unset */
static void
intersect_rank (struct widen *w, const char *field, int c, int r, const char *const *names, int *out)
{
  *out = r >= 0 ? r : c;
  if (r >= 0 && c >= 0 && r > c)
    {
      cleanup_free char *q = oci_quote (names[r]);
      cleanup_free char *cq = oci_quote (names[c]);
      widen_report (w, field, q, 1, cq);
      *out = c;
    }
}

static void
intersect_rest (struct widen *w, const struct pdoc *c, const struct pdoc *r, struct pdoc *e)
{
  e->deny_groups_set = c->deny_groups_set || r->deny_groups_set;
  e->deny_groups = c->deny_groups | r->deny_groups;
  /* true is the narrower: a request may turn it on, never off */
  e->deny_wx_memory = r->deny_wx_memory >= 0 ? r->deny_wx_memory : c->deny_wx_memory;
  if (r->deny_wx_memory == 0 && c->deny_wx_memory == 1)
    {
      widen_report (w, "syscalls.denyWriteExecMemory", "false", 1, "true");
      e->deny_wx_memory = 1;
    }
  intersect_strs (w, "capabilities.allow", &c->caps_allow, &r->caps_allow, NULL, &e->caps_allow);
  for (int i = 0; i < PDOC_LIMITS; i++)
    {
      cleanup_free char *field = xasprintf ("limits.%s", pdoc_limit_names[i]);
      intersect_u64 (w, field, c->limits[i], r->limits[i], &e->limits[i]);
    }
  e->cpus_set = r->cpus_set || c->cpus_set;
  e->cpus = r->cpus_set ? r->cpus : c->cpus;
  if (r->cpus_set && c->cpus_set && r->cpus > c->cpus)
    {
      char num[32], det[48];
      snprintf (num, sizeof num, "%g", r->cpus);
      snprintf (det, sizeof det, "%g", c->cpus);
      widen_report (w, "limits.cpus", num, 1, det);
      e->cpus = c->cpus;
    }
  intersect_rank (w, "approvals.network", c->approvals_network, r->approvals_network, policy_approval_names,
                  &e->approvals_network);
  intersect_u64 (w, "approvals.timeoutSeconds", c->approvals_timeout, r->approvals_timeout, &e->approvals_timeout);
  intersect_rank (w, "approvals.onTimeout", c->on_timeout_allow, r->on_timeout_allow, policy_on_timeout_names,
                  &e->on_timeout_allow);
  e->audit_set = c->audit_set || r->audit_set;
  e->audit_events = c->audit_events | r->audit_events;
  /* audit.onFull: continue is wider than kill; an unset ceiling means the default, kill */
  intersect_rank (w, "audit.onFull", c->audit_on_full < 0 && r->audit_on_full >= 0 ? 0 : c->audit_on_full,
                  r->audit_on_full, policy_on_full_names, &e->audit_on_full);
  /* degrade: an unset ceiling accepts no degradation */
  struct pdoc_strs none = { .set = true };
  intersect_strs (w, "degrade", c->degrade.set ? &c->degrade : &none, &r->degrade, NULL, &e->degrade);
  if (!r->degrade.set)
    pdoc_strs_copy (&e->degrade, &c->degrade);
}

struct pdoc *
pdoc_intersect (const struct pdoc *ceiling, const struct pdoc *request, const char *ceiling_name, bool clamp,
                char ***clamps, size_t *clamps_len, asbx_err_t *err)
{
  struct widen w = { .ceiling = ceiling_name, .clamp = clamp };
  struct pdoc *e = pdoc_new ("effective policy");

  intersect_isolation (&w, ceiling, request, e);
  intersect_fs (&w, ceiling, request, e);
  intersect_net (&w, ceiling, request, e);
  intersect_rest (&w, ceiling, request, e);
  if (w.len && !clamp)
    {
      size_t n = 0;
      for (size_t i = 0; i < w.len; i++)
        n += strlen (w.lines[i]) + 1;
      cleanup_free char *msg = xmalloc0 (n + 1);
      for (size_t i = 0; i < w.len; i++)
        {
          if (i)
            strcat (msg, "\n");
          strcat (msg, w.lines[i]);
        }
      asbx_strv_free (w.lines);
      pdoc_free (e);
      asbx_error (err, 0, "%s", msg);
      return NULL;
    }
  if (clamps)
    {
      *clamps = w.lines;
      *clamps_len = w.len;
    }
  else
    asbx_strv_free (w.lines);
  pdoc_normalize (e);
  return e;
}
