/* splice_http.c - the framing check of a plain-HTTP client stream in the splice (splice.c):
 * every request's Host and framing before its bytes leave.
 *
 * Keep-alive (plain HTTP): every request on a connection is checked, not just the first, or a
 * second request could name a refused host that shares the address. The relay follows request
 * boundaries in the client's stream (head, then Content-Length bytes or chunked framing) and
 * forwards no byte past what has been checked. Anything it cannot frame the way the server
 * might (bare CR/LF, obs-fold, both or repeated length headers, a transfer coding other than
 * chunked, absolute-form targets, CONNECT, two Host headers) is refused rather than guessed:
 * request smuggling is exactly a disagreement between two parsers. Servers that do not read a
 * body (most handlers of Python's http.server, many others) read it as the next request, so
 * (issue 14): GET, HEAD and TRACE may carry none, every body and chunk must not start the way a
 * request line does (splice_body_reads_as_request), and a head with a body leaves only once that is
 * seen; chunk extensions are refused; Host must be exactly host[:port] (sni_parse.c); header
 * names must be tokens directly followed by ':'; control bytes are refused. After an Upgrade
 * request the stream is opaque only if the server's next bytes are a 101. A refusal
 * mid-connection lets the earlier responses finish (upstream half-closed), then sends the 403.
 * A Host the TLS relay intercepts (network.credentials/network.http) is refused in plain HTTP:
 * its rules and credentials apply inside TLS only. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "monitor/sni_parse.h"
#include "monitor/splice_internal.h"
#include "monitor/tls_relay.h"

static bool
header_is (const unsigned char *line, size_t n, const char *name)
{
  size_t k = strlen (name);
  return n > k && line[k] == ':' && strncasecmp ((const char *) line, name, k) == 0;
}

/* the value of a header line, without the name, the colon and surrounding blanks */
static void
header_value (const unsigned char *line, size_t n, size_t namelen, const unsigned char **v, size_t *vlen)
{
  const unsigned char *p = line + namelen + 1, *e = line + n;
  while (p < e && (*p == ' ' || *p == '\t'))
    p++;
  while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
    e--;
  *v = p;
  *vlen = (size_t) (e - p);
}

/* Checks one complete request head h[0..n) (ending in CRLF CRLF) for unambiguous framing, and
 * an Upgrade only while no head has been let through on c (c->heads, counted by
 * splice_http_scan), and sets c->hs/left/upgrade for what follows it. Returns NULL, or the
 * audit rule of the refusal. */
const char *
splice_http_head (struct conn *c, const unsigned char *h, size_t n)
{
  int hosts = 0, cls = 0, tes = 0;
  uint64_t cl = 0;
  for (size_t i = 0; i < n; i++)
    if ((h[i] == '\n' && (i == 0 || h[i - 1] != '\r')) || (h[i] == '\r' && (i + 1 == n || h[i + 1] != '\n'))
        || (h[i] < 0x20 && h[i] != '\r' && h[i] != '\n' && h[i] != '\t') || h[i] == 0x7f)
      return "http: framing"; /* a bare CR or LF (some servers end lines there), NUL, control bytes */
  const unsigned char *sp = memchr (h, ' ', n);
  if (!sp || sp + 1 >= h + n || (sp[1] != '/' && sp[1] != '*'))
    return "http: framing"; /* absolute-form (its host wins over Host) and CONNECT */
  c->upgrade = c->expect100 = false;
  const unsigned char *line = (const unsigned char *) memmem (h, n, "\r\n", 2) + 2, *end = h + n - 2;
  while (line < end)
    {
      const unsigned char *le = memmem (line, (size_t) (end - line) + 2, "\r\n", 2), *v;
      size_t ln = (size_t) (le - line), vlen;
      const unsigned char *colon = memchr (line, ':', ln);
      if (!colon || colon == line)
        return "http: framing"; /* obs-fold (a leading blank), no field name */
      for (const unsigned char *k = line; k < colon; k++)
        if (!splice_tchar (*k))
          return "http: framing"; /* "Host :" and the like: servers disagree on them */
      if (header_is (line, ln, "host"))
        hosts++;
      else if (header_is (line, ln, "upgrade"))
        c->upgrade = true;
      else if (header_is (line, ln, "expect"))
        {
          header_value (line, ln, 6, &v, &vlen);
          c->expect100 = vlen == 12 && strncasecmp ((const char *) v, "100-continue", 12) == 0;
        }
      else if (header_is (line, ln, "transfer-encoding"))
        {
          header_value (line, ln, 17, &v, &vlen);
          if (tes++ || vlen != 7 || strncasecmp ((const char *) v, "chunked", 7) != 0)
            return "http: framing";
        }
      else if (header_is (line, ln, "content-length"))
        {
          header_value (line, ln, 14, &v, &vlen);
          if (cls++ || vlen == 0 || vlen > 18)
            return "http: framing";
          for (size_t i = 0; i < vlen; i++)
            if (v[i] < '0' || v[i] > '9')
              return "http: framing";
            else
              cl = cl * 10 + (uint64_t) (v[i] - '0');
        }
      line = le + 2;
    }
  if (hosts > 1 || (cls && tes))
    return "http: framing";
  if ((cl || tes) && splice_no_body_method (h, (size_t) (sp - h)))
    return "http: body on a method without one"; /* a server may ignore it and read it as a request */
  /* An Upgrade only as the connection's first request: H_WAIT101 takes the server's next
   * bytes for the answer to it, which after an earlier request may still be that request's
   * body - a body reading "HTTP/1.1 101" made the rest of the client's stream opaque,
   * unchecked (outside tester, 2026-12-01). Clients open a new connection for a WebSocket or
   * h2c upgrade. */
  if (c->upgrade && c->heads > 0)
    return "http: upgrade after the first request";
  c->left = cl;
  c->bstart = cl || tes;
  c->hs = tes ? H_CSIZE : cl ? H_BODY : c->upgrade ? H_WAIT101 : H_HEAD;
  c->status_len = 0;
  return NULL;
}

/* a request was refused after others passed: stop the client's side, let the server finish
 * what it was sent (half-close), and queue the 403 behind its responses (on_event) */
static void
refuse_request (struct splice *s, struct conn *c, const char *host, const char *rule)
{
  splice_audit_conn (s, c, host, "refused", rule);
  if (strcmp (rule, "host") == 0)
    snprintf (c->blocked, sizeof c->blocked, "host not allowed: %s", host);
  else
    snprintf (c->blocked, sizeof c->blocked, "%s", splice_blocked_why (host, rule));
  if (c->bstart)
    c->c2u.chk = c->c2u.hold; /* the head of the refused body too */
  c->c2u.len = c->c2u.chk;    /* the refused request and anything after it never leave */
  c->bstart = false;
  c->c_eof = true;
  c->hs = H_REFUSED;
  c->refuse_403 = true;
}

/* Advances c2u.chk over every complete, checked part of the client's stream. */
void
splice_http_scan (struct splice *s, struct conn *c)
{
  struct rbuf *b = &c->c2u;
  const char *bad;
  char name[256];
  while (b->chk < b->len && c->hs != H_WAIT101 && c->hs != H_REFUSED)
    {
      const unsigned char *p = b->b + b->chk, *e;
      size_t avail = b->len - b->chk, t;
      switch (c->hs)
        {
        case H_OPAQUE: b->chk = b->len; break;
        case H_BODY:
        case H_CDATA:
          t = avail < c->left ? avail : (size_t) c->left;
          if (c->bstart)
            {
              int r = splice_body_reads_as_request (p, t, t == c->left);
              if (r == 0)
                return;
              if (r > 0)
                {
                  refuse_request (s, c, c->host, "http: body reads as a request");
                  return;
                }
              c->bstart = false;
            }
          b->chk += t;
          c->left -= t;
          if (c->left == 0 && c->hs == H_CDATA)
            c->hs = H_CCRLF;
          else if (c->left == 0)
            c->hs = c->upgrade ? H_WAIT101 : H_HEAD;
          break;
        case H_CCRLF:
          if (avail < 2)
            return;
          if (p[0] != '\r' || p[1] != '\n')
            {
              refuse_request (s, c, c->host, "http: framing");
              return;
            }
          b->chk += 2;
          c->hs = H_CSIZE;
          break;
        case H_CSIZE:
        case H_TRAILER:
          e = memchr (p, '\n', avail);
          if (!e)
            {
              if (avail > 4096)
                refuse_request (s, c, c->host, "http: framing");
              return;
            }
          t = (size_t) (e - p) + 1;
          if (t < 2 || e[-1] != '\r')
            {
              refuse_request (s, c, c->host, "http: framing");
              return;
            }
          if (c->hs == H_TRAILER)
            c->hs = t == 2 ? (c->upgrade ? H_WAIT101 : H_HEAD) : H_TRAILER;
          else
            {
              size_t i = 0;
              c->left = 0;
              for (; i < t - 2 && i < 16 && isxdigit (p[i]); i++)
                c->left = c->left * 16 + (uint64_t) (p[i] <= '9' ? p[i] - '0' : (p[i] | 0x20) - 'a' + 10);
              if (i == 0 || i == 16 || i < t - 2) /* chunk extensions too: nobody needs them */
                {
                  refuse_request (s, c, c->host, "http: framing");
                  return;
                }
              c->hs = c->left ? H_CDATA : H_TRAILER;
              if (c->left && !c->bstart)
                b->hold = b->chk; /* this size line waits with its chunk's start */
              c->bstart = c->left != 0;
            }
          b->chk += t;
          break;
        default: /* H_HEAD */
          e = memmem (p, avail, "\r\n\r\n", 4);
          if (!e)
            {
              /* a head ended by bare LFs never shows CRLF CRLF: refuse it now, not at HELLO_MAX */
              const unsigned char *lf = memchr (p, '\n', avail);
              if (avail >= HELLO_MAX || (lf && (lf == p || lf[-1] != '\r')))
                refuse_request (s, c, c->host, "http: framing");
              return;
            }
          t = (size_t) (e - p) + 4;
          bad = NULL;
          b->hold = b->chk; /* with a body, the head leaves only once the body's start is checked */
          if (splice_http_host (p, t, name, sizeof name) <= 0)
            {
              refuse_request (s, c, NULL, "host: none");
              return;
            }
          /* the name the connection was opened for stays good after its TTL, like the
           * established flow in the table; any other name must be resolvable now */
          if (s->tls && tls_relay_wants (s->tls, name))
            {
              refuse_request (s, c, name, SPLICE_PLAIN_INTERCEPTED); /* a later request's Host too */
              return;
            }
          if (strcmp (name, c->host) != 0 && splice_dst_intercepted (s, c))
            {
              /* a later request's other name on an address that became intercepted after the
               * connection opened (the monitor's own resolution, monitor/dns_intercept.h) */
              refuse_request (s, c, name, SPLICE_OTHER_NAME_INTERCEPTED);
              return;
            }
          if ((bad = splice_http_head (c, p, t)) != NULL
              || (strcmp (name, c->host) != 0 && !splice_name_allowed (s, name)))
            {
              refuse_request (s, c, name, bad ? bad : "host");
              return;
            }
          c->heads++; /* let through: a later Upgrade is refused (splice_http_head) */
          if (c->expect100)
            b->hold = b->chk + t; /* the client waits for 100 before its body: the head goes now */
          if (strcmp (name, c->host) != 0)
            {
              splice_audit_conn (s, c, name, "allowed", "host"); /* one record per name per connection */
              snprintf (c->host, sizeof c->host, "%s", name);
            }
          b->chk += t;
          break;
        }
    }
}

/* H_WAIT101: the server's first bytes after an Upgrade request decide whether the stream
 * becomes opaque (101 Switching Protocols) or stays HTTP (any other status, or pipelined
 * answers to earlier requests coming first: fail closed, the client's next bytes are parsed) */
void
splice_http_status (struct conn *c, const unsigned char *p, size_t n)
{
  while (n-- > 0 && c->status_len < sizeof c->status)
    c->status[c->status_len++] = (char) *p++;
  if (c->status_len < sizeof c->status)
    return;
  c->hs = memcmp (c->status, "HTTP/1.", 7) == 0 && memcmp (c->status + 8, " 101", 4) == 0 ? H_OPAQUE : H_HEAD;
  c->upgrade = false;
}
