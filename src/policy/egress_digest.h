/* egress_digest.h - the part of a compiled plan that one network namespace's egress enforces
 * (the nftables table, the DNS stub, the SNI check and the TLS relay: monitor/dnsstub.c,
 * monitor/egress_table.c, monitor/splice.c), as one digest per field. Two containers in the same
 * network namespace can share one egress (runtime/egress_share.h) only when every field digest
 * is the same; the first one that is not is named in the refusal.
 *
 * Fields (in this order): network.mode, network.allowLocalBinding, network.allowedDomains,
 * network.deniedDomains, network.allowedCIDRs, network.ports, network.credentials (host, header
 * and value template: the secrets' names, never their values), network.http, secretsDir,
 * upstreamCaFile, approvals.network (with timeoutSeconds and onTimeout), audit.events (network
 * and dns only: the NFLOG rule of the table). Per-container parts are not in it:
 * network.allowUnixSockets (the seccomp connect supervisor of each container), limits, audit
 * directory. */
#ifndef ASBX_POLICY_EGRESS_DIGEST_H
#define ASBX_POLICY_EGRESS_DIGEST_H

#include "policy/plan.h"

/* "FIELD SHA256HEX\n" lines, one per field above, heap (the caller frees). The digest of a field
 * is over a canonical text of its compiled value, lists in plan order (the same policy gives the
 * same order; the same entries in another order count as a difference: refused, never merged).
 * Never NULL. */
char *policy_egress_fields (const struct policy_plan *p);

#endif
