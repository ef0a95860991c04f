/* dnsstub.h - the DNS stub of network.mode `filtered` (POLICY.md §2 `network`, §3), run by the
 * monitor. Every DNS query of the container (UDP and TCP port 53 to any address: the nftables
 * table redirects it) reaches a socket the monitor holds on the container's loopback (TCP: RFC
 * 7766 framing, queries answered on their connection; forwarded upstream over UDP). Names matching
 * `allowedDomains` (exact or `*.suffix`) and no `deniedDomains` entry are forwarded to the
 * upstream resolver, and the answer's addresses go into the table's @allow4/@allow6 sets (with
 * `ports`, for the answer's TTL, floor and ceiling in policy/nft_ruleset.h) BEFORE the answer is
 * passed on; every other name is answered REFUSED without being forwarded anywhere (no DNS
 * exfiltration). Each decision is one `dns` audit record.
 * What is forwarded is never the container's message but the stub's own query for the parsed
 * name and type (monitor/dns_build.h: class IN; A, AAAA, CNAME, SVCB, HTTPS; anything else
 * REFUSED), and what the container gets back is an answer rebuilt from the checked records; an
 * address of the host's neighbours or the host itself is never let in (monitor/dns_rebind.h).
 * With network.credentials/http hosts (intercepted, monitor/tls_relay.h), the monitor resolves
 * them itself too (monitor/dns_intercept.h), and an answer for any other name never carries an
 * intercepted address: those of an intercepted host, and every address of an answer whose CNAME
 * chain passes through one (both left out and audited, docs/policy.md §2.2a).
 *
 * Upstream: $AGENTSBX_UPSTREAM_DNS ("ADDR[:PORT]", "[V6]:PORT") when set in the runtime's
 * environment (tests, and hosts whose resolver is not in /etc/resolv.conf), else the first
 * `nameserver` of the host's /etc/resolv.conf. The upstream socket lives in the host's network
 * namespace: the container's table never sees that traffic. */
#ifndef ASBX_MONITOR_DNSSTUB_H
#define ASBX_MONITOR_DNSSTUB_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/plan.h"
#include "monitor/querier.h"

struct dnsstub;

struct tls_relay_keys;

/* Set up the stub for the container whose init is init_pid: open its network namespace, bring
 * its loopback up if it is down, bind UDP 127.0.0.1:53 (and [::1]:53 when IPv6 is there) inside
 * it, open the upstream socket here, and a libnftables context for the sets. Called in the
 * monitor (root, initial namespaces, single-threaded). audit_fd: where `dns` records go (kept
 * open by the caller). approvals.network `ask`: an unlisted name (not a deniedDomains one) is
 * held and put to the approval broker (monitor/approvals.h) bound in state_dirfd; allow-once
 * forwards the held queries, allow-always also adds the name to the stub's allowlist, deny and
 * the timeout's deny answer REFUSED. keys: the container's egress CA and environment secrets for
 * the splice's TLS interception (monitor/tls_relay.h; unused when nothing is intercepted). Returns NULL with *err
 * ("network: DNS stub: bind 127.0.0.1:53 in the container's network namespace: Address in use"). */
struct dnsstub *dnsstub_new (const char *id, pid_t init_pid, const struct policy_plan *plan, int audit_fd,
                             int state_dirfd, const struct tls_relay_keys *keys, asbx_err_t *err);

/* The container's processes, searched for the sender of a held query (approvals `ask`,
 * monitor/querier.h). Until set, a question's pid and exe are null. */
void dnsstub_set_members (struct dnsstub *d, querier_members_fn fn, void *data);

/* One fd to poll for POLLIN (an epoll set over the stub's sockets). */
int dnsstub_fd (const struct dnsstub *d);

/* Whether anything ready on dnsstub_fd may need the way out (pasta): a query, an approver, a TCP
 * connection, an upstream answer - anything but the NFLOG watch (refused packets and their
 * counter). The kernel's own MLD/IGMP reports when the route of last resort's veth comes up are
 * refused by the table and reach the watch with no container activity at all; starting pasta
 * for them cost ~20-70 ms at the end of most short sandboxes. Never blocks, consumes nothing
 * (the set is level-triggered: dnsstub_dispatch sees the same events). */
bool dnsstub_wants_network (struct dnsstub *d);

/* Handle whatever is ready: queries, upstream answers. Never blocks; failures are audited or
 * dropped (a client retries), never fatal. */
void dnsstub_dispatch (struct dnsstub *d);

/* At the end of the container, before its last `lifecycle` record: the refused packets still
 * queued on NFLOG into records, and the ones the log limit kept from NFLOG counted into
 * `suppressed.network` (monitor/nflog.h). NULL is a no-op. */
void dnsstub_finish (struct dnsstub *d);

/* The monitor is about to replace the container's nftables table: count what the old table's
 * log limit kept from NFLOG first (nflog_watch_before_reload). NULL is a no-op. */
void dnsstub_before_table_reload (struct dnsstub *d);

void dnsstub_free (struct dnsstub *d);

#endif
