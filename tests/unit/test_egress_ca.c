/* test_egress_ca.c - runtime/egress_ca.c and the pure half of runtime/egress_trust.c, without
 * root: the per-container CA (checked by what OpenSSL's own verifier accepts: a leaf for an
 * intercepted host verifies, one for any other host or an IP address fails on the name
 * constraints), its validity, the secrets directory checks, the trust-store env vars. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/plan.h"
#include "runtime/egress_ca.h"
#include "runtime/egress_trust.h"

static struct policy_credential creds[] = {
  { .host = (char *) "api.test", .header = (char *) "Authorization", .value = (char *) "Bearer ${secret:a}" },
  { .host = (char *) "api.test", .header = (char *) "X-Other", .value = (char *) "${secret:b}-${secret:a}" },
};
static struct policy_http_host hosts[] = { { .host = (char *) "git.test" }, { .host = (char *) "api.test" } };

static struct policy_plan
plan_of (void)
{
  struct policy_plan p = {
    .active = true, .credentials = creds, .credentials_len = 2, .http_hosts = hosts, .http_hosts_len = 2
  };
  return p;
}

static X509 *
cert_of (const char *pem)
{
  BIO *b = BIO_new_mem_buf (pem, -1);
  X509 *x = PEM_read_bio_X509 (b, NULL, NULL, NULL);
  BIO_free (b);
  assert_non_null (x);
  return x;
}

static EVP_PKEY *
key_of (const char *pem)
{
  BIO *b = BIO_new_mem_buf (pem, -1);
  EVP_PKEY *k = PEM_read_bio_PrivateKey (b, NULL, NULL, NULL);
  BIO_free (b);
  assert_non_null (k);
  return k;
}

/* a leaf for `san` ("DNS:x" or "IP:1.2.3.4") signed by the CA; the verifier's error code */
static int
verify_leaf (X509 *ca, EVP_PKEY *ca_key, const char *san)
{
  EVP_PKEY *lk = EVP_PKEY_Q_keygen (NULL, NULL, "EC", "P-256");
  X509 *leaf = X509_new ();
  X509V3_CTX ctx;
  assert_non_null (lk);
  X509_set_version (leaf, 2);
  ASN1_INTEGER_set (X509_get_serialNumber (leaf), 7);
  X509_gmtime_adj (X509_getm_notBefore (leaf), -60);
  X509_gmtime_adj (X509_getm_notAfter (leaf), 3600);
  X509_NAME_add_entry_by_txt (X509_get_subject_name (leaf), "CN", MBSTRING_UTF8, (const unsigned char *) "leaf", -1, -1,
                              0);
  X509_set_issuer_name (leaf, X509_get_subject_name (ca));
  X509_set_pubkey (leaf, lk);
  X509V3_set_ctx_nodb (&ctx);
  X509V3_set_ctx (&ctx, ca, leaf, NULL, NULL, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid (NULL, &ctx, NID_subject_alt_name, san);
  assert_non_null (ext);
  X509_add_ext (leaf, ext, -1);
  X509_EXTENSION_free (ext);
  assert_true (X509_sign (leaf, ca_key, EVP_sha256 ()) > 0);

  X509_STORE *store = X509_STORE_new ();
  X509_STORE_add_cert (store, ca);
  X509_STORE_CTX *vc = X509_STORE_CTX_new ();
  X509_STORE_CTX_init (vc, store, leaf, NULL);
  int ok = X509_verify_cert (vc);
  int e = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error (vc);
  X509_STORE_CTX_free (vc);
  X509_STORE_free (store);
  X509_free (leaf);
  EVP_PKEY_free (lk);
  return e;
}

static void
test_ca_constraints (void **state)
{
  struct policy_plan p = plan_of ();
  struct egress_ca ca = { 0 };
  asbx_err_t err = NULL;

  assert_true (egress_intercepts (&p));
  assert_int_equal (egress_ca_make (&p, "box1", &ca, &err), 0);
  assert_non_null (ca.cert_pem);
  assert_non_null (ca.key_pem);
  X509 *x = cert_of (ca.cert_pem);
  EVP_PKEY *k = key_of (ca.key_pem);
  assert_true (EVP_PKEY_is_a (k, "EC"));
  assert_int_equal (EVP_PKEY_get_bits (k), 256);
  assert_int_equal (X509_check_ca (x), 1);
  assert_int_equal (X509_get_pathlen (x), 0);
  assert_true (X509_get_key_usage (x) & KU_KEY_CERT_SIGN);
  char cn[128];
  X509_NAME_get_text_by_NID (X509_get_subject_name (x), NID_commonName, cn, sizeof cn);
  assert_string_equal (cn, "agentsbx egress CA box1");
  /* each intercepted host once in the constraints, and OpenSSL's verifier enforces them */
  NAME_CONSTRAINTS *nc = X509_get_ext_d2i (x, NID_name_constraints, NULL, NULL);
  assert_non_null (nc);
  assert_int_equal (sk_GENERAL_SUBTREE_num (nc->permittedSubtrees), 2);
  assert_int_equal (sk_GENERAL_SUBTREE_num (nc->excludedSubtrees), 2);
  NAME_CONSTRAINTS_free (nc);
  assert_int_equal (verify_leaf (x, k, "DNS:api.test"), X509_V_OK);
  assert_int_equal (verify_leaf (x, k, "DNS:git.test"), X509_V_OK);
  assert_int_equal (verify_leaf (x, k, "DNS:evil.test"), X509_V_ERR_PERMITTED_VIOLATION);
  assert_int_equal (verify_leaf (x, k, "DNS:api.test.evil"), X509_V_ERR_PERMITTED_VIOLATION);
  assert_int_equal (verify_leaf (x, k, "IP:203.0.113.1"), X509_V_ERR_EXCLUDED_VIOLATION);
  assert_int_equal (verify_leaf (x, k, "IP:2001:db8::1"), X509_V_ERR_EXCLUDED_VIOLATION);
  X509_free (x);
  EVP_PKEY_free (k);
  egress_ca_clear (&ca);
  assert_null (ca.key_pem);
  assert_null (ca.cert_pem);
  egress_ca_clear (&ca); /* twice is fine */
  (void) state;
}

static void
test_ca_validity (void **state)
{
  struct policy_plan p = plan_of ();
  struct egress_ca ca = { 0 };
  asbx_err_t err = NULL;
  int days, secs;

  p.wall_clock_seconds = 3600;
  assert_int_equal (egress_ca_make (&p, "v", &ca, &err), 0);
  X509 *x = cert_of (ca.cert_pem);
  assert_true (ASN1_TIME_diff (&days, &secs, X509_get0_notBefore (x), X509_get0_notAfter (x)));
  assert_true (labs ((long) days * 86400 + secs - (3600 + 3600 + 86400)) < 5); /* 1 h before .. life + 1 day */
  X509_free (x);
  egress_ca_clear (&ca);
  p.wall_clock_seconds = 0;
  assert_int_equal (egress_ca_make (&p, "v", &ca, &err), 0);
  x = cert_of (ca.cert_pem);
  assert_true (ASN1_TIME_diff (&days, &secs, X509_get0_notBefore (x), X509_get0_notAfter (x)));
  assert_true (labs ((long) days * 86400 + secs - (3600 + EGRESS_CA_DEFAULT_VALIDITY)) < 5);
  X509_free (x);
  egress_ca_clear (&ca);
  (void) state;
}

/* an engine's 64-character id (Docker, containerd): the CN holds 64 characters, so the id is cut */
static void
test_ca_long_id (void **state)
{
  struct policy_plan p = plan_of ();
  struct egress_ca ca = { 0 };
  asbx_err_t err = NULL;
  const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char cn[128];

  assert_int_equal (egress_ca_make (&p, id, &ca, &err), 0);
  X509 *x = cert_of (ca.cert_pem);
  X509_NAME_get_text_by_NID (X509_get_subject_name (x), NID_commonName, cn, sizeof cn);
  assert_string_equal (cn, "agentsbx egress CA 0123456789abcdef0123456789abcdef0123456789abc");
  assert_int_equal (strlen (cn), 64);
  X509_free (x);
  egress_ca_clear (&ca);
  (void) state;
}

static void
put (const char *dir, const char *name, const char *text)
{
  cleanup_free char *p = xasprintf ("%s/%s", dir, name);
  FILE *f = fopen (p, "w");
  assert_non_null (f);
  assert_true (fputs (text, f) >= 0);
  assert_int_equal (fclose (f), 0);
}

static void
test_secrets_dir (void **state)
{
  char dir[] = "/tmp/asbx-test-secrets-XXXXXX";
  struct policy_plan p = plan_of ();
  asbx_err_t err = NULL;

  assert_non_null (mkdtemp (dir)); /* mode 0700, ours */
  p.secrets_dir = dir;
  put (dir, "a", "value-a");
  /* b missing: named with the credential and the directory */
  assert_int_equal (egress_secrets_check (&p, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  assert_non_null (strstr (err->msg, "network.credentials[1] (api.test, header X-Other): secret \"b\""));
  assert_non_null (strstr (err->msg, dir));
  asbx_error_free (&err);
  put (dir, "b", "value-b");
  assert_int_equal (egress_secrets_check (&p, &err), 0);
  /* group or other bits on the directory: refused */
  chmod (dir, 0750);
  assert_int_equal (egress_secrets_check (&p, &err), -1);
  assert_int_equal (err->errnum, EACCES);
  assert_non_null (strstr (err->msg, "mode 0750"));
  assert_null (strstr (err->msg, "value-")); /* never a value */
  asbx_error_free (&err);
  chmod (dir, 0700);
  /* a secret that is a symlink: refused (the monitor opens with O_NOFOLLOW) */
  cleanup_free char *b = xasprintf ("%s/b", dir);
  unlink (b);
  assert_int_equal (symlink ("/etc/hostname", b), 0);
  assert_int_equal (egress_secrets_check (&p, &err), -1);
  assert_non_null (strstr (err->msg, "not a regular file"));
  asbx_error_free (&err);
  /* a directory given as a symlink: refused too */
  cleanup_free char *link = xasprintf ("%s-link", dir);
  assert_int_equal (symlink (dir, link), 0);
  p.secrets_dir = link;
  assert_int_equal (egress_secrets_check (&p, &err), -1);
  assert_int_equal (err->errnum, ELOOP);
  asbx_error_free (&err);
  /* no credential: no directory needed (http rules alone) */
  p.credentials_len = 0;
  p.secrets_dir = (char *) "/nonexistent";
  assert_int_equal (egress_secrets_check (&p, &err), 0);
  unlink (link);
  unlink (b);
  cleanup_free char *a = xasprintf ("%s/a", dir);
  unlink (a);
  rmdir (dir);
  (void) state;
}

static void
append_name (void *ud, const char *name, size_t len)
{
  char *buf = ud;
  size_t n = strlen (buf);
  snprintf (buf + n, 128 - n, "%s%.*s", n ? "," : "", (int) len, name);
}

static void
test_secret_refs (void **state)
{
  /* the names, in order: what the plan JSON lists and the secrets check looks up */
  char got[128] = "";
  policy_secret_refs ("x ${secret:one} ${secret:two.v2}-${secret:one} $ {x}", append_name, got);
  assert_string_equal (got, "one,two.v2,one");
  got[0] = '\0';
  policy_secret_refs ("no reference", append_name, got);
  assert_string_equal (got, "");
  (void) state;
}

static void
test_trust_env (void **state)
{
  struct oci_process proc = { 0 };
  proc.env = xmalloc0 (3 * sizeof (char *));
  proc.env[0] = xstrdup ("PATH=/bin");
  proc.env[1] = xstrdup ("SSL_CERT_FILE=/agent/own.pem");
  proc.env_len = 2;
  egress_trust_env (&proc, "/etc/ssl/certs/ca-certificates.crt");
  assert_int_equal (proc.env_len, 7);
  assert_string_equal (proc.env[0], "PATH=/bin");
  assert_string_equal (proc.env[1], "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"); /* replaced */
  const char *want[] = { "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT", "NODE_EXTRA_CA_CERTS" };
  for (size_t i = 0; i < 5; i++)
    {
      cleanup_free char *kv = xasprintf ("%s=/etc/ssl/certs/ca-certificates.crt", want[i]);
      assert_string_equal (proc.env[2 + i], kv);
    }
  assert_null (proc.env[7]);
  egress_trust_env (&proc, NULL); /* no bound path: nothing set */
  assert_int_equal (proc.env_len, 7);
  for (size_t i = 0; i < proc.env_len; i++)
    free (proc.env[i]);
  free (proc.env);
  (void) state;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_ca_constraints), cmocka_unit_test (test_ca_validity), cmocka_unit_test (test_ca_long_id),
    cmocka_unit_test (test_secrets_dir),    cmocka_unit_test (test_secret_refs), cmocka_unit_test (test_trust_env),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
