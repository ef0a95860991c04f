/* egress_doc.c - network.credentials and network.http in the document model (issue 19): list
 * helpers, the ${secret:NAME} references of a template, and the rules only the effective
 * document can check (pdoc_check_egress). Pure. */
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/doc.h"
#include "policy/plan.h"

void
pdoc_creds_clear (struct pdoc_creds *c)
{
  for (size_t i = 0; i < c->len; i++)
    {
      free (c->v[i].host);
      free (c->v[i].header);
      free (c->v[i].value);
      free (c->v[i].origin);
    }
  free (c->v);
  memset (c, 0, sizeof *c);
}

/* the same credential (host, header, value) is kept once, with its first origin */
void
pdoc_creds_add (struct pdoc_creds *c, const struct pdoc_cred *e)
{
  c->set = true;
  for (size_t i = 0; i < c->len; i++)
    if (strcmp (c->v[i].host, e->host) == 0 && strcmp (c->v[i].header, e->header) == 0
        && strcmp (c->v[i].value, e->value) == 0)
      return;
  c->v = xrealloc (c->v, (c->len + 1) * sizeof (*c->v));
  c->v[c->len++] = (struct pdoc_cred){
    .host = xstrdup (e->host),
    .header = xstrdup (e->header),
    .value = xstrdup (e->value),
    .origin = xstrdup (e->origin),
  };
}

void
pdoc_creds_copy (struct pdoc_creds *dst, const struct pdoc_creds *src)
{
  pdoc_creds_clear (dst);
  for (size_t i = 0; i < src->len; i++)
    pdoc_creds_add (dst, &src->v[i]);
  dst->set = src->set;
}

void
pdoc_https_clear (struct pdoc_https *h)
{
  for (size_t i = 0; i < h->len; i++)
    {
      for (size_t j = 0; j < h->v[i].allow_len; j++)
        {
          pdoc_strs_clear (&h->v[i].allow[j].methods);
          pdoc_strs_clear (&h->v[i].allow[j].paths);
        }
      free (h->v[i].allow);
      free (h->v[i].host);
      free (h->v[i].origin);
    }
  free (h->v);
  memset (h, 0, sizeof *h);
}

static bool
strs_equal (const struct pdoc_strs *a, const struct pdoc_strs *b)
{
  if (a->set != b->set || a->len != b->len)
    return false;
  for (size_t i = 0; i < a->len; i++)
    if (strcmp (a->v[i], b->v[i]) != 0)
      return false;
  return true;
}

static bool
http_equal (const struct pdoc_http *a, const struct pdoc_http *b)
{
  if (strcmp (a->host, b->host) != 0 || a->max_body_bytes != b->max_body_bytes || a->allow_set != b->allow_set
      || a->allow_len != b->allow_len)
    return false;
  for (size_t i = 0; i < a->allow_len; i++)
    if (!strs_equal (&a->allow[i].methods, &b->allow[i].methods)
        || !strs_equal (&a->allow[i].paths, &b->allow[i].paths))
      return false;
  return true;
}

void
pdoc_https_add (struct pdoc_https *h, const struct pdoc_http *e)
{
  h->set = true;
  for (size_t i = 0; i < h->len; i++)
    if (http_equal (&h->v[i], e))
      return;
  h->v = xrealloc (h->v, (h->len + 1) * sizeof (*h->v));
  struct pdoc_http *n = &h->v[h->len++];
  *n = (struct pdoc_http){ .host = xstrdup (e->host),
                           .allow_set = e->allow_set,
                           .allow_len = e->allow_len,
                           .max_body_bytes = e->max_body_bytes,
                           .origin = xstrdup (e->origin) };
  n->allow = xmalloc0 ((e->allow_len + 1) * sizeof (*n->allow));
  for (size_t i = 0; i < e->allow_len; i++)
    {
      pdoc_strs_copy (&n->allow[i].methods, &e->allow[i].methods);
      pdoc_strs_copy (&n->allow[i].paths, &e->allow[i].paths);
    }
}

void
pdoc_https_copy (struct pdoc_https *dst, const struct pdoc_https *src)
{
  pdoc_https_clear (dst);
  for (size_t i = 0; i < src->len; i++)
    pdoc_https_add (dst, &src->v[i]);
  dst->set = src->set;
}

void
policy_secret_refs (const char *value, void (*fn) (void *ud, const char *name, size_t len), void *ud)
{
  static const char open[] = "${secret:";
  for (const char *p = strstr (value, open); p; p = strstr (p, open))
    {
      const char *name = p + sizeof open - 1, *end = strchr (name, '}');
      if (end == NULL)
        return; /* refused at parse */
      fn (ud, name, (size_t) (end - name));
      p = end + 1;
    }
}

int
pdoc_check_egress (const struct pdoc *d, asbx_err_t *err)
{
  const char *origin = d->credentials.len ? d->credentials.v[0].origin : d->http.len ? d->http.v[0].origin : NULL;

  if (d->credentials.len == 0 && d->http.len == 0)
    return 0;
  if (!d->has_net || d->net_mode != POLICY_NET_FILTERED)
    return asbx_error (err, 0,
                       "%s: needs network.mode \"filtered\" (the egress that injects credentials and checks "
                       "HTTP rules is in the path only then; the mode is \"%s\")",
                       origin, d->has_net && d->net_mode >= 0 ? policy_net_mode_names[d->net_mode] : "open");
  /* credentials only ride TLS: the ports are not per host, so any other port would let the agent
   * reach a credential host in clear, where the egress cannot add the header and the agent would
   * learn the host answers without it, or where a header it wrote could be read */
  for (size_t i = 0; i < d->credentials.len; i++)
    for (size_t j = 0; j < d->ports_len; j++)
      if (d->ports[j] != 443)
        return asbx_error (err, 0,
                           "%s.host: \"%s\" has a credential, and network.ports allows port %u, where it would be "
                           "reached in clear: credentials only ride TLS (port 443); set network.ports to [443]",
                           d->credentials.v[i].origin, d->credentials.v[i].host, d->ports[j]);
  /* the same for HTTP rules: in clear they would not be checked */
  for (size_t i = 0; i < d->http.len; i++)
    for (size_t j = 0; j < d->ports_len; j++)
      if (d->ports[j] != 443)
        return asbx_error (err, 0,
                           "%s.host: \"%s\" has HTTP rules, and network.ports allows port %u, where they would not "
                           "be checked: HTTP rules apply on TLS (port 443); set network.ports to [443]",
                           d->http.v[i].origin, d->http.v[i].host, d->ports[j]);
  return 0;
}
