/* tls_relay_http.c - the HTTP side of the TLS interception (see tls_relay.h): a request's checks
 * (Host = SNI, Upgrade, the network.http rules), its credential headers (monitor/secret_tpl.h),
 * its body up within maxBodyBytes, the response's head rewritten and its framing followed down,
 * and keep-alive with the agent. Driven by tls_relay.c's state machine (tls_relay_internal.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "core/openssl_dl.h"
#include "core/util.h"
#include "monitor/http_rules.h"
#include "monitor/secret_tpl.h"
#include "monitor/tls_relay_internal.h"

/* ---- the request ---- */

/* a Host value that names the TLS server name (optionally with the default port) */
static bool
host_is_sni (const unsigned char *v, size_t n, const char *sni)
{
  if (n > 4 && memcmp (v + n - 4, ":443", 4) == 0)
    n -= 4;
  return n == strlen (sni) && strncasecmp ((const char *) v, sni, n) == 0;
}

/* the upstream head: the agent's, each credential header of the host set, Connection: close */
static int
build_uhead (struct tls_relay *r, struct tconn *c, char *why, size_t wl)
{
  size_t n = c->req.len;
  unsigned char *h = xmalloc0 (n + 1);
  memcpy (h, c->in, n);
  for (size_t i = 0; i < r->plan->credentials_len; i++)
    {
      const struct policy_credential *cr = &r->plan->credentials[i];
      if (strcmp (cr->host, c->host) != 0)
        continue;
      char *v = secret_expand (r->secrets_dirfd, r->secrets_envfd, cr->value, why, wl);
      unsigned char *nh = v ? http_head_set (h, n, cr->header, v, &n) : NULL;
      if (v)
        {
          OPENSSL_cleanse (v, strlen (v));
          free (v);
        }
      OPENSSL_cleanse (h, strlen ((char *) h));
      free (h);
      if (!nh)
        {
          if (!*why)
            snprintf (why, wl, "credential: header %s: bad name or value", cr->header);
          return -1;
        }
      h = nh;
      if (c->ncreds < CREDS_MAX)
        c->creds[c->ncreds++] = cr->header;
    }
  unsigned char *nh = http_head_set (h, n, "Connection", "close", &n);
  OPENSSL_cleanse (h, strlen ((char *) h));
  free (h);
  if (!nh)
    {
      snprintf (why, wl, "out of memory");
      return -1;
    }
  c->uhead = nh;
  c->uhead_len = n;
  c->uhead_off = 0;
  return 0;
}

/* a complete request head in c->in: check it, and start the upstream connection */
void
tls_relay_request (struct tls_relay *r, struct tconn *c)
{
  const unsigned char *t = c->in + c->req.target_off;
  size_t pl = strcspn ((const char *) t, "?");
  if (pl > c->req.target_len)
    pl = c->req.target_len;
  snprintf (c->path, sizeof c->path, "%.*s", (int) (pl < sizeof c->path ? pl : sizeof c->path - 1), t);
  c->requested = true;
  if (!host_is_sni (c->in + c->req.host_off, c->req.host_len, c->host))
    {
      tls_relay_answer (r, c, 403, "Host header does not name the TLS server name (domain fronting)");
      return;
    }
  if (c->req.upgrade)
    {
      tls_relay_answer (r, c, 403, "Upgrade (WebSocket, h2c) is not supported on an intercepted host");
      return;
    }
  char rule[sizeof c->rule];
  if (http_rules_check (r->plan, c->host, c->req.method, (const char *) t, c->req.target_len,
                        c->req.has_length ? c->req.content_length : 0, &c->max_body, rule, sizeof rule)
      < 0)
    {
      tls_relay_answer (r, c, 403, rule);
      return;
    }
  snprintf (c->rule, sizeof c->rule, "%s", rule);
  char why[300] = "";
  if (build_uhead (r, c, why, sizeof why) < 0)
    {
      tls_relay_answer (r, c, 502, why);
      return;
    }
  http_body_init (&c->body, &c->req);
  c->fwd_off = c->fwd_end = c->req.len;
  c->ufd = tls_relay_upstream_socket (r, c->dst.ss_family);
  size_t k = 0;
  while (k < TCONNS_MAX && r->c[k] != c)
    k++;
  struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = k * 2 + 1 };
  if (c->ufd < 0 || epoll_ctl (r->ep, EPOLL_CTL_ADD, c->ufd, &ev) < 0
      || (connect (c->ufd, (struct sockaddr *) &c->dst, c->dlen) < 0 && errno != EINPROGRESS))
    {
      snprintf (why, sizeof why, "upstream connect: %s", strerror (errno));
      tls_relay_answer (r, c, 502, why);
      return;
    }
  c->st = T_CONNECT;
}

/* the request's head and body, up */
bool
tls_relay_fwd_up (struct tls_relay *r, struct tconn *c)
{
  bool moved = false;
  if (c->uhead)
    {
      ERR_clear_error ();
      int n = SSL_write (c->us, c->uhead + c->uhead_off, (int) (c->uhead_len - c->uhead_off));
      int x = tls_relay_io (c, c->us, n);
      if (x <= 0)
        return false; /* an upstream error shows on its read side */
      c->uhead_off += (size_t) n;
      c->up += (uint64_t) n;
      if (c->uhead_off < c->uhead_len)
        return true;
      OPENSSL_cleanse (c->uhead, c->uhead_len);
      free (c->uhead);
      c->uhead = NULL;
      moved = true;
    }
  while (!c->body_done)
    {
      if (c->fwd_end > c->fwd_off)
        {
          ERR_clear_error ();
          int n = SSL_write (c->us, c->in + c->fwd_off, (int) (c->fwd_end - c->fwd_off));
          if (tls_relay_io (c, c->us, n) <= 0)
            return moved;
          c->fwd_off += (size_t) n;
          c->up += (uint64_t) n;
          moved = true;
          continue;
        }
      if (c->body_end)
        {
          c->body_done = true; /* what follows the body (a pipelined request) waits in `in` */
          return true;
        }
      size_t used;
      const char *why;
      int d = http_body_feed (&c->body, c->in + c->fwd_off, c->in_len - c->fwd_off, &used, &why);
      if (d < 0)
        {
          tls_relay_answer (r, c, 400, why);
          return true;
        }
      if (c->max_body && c->body.total > c->max_body)
        {
          /* a chunked body past the cap: the upstream is cut before the body's end */
          char w[120];
          snprintf (w, sizeof w, "body too large: more than %" PRIu64 " bytes", c->max_body);
          if (c->out_len == 0 && c->rs == R_HEAD)
            tls_relay_answer (r, c, 403, w);
          else
            c->st = T_FREE;
          return true;
        }
      c->fwd_end = c->fwd_off + used;
      c->body_end = d == 1;
      if (used || d == 1)
        continue;
      /* more of the body from the agent */
      c->in_len = c->fwd_off = c->fwd_end = 0;
      ERR_clear_error ();
      int n = SSL_read (c->cs, c->in, IN_MAX);
      int x = tls_relay_io (c, c->cs, n);
      if (x == 0)
        return moved;
      if (x < 0)
        {
          c->st = T_FREE; /* the agent went away mid-body */
          return true;
        }
      c->in_len = (size_t) n;
      moved = true;
    }
  return moved;
}

/* the response's head: Connection set (keep-alive or close), its framing followed */
static bool
resp_scan (struct tls_relay *r, struct tconn *c)
{
  bool moved = false;
  while (c->rscan < c->out_len && c->rs != R_COMPLETE)
    {
      if (c->rs == R_EOF)
        {
          c->rscan = c->out_len;
          return true;
        }
      if (c->rs == R_BODY)
        {
          size_t used;
          const char *why;
          int d = http_body_feed (&c->rbody, c->out + c->rscan, c->out_len - c->rscan, &used, &why);
          c->rscan += used;
          if (d != 0)
            {
              c->keep = c->keep && d > 0;
              c->rs = R_COMPLETE; /* d < 0, a framing error: the agent gets what was framed, then the end */
              c->out_len = c->rscan;
            }
          return true;
        }
      struct http_head h;
      const char *why;
      int p = http_head_parse (c->out + c->rscan, c->out_len - c->rscan, HTTP_RESPONSE, &h, &why);
      if (p == 0)
        return moved;
      if (p < 0)
        {
          char w[200];
          snprintf (w, sizeof w, "bad response from the upstream: %s", why);
          if (c->out_off == 0 && c->down == 0)
            tls_relay_answer (r, c, 502, w);
          else
            c->st = T_FREE;
          return true;
        }
      c->status = h.status;
      if (h.status < 200)
        {
          c->rscan += h.len; /* 100 Continue and the like: passed on as they are */
          moved = true;
          continue;
        }
      bool nobody = strcmp (c->req.method, "HEAD") == 0 || h.status == 204 || h.status == 304;
      /* keep-alive with the agent (a fresh upstream connection per request): only when the end of
       * the response is known from its framing, and the agent speaks HTTP/1.1 and did not ask to
       * close; the upstream's own `Connection: close` (we asked for it) is replaced */
      c->keep = (nobody || h.chunked || h.has_length) && c->req.minor == 1 && !c->req.conn_close;
      size_t nl;
      unsigned char *nh = http_head_set (c->out + c->rscan, h.len, "Connection", c->keep ? "keep-alive" : "close", &nl);
      if (!nh || c->out_len - h.len + nl > OUT_MAX)
        {
          free (nh);
          tls_relay_answer (r, c, 502, "response head too large");
          return true;
        }
      memmove (c->out + c->rscan + nl, c->out + c->rscan + h.len, c->out_len - c->rscan - h.len);
      memcpy (c->out + c->rscan, nh, nl);
      free (nh);
      c->out_len = c->out_len - h.len + nl;
      c->rscan += nl;
      if (nobody)
        {
          c->rs = R_COMPLETE;
          c->out_len = c->rscan;
        }
      else if (h.chunked || h.has_length)
        {
          http_body_init (&c->rbody, &h);
          c->rs = R_BODY;
          if (!h.chunked && h.content_length == 0)
            {
              c->rs = R_COMPLETE;
              c->out_len = c->rscan;
            }
        }
      else
        c->rs = R_EOF;
      moved = true;
    }
  return moved;
}

/* the response is delivered, the request's body all sent: the agent's next request, on the same
 * connection (what followed the body - a pipelined request - is kept) */
static void
next_request (struct tls_relay *r, struct tconn *c)
{
  tls_relay_record (r, c);
  tls_relay_upstream_close (r, c);
  size_t rest = c->in_len - c->fwd_off;
  memmove (c->in, c->in + c->fwd_off, rest);
  c->in_len = rest;
  c->fwd_off = c->fwd_end = 0;
  c->req = (struct http_head){ 0 };
  c->body = c->rbody = (struct http_body){ 0 };
  c->body_end = c->body_done = c->u_eof = c->keep = false;
  c->max_body = c->up = c->down = 0;
  c->out_off = c->out_len = c->rscan = 0;
  c->rs = R_HEAD;
  c->status = 0;
  c->rule[0] = c->path[0] = '\0';
  c->ncreds = 0;
  c->reparse = rest > 0;
  c->st = T_HEAD;
}

/* the response, down */
bool
tls_relay_fwd_down (struct tls_relay *r, struct tconn *c)
{
  bool moved = false;
  if (c->out_off && c->out_off == c->out_len)
    c->out_off = c->out_len = c->rscan = 0;
  if (c->out_off && OUT_MAX - OUT_SLACK - c->out_len < IO_MAX / 2)
    {
      memmove (c->out, c->out + c->out_off, c->out_len - c->out_off);
      c->out_len -= c->out_off, c->rscan -= c->out_off, c->out_off = 0;
    }
  if (c->us && !c->u_eof && c->rs != R_COMPLETE && c->out_len < OUT_MAX - OUT_SLACK)
    {
      ERR_clear_error ();
      int n = SSL_read (c->us, c->out + c->out_len, (int) (OUT_MAX - OUT_SLACK - c->out_len));
      int x = tls_relay_io (c, c->us, n);
      if (x > 0)
        c->out_len += (size_t) n, moved = true;
      else if (x < 0)
        {
          c->u_eof = moved = true;
          tls_relay_upstream_close (r, c); /* nothing more goes up: its HUP must not wake us again */
        }
    }
  if (resp_scan (r, c))
    moved = true;
  if (c->st != T_FWD)
    return true;
  if (c->rscan > c->out_off)
    {
      ERR_clear_error ();
      int n = SSL_write (c->cs, c->out + c->out_off, (int) (c->rscan - c->out_off));
      int x = tls_relay_io (c, c->cs, n);
      if (x < 0)
        {
          c->st = T_FREE;
          return true;
        }
      if (x > 0)
        c->out_off += (size_t) n, c->down += (uint64_t) n, moved = true;
    }
  bool sent = c->out_off == c->rscan;
  if (sent && c->rs == R_COMPLETE && c->keep && c->body_done)
    {
      next_request (r, c);
      return true;
    }
  if (sent && (c->rs == R_COMPLETE || (c->u_eof && c->rs == R_EOF)))
    {
      ERR_clear_error ();
      SSL_shutdown (c->cs); /* close_notify, once; the agent has its whole response */
      c->st = T_FREE;
      return true;
    }
  if (c->u_eof && c->rs != R_COMPLETE && c->rs != R_EOF && sent)
    {
      if (c->down == 0 && c->rs == R_HEAD)
        tls_relay_answer (r, c, 502, "the upstream closed without a response");
      else
        c->st = T_FREE; /* a truncated response: the agent sees the connection end */
      return true;
    }
  return moved;
}
