/* dnsstub.c - the filtered-mode DNS stub in the monitor (see dnsstub.h for the contract).
 *
 * Threat model: the container writes the queries (any bytes) and may flood the stub; the
 * upstream is trusted to answer but not to be the only one sending to our upstream socket, so
 * answers are matched on source address, a fresh random id and the echoed question. Nothing of
 * a query reaches the upstream unless its name is allowed. Addresses reach nft as text made by
 * inet_ntop from answer bytes - never as text of the answer.
 * Ordering: the sets are filled (one nft transaction, none while the address's elements
 * already outlive the answer: monitor/dns_setlife.h) before the answer is sent, so the
 * container's first connect after resolving already passes.
 * Sockets are created inside the container's namespace (linux/netns_call.h: setns(2) there and
 * back, or a helper child for a non-root caller) and stay there (a socket belongs to the
 * namespace it was created in).
 * The answer side (each answer address admitted or refused, the nft sets, the rebuilt answer) is
 * dnsstub_answer.c; dnsstub_internal.h is what the two share. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/netns_call.h"
#include "linux/nft.h"
#include "linux/process.h"
#include "policy/doc.h"
#include "policy/nft_ruleset.h"
#include "monitor/approvals.h"
#include "monitor/audit.h"
#include "monitor/dns_build.h"
#include "monitor/dns_intercept.h"
#include "monitor/dns_parse.h"
#include "monitor/dns_rebind.h"
#include "monitor/dns_upstream.h"
#include "monitor/dnsstub.h"
#include "monitor/dnsstub_internal.h"
#include "monitor/nflog.h"
#include "monitor/querier.h"
#include "monitor/splice.h"

/* ---- upstream address and per-query sockets: monitor/dns_upstream.c ---- */

/* ---- sockets inside the container's namespace ---- */

static void on_decision (void *data, uint64_t qid, const char *host, enum approval_decision dec);

static int
bind_stub (int family, int type, bool required, asbx_err_t *err)
{
  struct sockaddr_in a4 = { .sin_family = AF_INET,
                            .sin_port = htons (POLICY_NFT_DNS_PORT),
                            .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
                             .sin6_port = htons (POLICY_NFT_DNS_PORT),
                             .sin6_addr = IN6ADDR_LOOPBACK_INIT };
  int one = 1;
  cleanup_close int s = socket (family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0)
    return required ? asbx_error (err, errno, "socket") : -1;
  if (type == SOCK_STREAM)
    setsockopt (s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6)
    setsockopt (s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind (s, family == AF_INET ? (struct sockaddr *) &a4 : (struct sockaddr *) &a6,
            family == AF_INET ? sizeof a4 : sizeof a6)
      < 0)
    return required ? asbx_error (err, errno, "bind %s:53 (%s) in the container's network namespace",
                                  family == AF_INET ? "127.0.0.1" : "[::1]", type == SOCK_STREAM ? "tcp" : "udp")
                    : -1;
  if (type == SOCK_STREAM && listen (s, CONNS_MAX) < 0)
    return required ? asbx_error (err, errno, "listen on the DNS stub's TCP socket") : -1;
  return steal_fd (&s);
}

/* linux_netns_fn, in the container's namespace: `lo` up, the stub's sockets (fds[0..3]: udp4, tcp4,
 * udp6, tcp6; no IPv6 there: nothing to serve), with `network` audit the NFLOG socket (fds[4]) */
static int
stub_sockets (void *arg, int *fds, size_t nfds __attribute__ ((unused)), char **out __attribute__ ((unused)),
              asbx_err_t *err)
{
  const bool *audit = arg;
  if (linux_netns_loopback_up (err) < 0) /* the stub listens on 127.0.0.1 and [::1] */
    return asbx_error_wrap (err, "bring the container's loopback up");
  if ((fds[0] = bind_stub (AF_INET, SOCK_DGRAM, true, err)) < 0
      || (fds[1] = bind_stub (AF_INET, SOCK_STREAM, true, err)) < 0)
    return -1;
  fds[2] = bind_stub (AF_INET6, SOCK_DGRAM, false, NULL);
  fds[3] = bind_stub (AF_INET6, SOCK_STREAM, false, NULL);
  if (*audit && (fds[4] = nflog_open (POLICY_NFT_LOG_GROUP, err)) < 0)
    return -1;
  return 0;
}

static int
open_in_netns (struct dnsstub *d, int netns, asbx_err_t *err)
{
  bool audit = (d->plan->audit_events & POLICY_AUDIT_NETWORK) != 0;
  int fds[5];
  int r = linux_netns_call (netns, stub_sockets, &audit, fds, ASBX_ARRAY_SIZE (fds), NULL, err);
  d->stub4 = fds[0], d->tcp4 = fds[1], d->stub6 = fds[2], d->tcp6 = fds[3];
  if (fds[4] >= 0 && nflog_watch_adopt (&d->nflog, fds[4], d->id, d->audit_fd, err) < 0)
    r = -1;
  return r;
}

struct dnsstub *
dnsstub_new (const char *id, pid_t init_pid, const struct policy_plan *plan, int audit_fd, int state_dirfd,
             const struct tls_relay_keys *keys, asbx_err_t *err)
{
  struct dnsstub *d = xmalloc0 (sizeof *d);
  cleanup_free char *nspath = xasprintf ("/proc/%d/ns/net", (int) init_pid);
  cleanup_close int netns = -1;
  int fds[9];

  d->id = id;
  d->plan = plan;
  d->audit_fd = audit_fd;
  d->ep = d->stub4 = d->stub6 = d->tcp4 = d->tcp6 = d->cur_conn = d->netns = d->up.spare = -1;
  nflog_watch_init (&d->nflog);
  for (size_t i = 0; i < CONNS_MAX; i++)
    d->conns[i].fd = -1;
  if (dns_upstream_find (&d->up, err) < 0)
    goto fail;
  dns_rebind_init (&d->rebind, plan);
  netns = open (nspath, O_RDONLY | O_CLOEXEC);
  if (netns < 0)
    {
      asbx_error (err, errno, "open %s", nspath);
      goto fail;
    }
  if (open_in_netns (d, netns, err) < 0)
    goto fail;
  d->splice = splice_new (id, netns, plan, audit_fd, keys, err);
  if (!d->splice)
    goto fail;
  d->netns = steal_fd (&netns);
  d->init_pid = init_pid;
  if (policy_nft_has_intercept_sets (plan))
    splice_on_intercepted (d->splice, dnsstub_icpt_set_add, d);
  /* the intercepted names' addresses, known before the container's first connect (bounded wait) */
  if (plan->credentials_len || plan->http_hosts_len)
    {
      d->icpt = dns_intercept_new (id, plan, &d->up, d->splice, audit_fd, err);
      if (!d->icpt)
        goto fail;
    }
  /* the upstream sockets are made per query (forward: one fresh ephemeral port each, issue 14);
   * one made here checks that the family can be had at all */
  if (dns_upstream_check (&d->up, err) < 0)
    goto fail;
  /* d->nft, the libnftables context for the sets, is made at the first answer to fill them in
   * (nft_set_allow): most sandboxes resolve nothing, and the context costs a netlink socket,
   * setns twice and libnftables' reading of /etc/iproute2 (issue #9) */
  d->ep = epoll_create1 (EPOLL_CLOEXEC);
  if (d->ep < 0)
    {
      asbx_error (err, errno, "epoll_create1");
      goto fail;
    }
  if (plan->approvals_network == POLICY_APPROVAL_ASK)
    {
      d->appr = approvals_new (id, state_dirfd, plan, audit_fd, on_decision, d, err);
      d->querier = d->appr ? querier_new (d->netns, NULL, NULL, err) : NULL;
      if (!d->querier)
        goto fail;
    }
  fds[0] = d->stub4, fds[1] = d->stub6, fds[2] = d->nflog.unlogged.tfd, fds[3] = d->appr ? approvals_fd (d->appr) : -1;
  fds[4] = d->tcp4, fds[5] = d->tcp6, fds[6] = d->nflog.fd, fds[7] = splice_fd (d->splice);
  fds[8] = dns_intercept_fd (d->icpt);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (fds); i++)
    {
      struct epoll_event ev = { .events = EPOLLIN, .data.fd = fds[i] };
      if (fds[i] >= 0 && epoll_ctl (d->ep, EPOLL_CTL_ADD, fds[i], &ev) < 0)
        {
          asbx_error (err, errno, "epoll_ctl");
          goto fail;
        }
    }
  return d;
fail:
  dnsstub_free (d);
  asbx_error_wrap (err, "network: DNS stub");
  return NULL;
}

void
dnsstub_set_members (struct dnsstub *d, querier_members_fn fn, void *data)
{
  if (d->querier)
    querier_set_members (d->querier, fn, data);
}

int
dnsstub_fd (const struct dnsstub *d)
{
  return d->ep;
}

void
dnsstub_free (struct dnsstub *d)
{
  if (!d)
    return;
  dns_intercept_free (d->icpt); /* before the splice it feeds */
  splice_free (d->splice);
  int *fds[] = { &d->ep, &d->stub4, &d->stub6, &d->tcp4, &d->tcp6, &d->netns };
  for (size_t i = 0; i < CONNS_MAX; i++)
    if (d->conns[i].fd >= 0)
      close (d->conns[i].fd);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (fds); i++)
    if (*fds[i] >= 0)
      close (*fds[i]);
  for (size_t i = 0; i < PENDING_MAX; i++)
    dnsstub_pending_end (&d->pend[i]);
  dns_upstream_close (&d->up);
  nflog_watch_close (&d->nflog);
  linux_nft_free (d->nft);
  approvals_free (d->appr);
  querier_free (d->querier);
  for (size_t i = 0; i < d->always_len; i++)
    free (d->always[i]);
  free (d);
}

/* ---- DNS messages: the parsers are in monitor/dns_parse.c ---- */

/* ---- decisions ---- */

static const char *
match (char **list, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (pval_domain_covers (list[i], name))
      return list[i];
  return NULL;
}

void
dnsstub_audit (struct dnsstub *d, const char *name, unsigned qtype, const char *decision, const char *rule,
               char **addrs, size_t naddrs, const char *error)
{
  asbx_err_t e = NULL;
  struct audit_rec *r;
  if (!(d->plan->audit_events & POLICY_AUDIT_DNS))
    return;
  r = audit_rec_new (d->id, "dns");
  audit_rec_str (r, "host", name);
  audit_rec_int (r, "qtype", qtype);
  audit_rec_str (r, "decision", decision);
  audit_rec_str (r, "rule", rule);
  if (addrs)
    audit_rec_strv (r, "addrs", addrs, naddrs);
  if (error)
    audit_rec_str (r, "error", error);
  if (audit_rec_write (r, d->audit_fd, &e) < 0)
    asbx_error_free (&e); /* a full disk must not stop the stub */
}

static void
tcp_close (struct dnsstub *d, int conn)
{
  epoll_ctl (d->ep, EPOLL_CTL_DEL, d->conns[conn].fd, NULL);
  close (d->conns[conn].fd);
  d->conns[conn].fd = -1;
}

/* an answer to the querier: a datagram, or a length-prefixed message on its TCP connection
 * (still the same one: fd and generation); a connection that cannot take it is closed */
void
dnsstub_reply (struct dnsstub *d, int fd, int conn, uint32_t gen, const struct sockaddr_storage *to, socklen_t tolen,
               const unsigned char *m, size_t n)
{
  if (conn < 0)
    {
      sendto (fd, m, n, 0, (const struct sockaddr *) to, tolen);
      return;
    }
  if (d->conns[conn].fd != fd || d->conns[conn].gen != gen)
    return; /* the client went away */
  unsigned char hdr[2] = { (unsigned char) (n >> 8), (unsigned char) n };
  struct iovec iov[2] = { { hdr, 2 }, { (void *) m, n } };
  struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
  if (sendmsg (fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) (n + 2))
    tcp_close (d, conn);
}

/* the pending query p is answered or given up: its upstream socket goes (and with it its epoll
 * registration) */
void
dnsstub_pending_end (struct pending *p)
{
  if (p->used && p->up_fd >= 0)
    close (p->up_fd);
  p->used = false;
  p->up_fd = -1;
}

/* allowed: the stub's own query for (name, qtype) goes upstream under a fresh id - nothing of
 * the client's message m[0..n) (question ending at qend) but what was parsed; the answer is
 * matched and rebuilt in dnsstub_on_answer */
static void
forward (struct dnsstub *d, int fd, const unsigned char *m, size_t n, size_t qend, const struct sockaddr_storage *from,
         socklen_t flen, const char *name, unsigned qtype, const char *rule)
{
  struct pending *p = &d->pend[d->next];
  d->next = (d->next + 1) % PENDING_MAX; /* the oldest is dropped under flood: its client retries */
  dnsstub_pending_end (p);
  *p = (struct pending){ .used = true,
                         .up_fd = -1,
                         .client_id = dns_get16 (m),
                         .stub_fd = fd,
                         .conn = d->cur_conn,
                         .gen = d->cur_gen,
                         .client_len = flen,
                         .qtype = qtype,
                         .rd = (m[2] & 0x01) != 0 };
  if (dns_query_check (m, n, qend, &p->edns) != NULL || qend - 12 > sizeof p->cq)
    {
      dnsstub_pending_end (p); /* handle_query checked it: cannot happen */
      return;
    }
  memcpy (&p->client, from, flen);
  memcpy (p->cq, m + 12, qend - 12);
  snprintf (p->name, sizeof p->name, "%s", name);
  snprintf (p->rule, sizeof p->rule, "%s", rule);
  p->up_id = dns_upstream_id (p->up_id);
  p->qlen = dns_build_query (p->q, sizeof p->q, p->up_id, name, qtype, &p->qend);
  /* from a socket of its own (monitor/dns_upstream.h: connected, a random ephemeral port);
   * nothing sent: p unused, the client retries */
  if (!p->qlen || p->qend != qend || (p->up_fd = dns_upstream_send (&d->up, d->ep, p->q, p->qlen)) < 0)
    dnsstub_pending_end (p);
}

/* refused here: nothing of this name leaves the monitor */
static void
refuse (struct dnsstub *d, int fd, unsigned char *m, size_t qend, const struct sockaddr_storage *from, socklen_t flen,
        const char *name, unsigned qtype, const char *rule)
{
  dnsstub_audit (d, name, qtype, "refused", rule, NULL, 0, NULL);
  dnsstub_reply (d, fd, d->cur_conn, d->cur_gen, from, flen, m, dns_make_refused (m, qend));
}

static const char *
match_always (struct dnsstub *d, const char *name)
{
  for (size_t i = 0; i < d->always_len; i++)
    if (strcmp (d->always[i], name) == 0)
      return "approval:allow-always";
  return NULL;
}

/* approvals `ask`: keep the query until the broker decides (on_decision) */
static void
hold (struct dnsstub *d, int fd, unsigned char *m, size_t n, size_t qend, const struct sockaddr_storage *from,
      socklen_t flen, const char *name, unsigned qtype)
{
  struct held *h = NULL;
  for (size_t i = 0; i < HELD_MAX && !h; i++)
    if (!d->held[i].qid)
      h = &d->held[i];
  if (!h || n > HELD_MSG)
    {
      refuse (d, fd, m, qend, from, flen, name, qtype, "approvals: too many held queries");
      return;
    }
  char exe[256] = "";
  pid_t pid = querier_find (d->querier, d->cur_conn >= 0, from, exe, sizeof exe);
  uint64_t qid = approvals_ask (d->appr, name, -1, pid > 0 ? pid : -1, exe[0] ? exe : NULL);
  if (!qid)
    {
      refuse (d, fd, m, qend, from, flen, name, qtype, "approvals: too many pending questions");
      return;
    }
  *h = (struct held){ .qid = qid,
                      .stub_fd = fd,
                      .conn = d->cur_conn,
                      .gen = d->cur_gen,
                      .client_len = flen,
                      .len = n,
                      .qend = qend,
                      .qtype = qtype };
  memcpy (&h->client, from, flen);
  memcpy (h->msg, m, n);
  snprintf (h->name, sizeof h->name, "%s", name);
}

/* the broker's decision for question qid: every query held for it is forwarded or refused */
static void
on_decision (void *data, uint64_t qid, const char *host, enum approval_decision dec)
{
  struct dnsstub *d = data;
  if (dec == APPROVAL_ALLOW_ALWAYS && d->always_len < ALWAYS_MAX && !match_always (d, host))
    d->always[d->always_len++] = xstrdup (host);
  for (size_t i = 0; i < HELD_MAX; i++)
    {
      struct held *h = &d->held[i];
      if (h->qid != qid)
        continue;
      h->qid = 0;
      typeof (d->recent[0]) *r = &d->recent[d->recent_next];
      d->recent_next = (d->recent_next + 1) % ASBX_ARRAY_SIZE (d->recent);
      snprintf (r->name, sizeof r->name, "%s", h->name);
      memcpy (&r->client, &h->client, h->client_len);
      r->client_len = h->client_len;
      r->allow = dec != APPROVAL_DENY;
      d->cur_conn = h->conn, d->cur_gen = h->gen;
      if (dec == APPROVAL_DENY)
        refuse (d, h->stub_fd, h->msg, h->qend, &h->client, h->client_len, h->name, h->qtype, "approval:deny");
      else
        forward (d, h->stub_fd, h->msg, h->len, h->qend, &h->client, h->client_len, h->name, h->qtype,
                 dec == APPROVAL_ALLOW_ONCE ? "approval:allow-once" : "approval:allow-always");
    }
  d->cur_conn = -1;
}

/* one query (m, n: writable copy) from `from` on fd (d->cur_conn says whether TCP) */
static void
handle_query (struct dnsstub *d, int fd, unsigned char *m, ssize_t n, struct sockaddr_storage from, socklen_t flen)
{
  char name[256];
  unsigned qtype;
  size_t qend;

  unsigned edns;
  if (n < 0)
    return;
  if (dns_parse_question (m, (size_t) n, name, sizeof name, &qtype, &qend) < 0)
    {
      /* no host name (a '"', '\\', control byte, 0xff or '.' inside a label, too long): refused
       * and on record, the name in presentation format with \DDD escapes (issue 14) */
      char text[1024];
      if (dns_question_text (m, (size_t) n, text, sizeof text, &qtype, &qend) == 0)
        refuse (d, fd, m, qend, &from, flen, text, qtype, "dns: not a host name");
      else
        dnsstub_audit (d, "", 0, "dropped", "dns: malformed query", NULL, 0, NULL); /* no question to answer */
      return;
    }
  const char *bad = dns_query_check (m, (size_t) n, qend, &edns);
  if (bad)
    {
      refuse (d, fd, m, qend, &from, flen, name, qtype, bad); /* another class or type: never forwarded */
      return;
    }
  const struct policy_plan *pl = d->plan;
  const char *rule = match (pl->denied_domains, pl->denied_domains_len, name);
  const char *allow = rule ? NULL : match (pl->allowed_domains, pl->allowed_domains_len, name);
  if (!allow && !rule)
    allow = match_always (d, name);
  for (size_t i = 0; !allow && !rule && d->appr && i < ASBX_ARRAY_SIZE (d->recent); i++)
    if (d->recent[i].client_len == flen && memcmp (&d->recent[i].client, &from, flen) == 0
        && strcmp (d->recent[i].name, name) == 0)
      {
        if (d->recent[i].allow)
          allow = "approval:allow-once";
        else
          rule = "approval:deny";
      }
  if (allow)
    forward (d, fd, m, (size_t) n, qend, &from, flen, name, qtype, allow);
  else if (!rule && d->appr)
    hold (d, fd, m, (size_t) n, qend, &from, flen, name, qtype); /* unlisted, approvals `ask` */
  else
    refuse (d, fd, m, qend, &from, flen, name, qtype, rule ? rule : "unlisted");
}

/* one datagram on a stub socket, never blocking: false when there was none */
static bool
on_query (struct dnsstub *d, int fd)
{
  unsigned char m[MSG_MAX];
  struct sockaddr_storage from;
  socklen_t flen = sizeof from;
  ssize_t n = recvfrom (fd, m, sizeof m, MSG_DONTWAIT, (struct sockaddr *) &from, &flen);
  if (n < 0)
    return false;
  handle_query (d, fd, m, n, from, flen);
  return true;
}

static void
on_accept (struct dnsstub *d, int lfd)
{
  struct sockaddr_storage peer;
  socklen_t plen = sizeof peer;
  int fd = accept4 (lfd, (struct sockaddr *) &peer, &plen, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return;
  for (int i = 0; i < CONNS_MAX; i++)
    if (d->conns[i].fd < 0)
      {
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
        d->conns[i].fd = fd;
        d->conns[i].gen = ++d->gen;
        d->conns[i].len = 0;
        d->conns[i].peer = peer;
        d->conns[i].peer_len = plen;
        if (epoll_ctl (d->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
          tcp_close (d, i);
        return;
      }
  close (fd); /* too many connections: the client retries */
}

/* data on a TCP connection: every complete length-prefixed query in it */
static void
on_tcp (struct dnsstub *d, int conn)
{
  typeof (d->conns[0]) *c = &d->conns[conn];
  ssize_t n = recv (c->fd, c->buf + c->len, sizeof c->buf - c->len, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
    {
      tcp_close (d, conn);
      return;
    }
  c->len += n > 0 ? (size_t) n : 0;
  while (c->fd >= 0 && c->len >= 2)
    {
      size_t qlen = dns_get16 (c->buf);
      if (qlen == 0 || qlen > HELD_MSG)
        {
          tcp_close (d, conn); /* not a query we would ever answer */
          return;
        }
      if (c->len < 2 + qlen)
        return;
      unsigned char m[MSG_MAX];
      memcpy (m, c->buf + 2, qlen);
      memmove (c->buf, c->buf + 2 + qlen, c->len - 2 - qlen);
      c->len -= 2 + qlen;
      d->cur_conn = conn, d->cur_gen = c->gen;
      handle_query (d, c->fd, m, (ssize_t) qlen, c->peer, c->peer_len);
      d->cur_conn = -1;
    }
}

void
dnsstub_finish (struct dnsstub *d)
{
  if (d && d->nflog.fd >= 0)
    nflog_watch_finish (&d->nflog, dnsstub_nft, d);
}

void
dnsstub_before_table_reload (struct dnsstub *d)
{
  if (d && d->nflog.fd >= 0)
    nflog_watch_before_reload (&d->nflog, dnsstub_nft, d);
}

bool
dnsstub_wants_network (struct dnsstub *d)
{
  /* at most two of the set are the watch's (its socket and timer): any third event is another */
  struct epoll_event ev[8];
  int n = epoll_wait (d->ep, ev, 8, 0);
  for (int i = 0; i < n; i++)
    if (!nflog_watch_owns (&d->nflog, ev[i].data.fd))
      return true;
  return false;
}

void
dnsstub_dispatch (struct dnsstub *d)
{
  struct epoll_event ev[8];
  int n = epoll_wait (d->ep, ev, 8, 0);
  for (int i = 0; i < n; i++)
    {
      if (d->appr && ev[i].data.fd == approvals_fd (d->appr))
        {
          approvals_dispatch (d->appr);
          continue;
        }
      int fd = ev[i].data.fd, conn = -1;
      if (d->icpt && fd == dns_intercept_fd (d->icpt))
        {
          dns_intercept_dispatch (d->icpt);
          continue;
        }
      if (fd == splice_fd (d->splice))
        {
          /* nested in this set, not polled by the monitor's loop directly: measured, the direct
           * poll woke the relay sooner with less queued and cost ~4 % of a bulk download's rate
           * for one epoll_wait less per wake-up (docs/performance.md, issue 20) */
          splice_dispatch (d->splice);
          continue;
        }
      if (nflog_watch_owns (&d->nflog, fd))
        {
          nflog_watch_dispatch (&d->nflog, fd, dnsstub_nft, d);
          continue;
        }
      if (fd == d->tcp4 || fd == d->tcp6)
        {
          on_accept (d, fd);
          continue;
        }
      for (int c = 0; c < CONNS_MAX && conn < 0; c++)
        if (d->conns[c].fd == fd)
          conn = c;
      if (conn >= 0)
        {
          on_tcp (d, conn);
          continue;
        }
      struct pending *p = NULL;
      for (size_t k = 0; k < PENDING_MAX && !p; k++)
        if (d->pend[k].used && d->pend[k].up_fd == fd)
          p = &d->pend[k];
      /* a bounded batch per wakeup, so one busy socket cannot starve the monitor's loop; each
       * read until the socket has none (answered: its socket is closed, p unused) */
      for (int k = 0; k < 32; k++)
        if (p ? !p->used || !dnsstub_on_answer (d, p) : !on_query (d, fd))
          break;
    }
}
