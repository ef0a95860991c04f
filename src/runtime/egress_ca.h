/* egress_ca.h - the per-container CA of the egress's TLS interception and the create-time checks
 * of the secrets directory (issue 19; docs/policy.md "Credentials and HTTP rules", docs/security.md
 * "Secrets at the egress").
 *
 * A plan intercepts when it has network.credentials or network.http entries. Then create makes
 * a CA that exists only for this container: an EC P-256 key and a self-signed certificate with
 * basicConstraints CA:TRUE pathlen:0 (critical), keyUsage keyCertSign+cRLSign (critical) and
 * nameConstraints (critical) permitting DNS names of exactly the intercepted hosts (RFC 5280
 * 4.2.1.10: a permitted DNS name also covers its subdomains) and excluding every IPv4 and IPv6
 * address, so that even a leaked key cannot sign a certificate another host's clients accept.
 * The key is never written anywhere: it lives in the runtime's memory until the monitor has its
 * copy (monitor_opts.egress_ca_key_pem), then is wiped. The certificate joins the container's
 * trust store (runtime/egress_trust.h). */
#ifndef ASBX_RUNTIME_EGRESS_CA_H
#define ASBX_RUNTIME_EGRESS_CA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "policy/plan.h"

/* validity when the policy sets no limits.wallClockSeconds (seconds) */
#define EGRESS_CA_DEFAULT_VALIDITY (30L * 86400L)

struct egress_ca
{
  char *cert_pem; /* heap, NUL-terminated; NULL = none */
  char *key_pem;  /* heap, NUL-terminated, wiped by egress_ca_clear; NULL = none */
};

/* Whether the plan intercepts any host (credentials or http rules). */
bool egress_intercepts (const struct policy_plan *p);

/* Make the CA of container `id` for plan `p` (which must intercept) into *ca (zeroed by the
 * caller). Validity: from one hour before now (clock skew between host and container) to one day
 * past limits.wallClockSeconds when the policy sets it, else EGRESS_CA_DEFAULT_VALIDITY. Subject
 * CN "agentsbx egress CA <id>" (the id's first 45 characters: a CN holds 64), a random 128-bit
 * serial. 0, or -1 with *err (an OpenSSL failure,
 * its error queue in the message; *ca left empty). */
int egress_ca_make (const struct policy_plan *p, const char *id, struct egress_ca *ca, asbx_err_t *err);

/* Wipe and free the key only (the init's copy through fork: it needs the certificate). */
void egress_ca_wipe_key (struct egress_ca *ca);

/* Wipe the key (OPENSSL_cleanse) and free both PEMs. Safe on an empty or cleared *ca. */
void egress_ca_clear (struct egress_ca *ca);

/* The create-time checks of plan->secrets_dir when the plan has credentials: the directory
 * opened with O_DIRECTORY|O_NOFOLLOW must be owned by root (a non-root caller: by the caller)
 * with no group or other permission bits, and every ${secret:NAME} of every credential must be
 * either a regular file in it (fstatat AT_SYMLINK_NOFOLLOW: a file secret's value is never read
 * here) or a variable AGENTSBX_SECRET_NAME of the runtime's environment (runtime/secret_env.h) -
 * not both. A directory that does not exist is no error when the runtime has environment
 * secrets. 0, or -1 with *err naming the credential, the secret and the directory (EACCES for a
 * bad owner or mode, ENOENT for a missing secret, EEXIST for one in both places, the errno of the
 * failed call otherwise). */
int egress_secrets_check (const struct policy_plan *p, asbx_err_t *err);

#endif
