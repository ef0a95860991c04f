/* openssl_dl.h - OpenSSL (libssl, libcrypto), loaded when a policy or a verb needs it, not at
 * every start. Linked, the two libraries cost about 1.1 ms and 0.5 MiB of every `run`, `exec`
 * and `sandbox` (loader: mapping, relocation, their constructors), although only the egress's TLS
 * interception (network.http / network.credentials rules: the container's CA, the TLS relay),
 * the review walker's sha256 and OCI image layers use them (issue 20: the start path).
 *
 * Callers include this header instead of <openssl/...> (it includes every OpenSSL header the
 * tree uses, and must come after any other: its macros rename OpenSSL's functions) and call
 * openssl_load() before the first OpenSSL call. Every OpenSSL function the tree calls - after
 * OpenSSL's own macros are expanded: SSL_CTX_set_min_proto_version is SSL_CTX_ctrl,
 * sk_X509_INFO_num is OPENSSL_sk_num - goes through the table, typed by OpenSSL's own
 * prototypes (__typeof__), so a mismatch is a compile error and a function missing from the
 * table is a link error (the binary does not link libssl or libcrypto). */
#ifndef ASBX_CORE_OPENSSL_DL_H
#define ASBX_CORE_OPENSSL_DL_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/error.h"

/* libssl's soname (Debian 12: libssl3); its DT_NEEDED brings libcrypto.so.3 */
#define OPENSSL_DL_SONAME "libssl.so.3"

#define OPENSSL_DL_FUNCS(X)                                                                                            \
  X (ASN1_STRING_dup)                                                                                                  \
  X (ASN1_TIME_diff)                                                                                                   \
  X (ASN1_TIME_free)                                                                                                   \
  X (ASN1_TIME_set)                                                                                                    \
  X (BIO_ctrl)                                                                                                         \
  X (BIO_ctrl_pending)                                                                                                 \
  X (BIO_free)                                                                                                         \
  X (BIO_new)                                                                                                          \
  X (BIO_new_fd)                                                                                                       \
  X (BIO_new_mem_buf)                                                                                                  \
  X (BIO_new_socket)                                                                                                   \
  X (BIO_s_mem)                                                                                                        \
  X (BIO_s_secmem)                                                                                                     \
  X (BIO_write)                                                                                                        \
  X (BN_bin2bn)                                                                                                        \
  X (BN_free)                                                                                                          \
  X (BN_new)                                                                                                           \
  X (BN_rand)                                                                                                          \
  X (BN_to_ASN1_INTEGER)                                                                                               \
  X (ERR_clear_error)                                                                                                  \
  X (ERR_error_string_n)                                                                                               \
  X (ERR_get_error)                                                                                                    \
  X (ERR_peek_error)                                                                                                   \
  X (EVP_DigestFinal_ex)                                                                                               \
  X (EVP_DigestInit_ex)                                                                                                \
  X (EVP_DigestUpdate)                                                                                                 \
  X (EVP_MD_CTX_free)                                                                                                  \
  X (EVP_MD_CTX_new)                                                                                                   \
  X (EVP_PKEY_Q_keygen)                                                                                                \
  X (EVP_PKEY_free)                                                                                                    \
  X (EVP_sha256)                                                                                                       \
  X (OPENSSL_cleanse)                                                                                                  \
  X (OPENSSL_sk_num)                                                                                                   \
  X (OPENSSL_sk_pop_free)                                                                                              \
  X (OPENSSL_sk_value)                                                                                                 \
  X (PEM_X509_INFO_read_bio)                                                                                           \
  X (PEM_read_bio_PrivateKey)                                                                                          \
  X (PEM_read_bio_X509)                                                                                                \
  X (PEM_write_bio_PrivateKey)                                                                                         \
  X (PEM_write_bio_X509)                                                                                               \
  X (RAND_bytes)                                                                                                       \
  X (SSL_CTX_ctrl)                                                                                                     \
  X (SSL_CTX_free)                                                                                                     \
  X (SSL_CTX_get_cert_store)                                                                                           \
  X (SSL_CTX_new)                                                                                                      \
  X (SSL_CTX_set_alpn_protos)                                                                                          \
  X (SSL_CTX_set_alpn_select_cb)                                                                                       \
  X (SSL_CTX_set_default_verify_paths)                                                                                 \
  X (SSL_CTX_set_options)                                                                                              \
  X (SSL_CTX_set_verify)                                                                                               \
  X (SSL_ctrl)                                                                                                         \
  X (SSL_do_handshake)                                                                                                 \
  X (SSL_free)                                                                                                         \
  X (SSL_get_error)                                                                                                    \
  X (SSL_get_verify_result)                                                                                            \
  X (SSL_new)                                                                                                          \
  X (SSL_read)                                                                                                         \
  X (SSL_set1_host)                                                                                                    \
  X (SSL_set_accept_state)                                                                                             \
  X (SSL_set_bio)                                                                                                      \
  X (SSL_set_connect_state)                                                                                            \
  X (SSL_set_fd)                                                                                                       \
  X (SSL_shutdown)                                                                                                     \
  X (SSL_use_PrivateKey)                                                                                               \
  X (SSL_use_certificate)                                                                                              \
  X (SSL_write)                                                                                                        \
  X (TLS_client_method)                                                                                                \
  X (TLS_server_method)                                                                                                \
  X (X509V3_EXT_conf_nid)                                                                                              \
  X (X509V3_set_ctx)                                                                                                   \
  X (X509_EXTENSION_free)                                                                                              \
  X (X509_INFO_free)                                                                                                   \
  X (X509_NAME_add_entry_by_txt)                                                                                       \
  X (X509_STORE_add_cert)                                                                                              \
  X (X509_add_ext)                                                                                                     \
  X (X509_check_private_key)                                                                                           \
  X (X509_free)                                                                                                        \
  X (X509_get0_notAfter)                                                                                               \
  X (X509_get_serialNumber)                                                                                            \
  X (X509_get_subject_name)                                                                                            \
  X (X509_getm_notAfter)                                                                                               \
  X (X509_getm_notBefore)                                                                                              \
  X (X509_gmtime_adj)                                                                                                  \
  X (X509_new)                                                                                                         \
  X (X509_set1_notAfter)                                                                                               \
  X (X509_set_issuer_name)                                                                                             \
  X (X509_set_pubkey)                                                                                                  \
  X (X509_set_version)                                                                                                 \
  X (X509_sign)                                                                                                        \
  X (X509_time_adj_ex)                                                                                                 \
  X (X509_verify_cert_error_string)

struct openssl_api
{
/* NOLINTNEXTLINE(bugprone-macro-parentheses): n is the member name, a declarator */
#define OPENSSL_DL_FIELD(n) __typeof__ (n) *n;
  OPENSSL_DL_FUNCS (OPENSSL_DL_FIELD)
#undef OPENSSL_DL_FIELD
};

/* the table; filled by openssl_load */
extern struct openssl_api openssl_api;

/* dlopen(3) OPENSSL_DL_SONAME once (RTLD_NOW | RTLD_LOCAL) and look up every function of the
 * table (dlsym(3) on libssl's handle also finds libcrypto's, its dependency). WHY names the
 * user of OpenSSL for the error ("network.http rules: the TLS interception"). Idempotent;
 * thread-safe (pthread_once(3): the monitor's relay and the CLI may race). 0, or -1 with *err
 * (ENOENT: the library is not installed - `apt-get install -y libssl3` - or lacks a function:
 * dlerror(3)'s text). The caller fails: nothing that needs OpenSSL runs without it. */
int openssl_load (const char *why, asbx_err_t *err);

#ifndef OPENSSL_DL_IMPL
#define ASN1_STRING_dup (*openssl_api.ASN1_STRING_dup)
#define ASN1_TIME_diff (*openssl_api.ASN1_TIME_diff)
#define ASN1_TIME_free (*openssl_api.ASN1_TIME_free)
#define ASN1_TIME_set (*openssl_api.ASN1_TIME_set)
#define BIO_ctrl (*openssl_api.BIO_ctrl)
#define BIO_ctrl_pending (*openssl_api.BIO_ctrl_pending)
#define BIO_free (*openssl_api.BIO_free)
#define BIO_new (*openssl_api.BIO_new)
#define BIO_new_fd (*openssl_api.BIO_new_fd)
#define BIO_new_mem_buf (*openssl_api.BIO_new_mem_buf)
#define BIO_new_socket (*openssl_api.BIO_new_socket)
#define BIO_s_mem (*openssl_api.BIO_s_mem)
#define BIO_s_secmem (*openssl_api.BIO_s_secmem)
#define BIO_write (*openssl_api.BIO_write)
#define BN_bin2bn (*openssl_api.BN_bin2bn)
#define BN_free (*openssl_api.BN_free)
#define BN_new (*openssl_api.BN_new)
#define BN_rand (*openssl_api.BN_rand)
#define BN_to_ASN1_INTEGER (*openssl_api.BN_to_ASN1_INTEGER)
#define ERR_clear_error (*openssl_api.ERR_clear_error)
#define ERR_error_string_n (*openssl_api.ERR_error_string_n)
#define ERR_get_error (*openssl_api.ERR_get_error)
#define ERR_peek_error (*openssl_api.ERR_peek_error)
#define EVP_DigestFinal_ex (*openssl_api.EVP_DigestFinal_ex)
#define EVP_DigestInit_ex (*openssl_api.EVP_DigestInit_ex)
#define EVP_DigestUpdate (*openssl_api.EVP_DigestUpdate)
#define EVP_MD_CTX_free (*openssl_api.EVP_MD_CTX_free)
#define EVP_MD_CTX_new (*openssl_api.EVP_MD_CTX_new)
#define EVP_PKEY_Q_keygen (*openssl_api.EVP_PKEY_Q_keygen)
#define EVP_PKEY_free (*openssl_api.EVP_PKEY_free)
#define EVP_sha256 (*openssl_api.EVP_sha256)
#define OPENSSL_cleanse (*openssl_api.OPENSSL_cleanse)
#define OPENSSL_sk_num (*openssl_api.OPENSSL_sk_num)
#define OPENSSL_sk_pop_free (*openssl_api.OPENSSL_sk_pop_free)
#define OPENSSL_sk_value (*openssl_api.OPENSSL_sk_value)
#define PEM_X509_INFO_read_bio (*openssl_api.PEM_X509_INFO_read_bio)
#define PEM_read_bio_PrivateKey (*openssl_api.PEM_read_bio_PrivateKey)
#define PEM_read_bio_X509 (*openssl_api.PEM_read_bio_X509)
#define PEM_write_bio_PrivateKey (*openssl_api.PEM_write_bio_PrivateKey)
#define PEM_write_bio_X509 (*openssl_api.PEM_write_bio_X509)
#define RAND_bytes (*openssl_api.RAND_bytes)
#define SSL_CTX_ctrl (*openssl_api.SSL_CTX_ctrl)
#define SSL_CTX_free (*openssl_api.SSL_CTX_free)
#define SSL_CTX_get_cert_store (*openssl_api.SSL_CTX_get_cert_store)
#define SSL_CTX_new (*openssl_api.SSL_CTX_new)
#define SSL_CTX_set_alpn_protos (*openssl_api.SSL_CTX_set_alpn_protos)
#define SSL_CTX_set_alpn_select_cb (*openssl_api.SSL_CTX_set_alpn_select_cb)
#define SSL_CTX_set_default_verify_paths (*openssl_api.SSL_CTX_set_default_verify_paths)
#define SSL_CTX_set_options (*openssl_api.SSL_CTX_set_options)
#define SSL_CTX_set_verify (*openssl_api.SSL_CTX_set_verify)
#define SSL_ctrl (*openssl_api.SSL_ctrl)
#define SSL_do_handshake (*openssl_api.SSL_do_handshake)
#define SSL_free (*openssl_api.SSL_free)
#define SSL_get_error (*openssl_api.SSL_get_error)
#define SSL_get_verify_result (*openssl_api.SSL_get_verify_result)
#define SSL_new (*openssl_api.SSL_new)
#define SSL_read (*openssl_api.SSL_read)
#define SSL_set1_host (*openssl_api.SSL_set1_host)
#define SSL_set_accept_state (*openssl_api.SSL_set_accept_state)
#define SSL_set_bio (*openssl_api.SSL_set_bio)
#define SSL_set_connect_state (*openssl_api.SSL_set_connect_state)
#define SSL_set_fd (*openssl_api.SSL_set_fd)
#define SSL_shutdown (*openssl_api.SSL_shutdown)
#define SSL_use_PrivateKey (*openssl_api.SSL_use_PrivateKey)
#define SSL_use_certificate (*openssl_api.SSL_use_certificate)
#define SSL_write (*openssl_api.SSL_write)
#define TLS_client_method (*openssl_api.TLS_client_method)
#define TLS_server_method (*openssl_api.TLS_server_method)
#define X509V3_EXT_conf_nid (*openssl_api.X509V3_EXT_conf_nid)
#define X509V3_set_ctx (*openssl_api.X509V3_set_ctx)
#define X509_EXTENSION_free (*openssl_api.X509_EXTENSION_free)
#define X509_INFO_free (*openssl_api.X509_INFO_free)
#define X509_NAME_add_entry_by_txt (*openssl_api.X509_NAME_add_entry_by_txt)
#define X509_STORE_add_cert (*openssl_api.X509_STORE_add_cert)
#define X509_add_ext (*openssl_api.X509_add_ext)
#define X509_check_private_key (*openssl_api.X509_check_private_key)
#define X509_free (*openssl_api.X509_free)
#define X509_get0_notAfter (*openssl_api.X509_get0_notAfter)
#define X509_get_serialNumber (*openssl_api.X509_get_serialNumber)
#define X509_get_subject_name (*openssl_api.X509_get_subject_name)
#define X509_getm_notAfter (*openssl_api.X509_getm_notAfter)
#define X509_getm_notBefore (*openssl_api.X509_getm_notBefore)
#define X509_gmtime_adj (*openssl_api.X509_gmtime_adj)
#define X509_new (*openssl_api.X509_new)
#define X509_set1_notAfter (*openssl_api.X509_set1_notAfter)
#define X509_set_issuer_name (*openssl_api.X509_set_issuer_name)
#define X509_set_pubkey (*openssl_api.X509_set_pubkey)
#define X509_set_version (*openssl_api.X509_set_version)
#define X509_sign (*openssl_api.X509_sign)
#define X509_time_adj_ex (*openssl_api.X509_time_adj_ex)
#define X509_verify_cert_error_string (*openssl_api.X509_verify_cert_error_string)
#endif

#endif
