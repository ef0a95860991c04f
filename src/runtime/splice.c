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
 * Ordering: the name is checked BEFORE any byte or connect reaches the destination. */
#include <arpa/inet.h>
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
#include "policy/nft_ruleset.h"
#include "runtime/audit.h"
#include "runtime/splice.h"

#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

#define CONNS_MAX 64
#define HELLO_MAX SPLICE_HELLO_MAX /* runtime/sni_parse.h */
#define BUF_MAX 16384

enum
{
  ST_FREE = 0,
  ST_HELLO,
  ST_CONNECTING,
  ST_RELAY
};

struct rbuf
{
  unsigned char b[BUF_MAX];
  size_t off, len;
};

struct conn
{
  int state;
  int cfd, ufd;
  struct sockaddr_storage dst;
  socklen_t dlen;
  bool c_eof, u_eof;
  struct rbuf c2u, u2c; /* c2u holds the hello first */
};

struct splice
{
  const char *id;
  const struct policy_plan *plan;
  int audit_fd, netns, ep, l4, l6;
  struct conn c[CONNS_MAX];
  /* names whose answers the DNS stub let through, until their TTL ends: what may be named */
  struct
  {
    char name[256];
    uint64_t until_ns;
  } resolved[256];
};

static bool
name_allowed (struct splice *s, const char *host)
{
  uint64_t now = now_ns ();
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->resolved); i++)
    if (s->resolved[i].until_ns > now && strcmp (s->resolved[i].name, host) == 0)
      return true;
  return false;
}

void
splice_name_resolved (struct splice *s, const char *name, uint32_t ttl)
{
  uint64_t now = now_ns (), until;
  size_t slot = 0;
  ttl = ttl < POLICY_NFT_TTL_FLOOR ? POLICY_NFT_TTL_FLOOR : ttl > POLICY_NFT_TTL_CEIL ? POLICY_NFT_TTL_CEIL : ttl;
  until = now + (uint64_t) ttl * 1000000000u; /* as long as the set elements the answer made */
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->resolved); i++)
    {
      if (strcmp (s->resolved[i].name, name) == 0)
        {
          slot = i;
          break;
        }
      if (s->resolved[i].until_ns < s->resolved[slot].until_ns)
        slot = i; /* else the entry that ends first makes room */
    }
  if (strcmp (s->resolved[slot].name, name) == 0 && s->resolved[slot].until_ns > until)
    return;
  snprintf (s->resolved[slot].name, sizeof s->resolved[slot].name, "%s", name);
  s->resolved[slot].until_ns = until;
}

/* ---- parsers: runtime/sni_parse.c ---- */

/* ---- connections ---- */

static void
audit_conn (struct splice *s, struct conn *c, const char *host, const char *decision, const char *rule)
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
  c->state = ST_FREE;
  c->cfd = c->ufd = -1;
}

static void
interests (struct splice *s, struct conn *c)
{
  size_t k = (size_t) (c - s->c);
  struct epoll_event ev = { .data.u64 = k * 2 };
  ev.events = (c->state == ST_HELLO || (c->state == ST_RELAY && !c->c_eof && c->c2u.len < BUF_MAX) ? EPOLLIN : 0)
              | (c->u2c.len ? EPOLLOUT : 0);
  epoll_ctl (s->ep, EPOLL_CTL_MOD, c->cfd, &ev);
  if (c->ufd < 0)
    return;
  ev.data.u64 = k * 2 + 1;
  ev.events = (c->state == ST_CONNECTING || c->c2u.len ? EPOLLOUT : 0)
              | (c->state == ST_RELAY && !c->u_eof && c->u2c.len < BUF_MAX ? EPOLLIN : 0);
  epoll_ctl (s->ep, EPOLL_CTL_MOD, c->ufd, &ev);
}

/* a socket in the container's namespace (the filter chain applies to it), marked */
static int
upstream_socket (struct splice *s, int family)
{
  cleanup_close int self = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  uint32_t mark = POLICY_NFT_SPLICE_MARK;
  if (self < 0 || setns (s->netns, CLONE_NEWNET) < 0)
    return -1;
  int fd = socket (family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (setns (self, CLONE_NEWNET) < 0)
    abort (); /* never go on in the container's namespace (fail closed) */
  if (fd >= 0 && setsockopt (fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0)
    {
      close (fd);
      return -1;
    }
  return fd;
}

static void
refuse (struct splice *s, struct conn *c, const char *host, const char *rule, bool http)
{
  audit_conn (s, c, host, "refused", rule);
  if (http)
    {
      char resp[512];
      int n = snprintf (resp, sizeof resp,
                        "HTTP/1.1 403 Forbidden\r\nX-Agentsbx-Blocked: %s%s%s\r\nContent-Type: text/plain\r\n"
                        "Content-Length: 0\r\nConnection: close\r\n\r\n",
                        host ? "host not allowed: " : "no Host header", host ? host : "", "");
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
  if (!name_allowed (s, name))
    {
      refuse (s, c, name, tls ? "sni" : "host", !tls);
      return;
    }
  c->ufd = upstream_socket (s, c->dst.ss_family);
  struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = (uint64_t) (c - s->c) * 2 + 1 };
  if (c->ufd < 0 || epoll_ctl (s->ep, EPOLL_CTL_ADD, c->ufd, &ev) < 0
      || (connect (c->ufd, (struct sockaddr *) &c->dst, c->dlen) < 0 && errno != EINPROGRESS))
    {
      audit_conn (s, c, name, "refused", "upstream connect failed");
      conn_close (s, c, true);
      return;
    }
  audit_conn (s, c, name, "allowed", tls ? "sni" : "host");
  c->state = ST_CONNECTING;
}

/* move bytes from fd into b; false when the side is done (EOF or error) */
static bool
fill (int fd, struct rbuf *b, bool *eof)
{
  if (b->off && b->off == b->len)
    b->off = b->len = 0;
  if (b->len == BUF_MAX && b->off)
    {
      memmove (b->b, b->b + b->off, b->len - b->off);
      b->len -= b->off, b->off = 0;
    }
  ssize_t n = recv (fd, b->b + b->len, BUF_MAX - b->len, MSG_DONTWAIT);
  if (n > 0)
    b->len += (size_t) n;
  else if (n == 0 || (errno != EAGAIN && errno != EINTR))
    *eof = true;
  return n != 0 && !(n < 0 && errno != EAGAIN && errno != EINTR);
}

static bool
drain (int fd, struct rbuf *b)
{
  if (b->off == b->len)
    return true;
  ssize_t n = send (fd, b->b + b->off, b->len - b->off, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0)
    return errno == EAGAIN || errno == EINTR;
  b->off += (size_t) n;
  if (b->off == b->len)
    b->off = b->len = 0;
  return true;
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
  bool ok = true;
  if (upstream && (events & EPOLLIN) && !c->u_eof)
    fill (c->ufd, &c->u2c, &c->u_eof);
  if (!upstream && (events & EPOLLIN) && !c->c_eof)
    fill (c->cfd, &c->c2u, &c->c_eof);
  if (c->state == ST_RELAY)
    ok = drain (c->ufd, &c->c2u) && drain (c->cfd, &c->u2c);
  if (!ok || (events & EPOLLERR))
    {
      conn_close (s, c, true);
      return;
    }
  /* pass half-closes on once everything before them is delivered */
  if (c->c_eof && c->c2u.len == 0 && c->state == ST_RELAY)
    shutdown (c->ufd, SHUT_WR);
  if (c->u_eof && c->u2c.len == 0)
    shutdown (c->cfd, SHUT_WR);
  if (c->c_eof && c->u_eof && c->c2u.len == 0 && c->u2c.len == 0)
    {
      conn_close (s, c, false);
      return;
    }
  interests (s, c);
}

static void
on_accept (struct splice *s, int lfd)
{
  int fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return;
  struct conn *c = NULL;
  for (size_t i = 0; i < CONNS_MAX && !c; i++)
    if (s->c[i].state == ST_FREE)
      c = &s->c[i];
  if (!c)
    {
      close (fd); /* full: the client sees a close */
      return;
    }
  *c = (struct conn){ .state = ST_HELLO, .cfd = fd, .ufd = -1, .dlen = sizeof c->dst };
  int r = lfd == s->l4 ? getsockopt (fd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &c->dlen)
                       : getsockopt (fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &c->dst, &c->dlen);
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t) (c - s->c) * 2 };
  if (r < 0 || epoll_ctl (s->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
    conn_close (s, c, true); /* not a redirected connection (someone dialled the port itself) */
}

void
splice_dispatch (struct splice *s)
{
  struct epoll_event ev[16];
  int n = epoll_wait (s->ep, ev, 16, 0);
  for (int i = 0; i < n; i++)
    {
      uint64_t k = ev[i].data.u64;
      if (k == UINT64_MAX - 1 || k == UINT64_MAX)
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

struct splice *
splice_new (const char *id, int netns_fd, const struct policy_plan *plan, int audit_fd, asbx_err_t *err)
{
  struct splice *s = xmalloc0 (sizeof *s);
  cleanup_close int self = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  *s = (struct splice){
    .id = id,
    .plan = plan,
    .audit_fd = audit_fd,
    .netns = netns_fd,
    .ep = -1,
    .l4 = -1,
    .l6 = -1,
  };
  for (size_t i = 0; i < CONNS_MAX; i++)
    s->c[i].cfd = s->c[i].ufd = -1;
  if (self < 0 || setns (netns_fd, CLONE_NEWNET) < 0)
    {
      asbx_error (err, errno, "network: SNI/Host check: enter the container's network namespace");
      goto fail;
    }
  s->l4 = listen_on (AF_INET);
  int e = errno;
  s->l6 = listen_on (AF_INET6); /* no IPv6 in the namespace: nothing to redirect there */
  if (setns (self, CLONE_NEWNET) < 0)
    abort ();
  s->ep = epoll_create1 (EPOLL_CLOEXEC);
  if (s->l4 < 0 || s->ep < 0)
    {
      asbx_error (err, s->l4 < 0 ? e : errno,
                  "network: SNI/Host check: listen on 127.0.0.1:%d in the container's "
                  "network namespace",
                  POLICY_NFT_SPLICE_PORT);
      goto fail;
    }
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX - 1 };
  if (epoll_ctl (s->ep, EPOLL_CTL_ADD, s->l4, &ev) < 0)
    goto fail_epoll;
  ev.data.u64 = UINT64_MAX;
  if (s->l6 >= 0 && epoll_ctl (s->ep, EPOLL_CTL_ADD, s->l6, &ev) < 0)
    goto fail_epoll;
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
  int fds[] = { s->ep, s->l4, s->l6 };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (fds); i++)
    if (fds[i] >= 0)
      close (fds[i]);
  free (s);
}
