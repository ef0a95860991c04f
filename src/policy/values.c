/* values.c - the value grammar of a policy document: sizes, durations, filesystem paths,
 * domain names and CIDR prefixes; validation, normalisation and the "covers" relations the
 * merge uses to decide whether a request narrows its ceiling. Pure: no syscalls
 * (inet_pton/inet_ntop are string conversions).
 *
 * Threat model: the request comes from whoever starts the container. Everything is refused
 * rather than guessed: glob characters (v1 has none; a glob silently read as a literal would
 * drop a rule), `..` components (a path that means something else after resolution), `*`
 * alone or a bare TLD as a domain (an allowlist that allows everything), CIDRs with host bits
 * set (a typo that widens or narrows by surprise). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/pathlex.h"
#include "core/util.h"
#include "policy/doc.h"

static int why_fail (char **why, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static int
why_fail (char **why, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  if (vasprintf (why, fmt, ap) < 0)
    abort ();
  va_end (ap);
  return -1;
}

/* "<digits><unit>" against a unit table; the number part is a plain decimal integer. */
struct unit
{
  const char *name;
  uint64_t mult;
};

static int
parse_with_units (const char *s, const struct unit *units, uint64_t *out, char **why, const char *what)
{
  size_t n = 0;
  uint64_t v = 0, mult = 0;
  while (s[n] >= '0' && s[n] <= '9')
    n++;
  if (n == 0)
    return why_fail (why, "expected a %s: an integer or a string like %s", what,
                     units[1].name[0] == 's' ? "\"90s\"" : "\"512MiB\"");
  for (const struct unit *u = units; u->name; u++)
    if (strcmp (s + n, u->name) == 0)
      mult = u->mult;
  if (mult == 0)
    return why_fail (why, "unknown unit \"%s\" in a %s", s + n, what);
  cleanup_free char *digits = strndup (s, n);
  if (digits == NULL)
    abort ();
  /* at most INT64_MAX, like the integer form: the canonical document and the runtime carry these
   * as signed 64-bit (JSON integers, time_t, rlim). Found by fuzz_policy: "157777777777777777m"
   * passed and was emitted as a negative wallClockSeconds. */
  if (parse_u64 (digits, &v) < 0 || v > (uint64_t) INT64_MAX / mult)
    return why_fail (why, "%s out of range", what);
  *out = v * mult;
  return 0;
}

int
pval_size (const char *s, uint64_t *out, char **why)
{
  static const struct unit units[] = {
    { "", 1 },
    { "B", 1 },
    { "KiB", 1ull << 10 },
    { "MiB", 1ull << 20 },
    { "GiB", 1ull << 30 },
    { "TiB", 1ull << 40 },
    { "KB", 1000ull },
    { "MB", 1000ull * 1000 },
    { "GB", 1000ull * 1000 * 1000 },
    { "TB", 1000ull * 1000 * 1000 * 1000 },
    { NULL, 0 },
  };
  return parse_with_units (s, units, out, why, "size");
}

int
pval_duration (const char *s, uint64_t *out, char **why)
{
  static const struct unit units[] = {
    { "", 1 }, { "s", 1 }, { "m", 60 }, { "h", 3600 }, { "d", 86400 }, { NULL, 0 },
  };
  return parse_with_units (s, units, out, why, "duration");
}

/* ---- paths ---------------------------------------------------------------------------------- */

/* Normalise an absolute path: collapse "//", drop "/." and a trailing "/"; ".." is refused. */
static int
normalize_abs (const char *s, char **norm, char **why)
{
  *norm = asbx_path_lexical (s, true);
  return *norm ? 0 : why_fail (why, "\"..\" components are not allowed");
}

int
pval_path (const char *s, struct pdoc_path *out, bool home_ok, char **why)
{
  cleanup_free char *body = NULL;
  bool optional = false, home = false;
  size_t n;

  if (*s == '?')
    {
      optional = true;
      s++;
    }
  body = xstrdup (s);
  n = strlen (body);
  /* "/x" followed by "/" "**" = the hierarchy of /x, which is what "/x" already means */
  if (n >= 3 && strcmp (body + n - 3, "/**") == 0)
    body[n - 3] = '\0';
  if (strpbrk (body, "*?[") != NULL)
    return why_fail (why, "glob characters (*, ?, [) are not supported; only a trailing /** is accepted");
  if (body[0] == '~' && body[1] == '/')
    {
      if (!home_ok)
        return why_fail (why, "the ~/ form (every home directory) is only accepted in denyRead and denyWrite");
      home = true;
      memmove (body, body + 1, strlen (body)); /* "~/x" -> "/x", normalised below */
    }
  else if (body[0] != '/')
    return why_fail (why, "relative path: paths must be absolute (inside the container)");
  char *norm = NULL;
  if (normalize_abs (body, &norm, why) < 0 || norm == NULL)
    return -1;
  if (home && strcmp (norm, "/") == 0)
    {
      free (norm);
      return why_fail (why, "the ~/ form needs a path below the home directory");
    }
  if (home)
    memmove (norm, norm + 1, strlen (norm)); /* stored as the suffix "x" */
  out->path = norm;
  out->optional = optional;
  out->each_home = home;
  return 0;
}

bool
pval_path_covers (const char *outer, const char *inner)
{
  size_t n = strlen (outer);
  if (strcmp (outer, "/") == 0)
    return inner[0] == '/';
  return strncmp (outer, inner, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

/* ---- domains -------------------------------------------------------------------------------- */

static int
check_labels (const char *name, char **why)
{
  size_t labels = 0;
  const char *p = name;
  if (strlen (name) > 253)
    return why_fail (why, "a domain name has at most 253 characters");
  while (*p)
    {
      const char *e = strchrnul (p, '.');
      size_t len = (size_t) (e - p);
      if (len == 0 || len > 63)
        return why_fail (why, "each label of a domain name has 1 to 63 characters");
      if (p[0] == '-' || p[len - 1] == '-')
        return why_fail (why, "a label cannot start or end with \"-\"");
      for (const char *c = p; c < e; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
          return why_fail (why, "invalid character in a domain name (use the punycode form for IDNs)");
      labels++;
      p = *e ? e + 1 : e;
    }
  if (labels < 2)
    return why_fail (why, "a bare top-level domain would allow a whole TLD");
  return 0;
}

int
pval_domain (const char *s, char **norm, char **why)
{
  cleanup_free char *d = xstrdup (s);
  size_t n = strlen (d);
  for (size_t i = 0; i < n; i++)
    d[i] = (char) tolower ((unsigned char) d[i]);
  if (n > 1 && d[n - 1] == '.')
    d[--n] = '\0';
  if (strcmp (d, "*") == 0)
    return why_fail (why, "\"*\" alone would allow every domain");
  const char *name = strncmp (d, "*.", 2) == 0 ? d + 2 : d;
  if (strchr (name, '*'))
    return why_fail (why, "\"*\" is only accepted as the first label (\"*.example.com\")");
  if (n == 0)
    return why_fail (why, "empty domain name");
  if (check_labels (name, why) < 0)
    return -1;
  *norm = steal_ptr (&d);
  return 0;
}

static bool
ends_with_label (const char *name, const char *suffix)
{
  size_t n = strlen (name), m = strlen (suffix);
  return n > m && name[n - m - 1] == '.' && strcmp (name + n - m, suffix) == 0;
}

bool
pval_domain_covers (const char *outer, const char *inner)
{
  if (strcmp (outer, inner) == 0)
    return true;
  if (strncmp (outer, "*.", 2) != 0)
    return false;
  /* "*.s" allows "x.s", "a.b.s" and "*.x.s", but neither "s" nor "*.s"-equal handled above */
  const char *in = strncmp (inner, "*.", 2) == 0 ? inner + 2 : inner;
  if (in != inner && strcmp (in, outer + 2) == 0)
    return true;
  return ends_with_label (in, outer + 2);
}

/* ---- CIDRs ---------------------------------------------------------------------------------- */

struct cidr
{
  int family;
  unsigned char addr[16];
  unsigned prefix;
  unsigned port; /* 0 = any */
};

static int
parse_port (const char *s, unsigned *port, char **why)
{
  uint64_t v;
  if (parse_u64 (s, &v) < 0 || v == 0 || v > 65535)
    return why_fail (why, "invalid port \"%s\" (1 to 65535)", s);
  *port = (unsigned) v;
  return 0;
}

static int
cidr_parse (const char *s, struct cidr *c, char **why)
{
  cleanup_free char *buf = xstrdup (s);
  char *addr = buf, *pfx = NULL, *port = NULL;

  memset (c, 0, sizeof *c);
  if (*addr == '[')
    {
      char *e = strchr (++addr, ']');
      if (e == NULL)
        return why_fail (why, "missing \"]\"");
      *e++ = '\0';
      if (*e == '/')
        {
          pfx = e + 1;
          port = strchr (pfx, ':');
        }
      else if (*e == ':')
        port = e;
      else if (*e)
        return why_fail (why, "unexpected text after \"]\"");
      if (port)
        *port++ = '\0';
    }
  else
    {
      char *colon = strchr (addr, ':');
      if (colon && strchr (colon + 1, ':') == NULL) /* one colon: IPv4 with a port */
        {
          *colon = '\0';
          port = colon + 1;
        }
      pfx = strchr (addr, '/');
      if (pfx)
        *pfx++ = '\0';
    }
  if (inet_pton (AF_INET, addr, c->addr) == 1)
    c->family = AF_INET;
  else if (inet_pton (AF_INET6, addr, c->addr) == 1)
    c->family = AF_INET6;
  else
    return why_fail (why, "not an IPv4 or IPv6 address");
  unsigned bits = c->family == AF_INET ? 32 : 128;
  c->prefix = bits;
  if (pfx)
    {
      uint64_t v;
      if (parse_u64 (pfx, &v) < 0 || v > bits)
        return why_fail (why, "invalid prefix length \"%s\" (0 to %u)", pfx, bits);
      c->prefix = (unsigned) v;
    }
  if (port && parse_port (port, &c->port, why) < 0)
    return -1;
  for (unsigned b = c->prefix; b < bits; b++)
    if (c->addr[b / 8] & (0x80 >> (b % 8)))
      return why_fail (why, "host bits set after the /%u prefix", c->prefix);
  return 0;
}

int
pval_cidr (const char *s, char **norm, char **why)
{
  struct cidr c;
  char a[INET6_ADDRSTRLEN];
  if (cidr_parse (s, &c, why) < 0)
    return -1;
  if (c.prefix == 0)
    return why_fail (why, "a /0 prefix would allow every address");
  inet_ntop (c.family, c.addr, a, sizeof a);
  if (c.port && c.family == AF_INET6)
    *norm = xasprintf ("[%s]/%u:%u", a, c.prefix, c.port);
  else if (c.port)
    *norm = xasprintf ("%s/%u:%u", a, c.prefix, c.port);
  else
    *norm = xasprintf ("%s/%u", a, c.prefix);
  return 0;
}

bool
pval_cidr_covers (const char *outer, const char *inner)
{
  struct cidr o, i;
  cleanup_free char *w1 = NULL, *w2 = NULL;
  if (cidr_parse (outer, &o, &w1) < 0 || cidr_parse (inner, &i, &w2) < 0)
    return false;
  if (o.family != i.family || o.prefix > i.prefix || (o.port && o.port != i.port))
    return false;
  for (unsigned b = 0; b < o.prefix; b++)
    if ((o.addr[b / 8] ^ i.addr[b / 8]) & (0x80 >> (b % 8)))
      return false;
  return true;
}
