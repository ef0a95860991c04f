/* nft_ruleset.h - the network policy as nftables ruleset text (POLICY.md §2 `network`, §3).
 *
 * Pure: builds text from a compiled plan; src/linux/nft.c loads it with libnftables inside the
 * container's network namespace, and the monitor's DNS stub adds resolved addresses to the sets
 * with the commands built here. Keeping both the table and the element commands in one file
 * means the set names, types and table name cannot drift apart. */
#ifndef ASBX_POLICY_NFT_RULESET_H
#define ASBX_POLICY_NFT_RULESET_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "policy/plan.h"

#define POLICY_NFT_TABLE "agentsbx"          /* one `inet` table: IPv4 and IPv6 by the same rules */
#define POLICY_NFT_SET4 "allow4"             /* ipv4_addr . inet_service, flags timeout */
#define POLICY_NFT_SET6 "allow6"             /* ipv6_addr . inet_service, flags timeout */
#define POLICY_NFT_ICPT4 "icpt4"             /* ipv4_addr: intercepted hosts' addresses (with allowedCidrs) */
#define POLICY_NFT_ICPT6 "icpt6"             /* ipv6_addr: the same for IPv6 */
#define POLICY_NFT_DNS_PORT 53               /* the stub listens on 127.0.0.1:53 and [::1]:53 in the netns */
#define POLICY_NFT_SPLICE_PORT 10053         /* the monitor's SNI/Host check listens here (monitor/splice.h) */
#define POLICY_NFT_SPLICE_MARK 0x41534258u   /* SO_MARK of the monitor's own upstream sockets: not redirected */
#define POLICY_NFT_LOG_GROUP 7               /* NFLOG group of refused packets (per network namespace) */
#define POLICY_NFT_LOG_PREFIX "default-deny" /* the `rule` of their `network` audit records */
/* the log limit: beyond it refused packets are not logged but counted; its bucket is full with
 * POLICY_NFT_LOG_BURST packets at the table's load (monitor/nflog.c relies on that) */
#define POLICY_NFT_LOG_BURST 100
#define POLICY_NFT_LOG_RATE_S_(b) "50/second burst " #b " packets"
#define POLICY_NFT_LOG_RATE_S(b) POLICY_NFT_LOG_RATE_S_ (b)
#define POLICY_NFT_LOG_RATE POLICY_NFT_LOG_RATE_S (POLICY_NFT_LOG_BURST)
#define POLICY_NFT_LOG_CHAIN "refused_log" /* the limited log rule, then the counter */
#define POLICY_NFT_UNLOGGED "unlogged"     /* named counter: refused packets the limit kept from NFLOG */
#define POLICY_NFT_TTL_FLOOR 60            /* seconds: shorter DNS TTLs are raised to this */
#define POLICY_NFT_TTL_CEIL 86400          /* seconds: longer DNS TTLs are lowered to this */

/* Does the ruleset carry the intercepted-address sets (POLICY_NFT_ICPT4/6)? Only a plan with
 * intercepted hosts (network.credentials/http) and allowedCidrs needs them: an allowedCidrs range
 * is accepted without the SNI/Host check, so an intercepted host's address inside one would be
 * reached around the TLS relay's rules; the monitor adds each intercepted address it learns
 * (monitor/splice.h) and the output chain refuses direct connections to them before the
 * ranges. */
bool policy_nft_has_intercept_sets (const struct policy_plan *plan);

/* The ruleset that replaces `table inet agentsbx` atomically (a leading add + delete, so loading
 * twice into one namespace - two containers of a pod - neither fails nor duplicates rules).
 *   none:     output and input policy drop; loopback accepted when allowLocalBinding;
 *             everything else rejected (TCP reset, ICMP admin-prohibited) so tools fail fast.
 *   filtered: as none, plus established/related, IPv6 neighbour discovery, DNS (UDP and TCP
 *             port 53 to any address) redirected to the stub on loopback, the @allow4/@allow6
 *             sets (filled by the stub) and one rule per allowedCidrs entry (port optional).
 *   open / inactive plan: *out = NULL (nothing to load).
 * Returns 0 with *out a heap string (caller frees), or -1 with *err (EINVAL) for an allowedCidrs
 * entry not in the compiler's canonical form. */
int policy_nft_ruleset (const struct policy_plan *plan, char **out, asbx_err_t *err);

/* The timeout in seconds of a set element for a DNS TTL of ttl seconds: ttl clamped to
 * [POLICY_NFT_TTL_FLOOR, POLICY_NFT_TTL_CEIL]. */
uint32_t policy_nft_ttl (uint32_t ttl);

/* The command that puts `addr` (numeric IPv4 or IPv6 text) with each of ports[0..n) into the
 * matching set for `timeout_s` seconds (clamped to [POLICY_NFT_TTL_FLOOR, POLICY_NFT_TTL_CEIL]);
 * an element already present gets the new timeout (add, delete, add in one transaction).
 * Returns a heap string, or NULL when addr is not a numeric address or n is 0. */
char *policy_nft_allow_cmd (const char *addr, const uint16_t *ports, size_t n, uint32_t timeout_s);

#endif
