/* sni_parse.c - the SNI/Host check's parsers (see sni_parse.h): the first bytes the container
 * sends on a redirected TCP connection, a TLS ClientHello or an HTTP request head.
 *
 * Threat model: the container writes every byte and picks where the reads split them. Every
 * length field is checked against the bytes present before it is used; the name is copied only
 * when it fits and is made of host-name characters, so what reaches the allowlist comparison and
 * the audit record is a plain lowercase name. Results are stable under appending bytes (the
 * splice calls the parser again after every read), which tests/fuzz/fuzz_sni.c checks. */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "monitor/sni_parse.h"

#define HELLO_MAX SPLICE_HELLO_MAX

static int
set_name (const unsigned char *p, size_t n, char *name, size_t namelen)
{
  size_t o = 0;
  while (n > 0 && p[n - 1] == '.')
    n--;
  if (n == 0 || n >= namelen)
    return -1;
  for (size_t i = 0; i < n; i++)
    {
      unsigned char c = p[i];
      if (!(c == '-' || c == '.' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
            || (c >= 'A' && c <= 'Z')))
        return -1;
      name[o++] = (char) (c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
  name[o] = '\0';
  return 1;
}

int
splice_tls_sni (const unsigned char *b, size_t len, char *name, size_t namelen)
{
  if (len < 5)
    return 0;
  if (b[0] != 0x16 || b[1] != 3)
    return -1;
  size_t rec = (size_t) b[3] << 8 | b[4];
  if (len < 5 + rec)
    return rec + 5 > HELLO_MAX ? -1 : 0;
  const unsigned char *p = b + 5, *end = b + 5 + rec;
  /* handshake header (4), client_version (2), random (32) */
  if (end - p < 38 || p[0] != 1)
    return -1;
  p += 38;
#define SKIP(nbytes)                                                                                                   \
  do                                                                                                                   \
    {                                                                                                                  \
      if ((size_t) (end - p) < (size_t) (nbytes))                                                                      \
        return -1;                                                                                                     \
      p += (nbytes);                                                                                                   \
    }                                                                                                                  \
  while (0)
  if (end - p < 1)
    return -1;
  SKIP (1 + p[0]); /* session id */
  if (end - p < 2)
    return -1;
  SKIP (2 + (p[0] << 8 | p[1])); /* cipher suites */
  if (end - p < 1)
    return -1;
  SKIP (1 + p[0]); /* compression methods */
  if (end - p < 2)
    return -1;
  size_t ext = (size_t) (p[0] << 8 | p[1]);
  p += 2;
  if ((size_t) (end - p) < ext)
    return -1;
  end = p + ext;
  while (end - p >= 4)
    {
      unsigned type = (unsigned) (p[0] << 8 | p[1]), elen = (unsigned) (p[2] << 8 | p[3]);
      p += 4;
      if ((size_t) (end - p) < elen)
        return -1;
      if (type == 0 && elen >= 5 && p[2] == 0)
        {
          size_t nlen = (size_t) (p[3] << 8 | p[4]);
          if (5 + nlen > elen)
            return -1;
          return set_name (p + 5, nlen, name, namelen);
        }
      p += elen;
    }
#undef SKIP
  return -1; /* no server_name */
}

int
splice_http_host (const unsigned char *b, size_t len, char *name, size_t namelen)
{
  size_t i = 0;
  while (i < len && b[i] >= 'A' && b[i] <= 'Z')
    i++;
  if (i < len && (i == 0 || b[i] != ' '))
    return -1; /* not a request line */
  const unsigned char *head_end = memmem (b, len, "\r\n\r\n", 4);
  if (!head_end)
    return len >= HELLO_MAX ? -1 : 0;
  for (const unsigned char *p = memmem (b, len, "\r\n", 2); p && p < head_end;
       p = memmem (p + 2, (size_t) (head_end - p), "\r\n", 2))
    {
      const unsigned char *h = p + 2;
      if (head_end - h >= 5 && strncasecmp ((const char *) h, "host:", 5) == 0)
        {
          h += 5;
          while (h < head_end && (*h == ' ' || *h == '\t'))
            h++;
          /* exactly host[:port] (RFC 9110 §7.2, RFC 3986 §3.2.2-3): `ok:80@evil` or `ok evil`
           * is no Host of `ok` - a server may read another name in it */
          const unsigned char *e = h, *hend;
          while (e < head_end && *e != '\r' && *e != ':' && *e != ' ' && *e != '\t')
            e++;
          hend = e;
          if (e < head_end && *e == ':')
            {
              const unsigned char *d = ++e;
              while (e < head_end && *e >= '0' && *e <= '9')
                e++;
              if (e == d || e - d > 5)
                return -1;
            }
          while (e < head_end && (*e == ' ' || *e == '\t'))
            e++;
          if (e < head_end && *e != '\r')
            return -1;
          return set_name (h, (size_t) (hend - h), name, namelen);
        }
    }
  return -1; /* HTTP/1.0 without Host: no name */
}

/* ---- request bodies a server may read as requests (splice.c http_scan) ---- */

bool
splice_tchar (unsigned char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c && strchr ("!#$%&'*+-.^_`|~", c));
}

bool
splice_no_body_method (const unsigned char *m, size_t n)
{
  return (n == 3 && memcmp (m, "GET", 3) == 0) || (n == 4 && memcmp (m, "HEAD", 4) == 0)
         || (n == 5 && memcmp (m, "TRACE", 5) == 0);
}

/* a byte some request-line parser skips or splits on: every C0 control but LF (which ends the
 * line), space, DEL, and the two Latin-1 blanks str.split() knows (NEL 0x85, NBSP 0xa0) */
static bool
line_blank (unsigned char c)
{
  return (c <= 0x20 && c != '\n') || c == 0x7f || c == 0x85 || c == 0xa0;
}

int
splice_body_reads_as_request (const unsigned char *p, size_t n, bool complete)
{
  size_t i = 0, t;
  if (n > 512)
    n = 512, complete = false; /* only the first 512 bytes decide */
  int more = n == 512 ? 1 : complete ? -1 : 0;
  while (i < n && (line_blank (p[i]) || p[i] == '\n'))
    i++; /* blank lines and any blanks before them */
  for (t = i; i < n && splice_tchar (p[i]); i++)
    ;
  if (i == n)
    return more;
  if (i == t || !line_blank (p[i]))
    return -1; /* no method token: no server dispatches it */
  bool get = (i - t == 3 && strncasecmp ((const char *) p + t, "GET", 3) == 0)
             || (i - t == 4 && strncasecmp ((const char *) p + t, "HEAD", 4) == 0);
  /* the rest of the first line, split into words on the same blanks: a method and a second
   * word is a request for GET/HEAD (HTTP/0.9 `GET x`), any later word "HTTP/..." for any method
   * and any target form (Python's http.server: words = line.split()) */
  while (i < n && p[i] != '\n')
    {
      while (i < n && line_blank (p[i]))
        i++;
      if (i == n || p[i] == '\n')
        break;
      if (get)
        return 1;
      for (t = i; i < n && i - t < 5 && toupper (p[i]) == "HTTP/"[i - t]; i++)
        ;
      if (i - t == 5)
        return 1;
      while (i < n && p[i] != '\n' && !line_blank (p[i]))
        i++;
    }
  return i == n ? more : -1; /* the line ended without a second word / a version */
}
