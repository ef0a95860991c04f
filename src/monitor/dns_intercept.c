/* dns_intercept.c - the monitor's own resolution of the intercepted names (see dns_intercept.h).
 *
 * One A and one AAAA query per intercepted name, each on a fresh upstream socket of its own
 * (monitor/dns_upstream.h: connected, a random port and id, as the stub's), in an epoll set with
 * one timerfd armed at the earliest thing to do: a refresh that is due, or a query that waited
 * DNS_INTERCEPT_QUERY_MS. The answer is read with the stub's own parser (dns_rebuild_answer:
 * the question must be ours byte for byte, the addresses must sit in its CNAME chain), whose
 * admit callback here only collects the addresses; nothing of it reaches the container.
 * Threat model: the container has no say here (the names come from the policy, the sockets live
 * in the monitor's namespace); the upstream is trusted to answer, as for the stub. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/util.h"
#include "monitor/audit.h"
#include "monitor/dns_build.h"
#include "monitor/dns_intercept.h"
#include "monitor/dns_parse.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

struct iquery
{
  char name[256];
  unsigned qtype;
  int fd; /* -1: none in flight */
  uint16_t id;
  unsigned char q[300];
  size_t qlen, qend;
  uint64_t sent_ns, next_ns; /* in flight since; the next refresh is due at */
  bool failing;              /* the last attempt failed: audited once until an answer comes */
};

struct dns_intercept
{
  const char *id;
  const struct policy_plan *plan;
  struct dns_upstream up;
  struct splice *splice;
  int audit_fd, ep, tfd;
  struct iquery *q;
  size_t n;
};

/* the admit callback's state: which query, the shortest TTL of its addresses */
struct collect
{
  struct dns_intercept *di;
  const struct iquery *q;
  size_t addrs;
  uint32_t min_ttl;
};

static const char *
collect_addr (void *data, int family, const unsigned char *a, uint32_t *ttlp, bool in_chain)
{
  uint32_t ttl = *ttlp;
  struct collect *x = data;
  char text[INET6_ADDRSTRLEN];
  if (!in_chain || !inet_ntop (family, a, text, sizeof text))
    return "not in the question's CNAME chain";
  splice_addr_resolved (x->di->splice, x->q->name, text, ttl);
  x->min_ttl = x->addrs++ == 0 || ttl < x->min_ttl ? ttl : x->min_ttl;
  return NULL;
}

/* the first failure in a row of q: one `dns` record (an upstream that stays down is not a
 * record every few seconds) */
static void
audit_failed (struct dns_intercept *di, struct iquery *q, const char *why)
{
  bool again = q->failing;
  q->failing = true;
  if (again || !(di->plan->audit_events & POLICY_AUDIT_DNS))
    return;
  asbx_err_t e = NULL;
  struct audit_rec *r = audit_rec_new (di->id, "dns");
  audit_rec_str (r, "host", q->name);
  audit_rec_int (r, "qtype", q->qtype);
  audit_rec_str (r, "decision", "failed");
  audit_rec_str (r, "rule", "intercept: resolve");
  audit_rec_str (r, "reason", why);
  if (audit_rec_write (r, di->audit_fd, &e) < 0)
    asbx_error_free (&e);
}

static void
query_end (struct iquery *q)
{
  if (q->fd >= 0)
    close (q->fd); /* also ends its epoll registration */
  q->fd = -1;
}

static void
query_send (struct dns_intercept *di, struct iquery *q, uint64_t now)
{
  query_end (q);
  q->id = dns_upstream_id (q->id);
  q->qlen = dns_build_query (q->q, sizeof q->q, q->id, q->name, q->qtype, &q->qend);
  q->sent_ns = now;
  if (!q->qlen || (q->fd = dns_upstream_send (&di->up, di->ep, q->q, q->qlen)) < 0)
    {
      q->fd = -1;
      q->next_ns = now + DNS_INTERCEPT_REFRESH_MIN * NS_PER_S; /* tried again then */
    }
}

/* a datagram on q's socket: its answer, or something to drop while q waits on */
static void
on_answer (struct dns_intercept *di, struct iquery *q, uint64_t now)
{
  unsigned char m[4096], out[4096];
  ssize_t n = dns_upstream_recv (&di->up, q->fd, m, sizeof m);
  if (n < 12 || dns_get16 (m) != q->id)
    return;
  struct collect x = { .di = di, .q = q };
  if (!dns_rebuild_answer (m, (size_t) n, q->q, q->qend, q->q + 12, q->qend - 12, true, false, out, sizeof out,
                           collect_addr, &x))
    return; /* not an answer to our question */
  query_end (q);
  unsigned rcode = m[3] & 0xf;
  if (rcode != 0)
    audit_failed (di, q, rcode == 3 ? "NXDOMAIN" : rcode == 2 ? "SERVFAIL" : "error rcode");
  else
    q->failing = false;
  uint32_t ttl = x.addrs ? x.min_ttl : 0;
  ttl = ttl < DNS_INTERCEPT_REFRESH_MIN   ? DNS_INTERCEPT_REFRESH_MIN
        : ttl > DNS_INTERCEPT_REFRESH_MAX ? DNS_INTERCEPT_REFRESH_MAX
                                          : ttl;
  q->next_ns = now + ttl * NS_PER_S;
}

/* send what is due, resend what timed out, and arm the timer at the earliest of what is next */
static void
tick (struct dns_intercept *di)
{
  uint64_t now = now_ns (), next = UINT64_MAX;
  for (size_t i = 0; i < di->n; i++)
    {
      struct iquery *q = &di->q[i];
      if (q->fd >= 0 && now - q->sent_ns >= DNS_INTERCEPT_QUERY_MS * NS_PER_MS)
        {
          audit_failed (di, q, "no answer");
          query_end (q);
          q->next_ns = now + DNS_INTERCEPT_REFRESH_MIN * NS_PER_S; /* tried again then */
        }
      else if (q->fd < 0 && now >= q->next_ns)
        query_send (di, q, now);
      uint64_t at = q->fd >= 0 ? q->sent_ns + DNS_INTERCEPT_QUERY_MS * NS_PER_MS : q->next_ns;
      next = at < next ? at : next;
    }
  if (next == UINT64_MAX)
    return;
  uint64_t wait = next > now ? next - now : 1;
  struct itimerspec its = { .it_value = { .tv_sec = (time_t) (wait / NS_PER_S), .tv_nsec = (long) (wait % NS_PER_S) } };
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
    its.it_value.tv_nsec = 1;
  timerfd_settime (di->tfd, 0, &its, NULL);
}

static void
handle (struct dns_intercept *di, int fd)
{
  uint64_t expirations;
  if (fd == di->tfd)
    {
      if (read (di->tfd, &expirations, sizeof expirations) < 0)
        {
          /* EAGAIN: nothing expired after all; tick re-arms either way */
        }
      return;
    }
  for (size_t i = 0; i < di->n; i++)
    if (di->q[i].fd == fd)
      {
        on_answer (di, &di->q[i], now_ns ());
        return;
      }
}

/* add `name` (two queries) unless it is there already */
static void
add_name (struct dns_intercept *di, const char *name)
{
  for (size_t i = 0; i < di->n; i++)
    if (strcmp (di->q[i].name, name) == 0)
      return;
  di->q = xrealloc (di->q, (di->n + 2) * sizeof *di->q);
  for (int k = 0; k < 2; k++)
    {
      struct iquery *q = &di->q[di->n++];
      *q = (struct iquery){ .qtype = k ? DNS_T_AAAA : DNS_T_A, .fd = -1 };
      snprintf (q->name, sizeof q->name, "%s", name);
    }
}

struct dns_intercept *
dns_intercept_new (const char *id, const struct policy_plan *plan, const struct dns_upstream *up, struct splice *splice,
                   int audit_fd, asbx_err_t *err)
{
  if (!plan->credentials_len && !plan->http_hosts_len)
    return NULL;
  struct dns_intercept *di = xmalloc0 (sizeof *di);
  di->id = id;
  di->plan = plan;
  di->up = *up;
  di->splice = splice;
  di->audit_fd = audit_fd;
  di->ep = epoll_create1 (EPOLL_CLOEXEC);
  di->tfd = timerfd_create (CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  struct epoll_event ev = { .events = EPOLLIN, .data.fd = di->tfd };
  if (di->ep < 0 || di->tfd < 0 || epoll_ctl (di->ep, EPOLL_CTL_ADD, di->tfd, &ev) < 0)
    {
      asbx_error (err, errno, "network: the intercepted names' resolution: %s",
                  di->ep < 0    ? "epoll_create1"
                  : di->tfd < 0 ? "timerfd_create"
                                : "epoll_ctl");
      dns_intercept_free (di);
      return NULL;
    }
  for (size_t i = 0; i < plan->credentials_len; i++)
    add_name (di, plan->credentials[i].host);
  for (size_t i = 0; i < plan->http_hosts_len; i++)
    add_name (di, plan->http_hosts[i].host);
  tick (di); /* every query sent now */
  /* wait for the first answers (bounded): the container's first connect should meet them */
  uint64_t end = now_ns () + DNS_INTERCEPT_QUERY_MS * NS_PER_MS;
  for (;;)
    {
      bool pending = false;
      for (size_t i = 0; i < di->n; i++)
        pending = pending || di->q[i].fd >= 0;
      uint64_t now = now_ns ();
      if (!pending || now >= end)
        break;
      struct pollfd p = { .fd = di->ep, .events = POLLIN };
      if (poll (&p, 1, (int) ((end - now) / NS_PER_MS) + 1) < 0 && errno != EINTR)
        break;
      struct epoll_event evs[16];
      int k = epoll_wait (di->ep, evs, 16, 0);
      for (int j = 0; j < k; j++)
        if (evs[j].data.fd != di->tfd)
          handle (di, evs[j].data.fd);
    }
  tick (di);
  return di;
}

int
dns_intercept_fd (const struct dns_intercept *di)
{
  return di ? di->ep : -1;
}

void
dns_intercept_dispatch (struct dns_intercept *di)
{
  if (!di)
    return;
  struct epoll_event ev[16];
  int n = epoll_wait (di->ep, ev, 16, 0);
  for (int i = 0; i < n; i++)
    handle (di, ev[i].data.fd);
  tick (di);
}

void
dns_intercept_free (struct dns_intercept *di)
{
  if (!di)
    return;
  for (size_t i = 0; i < di->n; i++)
    query_end (&di->q[i]);
  free (di->q);
  dns_upstream_close (&di->up);
  if (di->tfd >= 0)
    close (di->tfd);
  if (di->ep >= 0)
    close (di->ep);
  free (di);
}
