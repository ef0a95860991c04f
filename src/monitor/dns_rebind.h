/* dns_rebind.h - which addresses an answer for an allowed name may not open (issue 14: DNS
 * rebinding and SSRF through the filtered egress). An allowed name is a promise about a name,
 * not about where it points: an answer naming the host itself, its loopback, its neighbours
 * (RFC 1918, CGNAT, ULA, link-local incl. the cloud metadata address) or nowhere (multicast,
 * unspecified, reserved) would turn the allowlist into a way to them. Such addresses are let in
 * only when `allowedCidrs` lists them (POLICY.md §2 `network`; docs/policy.md). */
#ifndef ASBX_MONITOR_DNS_REBIND_H
#define ASBX_MONITOR_DNS_REBIND_H

#include <stddef.h>

#include "policy/plan.h"

struct dns_rebind
{
  const struct policy_plan *plan; /* its allowedCidrs lift a refusal; borrowed */
  struct
  {
    int family;
    unsigned char a[16];
  } host[64]; /* the host's interface addresses, read by dns_rebind_init */
  size_t host_len;
};

/* Read the host's interface addresses (getifaddrs(3) in the caller's network namespace: the
 * monitor's, i.e. the host's) into r; plan is borrowed for r's lifetime. A host with more than
 * 64 addresses: the first 64 (the special ranges above are refused whatever the host has). */
void dns_rebind_init (struct dns_rebind *r, const struct policy_plan *plan);

/* Why the address a (family AF_INET: 4 bytes, AF_INET6: 16; text: its inet_ntop form) may not
 * be let in: dns_addr_special()'s reason (monitor/dns_build.h) or "host address" - or NULL when
 * it may, also when an allowedCidrs entry (with or without a port) covers it. */
const char *dns_rebind_refused (const struct dns_rebind *r, int family, const unsigned char *a, const char *text);

#endif
