/* splice.c - the SNI/Host check and relay in the monitor (see splice.h for the contract).
 *
 * Mechanism: the table's nat output chain redirects the container's TCP connections to set
 * members onto our listener in its namespace; SO_ORIGINAL_DST (IP6T_SO_ORIGINAL_DST) gives the
 * destination the container asked for. Per connection: HELLO (read until the parser finds the
 * name, at most HELLO_MAX bytes), then CONNECTING (a socket made in the container's namespace,
 * SO_MARK so the redirect skips it, non-blocking connect; the filter chain still applies to it),
 * then RELAY with one bounded buffer per direction and level-triggered epoll interests
 * recomputed after every event. Half-closes are passed on (shutdown SHUT_WR).
 * Threat model: the container controls the bytes and the pace. Parsers check every length; a
 * connection that never names a host holds one of CONNS_MAX slots until it closes (known
 * limit: no hello timeout yet); the relay never blocks the monitor (non-blocking sockets).
 * Ordering: the name is checked BEFORE any byte or connect reaches the destination.
 * Keep-alive (plain HTTP): every request on a connection is checked, see splice_http.c.
 * A connection dialled to the relay's port directly (not redirected) is refused at accept:
 * its original destination is the relay itself. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/netfilter_ipv4.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/netns_call.h"
#include "policy/nft_ruleset.h"
#include "monitor/audit.h"
#include "monitor/splice.h"
#include "monitor/splice_internal.h"
#include "monitor/tls_relay.h"

#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

/* ---- parsers: monitor/sni_parse.c ---- */

/* ---- connections ---- */

void
splice_audit_conn (struct splice *s, struct conn *c, const char *host, const char *decision, const char *rule)
{
  char addr[INET6_ADDRSTRLEN] = "";
  int port = 0;
  if (!(s->plan->audit_events & POLICY_AUDIT_NETWORK))
    return;
  if (c->dst.ss_family == AF_INET)
    {
      struct sockaddr_in *a = (struct sockaddr_in *) &c->dst;
      inet_ntop (AF_INET, &a->sin_addr, addr, sizeof addr);
      port = ntohs (a->sin_port);
    }
  else
    {
      struct sockaddr_in6 *a = (struct sockaddr_in6 *) &c->dst;
      inet_ntop (AF_INET6, &a->sin6_addr, addr, sizeof addr);
      port = ntohs (a->sin6_port);
    }
  struct audit_rec *r = audit_rec_new (s->id, "network");
  audit_rec_str (r, "addr", addr);
  audit_rec_int (r, "port", port);
  audit_rec_str (r, "proto", "tcp");
  audit_rec_str (r, "host", host);
  audit_rec_str (r, "decision", decision);
  audit_rec_str (r, "rule", rule);
  asbx_err_t e = NULL;
  if (audit_rec_write (r, s->audit_fd, &e) < 0)
    asbx_error_free (&e);
}

static void
conn_close (struct splice *s, struct conn *c, bool reset)
{
  if (c->cfd >= 0)
    {
      if (reset)
        {
          struct linger l = { .l_onoff = 1, .l_linger = 0 }; /* close sends RST */
          setsockopt (c->cfd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        }
      epoll_ctl (s->ep, EPOLL_CTL_DEL, c->cfd, NULL);
      close (c->cfd);
    }
  if (c->ufd >= 0)
    {
      epoll_ctl (s->ep, EPOLL_CTL_DEL, c->ufd, NULL);
      close (c->ufd);
    }
  struct splice_pipe *pipes[] = { &c->c2u_pipe, &c->u2c_pipe };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (pipes); i++)
    {
      if (pipes[i]->rd >= 0 && pipes[i]->cap > 65536)
        s->pipes_big--;
      splice_pipe_close (pipes[i]);
    }
  free (c->c2u.b);
  free (c->u2c.b);
  c->c2u.b = c->u2c.b = NULL;
  c->state = ST_FREE;
  c->cfd = c->ufd = -1;
}

/* the end of what may be sent upstream: the checked bytes, less a head whose body's start is
 * still to be checked */
static size_t
sendable (const struct conn *c)
{
  return c->bstart ? c->c2u.hold : c->c2u.chk;
}

/* the client's bytes go through c2u_pipe: the stream is opaque (TLS after its ClientHello, an
 * upgraded connection) and the hello or head before it is sent */
static bool
c2u_piped (const struct conn *c)
{
  return c->state == ST_RELAY && c->hs == H_OPAQUE && c->c2u.len == 0 && c->c2u_bulk;
}

/* the upstream's bytes go through u2c_pipe: nothing reads them but H_WAIT101's status check,
 * and the rbuf holds nothing (the 403 after a refusal, the bytes that answered an Upgrade) */
static bool
u2c_piped (const struct conn *c)
{
  return c->state == ST_RELAY && c->hs != H_WAIT101 && c->u2c.len == 0 && c->u2c_bulk;
}

static void
interest (struct splice *s, int fd, uint64_t key, uint32_t want, uint32_t *have)
{
  struct epoll_event ev = { .events = want, .data.u64 = key };
  if (want != *have && epoll_ctl (s->ep, EPOLL_CTL_MOD, fd, &ev) == 0)
    *have = want; /* unchanged interests cost no syscall (one of the relay's per-wake-up costs) */
}

static void
interests (struct splice *s, struct conn *c)
{
  size_t k = (size_t) (c - s->c);
  bool cin = c->state == ST_RELAY && !c->c_eof
             && (c2u_piped (c) ? c->c2u_pipe.held < c->c2u_pipe.cap || c->c2u_pipe.rd < 0 : c->c2u.len < BUF_MAX);
  interest (s, c->cfd, k * 2,
            (c->state == ST_HELLO || cin ? EPOLLIN : 0) | (c->u2c.len || c->u2c_pipe.held ? EPOLLOUT : 0), &c->ev_c);
  if (c->ufd < 0)
    return;
  /* the rbuf fills only once the pipe is empty, the pipe only once the rbuf is (the order) */
  bool uin = c->state == ST_RELAY && !c->u_eof
             && (u2c_piped (c) ? c->u2c_pipe.held < c->u2c_pipe.cap || c->u2c_pipe.rd < 0
                               : c->u2c.len < BUF_MAX && c->u2c_pipe.held == 0);
  bool uout = c->state == ST_CONNECTING || sendable (c) > c->c2u.off || c->c2u_pipe.held; /* checked bytes only */
  interest (s, c->ufd, k * 2 + 1, (uout ? EPOLLOUT : 0) | (uin ? EPOLLIN : 0), &c->ev_u);
}

/* a socket in the container's namespace (the filter chain applies to it), marked */
static int
upstream_socket (struct splice *s, int family)
{
  int *spare = &s->spare[family == AF_INET6];
  if (*spare >= 0)
    {
      int fd = *spare;
      *spare = -1;
      return fd;
    }
  return linux_netns_marked_stream (s->netns, family, POLICY_NFT_SPLICE_MARK);
}

/* make the next connection's upstream socket of `family` now (see struct splice's spare);
 * a failure leaves none, and upstream_socket then tries again and reports it */
static void
spare_refill (struct splice *s, int family)
{
  int *spare = &s->spare[family == AF_INET6];
  if (*spare < 0)
    *spare = linux_netns_marked_stream (s->netns, family, POLICY_NFT_SPLICE_MARK);
}

/* the X-Agentsbx-Blocked value of a refusal (without the host name of "host not allowed: ") */
const char *
splice_blocked_why (const char *host, const char *rule)
{
  if (!host)
    return "no Host header";
  if (strcmp (rule, "http: framing") == 0)
    return "ambiguous request framing";
  return strncmp (rule, "http: ", 6) == 0 ? rule + 6 : "host not allowed: ";
}

static void
refuse (struct splice *s, struct conn *c, const char *host, const char *rule, bool http)
{
  splice_audit_conn (s, c, host, "refused", rule);
  if (http)
    {
      char resp[512];
      int n = snprintf (resp, sizeof resp,
                        "HTTP/1.1 403 Forbidden\r\nX-Agentsbx-Blocked: %s%s\r\nContent-Type: text/plain\r\n"
                        "Content-Length: 0\r\nConnection: close\r\n\r\n",
                        splice_blocked_why (host, rule), host && strncmp (rule, "http: ", 6) != 0 ? host : "");
      if (send (c->cfd, resp, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        {
          /* nothing more to do: the client sees the close */
        }
      shutdown (c->cfd, SHUT_WR);
    }
  conn_close (s, c, !http);
}

static void
on_hello (struct splice *s, struct conn *c)
{
  char name[256];
  ssize_t n = recv (c->cfd, c->c2u.b + c->c2u.len, HELLO_MAX - c->c2u.len, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
    {
      conn_close (s, c, false);
      return;
    }
  if (n < 0)
    return;
  c->c2u.len += (size_t) n;
  bool tls = c->c2u.b[0] == 0x16;
  int r = tls ? splice_tls_sni (c->c2u.b, c->c2u.len, name, sizeof name)
              : splice_http_host (c->c2u.b, c->c2u.len, name, sizeof name);
  if (r == 0 && c->c2u.len < HELLO_MAX)
    return; /* more bytes to come */
  if (r <= 0)
    {
      refuse (s, c, NULL, tls ? "sni: none" : "host: none", !tls && c->c2u.b[0] >= 'A' && c->c2u.b[0] <= 'Z');
      return;
    }
  if (!splice_name_allowed (s, name))
    {
      refuse (s, c, name, tls ? "sni" : "host", !tls);
      return;
    }
  if (!tls && s->tls && tls_relay_wants (s->tls, name))
    {
      /* its rules and credentials apply inside TLS only: plain HTTP would pass them by */
      refuse (s, c, name, SPLICE_PLAIN_INTERCEPTED, true);
      return;
    }
  if (s->tls && !tls_relay_wants (s->tls, name) && splice_dst_intercepted (s, c))
    {
      /* another name on an intercepted host's address: behind it the server may route the
       * request to that host, past its rules */
      refuse (s, c, name, SPLICE_OTHER_NAME_INTERCEPTED, !tls);
      return;
    }
  const char *bad = tls ? NULL
                        : splice_http_head (
                            c, c->c2u.b,
                            (size_t) ((const unsigned char *) memmem (c->c2u.b, c->c2u.len, "\r\n\r\n", 4) + 4
                                      - c->c2u.b));
  if (bad)
    {
      refuse (s, c, name, bad, true);
      return;
    }
  if (tls && s->tls && tls_relay_wants (s->tls, name))
    {
      /* an intercepted host: the relay terminates TLS and checks every request */
      splice_audit_conn (s, c, name, "allowed", "sni: intercepted");
      epoll_ctl (s->ep, EPOLL_CTL_DEL, c->cfd, NULL);
      tls_relay_adopt (s->tls, c->cfd, &c->dst, c->dlen, name, c->c2u.b, c->c2u.len);
      c->cfd = -1;              /* the relay's now */
      conn_close (s, c, false); /* the slot and its buffers */
      return;
    }
  /* TLS: one name per connection (the SNI); HTTP: http_scan checks this request again and
   * every later one before their bytes leave */
  c->hs = tls ? H_OPAQUE : H_HEAD;
  snprintf (c->host, sizeof c->host, "%s", name);
  c->ufd = upstream_socket (s, c->dst.ss_family);
  struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = (uint64_t) (c - s->c) * 2 + 1 };
  c->ev_u = EPOLLOUT;
  if (c->ufd < 0 || epoll_ctl (s->ep, EPOLL_CTL_ADD, c->ufd, &ev) < 0
      || (connect (c->ufd, (struct sockaddr *) &c->dst, c->dlen) < 0 && errno != EINPROGRESS))
    {
      splice_audit_conn (s, c, name, "refused", "upstream connect failed");
      conn_close (s, c, true);
      return;
    }
  splice_audit_conn (s, c, name, "allowed", tls ? "sni" : "host");
  c->state = ST_CONNECTING;
  spare_refill (s, c->dst.ss_family); /* while the SYN is out */
}

static void
compact (struct rbuf *b)
{
  memmove (b->b, b->b + b->off, b->len - b->off);
  b->len -= b->off, b->chk -= b->off, b->hold -= b->hold >= b->off ? b->off : b->hold, b->off = 0;
}

/* move bytes from fd into b; returns how many arrived (0 at EOF, on error or none yet) */
static size_t
fill (int fd, struct rbuf *b, bool *eof)
{
  if (b->off && b->off == b->len)
    b->off = b->len = b->chk = b->hold = 0;
  if (b->len == BUF_MAX && b->off)
    compact (b);
  ssize_t n = recv (fd, b->b + b->len, BUF_MAX - b->len, MSG_DONTWAIT);
  if (n > 0)
    b->len += (size_t) n;
  else if (n == 0 || (errno != EAGAIN && errno != EINTR))
    *eof = true;
  return n > 0 ? (size_t) n : 0;
}

/* send b's bytes before `end` (c2u: the checked ones; u2c: all); returns how many left (0:
 * none to send, or EAGAIN), -1 on an error */
static ssize_t
drain (int fd, struct rbuf *b, size_t end)
{
  if (end <= b->off)
    {
      if (b->off == b->len)
        b->off = b->len = b->chk = b->hold = 0;
      return 0;
    }
  ssize_t n = send (fd, b->b + b->off, end - b->off, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0)
    return errno == EAGAIN || errno == EINTR ? 0 : -1;
  b->off += (size_t) n;
  if (b->off == b->len)
    b->off = b->len = b->chk = b->hold = 0;
  else if (b->len == BUF_MAX)
    compact (b); /* full, with unchecked bytes waiting for the rest of a head: make room */
  return n;
}

/* open p (a direction's pipe) at its first use: a big one while there are few (PIPES_BIG) */
static int
pipe_open (struct splice *s, struct splice_pipe *p)
{
  if (splice_pipe_open (p, s->pipes_big < PIPES_BIG ? PIPE_WANT : 0) < 0)
    return -1;
  if (p->cap > 65536)
    s->pipes_big++;
  return 0;
}

/* one pass of the relay for the side that had `events` (upstream: ufd, else cfd): read what it
 * has, check it (the client's plain HTTP), send what may leave both ways, pass half-closes on.
 * Returns 1 when bytes moved, 0 when none did, -1 to close with a reset, -2 to close (both
 * sides done). Ordering and checks: c2u bytes leave only up to sendable() (splice_http.c); the
 * pipes carry only bytes nothing needs to look at (c2u_piped, u2c_piped). */
static int
relay_round (struct splice *s, struct conn *c, bool upstream, uint32_t events)
{
  bool moved = false;
  ssize_t got;
  if (upstream && (events & EPOLLIN) && !c->u_eof)
    {
      if (u2c_piped (c))
        {
          if (c->u2c_pipe.rd < 0 && pipe_open (s, &c->u2c_pipe) < 0)
            return -1;
          moved = splice_pipe_fill (&c->u2c_pipe, c->ufd, &c->u_eof) > 0 || c->u_eof;
        }
      else if (c->u2c_pipe.held == 0 && (got = (ssize_t) fill (c->ufd, &c->u2c, &c->u_eof)) > 0)
        {
          moved = true;
          c->u2c_bulk = c->u2c_bulk || c->u2c.len == BUF_MAX;
          if (c->hs == H_WAIT101)
            splice_http_status (c, c->u2c.b + c->u2c.len - (size_t) got, (size_t) got);
        }
      else
        moved = c->u_eof;
    }
  if (!upstream && (events & EPOLLIN) && !c->c_eof)
    {
      if (c2u_piped (c))
        {
          if (c->c2u_pipe.rd < 0 && pipe_open (s, &c->c2u_pipe) < 0)
            return -1;
          moved = splice_pipe_fill (&c->c2u_pipe, c->cfd, &c->c_eof) > 0 || c->c_eof;
        }
      else
        {
          moved = fill (c->cfd, &c->c2u, &c->c_eof) > 0 || c->c_eof;
          c->c2u_bulk = c->c2u_bulk || c->c2u.len == BUF_MAX;
        }
    }
  splice_http_scan (s, c);
  size_t keep = sendable (c) > c->c2u.off ? sendable (c) : c->c2u.off;
  if (c->c_eof && c->c2u.len > keep)
    {
      /* the client is done, and bytes wait for a check that needs more of them (the start of a
       * body - an `Expect: 100-continue` client that sent part of it at once - a head without
       * its end, what follows an Upgrade): they can never leave. Drop them, so the half-close
       * goes on and the connection can end - else the client's EPOLLHUP, reported whatever the
       * interests, woke the relay in a loop (100% of a core) until the monitor ended. */
      c->c2u.len = keep;
      if (c->c2u.chk > c->c2u.len)
        c->c2u.chk = c->c2u.len;
      if (c->c2u.hold > c->c2u.len)
        c->c2u.hold = c->c2u.len;
    }
  if (c->u_eof && c->u2c.len == 0 && c->u2c_pipe.held == 0 && c->refuse_403)
    {
      /* every response before the refused request is delivered: now the refusal */
      char resp[512];
      int n = snprintf (resp, sizeof resp,
                        "HTTP/1.1 403 Forbidden\r\nX-Agentsbx-Blocked: %s\r\n"
                        "Content-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        c->blocked);
      memcpy (c->u2c.b, resp, (size_t) n); /* n < sizeof resp: blocked is at most 299 bytes */
      c->u2c.len = c->u2c.chk = (size_t) n;
      c->refuse_403 = false;
    }
  if (c->state == ST_RELAY)
    {
      /* each direction: the pipe's bytes came before the rbuf's (the rbuf fills only when the
       * pipe is empty), so the pipe drains first */
      if (c->c2u_pipe.held && (got = splice_pipe_drain (&c->c2u_pipe, c->ufd)) != 0)
        {
          if (got < 0)
            return -1;
          moved = true;
        }
      if (c->u2c_pipe.held && (got = splice_pipe_drain (&c->u2c_pipe, c->cfd)) != 0)
        {
          if (got < 0)
            return -1;
          moved = true;
        }
      if (c->c2u_pipe.held == 0 && (got = drain (c->ufd, &c->c2u, sendable (c))) != 0)
        {
          if (got < 0)
            return -1;
          moved = true;
        }
      if (c->u2c_pipe.held == 0 && (got = drain (c->cfd, &c->u2c, c->u2c.len)) != 0)
        {
          if (got < 0)
            return -1;
          moved = true;
        }
    }
  if (events & EPOLLERR)
    return -1;
  /* pass half-closes on once everything before them is delivered */
  if (c->c_eof && c->c2u.len == 0 && c->c2u_pipe.held == 0 && c->state == ST_RELAY && !c->u_shut)
    {
      shutdown (c->ufd, SHUT_WR);
      c->u_shut = true; /* (a failure: the upstream is gone, its close follows) */
    }
  if (c->u_eof && c->u2c.len == 0 && c->u2c_pipe.held == 0 && !c->c_shut)
    {
      shutdown (c->cfd, SHUT_WR);
      c->c_shut = true;
    }
  if (c->c_eof && c->u_eof && c->c2u.len == 0 && c->u2c.len == 0 && c->c2u_pipe.held == 0 && c->u2c_pipe.held == 0)
    return -2;
  return moved ? 1 : 0;
}

static void
on_event (struct splice *s, struct conn *c, bool upstream, uint32_t events)
{
  if (c->state == ST_HELLO)
    {
      if (!upstream)
        on_hello (s, c);
      if (c->state != ST_FREE)
        interests (s, c);
      return;
    }
  if (upstream && c->state == ST_CONNECTING)
    {
      int e = 0;
      socklen_t el = sizeof e;
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
        return;
      if (getsockopt (c->ufd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e)
        {
          conn_close (s, c, true);
          return;
        }
      c->state = ST_RELAY;
    }
  /* a few rounds per wake-up while bytes move (fewer epoll round trips per byte), bounded so
   * that one busy connection cannot starve the others */
  for (int round = 0; round < 8; round++)
    {
      int r = relay_round (s, c, upstream, events);
      if (r < 0)
        {
          conn_close (s, c, r == -1);
          return;
        }
      if (r == 0)
        break;
      events &= EPOLLIN | EPOLLOUT; /* later rounds: the same side again, until EAGAIN */
    }
  interests (s, c);
}

/* the relay's own port on a loopback address (127/8, ::1, ::ffff:127/104): the destination of a
 * connection that was not redirected here but dialled directly */
static bool
dst_is_relay (const struct sockaddr_storage *ss)
{
  if (ss->ss_family == AF_INET)
    {
      const struct sockaddr_in *a = (const struct sockaddr_in *) ss;
      return (ntohl (a->sin_addr.s_addr) >> 24) == 127 && ntohs (a->sin_port) == POLICY_NFT_SPLICE_PORT;
    }
  const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *) ss;
  const struct in6_addr *a = &a6->sin6_addr;
  return (IN6_IS_ADDR_LOOPBACK (a) || (IN6_IS_ADDR_V4MAPPED (a) && a->s6_addr[12] == 127))
         && ntohs (a6->sin6_port) == POLICY_NFT_SPLICE_PORT;
}

/* one connection from the listener; false when none was waiting */
static bool
accept_one (struct splice *s, int lfd)
{
  int fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return false;
  struct conn *c = NULL;
  for (size_t i = 0; i < CONNS_MAX && !c; i++)
    if (s->c[i].state == ST_FREE)
      c = &s->c[i];
  if (!c)
    {
      close (fd); /* full: the client sees a close */
      return true;
    }
  *c = (struct conn){ .state = ST_HELLO, .cfd = fd, .ufd = -1, .dlen = sizeof c->dst, .ev_c = EPOLLIN };
  splice_pipe_init (&c->c2u_pipe);
  splice_pipe_init (&c->u2c_pipe);
  c->c2u.b = xmalloc (BUF_MAX);
  c->u2c.b = xmalloc (BUF_MAX);
  int r = lfd == s->l4 ? getsockopt (fd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &c->dlen)
                       : getsockopt (fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &c->dst, &c->dlen);
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t) (c - s->c) * 2 };
  if (r == 0 && dst_is_relay (&c->dst))
    {
      /* dialled directly (127.0.0.1:POLICY_NFT_SPLICE_PORT is open to the container for the
       * redirect): the original destination is the relay itself, and connecting there would
       * make the relay dial itself until its slots run out */
      splice_audit_conn (s, c, NULL, "refused", "relay: not a redirected connection");
      conn_close (s, c, true);
      return true;
    }
  if (r < 0 || epoll_ctl (s->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
    {
      conn_close (s, c, true); /* not a redirected connection (someone dialled the port itself) */
      return true;
    }
  /* the client's first bytes often came with the handshake's end (connect returns, the request
   * is sent before we run): read them now rather than after one more epoll round trip */
  on_event (s, c, false, EPOLLIN);
  return true;
}

/* every connection waiting, up to a batch (100 parallel connects come in one wake-up) */
static void
on_accept (struct splice *s, int lfd)
{
  for (int i = 0; i < 64 && accept_one (s, lfd); i++)
    ;
}

void
splice_dispatch (struct splice *s)
{
  struct epoll_event ev[16];
  int n = epoll_wait (s->ep, ev, 16, 0);
  for (int i = 0; i < n; i++)
    {
      uint64_t k = ev[i].data.u64;
      if (k == UINT64_MAX - 2)
        tls_relay_dispatch (s->tls);
      else if (k == UINT64_MAX - 1 || k == UINT64_MAX)
        on_accept (s, k == UINT64_MAX - 1 ? s->l4 : s->l6);
      else if (s->c[k / 2].state != ST_FREE)
        on_event (s, &s->c[k / 2], k % 2, ev[i].events);
    }
}

int
splice_fd (const struct splice *s)
{
  return s->ep;
}

static int
listen_on (int family)
{
  struct sockaddr_in a4 = { .sin_family = AF_INET,
                            .sin_port = htons (POLICY_NFT_SPLICE_PORT),
                            .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
                             .sin6_port = htons (POLICY_NFT_SPLICE_PORT),
                             .sin6_addr = IN6ADDR_LOOPBACK_INIT };
  int one = 1;
  cleanup_close int fd = socket (family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -1;
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6)
    setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind (fd, family == AF_INET ? (struct sockaddr *) &a4 : (struct sockaddr *) &a6,
            family == AF_INET ? sizeof a4 : sizeof a6)
          < 0
      || listen (fd, CONNS_MAX) < 0)
    return -1;
  return steal_fd (&fd);
}

/* linux_netns_fn: the relay's listeners in the container's namespace, fds[0] v4, fds[1] v6 */
static int
listeners (void *arg, int *fds, size_t nfds, char **out, asbx_err_t *err)
{
  (void) arg;
  (void) nfds;
  (void) out;
  fds[0] = listen_on (AF_INET);
  if (fds[0] < 0)
    return asbx_error (err, errno,
                       "network: SNI/Host check: listen on 127.0.0.1:%d in the container's network namespace",
                       POLICY_NFT_SPLICE_PORT);
  fds[1] = listen_on (AF_INET6); /* no IPv6 in the namespace: nothing to redirect there */
  return 0;
}

struct splice *
splice_new (const char *id, int netns_fd, const struct policy_plan *plan, int audit_fd,
            const struct tls_relay_keys *keys, asbx_err_t *err)
{
  struct splice *s = xmalloc0 (sizeof *s);
  /* field by field: a compound literal of this 2 MiB struct would be built on the stack */
  s->id = id;
  s->plan = plan;
  s->audit_fd = audit_fd;
  s->netns = netns_fd;
  s->ep = s->l4 = s->l6 = -1;
  s->spare[0] = s->spare[1] = -1;
  for (size_t i = 0; i < CONNS_MAX; i++)
    s->c[i].cfd = s->c[i].ufd = -1;
  int l[2];
  int r = linux_netns_call (netns_fd, listeners, NULL, l, 2, NULL, err);
  s->l4 = l[0];
  s->l6 = l[1];
  if (r < 0)
    goto fail;
  s->ep = epoll_create1 (EPOLL_CLOEXEC);
  if (s->ep < 0)
    {
      asbx_error (err, errno, "network: SNI/Host check: epoll_create1");
      goto fail;
    }
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX - 1 };
  if (epoll_ctl (s->ep, EPOLL_CTL_ADD, s->l4, &ev) < 0)
    goto fail_epoll;
  ev.data.u64 = UINT64_MAX;
  if (s->l6 >= 0 && epoll_ctl (s->ep, EPOLL_CTL_ADD, s->l6, &ev) < 0)
    goto fail_epoll;
  if (plan->credentials_len || plan->http_hosts_len)
    {
      s->tls = tls_relay_new (id, plan, netns_fd, audit_fd, keys, err);
      if (!s->tls)
        goto fail;
      ev.data.u64 = UINT64_MAX - 2;
      if (epoll_ctl (s->ep, EPOLL_CTL_ADD, tls_relay_fd (s->tls), &ev) < 0)
        goto fail_epoll;
    }
  return s;
fail_epoll:
  asbx_error (err, errno, "network: SNI/Host check: epoll_ctl");
fail:
  splice_free (s);
  return NULL;
}

void
splice_free (struct splice *s)
{
  if (!s)
    return;
  for (size_t i = 0; i < CONNS_MAX; i++)
    if (s->c[i].state != ST_FREE)
      conn_close (s, &s->c[i], false);
  tls_relay_free (s->tls);
  int fds[] = { s->ep, s->l4, s->l6, s->spare[0], s->spare[1] };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (fds); i++)
    if (fds[i] >= 0)
      close (fds[i]);
  free (s);
}
