/* http_rules.c - network.http[] rules of the TLS interception (see http_rules.h). */
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "monitor/http_rules.h"

bool
http_rules_intercepted (const struct policy_plan *plan, const char *host)
{
  for (size_t i = 0; i < plan->credentials_len; i++)
    if (strcmp (plan->credentials[i].host, host) == 0)
      return true;
  for (size_t i = 0; i < plan->http_hosts_len; i++)
    if (strcmp (plan->http_hosts[i].host, host) == 0)
      return true;
  return false;
}

/* a dot-segment or an encoded '.', '/' or '\' in the path part of t (before '?') */
static bool
ambiguous_path (const char *t)
{
  size_t n = strcspn (t, "?#");
  for (size_t i = 0; i < n; i++)
    {
      if (t[i] == '\\')
        return true;
      if (t[i] == '%' && i + 2 < n)
        {
          char a = t[i + 1], b = (char) (t[i + 2] | 0x20);
          if ((a == '2' && (b == 'e' || b == 'f')) || (a == '5' && b == 'c'))
            return true;
        }
      if (t[i] == '/')
        {
          size_t k = i + 1;
          while (k < n && t[k] == '.')
            k++;
          if ((k - i - 1 == 1 || k - i - 1 == 2) && (k == n || t[k] == '/'))
            return true;
        }
    }
  return false;
}

static bool
allow_matches (const struct policy_http_allow *a, const char *method, const char *target, bool *method_ok)
{
  bool m = a->methods_len == 0;
  for (size_t i = 0; i < a->methods_len && !m; i++)
    m = strcmp (a->methods[i], method) == 0;
  if (!m)
    return false;
  *method_ok = true;
  if (a->paths_len == 0)
    return true;
  /* the path only: a query string is not matched (outside test: with `*` crossing `/` and the
   * query included, a push `POST .../git-receive-pack?x=/git-upload-pack` passed the documented
   * fetch-only rule for `.../git-upload-pack`) - what a server routes on is the path */
  char path[8192];
  size_t pn = strcspn (target, "?");
  if (pn >= sizeof path)
    return false;
  memcpy (path, target, pn);
  path[pn] = '\0';
  for (size_t i = 0; i < a->paths_len; i++)
    if (fnmatch (a->paths[i], path, 0) == 0)
      return true;
  return false;
}

int
http_rules_check (const struct policy_plan *plan, const char *host, const char *method, const char *t, size_t tn,
                  uint64_t body_len, uint64_t *max_body, char *rule, size_t rulelen)
{
  char target[8192];
  size_t o = 0;
  *max_body = 0;
  if (tn >= sizeof target || memchr (t, '\0', tn))
    {
      snprintf (rule, rulelen, "path too long");
      return -1;
    }
  memcpy (target, t, tn);
  target[tn] = '\0';
  snprintf (rule, rulelen, "any");
  if (strcasecmp (method, "TRACE") == 0 || strcasecmp (method, "TRACK") == 0)
    {
      /* a TRACE (IIS: TRACK) answer echoes the request, the credential header with it, to the
       * agent; any case, since servers differ on it (outside retest: `trace` passed) */
      snprintf (rule, rulelen, "method not allowed: %s (it echoes the credential)", method);
      return -1;
    }
  if (strchr (target, '#'))
    {
      /* a request target never carries a fragment (RFC 9112 §3.2); servers end the path there,
       * so `/push#/fetch` was routed to a path the patterns never saw (outside retest) */
      snprintf (rule, rulelen, "fragment in the request target");
      return -1;
    }
  for (size_t i = 0; i < plan->http_hosts_len; i++)
    {
      const struct policy_http_host *e = &plan->http_hosts[i];
      if (strcmp (e->host, host) != 0)
        continue;
      if (ambiguous_path (target))
        {
          snprintf (rule, rulelen, "ambiguous path");
          return -1;
        }
      bool method_ok = e->allow_len == 0;
      size_t k = 0;
      while (k < e->allow_len && !allow_matches (&e->allow[k], method, target, &method_ok))
        k++;
      if (e->allow_len && k == e->allow_len)
        {
          if (method_ok)
            snprintf (rule, rulelen, "path not allowed");
          else
            snprintf (rule, rulelen, "method not allowed: %s", method);
          return -1;
        }
      if (e->max_body_bytes && body_len > e->max_body_bytes)
        {
          snprintf (rule, rulelen, "body too large: %" PRIu64 " > %" PRIu64 " bytes", body_len, e->max_body_bytes);
          return -1;
        }
      if (e->max_body_bytes && (*max_body == 0 || e->max_body_bytes < *max_body))
        *max_body = e->max_body_bytes;
      int w = e->allow_len ? snprintf (rule + o, rulelen > o ? rulelen - o : 0, "%sallow[%zu]", o ? "+" : "", k)
                           : snprintf (rule + o, rulelen > o ? rulelen - o : 0, "%sany", o ? "+" : "");
      if (w > 0)
        o += (size_t) w;
    }
  return 0;
}
