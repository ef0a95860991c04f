/* dns_setlife.h - the DNS stub's record of how long each address it put into the @allow4/@allow6
 * sets (policy/nft_ruleset.h) still lives there, so that an answer naming an address whose
 * elements outlive the answer's TTL costs no nftables transaction (issue 20: the add/delete/add
 * through libnftables was 2 setns and 7 netlink round trips per address per answer).
 *
 * Timing semantics (docs/performance.md "DNS: the set update skipped"): an element's timeout is
 * only ever set by a transaction to clamp(TTL) (POLICY_NFT_TTL_FLOOR..CEIL) from that transaction;
 * an answer whose address already lives at least half of clamp(its TTL) - and so no shorter than
 * the TTL the stub hands out for it, which dns_setlife_decide lowers to that remaining life - is
 * not written: the element keeps its end, the later one of the two answers' when the earlier
 * answer's TTL was the longer. Otherwise the transaction sets the new timeout as before. An
 * address is never let in here: only the sets' own timeouts decide what is reachable; this is the
 * stub's lower bound of them (taken before the transaction, less DNS_SETLIFE_MARGIN_NS), so a
 * wrong record can only make the stub write again (it is forgotten) or hand out a shorter TTL. */
#ifndef ASBX_MONITOR_DNS_SETLIFE_H
#define ASBX_MONITOR_DNS_SETLIFE_H

#include <stdbool.h>
#include <stdint.h>

#define DNS_SETLIFE_MAX 512
/* the kernel's timer starts at the commit (after the clock read) in jiffies: a second of slack */
#define DNS_SETLIFE_MARGIN_NS 1000000000ull

struct dns_setlife
{
  struct
  {
    uint64_t until_ns; /* CLOCK_MONOTONIC (now_ns); 0: free */
    int family;
    unsigned char a[16];
  } e[DNS_SETLIFE_MAX];
};

/* What one admitted address of an answer needs: `write` - run the set transaction (then
 * dns_setlife_note its end once it succeeded) - or not; *ttl (in: the record's TTL) the TTL the
 * rebuilt record carries: no longer than the element lives (the remaining life when not written,
 * else at most POLICY_NFT_TTL_CEIL, the longest timeout a transaction sets). now: now_ns(). */
bool dns_setlife_decide (const struct dns_setlife *s, int family, const unsigned char *a, uint64_t now, uint32_t *ttl);

/* The transaction that set a's elements to clamp(ttl) seconds succeeded; `started`: now_ns() read
 * before it ran. A full table forgets the entry that ends first (its next answer writes again). */
void dns_setlife_note (struct dns_setlife *s, int family, const unsigned char *a, uint64_t started, uint32_t ttl);

#endif
