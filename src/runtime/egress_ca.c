/* egress_ca.c - the per-container CA and the secrets directory checks; see egress_ca.h.
 *
 * OpenSSL 3 (the Debian package): EVP_PKEY_Q_keygen for the key, X509V3_EXT_conf_nid for the
 * extensions (the same syntax as openssl.cnf, so the constraints read as the admin would write
 * them), PEM into memory BIOs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/openssl_dl.h"
#include "core/cleanup.h"
#include "core/openssl_err.h"
#include "core/util.h"
#include "monitor/monitor.h"
#include "monitor/secret_tpl.h"
#include "runtime/egress_ca.h"
#include "runtime/secret_env.h"

bool
egress_intercepts (const struct policy_plan *p)
{
  return p && p->active && (p->credentials_len > 0 || p->http_hosts_len > 0);
}

#define ssl_fail(err, what) openssl_error (err, "egress CA", what)

/* "critical,permitted;DNS:a,permitted;DNS:b,excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::" with
 * each intercepted host once */
static char *
name_constraints (const struct policy_plan *p)
{
  char *s = xstrdup ("critical");
  const char *seen[512];
  size_t nseen = 0;
  for (size_t i = 0; i < p->credentials_len + p->http_hosts_len; i++)
    {
      const char *h = i < p->credentials_len ? p->credentials[i].host : p->http_hosts[i - p->credentials_len].host;
      bool dup = false;
      for (size_t j = 0; j < nseen && !dup; j++)
        dup = strcmp (seen[j], h) == 0;
      if (dup)
        continue;
      if (nseen < ASBX_ARRAY_SIZE (seen))
        seen[nseen++] = h;
      char *n = xasprintf ("%s,permitted;DNS:%s", s, h);
      free (s);
      s = n;
    }
  char *n = xasprintf ("%s,excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::", s);
  free (s);
  return n;
}

static int
add_ext (X509 *x, int nid, const char *value)
{
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb (&ctx);
  X509V3_set_ctx (&ctx, x, x, NULL, NULL, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid (NULL, &ctx, nid, value);
  if (ext == NULL)
    return -1;
  int r = X509_add_ext (x, ext, -1) ? 0 : -1;
  X509_EXTENSION_free (ext);
  return r;
}

/* the BIO's contents as a heap string; `secret`: the BIO's copy is wiped too (BIO_s_secmem) */
static char *
bio_text (BIO *b)
{
  char *data = NULL;
  long n = BIO_get_mem_data (b, &data);
  if (n <= 0)
    return NULL;
  char *out = xmalloc ((size_t) n + 1);
  memcpy (out, data, (size_t) n);
  out[n] = '\0';
  return out;
}

static int
set_serial (X509 *x)
{
  unsigned char raw[16];
  if (RAND_bytes (raw, sizeof raw) != 1)
    return -1;
  raw[0] &= 0x7f; /* positive (RFC 5280 4.1.2.2) */
  BIGNUM *bn = BN_bin2bn (raw, sizeof raw, NULL);
  int r = bn && BN_to_ASN1_INTEGER (bn, X509_get_serialNumber (x)) ? 0 : -1;
  BN_free (bn);
  return r;
}

static int
build_cert (X509 *x, EVP_PKEY *key, const struct policy_plan *p, const char *id, asbx_err_t *err)
{
  /* the container's life (capped at a year) plus a day, else the default */
  const uint64_t year = UINT64_C (365) * 86400;
  long life = p->wall_clock_seconds ? (long) (p->wall_clock_seconds > year ? year : p->wall_clock_seconds) + 86400L
                                    : (long) EGRESS_CA_DEFAULT_VALIDITY;
  /* a commonName is at most 64 characters (RFC 5280 ub-common-name; OpenSSL refuses more) and
   * engines use 64-character ids (Docker, containerd): the id is cut to fit (45 characters) */
  cleanup_free char *cn = xasprintf ("agentsbx egress CA %.45s", id);
  cleanup_free char *nc = name_constraints (p);
  X509_NAME *name = X509_get_subject_name (x);

  if (!X509_set_version (x, 2) || set_serial (x) < 0 || !X509_gmtime_adj (X509_getm_notBefore (x), -3600)
      || !X509_gmtime_adj (X509_getm_notAfter (x), life))
    return ssl_fail (err, "certificate fields");
  if (!X509_NAME_add_entry_by_txt (name, "O", MBSTRING_UTF8, (const unsigned char *) "agentsbx", -1, -1, 0)
      || !X509_NAME_add_entry_by_txt (name, "CN", MBSTRING_UTF8, (const unsigned char *) cn, -1, -1, 0)
      || !X509_set_issuer_name (x, name) || !X509_set_pubkey (x, key))
    return ssl_fail (err, "subject");
  if (add_ext (x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0
      || add_ext (x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0
      || add_ext (x, NID_subject_key_identifier, "hash") < 0 || add_ext (x, NID_name_constraints, nc) < 0)
    return ssl_fail (err, "extensions");
  if (X509_sign (x, key, EVP_sha256 ()) <= 0)
    return ssl_fail (err, "sign");
  return 0;
}

int
egress_ca_make (const struct policy_plan *p, const char *id, struct egress_ca *ca, asbx_err_t *err)
{
  EVP_PKEY *key;
  X509 *x = NULL;
  BIO *kb = NULL, *cb = NULL;
  int r = -1;

  /* loaded here, before the monitor is forked: the monitor's TLS relay inherits it */
  if (openssl_load ("network.http/network.credentials rules (the container's egress CA)", err) < 0)
    return -1;
  key = EVP_PKEY_Q_keygen (NULL, NULL, "EC", "P-256");
  if (key == NULL)
    return ssl_fail (err, "EC P-256 key");
  x = X509_new ();
  kb = BIO_new (BIO_s_secmem ());
  cb = BIO_new (BIO_s_mem ());
  if (!x || !kb || !cb)
    ssl_fail (err, "allocate");
  else if (build_cert (x, key, p, id, err) == 0)
    {
      if (!PEM_write_bio_PrivateKey (kb, key, NULL, NULL, 0, NULL, NULL) || !PEM_write_bio_X509 (cb, x))
        ssl_fail (err, "PEM");
      else if ((ca->key_pem = bio_text (kb)) == NULL || (ca->cert_pem = bio_text (cb)) == NULL)
        {
          egress_ca_clear (ca);
          asbx_error (err, ENOMEM, "egress CA: PEM");
        }
      else
        r = 0;
    }
  BIO_free (kb); /* a secmem BIO clears its buffer when freed */
  BIO_free (cb);
  X509_free (x);
  EVP_PKEY_free (key);
  return r;
}

void
egress_ca_wipe_key (struct egress_ca *ca)
{
  if (ca->key_pem)
    OPENSSL_cleanse (ca->key_pem, strlen (ca->key_pem));
  free (ca->key_pem);
  ca->key_pem = NULL;
}

void
egress_ca_clear (struct egress_ca *ca)
{
  egress_ca_wipe_key (ca);
  free (ca->cert_pem);
  ca->cert_pem = NULL;
}

/* ---- the secrets directory ---------------------------------------------------------------- */

struct secret_check
{
  int dirfd; /* -1: the directory does not exist (then every secret is in the environment) */
  int envfd; /* runtime/secret_env.h, or -1 */
  const char *dir;
  const struct policy_credential *cred;
  size_t index;
  asbx_err_t *err;
  int r;
};

static void
check_one_secret (void *ud, const char *name, size_t len)
{
  struct secret_check *sc = ud;
  struct stat st;
  if (sc->r < 0)
    return;
  cleanup_free char *n = xasprintf ("%.*s", (int) len, name);
  /* the name was checked at parse ([A-Za-z0-9_.-]+, not . or ..): one entry of the directory */
  int fr = sc->dirfd < 0 ? -1 : fstatat (sc->dirfd, n, &st, AT_SYMLINK_NOFOLLOW);
  int e = sc->dirfd < 0 ? ENOENT : errno;
  bool in_env = secret_env_has (sc->envfd, name, len) == 1;
  if (fr < 0 && e == ENOENT && in_env)
    return; /* the runtime's environment has it (runtime/secret_env.h) */
  if (fr == 0 && in_env)
    {
      /* one source per name: a file that shadows (or is shadowed by) the variable would make
       * rotating the file do nothing, or the reverse, without a word */
      sc->r = asbx_error (sc->err, 0,
                          "network.credentials[%zu] (%s, header %s): secret \"%s\" is both a file of %s and the "
                          "runtime's environment variable " SECRET_ENV_PREFIX "%s: keep one of them - refused",
                          sc->index, sc->cred->host, sc->cred->header, n, sc->dir, n);
      if (*sc->err)
        (*sc->err)->errnum = EEXIST;
    }
  else if (fr < 0)
    sc->r = asbx_error (sc->err, e,
                        "network.credentials[%zu] (%s, header %s): secret \"%s\" in %s (nor " SECRET_ENV_PREFIX
                        "%s in the runtime's environment)",
                        sc->index, sc->cred->host, sc->cred->header, n, sc->dir, n);
  else if (!S_ISREG (st.st_mode))
    {
      sc->r = asbx_error (sc->err, 0,
                          "network.credentials[%zu] (%s, header %s): secret \"%s\" in %s is not a regular file "
                          "(a symbolic link or a directory is refused)",
                          sc->index, sc->cred->host, sc->cred->header, n, sc->dir);
      if (*sc->err)
        (*sc->err)->errnum = EINVAL;
    }
}

int
egress_secrets_check (const struct policy_plan *p, asbx_err_t *err)
{
  struct stat st;
  uid_t owner = geteuid ();

  if (!p || !p->active || p->credentials_len == 0)
    return 0;
  if (p->secrets_dir == NULL)
    return asbx_error (err, ENOENT, "network.credentials: no secrets directory (host config secretsDir)");
  const int envfd = secret_env_fd ();
  cleanup_close int fd = open (p->secrets_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && envfd >= 0)
    goto check; /* Docker/CRI: no directory, the secrets come from the runtime's environment */
  if (fd < 0 && (errno == ENOTDIR || errno == ELOOP) && lstat (p->secrets_dir, &st) == 0 && S_ISLNK (st.st_mode))
    return asbx_error (err, ELOOP,
                       "network.credentials: secrets directory %s (host config secretsDir) is a symbolic link: name "
                       "the directory itself - refused",
                       p->secrets_dir);
  if (fd < 0)
    return asbx_error (err, errno, "network.credentials: secrets directory %s (host config secretsDir)",
                       p->secrets_dir);
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "network.credentials: secrets directory %s: fstat", p->secrets_dir);
  if (st.st_uid != owner || (st.st_mode & 077))
    {
      asbx_error (err, 0,
                  "network.credentials: secrets directory %s is owned by uid %u with mode %04o: expected a directory "
                  "of uid %u that neither its group nor others can use (chown %u %s; chmod 0700 %s) - refused",
                  p->secrets_dir, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777), (unsigned) owner,
                  (unsigned) owner, p->secrets_dir, p->secrets_dir);
      if (*err)
        (*err)->errnum = EACCES;
      return -1;
    }
check:;
  struct secret_check sc = { .dirfd = fd, .envfd = envfd, .dir = p->secrets_dir, .err = err };
  for (size_t i = 0; i < p->credentials_len && sc.r == 0; i++)
    {
      sc.cred = &p->credentials[i];
      sc.index = i;
      policy_secret_refs (p->credentials[i].value, check_one_secret, &sc);
    }
  return sc.r;
}
