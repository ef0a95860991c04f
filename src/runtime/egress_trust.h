/* egress_trust.h - the container's trust store when the egress intercepts (issue 19;
 * docs/policy.md "Credentials and HTTP rules": "The trust store").
 *
 * The bundle is the rootfs's own distro bundle (the first regular file of EGRESS_TRUST_PATHS,
 * read through the rootfs fd, symlinks resolved inside the root; a file that is neither empty nor
 * holds a PEM certificate is not a bundle and is left alone) followed by the container's CA
 * certificate. It is written in a private detached tmpfs (never on the host or in the rootfs),
 * and bound read-only over every path of EGRESS_TRUST_PATHS that exists (each file once, by
 * inode); when none exists but /etc/ssl/certs does, an empty ca-certificates.crt is created
 * there as the mount target (a read-only rootfs then has no path: a warning, and the tools of the
 * container do not trust the interception, which fails their TLS, never opens it). The process
 * environment gets SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, PIP_CERT
 * and NODE_EXTRA_CA_CERTS, every one naming the first bound path (node adds the file's
 * certificates to its own store, so the whole bundle there is harmless). */
#ifndef ASBX_RUNTIME_EGRESS_TRUST_H
#define ASBX_RUNTIME_EGRESS_TRUST_H

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* the distro bundle paths, in the order they are looked up (Debian/Ubuntu/Alpine, Fedora/RHEL,
 * the OpenSSL/LibreSSL default) */
#define EGRESS_TRUST_PATHS                                                                                             \
  {                                                                                                                    \
    "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"                      \
  }

/* Build the bundle with `ca_pem` and bind it as above beneath `rootfd` (the container's root, in
 * the init's mount namespace, before pivot_root). *bundle_path: the container path the env vars
 * name (heap), or NULL when no path could be bound. Nothing is done for ca_pem NULL. 0, or -1
 * with *err (a distro bundle that cannot be read, a mount that fails). */
int egress_trust_apply (int rootfd, const char *ca_pem, char **bundle_path, asbx_err_t *err);

/* The container path the env vars name, as egress_trust_apply chose it, looked up again beneath
 * `rootfd` (for exec: the first path of EGRESS_TRUST_PATHS that is a regular file). Heap, or NULL. */
char *egress_trust_path (int rootfd);

/* Set the six variables above in p->env to `bundle_path` (replacing the process's own). */
void egress_trust_env (struct oci_process *p, const char *bundle_path);

#endif
