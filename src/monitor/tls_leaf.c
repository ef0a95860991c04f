/* tls_leaf.c - minting the interception's leaf certificates (see tls_leaf.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/openssl_dl.h"
#include "core/openssl_err.h"
#include "core/util.h"
#include "monitor/tls_leaf.h"

#define LEAF_CACHE 64          /* hosts: the plan's intercepted hosts are fewer in practice */
#define LEAF_LIFE (24L * 3600) /* seconds */
#define LEAF_BACKDATE 300      /* seconds: a container clock slightly behind still accepts it */
#define LEAF_RENEW 3600        /* seconds before the end a leaf is minted again */

struct tls_leaf
{
  X509 *ca;
  EVP_PKEY *ca_key, *key;
  struct
  {
    char host[256];
    X509 *cert;
    time_t until;
  } cache[LEAF_CACHE];
};

#define ssl_error(err, what) openssl_error (err, "egress CA", what)

struct tls_leaf *
tls_leaf_new (const char *ca_cert_pem, const char *ca_key_pem, asbx_err_t *err)
{
  if (openssl_load ("network.http/network.credentials rules (the TLS interception)", err) < 0)
    return NULL;
  struct tls_leaf *l = xmalloc0 (sizeof *l);
  BIO *b = BIO_new_mem_buf (ca_cert_pem, -1);
  l->ca = b ? PEM_read_bio_X509 (b, NULL, NULL, NULL) : NULL;
  BIO_free (b);
  if (!l->ca)
    {
      ssl_error (err, "certificate: no PEM certificate");
      goto fail;
    }
  b = BIO_new_mem_buf (ca_key_pem, -1);
  l->ca_key = b ? PEM_read_bio_PrivateKey (b, NULL, NULL, NULL) : NULL;
  BIO_free (b);
  if (!l->ca_key)
    {
      ssl_error (err, "key: no PEM private key");
      goto fail;
    }
  if (X509_check_private_key (l->ca, l->ca_key) != 1)
    {
      ERR_clear_error ();
      asbx_error (err, 0, "egress CA: the key does not match the certificate");
      goto fail;
    }
  l->key = EVP_EC_gen ("P-256");
  if (!l->key)
    {
      ssl_error (err, "leaf key (EC P-256)");
      goto fail;
    }
  return l;
fail:
  tls_leaf_free (l);
  return NULL;
}

static bool
add_ext (X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
  X509_EXTENSION *e = X509V3_EXT_conf_nid (NULL, ctx, nid, value);
  bool ok = e && X509_add_ext (x, e, -1) == 1;
  X509_EXTENSION_free (e);
  return ok;
}

static X509 *
mint (struct tls_leaf *l, const char *host, time_t now, time_t *until)
{
  X509 *x = X509_new ();
  BIGNUM *serial = BN_new ();
  char san[300];
  bool ok = x && serial && X509_set_version (x, X509_VERSION_3) == 1
            && BN_rand (serial, 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1
            && BN_to_ASN1_INTEGER (serial, X509_get_serialNumber (x)) != NULL;
  /* the validity: never past the CA's own end */
  time_t end = now + LEAF_LIFE;
  const ASN1_TIME *ca_end = X509_get0_notAfter (l->ca);
  int days, secs;
  ASN1_TIME *t_end = ASN1_TIME_set (NULL, end);
  if (ok && t_end && ASN1_TIME_diff (&days, &secs, ca_end, t_end) == 1 && (days > 0 || secs > 0))
    {
      ASN1_TIME_free (t_end);
      t_end = ASN1_STRING_dup (ca_end);
      end = now + 3600; /* renewed at once: the CA is near its end anyway */
    }
  ok = ok && t_end && X509_time_adj_ex (X509_getm_notBefore (x), 0, -LEAF_BACKDATE, &now) != NULL
       && X509_set1_notAfter (x, t_end) == 1;
  ASN1_TIME_free (t_end);
  X509_NAME *name = X509_get_subject_name (x);
  ok = ok && X509_NAME_add_entry_by_txt (name, "CN", MBSTRING_ASC, (const unsigned char *) host, -1, -1, 0) == 1
       && X509_set_issuer_name (x, X509_get_subject_name (l->ca)) == 1 && X509_set_pubkey (x, l->key) == 1;
  X509V3_CTX ctx;
  X509V3_set_ctx (&ctx, l->ca, x, NULL, NULL, 0);
  snprintf (san, sizeof san, "DNS:%s", host);
  ok = ok && add_ext (x, &ctx, NID_basic_constraints, "critical,CA:FALSE")
       && add_ext (x, &ctx, NID_key_usage, "critical,digitalSignature")
       && add_ext (x, &ctx, NID_ext_key_usage, "serverAuth") && add_ext (x, &ctx, NID_subject_alt_name, san)
       && add_ext (x, &ctx, NID_subject_key_identifier, "hash")
       && add_ext (x, &ctx, NID_authority_key_identifier, "keyid:always")
       && X509_sign (x, l->ca_key, EVP_sha256 ()) > 0;
  BN_free (serial);
  if (!ok)
    {
      X509_free (x);
      return NULL;
    }
  *until = end;
  return x;
}

int
tls_leaf_get (struct tls_leaf *l, const char *host, X509 **cert, EVP_PKEY **key, asbx_err_t *err)
{
  time_t now = time (NULL);
  size_t slot = 0;
  for (size_t i = 0; i < LEAF_CACHE; i++)
    {
      if (l->cache[i].cert && strcmp (l->cache[i].host, host) == 0)
        {
          slot = i;
          if (l->cache[i].until - now > LEAF_RENEW)
            {
              *cert = l->cache[i].cert;
              *key = l->key;
              return 0;
            }
          break;
        }
      if (!l->cache[i].cert || (l->cache[slot].cert && l->cache[i].until < l->cache[slot].until))
        slot = i; /* a free slot, else the one that ends first */
    }
  time_t until;
  X509 *x = mint (l, host, now, &until);
  if (!x)
    return ssl_error (err, "mint a leaf certificate");
  X509_free (l->cache[slot].cert);
  snprintf (l->cache[slot].host, sizeof l->cache[slot].host, "%s", host);
  l->cache[slot].cert = x;
  l->cache[slot].until = until;
  *cert = x;
  *key = l->key;
  return 0;
}

X509 *
tls_leaf_ca (const struct tls_leaf *l)
{
  return l->ca;
}

void
tls_leaf_free (struct tls_leaf *l)
{
  if (!l)
    return;
  for (size_t i = 0; i < LEAF_CACHE; i++)
    X509_free (l->cache[i].cert);
  X509_free (l->ca);
  EVP_PKEY_free (l->ca_key);
  EVP_PKEY_free (l->key);
  free (l);
}
