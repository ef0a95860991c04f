/* intercept_test.c - TEST ONLY stand-in for eg-policy's parse and CA (see intercept_test.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/intercept_test.h"

static char *ca_cert, *ca_key;

void
intercept_test_ca (const char **cert_pem, const char **key_pem)
{
  *cert_pem = ca_cert;
  *key_pem = ca_key;
}

static const char *
str_at (yajl_val o, const char *key)
{
  const char *path[] = { key, NULL };
  yajl_val v = yajl_tree_get (o, path, yajl_t_string);
  return v ? YAJL_GET_STRING (v) : NULL;
}

static yajl_val
arr_at (yajl_val o, const char *key)
{
  const char *path[] = { key, NULL };
  return yajl_tree_get (o, path, yajl_t_array);
}

static char **
strv_of (yajl_val a, size_t *n)
{
  *n = a ? a->u.array.len : 0;
  char **v = xmalloc0 ((*n + 1) * sizeof *v);
  for (size_t i = 0; i < *n; i++)
    v[i] = xstrdup (YAJL_GET_STRING (a->u.array.values[i]));
  return v;
}

static char *
pem (BIO *b)
{
  char *p;
  long n = BIO_get_mem_data (b, &p);
  char *s = strndup (p, (size_t) n);
  BIO_free (b);
  return s;
}

static int
make_ca (const struct policy_plan *plan, asbx_err_t *err)
{
  EVP_PKEY *key = EVP_EC_gen ("P-256");
  X509 *x = X509_new ();
  if (!key || !x)
    return asbx_error (err, 0, "test intercept: CA key");
  X509_set_version (x, X509_VERSION_3);
  ASN1_INTEGER_set (X509_get_serialNumber (x), 1);
  X509_gmtime_adj (X509_getm_notBefore (x), -300);
  X509_gmtime_adj (X509_getm_notAfter (x), 2L * 86400);
  X509_NAME_add_entry_by_txt (X509_get_subject_name (x), "CN", MBSTRING_ASC,
                              (const unsigned char *) "agentsbx test egress CA", -1, -1, 0);
  X509_set_issuer_name (x, X509_get_subject_name (x));
  X509_set_pubkey (x, key);
  X509V3_CTX ctx;
  X509V3_set_ctx (&ctx, x, x, NULL, NULL, 0);
  char nc[4096] = "critical";
  for (size_t i = 0; i < plan->credentials_len; i++)
    snprintf (nc + strlen (nc), sizeof nc - strlen (nc), ",permitted;DNS:%s", plan->credentials[i].host);
  for (size_t i = 0; i < plan->http_hosts_len; i++)
    snprintf (nc + strlen (nc), sizeof nc - strlen (nc), ",permitted;DNS:%s", plan->http_hosts[i].host);
  const struct
  {
    int nid;
    const char *v;
  } ext[] = { { NID_basic_constraints, "critical,CA:TRUE,pathlen:0" },
              { NID_key_usage, "critical,keyCertSign,cRLSign" },
              { NID_subject_key_identifier, "hash" },
              { NID_name_constraints, nc } };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (ext); i++)
    {
      X509_EXTENSION *e = X509V3_EXT_conf_nid (NULL, &ctx, ext[i].nid, ext[i].v);
      if (!e || X509_add_ext (x, e, -1) != 1)
        return asbx_error (err, 0, "test intercept: CA extension %s", ext[i].v);
      X509_EXTENSION_free (e);
    }
  if (X509_sign (x, key, EVP_sha256 ()) <= 0)
    return asbx_error (err, 0, "test intercept: CA signature");
  BIO *b = BIO_new (BIO_s_mem ());
  PEM_write_bio_X509 (b, x);
  ca_cert = pem (b);
  b = BIO_new (BIO_s_mem ());
  PEM_write_bio_PrivateKey (b, key, NULL, NULL, 0, NULL, NULL);
  ca_key = pem (b);
  X509_free (x);
  EVP_PKEY_free (key);
  return 0;
}

int
intercept_test_apply (struct policy_plan *plan, asbx_err_t *err)
{
  const char *path = getenv ("AGENTSBX_TEST_INTERCEPT");
  if (!path || !plan->active)
    return 0;
  cleanup_free char *text = NULL;
  size_t len = 0;
  FILE *f = fopen (path, "re");
  if (!f)
    return asbx_error (err, errno, "AGENTSBX_TEST_INTERCEPT %s", path);
  text = xmalloc0 (1 << 20);
  len = fread (text, 1, (1 << 20) - 1, f);
  (void) fclose (f);
  text[len] = '\0';
  char ebuf[256];
  yajl_val top = yajl_tree_parse (text, ebuf, sizeof ebuf);
  if (!top)
    return asbx_error (err, 0, "AGENTSBX_TEST_INTERCEPT %s: %s", path, ebuf);
  yajl_val cr = arr_at (top, "credentials"), ht = arr_at (top, "http");
  size_t nc = cr ? cr->u.array.len : 0, nh = ht ? ht->u.array.len : 0;
  plan->credentials = xmalloc0 ((nc + 1) * sizeof *plan->credentials);
  for (size_t i = 0; i < nc; i++)
    {
      yajl_val e = cr->u.array.values[i];
      plan->credentials[i] = (struct policy_credential){ .host = xstrdup (str_at (e, "host")),
                                                         .header = xstrdup (str_at (e, "header")),
                                                         .value = xstrdup (str_at (e, "value")) };
    }
  plan->credentials_len = nc;
  plan->http_hosts = xmalloc0 ((nh + 1) * sizeof *plan->http_hosts);
  for (size_t i = 0; i < nh; i++)
    {
      yajl_val e = ht->u.array.values[i], al = arr_at (e, "allow");
      const char *mb[] = { "maxBodyBytes", NULL };
      yajl_val m = yajl_tree_get (e, mb, yajl_t_number);
      struct policy_http_host *h = &plan->http_hosts[i];
      h->host = xstrdup (str_at (e, "host"));
      h->max_body_bytes = m ? (uint64_t) YAJL_GET_INTEGER (m) : 0;
      h->allow_len = al ? al->u.array.len : 0;
      h->allow = xmalloc0 ((h->allow_len + 1) * sizeof *h->allow);
      for (size_t j = 0; j < h->allow_len; j++)
        {
          yajl_val a = al->u.array.values[j];
          h->allow[j].methods = strv_of (arr_at (a, "methods"), &h->allow[j].methods_len);
          h->allow[j].paths = strv_of (arr_at (a, "paths"), &h->allow[j].paths_len);
        }
    }
  plan->http_hosts_len = nh;
  free (plan->secrets_dir);
  plan->secrets_dir = xstrdup (str_at (top, "secretsDir"));
  free (plan->upstream_ca_file);
  plan->upstream_ca_file = xstrdup (str_at (top, "upstreamCaFile"));
  const char *out = str_at (top, "caCertOut");
  int r = make_ca (plan, err);
  if (r == 0 && out)
    {
      int fd = open (out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd < 0 || write_all (fd, ca_cert, strlen (ca_cert)) < 0)
        r = asbx_error (err, errno, "AGENTSBX_TEST_INTERCEPT: write %s", out);
      if (fd >= 0)
        close (fd);
    }
  yajl_tree_free (top);
  return r;
}
