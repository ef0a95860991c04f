/* dns_intercept.h - the monitor's own resolution of the intercepted names (issue 19): every host
 * of network.credentials and network.http is resolved (A and AAAA) by the monitor itself, through
 * the upstream resolver the DNS stub uses (monitor/dns_upstream.h), when the container's egress
 * is set up and again each time its answer's TTL ends (clamped to DNS_INTERCEPT_REFRESH_MIN..
 * DNS_INTERCEPT_REFRESH_MAX seconds). Every address of those answers becomes an intercepted
 * address (monitor/splice.h splice_addr_resolved): another name's TLS or HTTP to it is refused,
 * and the stub leaves it out of any other name's answer. So an address of an intercepted host is
 * known as such even when the container never asked for that host, or when the host's answer
 * rotates to addresses the container never saw (domain fronting on a shared CDN address).
 * What the monitor cannot know: addresses the resolver never answers it (a CDN's other edges,
 * a geo-split answer), see docs/security.md. */
#ifndef ASBX_MONITOR_DNS_INTERCEPT_H
#define ASBX_MONITOR_DNS_INTERCEPT_H

#include "core/error.h"
#include "policy/plan.h"
#include "monitor/dns_upstream.h"
#include "monitor/splice.h"

/* seconds: an intercepted name is resolved again at its answer's TTL, at least this long after
 * (a 0 TTL does not make a query loop) and at most this long after (a long TTL does not hide a
 * rotation for a day); an unanswered or failed query is retried after the minimum */
#define DNS_INTERCEPT_REFRESH_MIN 5
#define DNS_INTERCEPT_REFRESH_MAX 300
/* milliseconds: an upstream query without an answer is given up after this (and sent again
 * DNS_INTERCEPT_REFRESH_MIN later); setup waits at most this long for the first answers */
#define DNS_INTERCEPT_QUERY_MS 2000

struct dns_intercept;

/* Resolve every intercepted name of plan (none: NULL is returned with no error, and the
 * functions below accept NULL) through upstream `up` (copied), feeding the addresses to splice
 * (kept by the caller for the lifetime of the result). Waits up to DNS_INTERCEPT_QUERY_MS for
 * the first answers so that the container's first connection already meets the known addresses;
 * a name not answered by then is retried in the background (its addresses are intercepted from
 * the answer on; until then only those the container's own answers for it gave). The first of a
 * run of failed resolutions of a name and type is one `dns` audit record {host, qtype, decision "failed", rule
 * "intercept: resolve", reason} written to audit_fd when the policy audits DNS. NULL with *err only on a resource
 * failure (epoll, timerfd: errno). */
struct dns_intercept *dns_intercept_new (const char *id, const struct policy_plan *plan, const struct dns_upstream *up,
                                         struct splice *splice, int audit_fd, asbx_err_t *err);

/* One fd to poll for POLLIN (an epoll set over the query sockets and the refresh timer); -1 for
 * NULL. */
int dns_intercept_fd (const struct dns_intercept *di);

/* Answers, timeouts, refreshes - never blocks. */
void dns_intercept_dispatch (struct dns_intercept *di);

void dns_intercept_free (struct dns_intercept *di);

#endif
