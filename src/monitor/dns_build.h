/* dns_build.h - what the DNS stub sends: the query it makes itself from a parsed question, and
 * the answer it rebuilds for the container from the upstream's (issue 14: no byte of the
 * container's message reaches the upstream, and only checked records reach the container).
 * Pure like monitor/dns_parse.h: every function reads only its inputs, writes only what its
 * arguments name; no allocation, no syscalls, no errno. Fuzzed by tests/fuzz/fuzz_dns.c. */
#ifndef ASBX_MONITOR_DNS_BUILD_H
#define ASBX_MONITOR_DNS_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* DNS types the stub forwards (docs/policy.md "DNS stub"): A, AAAA, CNAME, SVCB, HTTPS. */
#define DNS_T_A 1
#define DNS_T_CNAME 5
#define DNS_T_AAAA 28
#define DNS_T_OPT 41
#define DNS_T_SVCB 64
#define DNS_T_HTTPS 65
#define DNS_C_IN 1
/* the UDP payload size the stub announces upstream and to EDNS clients (RFC 9715's 1232) */
#define DNS_EDNS_SIZE 1232

/* true for the query types the stub forwards */
bool dns_qtype_allowed (unsigned qtype);

/* What else a query m[0..len) (already accepted by dns_parse_question, question ending at qend)
 * carries: NULL when the stub may answer it (no answer or authority records; at most one OPT
 * record, root-owned, in the additional section), else the audit rule of its refusal. The OPT's
 * UDP payload size into *edns_size (0: the client sent none). */
const char *dns_query_check (const unsigned char *m, size_t len, size_t qend, unsigned *edns_size);

/* The stub's own query into out[0..outlen): id, RD, one question (name: the lowercase dotted
 * name dns_parse_question produced; qtype; class IN) and an OPT record (DNS_EDNS_SIZE, no
 * options, DO clear). Returns its length, its question ending at *qend; 0 if it does not fit. */
size_t dns_build_query (unsigned char *out, size_t outlen, uint16_t id, const char *name, unsigned qtype, size_t *qend);

/* The admission decision for one address record of the answer (the stub's policy: rebinding
 * and SSRF checks, the nft sets). in_chain: its owner name is the question's name or a CNAME
 * target reached from it. *ttl: the record's TTL, which admit may lower for the rebuilt record
 * (never read after a refusal). Returns NULL to admit it (it is copied into the rebuilt answer,
 * with *ttl), or the reason it is refused (it is left out). */
typedef const char *(*dns_admit_fn) (void *data, int family, const unsigned char *addr, uint32_t *ttl, bool in_chain);

/* Rebuild the upstream's answer up[0..uplen) to our query q[0..qend) (from dns_build_query) as
 * the answer to the client: header (id 0: the caller sets it; QR, RA, the client's RD `rd`, the
 * upstream's rcode), the client's own question cq[0..cqlen) (same name, letter case kept), then
 * only the answer-section records of class IN whose owner is in the CNAME chain: CNAMEs (names
 * written out uncompressed), the question type's records (SVCB/HTTPS with an uncompressed target)
 * and A/AAAA records that admit() admits; A/AAAA records out of the chain also go to admit()
 * (in_chain false, to be refused and audited). No authority or additional records; an OPT (size
 * DNS_EDNS_SIZE) when edns. At most outlen bytes: records that do not fit are left out and TC is
 * set. Returns the length, or 0 when up is not an answer to q (QR, opcode, one question equal
 * byte for byte to ours) or malformed before its records (then nothing is admitted). */
size_t dns_rebuild_answer (const unsigned char *up, size_t uplen, const unsigned char *q, size_t qend,
                           const unsigned char *cq, size_t cqlen, bool rd, bool edns, unsigned char *out, size_t outlen,
                           dns_admit_fn admit, void *data);

/* The CNAME chain of the upstream's answer up[0..uplen) to a question ending at qend (the
 * question already matched by dns_rebuild_answer): names[0] is the question's name (lower case,
 * read from up), then every CNAME target reached from it through the answer section, in any
 * record order (an over-approximation of what dns_rebuild_answer keeps: a chain name is never
 * missed). At most max names (max >= 1). Returns how many were written, 0 when up is malformed
 * before its records. */
size_t dns_answer_chain (const unsigned char *up, size_t uplen, size_t qend, char (*names)[256], size_t max);

/* Why an address may not be let in whatever the name (RFC 6890 special-purpose ranges that
 * reach the host, its neighbours or nowhere): "unspecified", "loopback", "link-local" (incl. the
 * cloud metadata 169.254.169.254 and fe80::/10), "private" (RFC 1918), "cgnat" (100.64/10),
 * "ula" (fc00::/7), "site-local" (fec0::/10), "multicast", "reserved" (240/4, incl. the
 * broadcast address), or "ipv4-mapped <reason>" / "nat64 <reason>" / "ipv4-compatible <reason>"
 * for an IPv6 form of such an IPv4 address. NULL: a global address (the documentation ranges
 * 192.0.2/24, 198.51.100/24, 203.0.113/24 and 2001:db8::/32 included: they route nowhere
 * publicly, and test networks use them). family AF_INET (4 bytes) or AF_INET6 (16). */
const char *dns_addr_special (int family, const unsigned char *addr);

#endif
