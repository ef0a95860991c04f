/* parse_egress.c - network.credentials[] and network.http[] of a policy document (issue 19;
 * docs/policy.md "Credentials and HTTP rules"), validated field by field. The rules that need
 * the whole effective document (network mode, ports) are pdoc_check_egress (egress_doc.c).
 *
 * Threat model: a credential value becomes an HTTP header the egress writes to the real host, so
 * what is checked here is what keeps it one header: a field name that is an RFC 9110 token and
 * not one of the fields that frame or route the message (Host, Content-Length, ...), and a value
 * without CR, LF, NUL or other control characters. `${secret:NAME}` names a file of the host's
 * secrets directory: NAME is [A-Za-z0-9_.-]+ and neither "." nor "..", so it can never name a
 * path outside that directory. The secret's value is never read here (the runtime checks that it
 * exists at create, the monitor reads it at each request). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/doc.h"
#include "policy/parse_internal.h"

#define CRED_VALUE_MAX 8192
#define HTTP_PATH_MAX 4096

/* RFC 9110 5.6.2 tchar */
static bool
is_tchar (char ch)
{
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
         || (ch != '\0' && strchr ("!#$%&'*+-.^_`|~", ch) != NULL);
}

static bool
is_secret_char (char ch)
{
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.'
         || ch == '-';
}

/* an exact host: a domain without wildcard (the egress mints a certificate for exactly it) */
static int
get_host (struct oci_ctx *c, yajl_val obj, char **out)
{
  cleanup_free char *s = NULL;
  char *why = NULL;
  int r = oci_required (c, "host", oci_get_string (c, obj, "host", &s));
  if (r < 0)
    return -1;
  size_t mark = oci_ctx_push_key (c, "host");
  if (strchr (s, '*'))
    r = pparse_fail_value (c, s,
                           xstrdup ("expected an exact host name (no wildcard: the egress intercepts "
                                    "exactly the hosts named)"));
  else if (strchr (s, ':'))
    r = pparse_fail_value (c, s, xstrdup ("expected a host name without a port (credentials ride port 443)"));
  else if (pval_domain (s, out, &why) < 0)
    r = pparse_fail_value (c, s, why);
  oci_ctx_pop (c, mark);
  return r < 0 ? -1 : 0;
}

/* fields a credential may not set: they frame or route the message, which the egress owns */
static bool
reserved_header (const char *h)
{
  static const char *const names[] = { "host",    "content-length", "transfer-encoding", "connection", "upgrade", "te",
                                       "trailer", "keep-alive",     "proxy-connection",  "expect",     NULL };
  for (const char *const *n = names; *n; n++)
    if (strcasecmp (*n, h) == 0)
      return true;
  return false;
}

static int
check_header (struct oci_ctx *c, const char *h)
{
  if (h[0] == '\0')
    return oci_fail_key (c, "header", "expected an HTTP field name (\"Authorization\")");
  for (const char *p = h; *p; p++)
    if (!is_tchar (*p))
      {
        cleanup_free char *q = oci_quote (h);
        return oci_fail_key (c, "header", "%s: not an HTTP field name (letters, digits and !#$%%&'*+-.^_`|~)", q);
      }
  if (reserved_header (h))
    {
      cleanup_free char *q = oci_quote (h);
      return oci_fail_key (c, "header", "%s: a credential cannot set a field that frames or routes the request", q);
    }
  return 0;
}

/* The template: printable text and ${secret:NAME} references; every "${" must open one. */
static int
check_value (struct oci_ctx *c, const char *v)
{
  size_t n = strlen (v);
  if (n == 0 || n > CRED_VALUE_MAX)
    return oci_fail_key (c, "value", "expected 1 to %d characters", CRED_VALUE_MAX);
  for (const char *p = v; *p; p++)
    {
      unsigned char ch = (unsigned char) *p;
      if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
        return oci_fail_key (c, "value", "control character 0x%02x: a header value is one line of text", ch);
      if (p[0] != '$' || p[1] != '{')
        continue;
      const char *name = p + 2 + strlen ("secret:");
      if (strncmp (p + 2, "secret:", strlen ("secret:")) != 0)
        return oci_fail_key (c, "value", "\"${\" at offset %zu: expected ${secret:NAME}", (size_t) (p - v));
      size_t len = 0;
      while (is_secret_char (name[len]))
        len++;
      if (len == 0 || name[len] != '}' || (len == 1 && name[0] == '.')
          || (len == 2 && name[0] == '.' && name[1] == '.'))
        return oci_fail_key (c, "value",
                             "${secret:...} at offset %zu: NAME is one file name of the secrets directory "
                             "([A-Za-z0-9_.-]+, not . or ..) closed by }",
                             (size_t) (p - v));
      p = name + len; /* the '}' */
    }
  return 0;
}

static int
elem_credential (struct oci_ctx *c, yajl_val v, void *ud)
{
  static const char *const keys[] = { "host", "header", "value", NULL };
  struct pdoc_cred cr = { 0 };
  cleanup_free char *host = NULL, *header = NULL, *value = NULL, *origin = NULL;

  if (!YAJL_IS_OBJECT (v))
    return oci_fail (c, "expected an object {\"host\", \"header\", \"value\"}");
  if (pparse_keys (c, v, keys) < 0 || get_host (c, v, &host) < 0
      || oci_required (c, "header", oci_get_string (c, v, "header", &header)) < 0 || check_header (c, header) < 0
      || oci_required (c, "value", oci_get_string (c, v, "value", &value)) < 0 || check_value (c, value) < 0)
    return -1;
  origin = xasprintf ("%s: %s", c->name, c->path);
  cr = (struct pdoc_cred){ .host = host, .header = header, .value = value, .origin = origin };
  pdoc_creds_add (ud, &cr);
  return 0;
}

static int
elem_method (struct oci_ctx *c, yajl_val v, void *ud)
{
  const char *s = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  bool ok = s[0] != '\0' && strlen (s) <= 32;
  for (const char *p = s; ok && *p; p++)
    ok = (*p >= 'A' && *p <= 'Z') || *p == '-';
  if (!ok)
    return pparse_fail_value (c, s, xstrdup ("expected an HTTP method in upper case (\"GET\", \"POST\")"));
  pdoc_strs_add (ud, s);
  return 0;
}

static int
elem_http_path (struct oci_ctx *c, yajl_val v, void *ud)
{
  const char *s = NULL;
  if (pparse_string (c, v, &s) < 0)
    return -1;
  if (!(s[0] == '/' || strcmp (s, "*") == 0) || strlen (s) > HTTP_PATH_MAX)
    return pparse_fail_value (c, s,
                              xstrdup ("expected a pattern of the request path starting with \"/\" "
                                       "(fnmatch(3): \"/repos/org/*\"), or \"*\""));
  for (const char *p = s; *p; p++)
    if ((unsigned char) *p <= 0x20 || *p == 0x7f)
      return pparse_fail_value (c, s, xstrdup ("a request path has no spaces or control characters"));
  pdoc_strs_add (ud, s);
  return 0;
}

static int
elem_allow (struct oci_ctx *c, yajl_val v, void *ud)
{
  static const char *const keys[] = { "methods", "paths", NULL };
  struct pdoc_http *h = ud;
  struct pdoc_http_allow a = { 0 };
  int r;

  if (!YAJL_IS_OBJECT (v))
    return oci_fail (c, "expected an object {\"methods\": [...], \"paths\": [...]}");
  r = pparse_keys (c, v, keys);
  if (r == 0)
    r = pparse_each (c, v, "methods", elem_method, &a.methods, &a.methods.set);
  if (r >= 0)
    r = pparse_each (c, v, "paths", elem_http_path, &a.paths, &a.paths.set);
  if (r >= 0 && ((a.methods.set && a.methods.len == 0) || (a.paths.set && a.paths.len == 0)))
    r = oci_fail_key (c, a.methods.set && a.methods.len == 0 ? "methods" : "paths",
                      "an empty list would allow no request (leave the key out for any)");
  if (r < 0)
    {
      pdoc_strs_clear (&a.methods);
      pdoc_strs_clear (&a.paths);
      return -1;
    }
  h->allow = xrealloc (h->allow, (h->allow_len + 1) * sizeof (*h->allow));
  h->allow[h->allow_len++] = a;
  return 0;
}

static void
http_entry_clear (struct pdoc_http *h)
{
  for (size_t i = 0; i < h->allow_len; i++)
    {
      pdoc_strs_clear (&h->allow[i].methods);
      pdoc_strs_clear (&h->allow[i].paths);
    }
  free (h->allow);
  free (h->host);
  free (h->origin);
}

static int
elem_http (struct oci_ctx *c, yajl_val v, void *ud)
{
  static const char *const keys[] = { "host", "allow", "maxBodyBytes", NULL };
  struct pdoc_http h = { 0 };
  struct pdoc_u64 cap = { 0 };
  int r;

  if (!YAJL_IS_OBJECT (v))
    return oci_fail (c, "expected an object {\"host\", \"allow\", \"maxBodyBytes\"}");
  r = pparse_keys (c, v, keys);
  if (r == 0)
    r = get_host (c, v, &h.host);
  if (r == 0)
    r = pparse_each (c, v, "allow", elem_allow, &h, &h.allow_set);
  if (r >= 0 && h.allow_set && h.allow_len == 0)
    r = oci_fail_key (c, "allow",
                      "an empty list would allow no request (leave the key out for any, or remove the host from "
                      "network.allowedDomains)");
  if (r >= 0)
    r = pparse_quantity (c, v, "maxBodyBytes", V_SIZE, true, &cap);
  if (r >= 0)
    {
      h.max_body_bytes = cap.v;
      h.origin = xasprintf ("%s: %s", c->name, c->path);
      pdoc_https_add (ud, &h);
    }
  http_entry_clear (&h);
  return r < 0 ? -1 : 0;
}

int
pparse_egress (struct oci_ctx *c, yajl_val net, struct pdoc *d)
{
  if (pparse_each (c, net, "credentials", elem_credential, &d->credentials, &d->credentials.set) < 0)
    return -1;
  if (pparse_each (c, net, "http", elem_http, &d->http, &d->http.set) < 0)
    return -1;
  return 0;
}
