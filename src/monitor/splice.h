/* splice.h - the SNI/Host check of network.mode `filtered` (issue 7): TCP connections of the
 * container to an address+port the DNS stub opened (the @allow4/@allow6 sets: addresses of
 * allowed names, on `ports`) are redirected by the table to a socket the monitor holds in the
 * container's namespace. The monitor reads the first bytes - a TLS ClientHello's server_name or
 * an HTTP request's Host header - and only when that name is one the stub resolved and allowed
 * (splice_name_resolved) connects to the original destination and splices both ways; otherwise HTTP gets
 * `403` with `X-Agentsbx-Blocked: <reason>`, anything else a reset. Two sites sharing one CDN
 * address are told apart this way. No TLS interception (the bytes pass unchanged), except for
 * the hosts of network.credentials and network.http (monitor/tls_relay.h).
 * The monitor's own upstream sockets carry POLICY_NFT_SPLICE_MARK, which the redirect skips.
 * Every decision is one `network` audit record {addr, port, proto, host, decision, rule}. */
#ifndef ASBX_MONITOR_SPLICE_H
#define ASBX_MONITOR_SPLICE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "policy/plan.h"

struct splice;

struct tls_relay_keys;

/* Listen on 127.0.0.1 and [::1] port POLICY_NFT_SPLICE_PORT inside the network namespace
 * netns_fd (kept by the caller for the splice's lifetime: upstream sockets are made there).
 * When the plan has network.credentials or network.http hosts, TLS connections to those hosts
 * are intercepted (monitor/tls_relay.h) with leaves of the container's CA and the secrets of
 * `keys` (required then, else ignored).
 * NULL with *err. */
struct splice *splice_new (const char *id, int netns_fd, const struct policy_plan *plan, int audit_fd,
                           const struct tls_relay_keys *keys, asbx_err_t *err);

/* The DNS stub let an answer for `name` (lowercase, no trailing dot) through with TTL ttl
 * seconds: a TLS SNI / HTTP Host of that name is allowed as long as the answer's set elements
 * live (the same floor and ceiling). Names never resolved through the stub - deniedDomains,
 * unlisted, refused by the approver - are never allowed. */
void splice_name_resolved (struct splice *s, const char *name, uint32_t ttl);

/* The answer for `name` let address `addr` (text, IPv4 or IPv6) through with TTL ttl seconds:
 * when the TLS relay intercepts `name`, the address is an intercepted address for the rest of
 * the container's life (the TTL is not used: an address may still serve the host after it), and
 * a connection to it that names another host (SNI or Host) is refused. Called for the
 * container's answers (monitor/dnsstub.h), the monitor's own resolution of the intercepted
 * names (monitor/dns_intercept.h), and with the intercepted name of a CNAME chain. */
void splice_addr_resolved (struct splice *s, const char *name, const char *addr, uint32_t ttl);

/* Called once for each address that becomes intercepted (a new entry of splice_addr_resolved),
 * family AF_INET (4 bytes) or AF_INET6 (16, IPv4 never v4-mapped here): the DNS stub puts it
 * into the nftables sets of policy_nft_has_intercept_sets, before the answer that carried it is
 * sent. One callback per splice; NULL removes it. */
typedef void (*splice_intercepted_fn) (void *data, int family, const unsigned char *addr);
void splice_on_intercepted (struct splice *s, splice_intercepted_fn fn, void *data);

/* Whether `name` (lower case) is intercepted: TLS to it goes through the TLS relay
 * (monitor/tls_relay.h). False when the plan intercepts nothing. */
bool splice_intercepts (const struct splice *s, const char *name);

/* The intercepted host whose address addr (family AF_INET: 4 bytes, AF_INET6: 16) is (see
 * splice_addr_resolved), or NULL. The string lives as long as s; the next call may change it. */
const char *splice_addr_intercepted (const struct splice *s, int family, const unsigned char *addr);

/* One fd to poll for POLLIN (an epoll set over the listeners and connections). */
int splice_fd (const struct splice *s);

/* Accept, read, decide, relay - never blocks. */
void splice_dispatch (struct splice *s);

void splice_free (struct splice *s);

/* The pure parsers splice_tls_sni and splice_http_host (unit-testable, fuzzed). */
#include "monitor/sni_parse.h"

#endif
