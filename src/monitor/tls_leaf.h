/* tls_leaf.h - the leaf certificates of the egress's TLS interception (issue 19): the monitor
 * holds the container's CA (made at create by runtime/egress_ca.c, its key only in memory) and
 * mints, for each intercepted host the container opens, a leaf signed by it: subject CN and
 * SAN DNS the host, serverAuth, valid from 5 minutes ago for 24 hours (never past the CA), a
 * random 128-bit serial. All leaves share one EC P-256 key made when the CA is loaded (it never
 * leaves the monitor; a leaf is only as good as the CA's nameConstraints allow anyway). Leaves are
 * cached per host and minted again an hour before they end. OpenSSL does the crypto. */
#ifndef ASBX_MONITOR_TLS_LEAF_H
#define ASBX_MONITOR_TLS_LEAF_H

#include "core/openssl_dl.h"
#include "core/error.h"

struct tls_leaf;

/* Load the CA from PEM text (a certificate, and its private key matching it). Returns the minter,
 * or NULL with *err ("egress CA: certificate: no PEM certificate", "egress CA: the key does not
 * match the certificate"). The caller may wipe and free the PEM text afterwards. */
struct tls_leaf *tls_leaf_new (const char *ca_cert_pem, const char *ca_key_pem, asbx_err_t *err);

/* The leaf for `host` (lower case, a DNS name), minted or from the cache, and the shared key:
 * both owned by l (valid until tls_leaf_free, or until the next call for this host once the cached
 * leaf has been renewed - SSL_use_certificate takes its own reference). Returns 0, or -1 with
 * *err (an OpenSSL failure). */
int tls_leaf_get (struct tls_leaf *l, const char *host, X509 **cert, EVP_PKEY **key, asbx_err_t *err);

/* The CA certificate (owned by l). */
X509 *tls_leaf_ca (const struct tls_leaf *l);

void tls_leaf_free (struct tls_leaf *l);

#endif
