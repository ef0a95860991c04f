/* http_req.c - the HTTP/1.1 head parser and body decoder of the TLS interception (see
 * http_req.h for what is refused and why). Every length is checked against the bytes given;
 * nothing reads past b[n). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "monitor/http_req.h"

bool
http_tchar (unsigned char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c != 0 && strchr ("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool
name_is (const unsigned char *p, size_t n, const char *name)
{
  return strlen (name) == n && strncasecmp ((const char *) p, name, n) == 0;
}

/* a field value byte (RFC 9110 §5.5: VCHAR, obs-text, SP, HTAB) */
static bool
vchar (unsigned char c)
{
  return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* whether the comma-separated list v[0..n) has the token `tok` (case-insensitive) */
static bool
list_has (const unsigned char *v, size_t n, const char *tok)
{
  size_t i = 0;
  while (i < n)
    {
      while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
        i++;
      size_t s = i;
      while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
        i++;
      if (name_is (v + s, i - s, tok))
        return true;
      while (i < n && v[i] != ',')
        i++;
    }
  return false;
}

static int
refuse (const char **why, const char *reason)
{
  *why = reason;
  return -1;
}

/* "HTTP/1.0" or "HTTP/1.1" at p[0..8) */
static int
version (const unsigned char *p)
{
  if (memcmp (p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
    return -1;
  return p[7] - '0';
}

static int
request_line (const unsigned char *l, size_t n, struct http_head *h, const char **why)
{
  size_t i = 0;
  while (i < n && http_tchar (l[i]))
    i++;
  if (i == 0 || i >= sizeof h->method || i >= n || l[i] != ' ')
    return refuse (why, "bad request line: method");
  memcpy (h->method, l, i);
  h->method[i] = '\0';
  size_t t = ++i;
  while (i < n && l[i] > 0x20 && l[i] < 0x7f)
    i++;
  if (i == t || i >= n || l[i] != ' ')
    return refuse (why, "bad request line: target");
  if (l[t] != '/')
    return refuse (why, "request target not in origin-form (absolute-form, CONNECT and * are refused)");
  h->target_off = t;
  h->target_len = i - t;
  if (n - i - 1 != 8 || (h->minor = version (l + i + 1)) < 0)
    return refuse (why, "bad request line: version (HTTP/1.0 or HTTP/1.1 only)");
  return 0;
}

static int
status_line (const unsigned char *l, size_t n, struct http_head *h, const char **why)
{
  if (n < 12 || (h->minor = version (l)) < 0 || l[8] != ' ')
    return refuse (why, "bad status line");
  h->status = 0;
  for (size_t i = 9; i < 12; i++)
    {
      if (l[i] < '0' || l[i] > '9')
        return refuse (why, "bad status line");
      h->status = h->status * 10 + (l[i] - '0');
    }
  if (h->status < 100 || (n > 12 && l[12] != ' '))
    return refuse (why, "bad status line");
  for (size_t i = 13; i < n; i++)
    if (!vchar (l[i]))
      return refuse (why, "bad status line");
  return 0;
}

/* one field line l[0..n) (without CRLF) at offset off of the head */
static int
field_line (const unsigned char *l, size_t n, size_t off, struct http_head *h, int *hosts, int *tes, int *cls,
            const char **why)
{
  if (n && (l[0] == ' ' || l[0] == '\t'))
    return refuse (why, "obs-fold (a field line starting with a blank)");
  size_t k = 0;
  while (k < n && l[k] != ':')
    if (!http_tchar (l[k++]))
      return refuse (why, "bad field name");
  if (k == 0 || k == n)
    return refuse (why, "bad field line");
  size_t vs = k + 1, ve = n;
  while (vs < ve && (l[vs] == ' ' || l[vs] == '\t'))
    vs++;
  while (ve > vs && (l[ve - 1] == ' ' || l[ve - 1] == '\t'))
    ve--;
  for (size_t i = vs; i < ve; i++)
    if (!vchar (l[i]))
      return refuse (why, "control byte in a field value");
  const unsigned char *v = l + vs;
  size_t vn = ve - vs;
  if (name_is (l, k, "host"))
    {
      h->host_off = off + vs;
      h->host_len = vn;
      ++*hosts;
    }
  else if (name_is (l, k, "content-length"))
    {
      if (++*cls > 1)
        return refuse (why, "ambiguous framing: two Content-Length fields");
      if (vn == 0 || vn > 18)
        return refuse (why, "bad Content-Length");
      h->content_length = 0;
      for (size_t i = 0; i < vn; i++)
        {
          if (v[i] < '0' || v[i] > '9')
            return refuse (why, "bad Content-Length");
          h->content_length = h->content_length * 10 + (uint64_t) (v[i] - '0');
        }
      h->has_length = true;
    }
  else if (name_is (l, k, "transfer-encoding"))
    {
      if (++*tes > 1 || !name_is (v, vn, "chunked"))
        return refuse (why, "unsupported Transfer-Encoding (only one `chunked`)");
      h->chunked = true;
    }
  else if (name_is (l, k, "connection"))
    h->conn_close = h->conn_close || list_has (v, vn, "close");
  else if (name_is (l, k, "expect"))
    h->expect_100 = name_is (v, vn, "100-continue");
  else if (name_is (l, k, "upgrade"))
    h->upgrade = true;
  return 0;
}

int
http_head_parse (const unsigned char *b, size_t n, enum http_kind kind, struct http_head *h, const char **why)
{
  int hosts = 0, tes = 0, cls = 0;
  size_t pos = 0;
  *h = (struct http_head){ 0 };
  *why = NULL;
  for (unsigned line = 0;; line++)
    {
      size_t lim = n - pos < HTTP_LINE_MAX ? n - pos : HTTP_LINE_MAX;
      const unsigned char *lf = memchr (b + pos, '\n', lim);
      if (!lf)
        {
          if (n - pos >= HTTP_LINE_MAX)
            return refuse (why, "line too long");
          return n >= HTTP_HEAD_MAX ? refuse (why, "head too long") : 0;
        }
      size_t end = (size_t) (lf - b); /* b[end] == '\n' */
      if (end + 1 > HTTP_HEAD_MAX)
        return refuse (why, "head too long");
      if (end == pos || b[end - 1] != '\r')
        return refuse (why, "bare LF");
      const unsigned char *l = b + pos;
      size_t ln = end - 1 - pos;
      if (memchr (l, '\r', ln))
        return refuse (why, "bare CR");
      int r;
      if (line == 0)
        {
          if (ln == 0)
            return refuse (why, "empty line before the start line");
          r = kind == HTTP_REQUEST ? request_line (l, ln, h, why) : status_line (l, ln, h, why);
        }
      else if (ln == 0)
        {
          h->len = end + 1;
          break;
        }
      else
        r = field_line (l, ln, pos, h, &hosts, &tes, &cls, why);
      if (r < 0)
        return -1;
      pos = end + 1;
    }
  if (cls && tes)
    return refuse (why, "ambiguous framing: Content-Length and Transfer-Encoding");
  if (kind == HTTP_REQUEST && hosts != 1)
    return refuse (why, hosts ? "two Host fields" : "no Host field");
  return 1;
}

enum
{
  B_DONE = 0,
  B_LENGTH,     /* Content-Length bytes */
  B_SIZE,       /* chunk-size hex digits */
  B_SIZE_LF,    /* the LF after a chunk size's CR */
  B_DATA,       /* chunk data */
  B_DATA_CR,    /* the CRLF after the data */
  B_DATA_LF,    /* */
  B_TRAILER,    /* at the start of / inside a trailer line */
  B_TRAILER_LF, /* the LF ending a trailer line */
  B_END_LF,     /* the LF of the empty line ending the trailers */
};

void
http_body_init (struct http_body *d, const struct http_head *h)
{
  *d = (struct http_body){ .chunked = h->chunked };
  if (h->chunked)
    d->st = B_SIZE;
  else if (h->has_length && h->content_length)
    d->st = B_LENGTH, d->left = h->content_length;
  else
    d->st = B_DONE;
}

static int
hexval (unsigned char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  c |= 0x20;
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int
http_body_feed (struct http_body *d, const unsigned char *p, size_t n, size_t *used, const char **why)
{
  size_t i = 0;
  *why = NULL;
  while (d->st != B_DONE && i < n)
    {
      unsigned char c = p[i];
      size_t t;
      int x;
      switch (d->st)
        {
        case B_LENGTH:
        case B_DATA:
          t = n - i < d->left ? n - i : (size_t) d->left;
          i += t;
          d->left -= t;
          d->total += t;
          if (d->left == 0)
            d->st = d->st == B_LENGTH ? B_DONE : B_DATA_CR;
          continue;
        case B_SIZE:
          if ((x = hexval (c)) >= 0)
            {
              if (++d->line > 15)
                goto bad;
              d->left = d->left * 16 + (uint64_t) x;
            }
          else if (c == '\r' && d->line > 0)
            d->st = B_SIZE_LF;
          else
            goto bad; /* extensions too: nobody needs them, and parsers disagree on them */
          break;
        case B_SIZE_LF:
          if (c != '\n')
            goto bad;
          d->line = 0;
          d->st = d->left ? B_DATA : B_TRAILER;
          break;
        case B_DATA_CR:
          if (c != '\r')
            goto bad;
          d->st = B_DATA_LF;
          break;
        case B_DATA_LF:
          if (c != '\n')
            goto bad;
          d->st = B_SIZE;
          break;
        case B_TRAILER:
          if (c == '\r' && d->line == 0)
            {
              d->st = B_END_LF; /* the empty line: the end of the message */
              break;
            }
          /* a trailer field is body: counted (a maxBodyBytes cap covers it), bounded like a head */
          d->total++;
          if (++d->trailers > HTTP_HEAD_MAX)
            {
              *used = i;
              *why = "trailer section too large";
              return -1;
            }
          if (c == '\r')
            d->st = B_TRAILER_LF;
          else if ((c < 0x20 && c != '\t') || c == 0x7f || ++d->line >= HTTP_LINE_MAX)
            goto bad;
          break;
        case B_TRAILER_LF:
          if (c != '\n')
            goto bad;
          d->total++;
          d->trailers++;
          d->line = 0;
          d->st = B_TRAILER;
          break;
        case B_END_LF:
          if (c != '\n')
            goto bad;
          d->st = B_DONE;
          break;
        default: goto bad;
        }
      i++;
    }
  *used = i;
  return d->st == B_DONE ? 1 : 0;
bad:
  *used = i;
  *why = "bad chunked framing";
  return -1;
}

unsigned char *
http_head_set (const unsigned char *head, size_t n, const char *name, const char *value, size_t *outlen)
{
  size_t nl = strlen (name), vl = strlen (value);
  if (nl == 0 || n < 4 || memcmp (head + n - 4, "\r\n\r\n", 4) != 0)
    {
      errno = EINVAL;
      return NULL;
    }
  for (size_t i = 0; i < nl; i++)
    if (!http_tchar ((unsigned char) name[i]))
      {
        errno = EINVAL;
        return NULL;
      }
  if (strpbrk (value, "\r\n"))
    {
      errno = EINVAL;
      return NULL;
    }
  unsigned char *out = malloc (n + nl + vl + 5);
  if (!out)
    return NULL;
  const unsigned char *lf = memchr (head, '\n', n);
  size_t pos = (size_t) (lf - head) + 1, o = pos;
  memcpy (out, head, pos); /* the start line */
  while (pos < n - 2)
    {
      const unsigned char *e = memchr (head + pos, '\n', n - pos);
      size_t ln = (size_t) (e - head) + 1 - pos;
      if (!(ln > nl && head[pos + nl] == ':' && strncasecmp ((const char *) head + pos, name, nl) == 0))
        {
          memcpy (out + o, head + pos, ln);
          o += ln;
        }
      pos += ln;
    }
  memcpy (out + o, name, nl);
  o += nl;
  memcpy (out + o, ": ", 2);
  o += 2;
  memcpy (out + o, value, vl);
  o += vl;
  memcpy (out + o, "\r\n\r\n", 4);
  o += 4;
  out[o] = '\0';
  *outlen = o;
  return out;
}
