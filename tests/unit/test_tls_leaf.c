/* test_tls_leaf.c - the interception's leaf minting (monitor/tls_leaf.c): a CA made here with
 * OpenSSL, leaves that verify against it for their host and no other, one key for all, the
 * cache, and refusal of a bad CA. No root needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "monitor/tls_leaf.h"

static char *
pem_of (int (*wr) (BIO *, void *), void *obj)
{
  BIO *b = BIO_new (BIO_s_mem ());
  assert_int_equal (wr (b, obj), 1);
  char *p;
  long n = BIO_get_mem_data (b, &p);
  char *s = strndup (p, (size_t) n);
  BIO_free (b);
  return s;
}

static int
wr_cert (BIO *b, void *x)
{
  return PEM_write_bio_X509 (b, x);
}

static int
wr_key (BIO *b, void *k)
{
  return PEM_write_bio_PrivateKey (b, k, NULL, NULL, 0, NULL, NULL);
}

/* a self-signed CA (EC P-256, CA:TRUE), as runtime/egress_ca.c makes one */
static X509 *
make_ca (EVP_PKEY **key)
{
  *key = EVP_EC_gen ("P-256");
  X509 *x = X509_new ();
  X509_set_version (x, X509_VERSION_3);
  ASN1_INTEGER_set (X509_get_serialNumber (x), 1);
  X509_gmtime_adj (X509_getm_notBefore (x), -60);
  X509_gmtime_adj (X509_getm_notAfter (x), 7 * 86400);
  X509_NAME_add_entry_by_txt (X509_get_subject_name (x), "CN", MBSTRING_ASC, (const unsigned char *) "test CA", -1, -1,
                              0);
  X509_set_issuer_name (x, X509_get_subject_name (x));
  X509_set_pubkey (x, *key);
  X509V3_CTX ctx;
  X509V3_set_ctx (&ctx, x, x, NULL, NULL, 0);
  X509_EXTENSION *e = X509V3_EXT_conf_nid (NULL, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  X509_add_ext (x, e, -1);
  X509_EXTENSION_free (e);
  e = X509V3_EXT_conf_nid (NULL, &ctx, NID_key_usage, "critical,keyCertSign");
  X509_add_ext (x, e, -1);
  X509_EXTENSION_free (e);
  e = X509V3_EXT_conf_nid (NULL, &ctx, NID_subject_key_identifier, "hash");
  X509_add_ext (x, e, -1);
  X509_EXTENSION_free (e);
  assert_true (X509_sign (x, *key, EVP_sha256 ()) > 0);
  return x;
}

static int
verify (X509 *ca, X509 *leaf, const char *host)
{
  X509_STORE *st = X509_STORE_new ();
  X509_STORE_add_cert (st, ca);
  X509_STORE_CTX *c = X509_STORE_CTX_new ();
  X509_STORE_CTX_init (c, st, leaf, NULL);
  X509_VERIFY_PARAM_set1_host (X509_STORE_CTX_get0_param (c), host, 0);
  X509_STORE_CTX_set_purpose (c, X509_PURPOSE_SSL_SERVER);
  int r = X509_verify_cert (c);
  X509_STORE_CTX_free (c);
  X509_STORE_free (st);
  return r;
}

static void
test_mint_verify_cache (void **state)
{
  (void) state;
  EVP_PKEY *cakey;
  X509 *ca = make_ca (&cakey);
  char *cp = pem_of (wr_cert, ca), *kp = pem_of (wr_key, cakey);
  asbx_err_t err = NULL;
  struct tls_leaf *l = tls_leaf_new (cp, kp, &err);
  assert_non_null (l);
  X509 *a, *b, *a2;
  EVP_PKEY *ka, *kb;
  assert_int_equal (tls_leaf_get (l, "api.test", &a, &ka, &err), 0);
  assert_int_equal (tls_leaf_get (l, "git.test", &b, &kb, &err), 0);
  assert_int_equal (tls_leaf_get (l, "api.test", &a2, &ka, &err), 0);
  assert_ptr_equal (a, a2);  /* cached */
  assert_ptr_equal (ka, kb); /* one key */
  assert_int_equal (X509_check_private_key (a, ka), 1);
  assert_int_equal (verify (ca, a, "api.test"), 1);
  assert_int_equal (verify (ca, b, "git.test"), 1);
  assert_int_equal (verify (ca, a, "git.test"), 0); /* SAN: only its host */
  assert_int_equal (verify (ca, a, "x.api.test"), 0);
  /* random serials, a short life */
  assert_int_not_equal (ASN1_INTEGER_cmp (X509_get0_serialNumber (a), X509_get0_serialNumber (b)), 0);
  int days, secs;
  assert_int_equal (ASN1_TIME_diff (&days, &secs, X509_get0_notBefore (a), X509_get0_notAfter (a)), 1);
  assert_true (days == 1 && secs <= 300);
  tls_leaf_free (l);
  free (cp);
  free (kp);
  X509_free (ca);
  EVP_PKEY_free (cakey);
}

static void
test_bad_ca (void **state)
{
  (void) state;
  EVP_PKEY *k1, *k2;
  X509 *c1 = make_ca (&k1), *c2 = make_ca (&k2);
  char *cp = pem_of (wr_cert, c1), *kp = pem_of (wr_key, k2);
  asbx_err_t err = NULL;
  assert_null (tls_leaf_new (cp, kp, &err)); /* the key of another CA */
  assert_non_null (strstr (err->msg, "does not match"));
  asbx_error_free (&err);
  assert_null (tls_leaf_new ("not a pem", kp, &err));
  assert_non_null (strstr (err->msg, "no PEM certificate"));
  asbx_error_free (&err);
  assert_null (tls_leaf_new (cp, "", &err));
  asbx_error_free (&err);
  free (cp);
  free (kp);
  X509_free (c1);
  X509_free (c2);
  EVP_PKEY_free (k1);
  EVP_PKEY_free (k2);
}

int
main (void)
{
  const struct CMUnitTest tests[] = { cmocka_unit_test (test_mint_verify_cache), cmocka_unit_test (test_bad_ca) };
  /* the calls of this file that tls_leaf.c also makes go through core/openssl_dl.h's table (tls_leaf.h);
   * the others are linked ($(OPENSSL_LIBS)): one libcrypto either way */
  if (openssl_load ("test_tls_leaf", NULL) < 0)
    return 1;
  return cmocka_run_group_tests (tests, NULL, NULL);
}
