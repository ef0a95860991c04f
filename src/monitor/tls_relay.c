/* tls_relay.c - the TLS interception's connections and state machine (see tls_relay.h); the
 * HTTP side of each state is tls_relay_http.c.
 *
 * States: T_ACCEPT (TLS with the agent), T_HEAD (the request head), T_CONNECT (TCP to the
 * original destination), T_UHS (TLS with it), T_FWD (head and body up, response down at the
 * same time), T_ERR (a 4xx/5xx of ours to the agent, then the end).
 * One drive() per event runs every operation that can progress until none does; each SSL
 * operation that would block records the epoll interest it waits for (cw/uw), and the
 * connection's interests are exactly those (level-triggered): nothing is polled for that no
 * operation waits on. The agent's TLS reads go through a memory BIO the relay fills from the
 * socket (pump), which is how the ClientHello the splice already consumed is given back to
 * OpenSSL; its writes go straight to the socket.
 * A peer that resets (EPOLLHUP/EPOLLERR) ends the connection; an upstream that has closed is
 * dropped from the set at once, so its HUP cannot spin the loop while the agent is slow. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/openssl_dl.h"
#include "core/openssl_err.h"
#include "core/util.h"
#include "linux/netns_call.h"
#include "policy/nft_ruleset.h"
#include "monitor/audit.h"
#include "monitor/http_req.h"
#include "monitor/http_rules.h"
#include "monitor/tls_leaf.h"
#include "monitor/tls_relay.h"
#include "monitor/tls_relay_internal.h"

#define ssl_fail(err, what) openssl_error (err, "network: TLS interception", what)

bool
tls_relay_wants (const struct tls_relay *r, const char *host)
{
  return http_rules_intercepted (r->plan, host);
}

int
tls_relay_fd (const struct tls_relay *r)
{
  return r->ep;
}

/* ---- the audit record ---- */

void
tls_relay_record (struct tls_relay *r, struct tconn *c)
{
  if (!c->requested || !(r->plan->audit_events & POLICY_AUDIT_NETWORK))
    return;
  c->requested = false;
  struct audit_rec *a = audit_rec_new (r->id, "http");
  audit_rec_str (a, "method", c->req.method);
  audit_rec_str (a, "host", c->host);
  audit_rec_str (a, "path", c->path);
  audit_rec_int (a, "status", c->status);
  audit_rec_int (a, "bytesUp", (int64_t) c->up);
  audit_rec_int (a, "bytesDown", (int64_t) c->down);
  audit_rec_str (a, "rule", c->rule);
  audit_rec_strv (a, "credentials", (char *const *) c->creds, c->ncreds);
  asbx_err_t e = NULL;
  if (audit_rec_write (a, r->audit_fd, &e) < 0)
    asbx_error_free (&e);
}

/* ---- connections ---- */

void
tls_relay_upstream_close (struct tls_relay *r, struct tconn *c)
{
  if (c->us)
    SSL_free (c->us);
  c->us = NULL;
  if (c->ufd >= 0)
    {
      epoll_ctl (r->ep, EPOLL_CTL_DEL, c->ufd, NULL);
      close (c->ufd);
    }
  c->ufd = -1;
}

static void
conn_free (struct tls_relay *r, size_t k)
{
  struct tconn *c = r->c[k];
  if (!c)
    return;
  tls_relay_record (r, c);
  tls_relay_upstream_close (r, c);
  if (c->cs)
    SSL_free (c->cs);
  if (c->cfd >= 0)
    {
      epoll_ctl (r->ep, EPOLL_CTL_DEL, c->cfd, NULL);
      close (c->cfd);
    }
  if (c->uhead)
    {
      OPENSSL_cleanse (c->uhead, c->uhead_len);
      free (c->uhead);
    }
  free (c->err_resp);
  OPENSSL_cleanse (c, sizeof *c);
  free (c);
  r->c[k] = NULL;
}

/* our own answer to the agent (a refusal or an upstream failure), then the end: status code,
 * its reason phrase and why, which goes into X-Agentsbx-Blocked and the plain-text body */
void
tls_relay_answer (struct tls_relay *r, struct tconn *c, int code, const char *why)
{
  const char *phrase = code == 400 ? "Bad Request" : code == 403 ? "Forbidden" : "Bad Gateway";
  char body[600];
  int bn = snprintf (body, sizeof body, "agentsbx egress: %s %s: %s\n",
                     code == 403 ? "request refused by the policy for" : "request failed for", c->host, why);
  if (bn < 0 || (size_t) bn >= sizeof body)
    bn = (int) sizeof body - 1;
  char *resp = NULL;
  int n = asprintf (&resp,
                    "HTTP/1.1 %d %s\r\nX-Agentsbx-Blocked: %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                    "Content-Length: %d\r\nConnection: close\r\n\r\n%.*s",
                    code, phrase, why, bn, bn, body);
  tls_relay_upstream_close (r, c);
  if (n < 0)
    {
      c->st = T_FREE; /* drive ends it */
      return;
    }
  snprintf (c->rule, sizeof c->rule, "%s", why);
  c->status = code;
  c->err_resp = resp;
  c->err_len = (size_t) n;
  c->err_off = 0;
  c->st = T_ERR;
}

/* read what the agent sent into the memory BIO OpenSSL reads from */
static void
pump (struct tconn *c)
{
  unsigned char buf[IO_MAX];
  while (!c->c_eof && BIO_ctrl_pending (c->crbio) < CRBIO_MAX)
    {
      ssize_t n = recv (c->cfd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0)
        {
          BIO_write (c->crbio, buf, (int) n);
          continue;
        }
      if (n == 0 || (errno != EAGAIN && errno != EINTR))
        {
          c->c_eof = true;
          BIO_set_mem_eof_return (c->crbio, 0); /* OpenSSL now sees the end */
        }
      break;
    }
}

/* the result r of an SSL operation on s: 1 = done, 0 = blocked (the interest recorded), -1 = the
 * end or an error */
int
tls_relay_io (struct tconn *c, SSL *s, int ret)
{
  if (ret > 0)
    return 1;
  int e = SSL_get_error (s, ret);
  unsigned *w = s == c->cs ? &c->cw : &c->uw;
  if (e == SSL_ERROR_WANT_READ)
    {
      *w |= EPOLLIN;
      return 0;
    }
  if (e == SSL_ERROR_WANT_WRITE)
    {
      *w |= EPOLLOUT;
      return 0;
    }
  return -1;
}

/* a socket in the container's namespace, marked so the redirect skips it (as the splice does) */
int
tls_relay_upstream_socket (struct tls_relay *r, int family)
{
  return linux_netns_marked_stream (r->netns, family, POLICY_NFT_SPLICE_MARK);
}

/* ---- each state's progress: true when something moved ---- */

static bool
step_accept (struct tls_relay *r, struct tconn *c)
{
  ERR_clear_error ();
  int x = tls_relay_io (c, c->cs, SSL_do_handshake (c->cs));
  if (x == 0)
    return false;
  if (x < 0)
    {
      /* the agent does not trust the CA, offered only h2, or went away: one record saying which
       * (the OpenSSL reason: "tlsv1 alert unknown ca", "no application protocol") */
      unsigned long l = ERR_peek_error ();
      if (l)
        {
          char e[160];
          ERR_error_string_n (l, e, sizeof e);
          const char *reason = strrchr (e, ':');
          snprintf (c->rule, sizeof c->rule, "tls with the agent failed: %s", reason ? reason + 1 : e);
          snprintf (c->req.method, sizeof c->req.method, "-");
          c->requested = true;
          (void) r;
        }
      ERR_clear_error ();
      c->st = T_FREE;
      return true;
    }
  c->st = T_HEAD;
  return true;
}

static bool
step_head (struct tls_relay *r, struct tconn *c)
{
  if (!c->reparse)
    {
      ERR_clear_error ();
      int n = SSL_read (c->cs, c->in + c->in_len, (int) (IN_MAX - c->in_len));
      int x = tls_relay_io (c, c->cs, n);
      if (x == 0)
        return false;
      if (x < 0)
        {
          c->st = T_FREE; /* closed before a whole head (or between two requests) */
          return true;
        }
      c->in_len += (size_t) n;
    }
  c->reparse = false;
  const char *why;
  int p = http_head_parse (c->in, c->in_len, HTTP_REQUEST, &c->req, &why);
  if (p < 0)
    {
      c->requested = true;
      snprintf (c->req.method, sizeof c->req.method, "-");
      tls_relay_answer (r, c, 400, why);
    }
  else if (p > 0)
    tls_relay_request (r, c);
  return true;
}

static bool
step_connect (struct tls_relay *r, struct tconn *c)
{
  int e = 0;
  socklen_t el = sizeof e;
  if (getsockopt (c->ufd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
    e = errno;
  if (e == EINPROGRESS || e == EALREADY)
    return false;
  if (e == 0)
    {
      /* still connecting when no error and not writable yet: ask the kernel */
      struct sockaddr_storage peer;
      socklen_t pl = sizeof peer;
      if (getpeername (c->ufd, (struct sockaddr *) &peer, &pl) < 0)
        {
          c->uw |= EPOLLOUT;
          return false;
        }
    }
  if (e)
    {
      char why[200];
      snprintf (why, sizeof why, "upstream connect: %s", strerror (e));
      tls_relay_answer (r, c, 502, why);
      return true;
    }
  c->us = SSL_new (r->uctx);
  if (!c->us || SSL_set_fd (c->us, c->ufd) != 1 || SSL_set_tlsext_host_name (c->us, c->host) != 1
      || SSL_set1_host (c->us, c->host) != 1)
    {
      ERR_clear_error ();
      tls_relay_answer (r, c, 502, "upstream TLS setup failed");
      return true;
    }
  SSL_set_connect_state (c->us);
  c->st = T_UHS;
  return true;
}

static bool
step_uhs (struct tls_relay *r, struct tconn *c)
{
  ERR_clear_error ();
  int x = tls_relay_io (c, c->us, SSL_do_handshake (c->us));
  if (x == 0)
    return false;
  if (x < 0)
    {
      char why[300];
      long v = SSL_get_verify_result (c->us);
      if (v != X509_V_OK)
        snprintf (why, sizeof why, "upstream certificate verification failed: %s", X509_verify_cert_error_string (v));
      else
        {
          char e[200] = "connection closed";
          unsigned long l = ERR_get_error ();
          if (l)
            ERR_error_string_n (l, e, sizeof e);
          snprintf (why, sizeof why, "upstream TLS handshake failed: %s", e);
        }
      ERR_clear_error ();
      tls_relay_answer (r, c, 502, why);
      return true;
    }
  c->st = T_FWD;
  return true;
}

static bool
step_err (struct tconn *c)
{
  ERR_clear_error ();
  int n = SSL_write (c->cs, c->err_resp + c->err_off, (int) (c->err_len - c->err_off));
  int x = tls_relay_io (c, c->cs, n);
  if (x == 0)
    return false;
  if (x > 0)
    {
      c->err_off += (size_t) n;
      c->down += (uint64_t) n;
      if (c->err_off < c->err_len)
        return true;
      ERR_clear_error ();
      SSL_shutdown (c->cs);
    }
  c->st = T_FREE;
  return true;
}

static void
interests (struct tls_relay *r, size_t k)
{
  struct tconn *c = r->c[k];
  struct epoll_event ev = { .data.u64 = k * 2 };
  ev.events = (c->cw & EPOLLIN && !c->c_eof ? EPOLLIN : 0) | (c->cw & EPOLLOUT);
  epoll_ctl (r->ep, EPOLL_CTL_MOD, c->cfd, &ev);
  if (c->ufd < 0)
    return;
  ev.data.u64 = k * 2 + 1;
  ev.events = c->st == T_CONNECT ? EPOLLOUT : c->uw & (EPOLLIN | EPOLLOUT);
  epoll_ctl (r->ep, EPOLL_CTL_MOD, c->ufd, &ev);
}

static void
drive (struct tls_relay *r, size_t k)
{
  struct tconn *c = r->c[k];
  int rounds;
  for (rounds = 0; rounds < 1000; rounds++)
    {
      bool moved = false;
      c->cw = c->uw = 0;
      pump (c);
      switch (c->st)
        {
        case T_ACCEPT: moved = step_accept (r, c); break;
        case T_HEAD: moved = step_head (r, c); break;
        case T_CONNECT: moved = step_connect (r, c); break;
        case T_UHS: moved = step_uhs (r, c); break;
        case T_FWD:
          moved = tls_relay_fwd_up (r, c);
          if (c->st == T_FWD && tls_relay_fwd_down (r, c))
            moved = true;
          break;
        case T_ERR: moved = step_err (c); break;
        default: break;
        }
      if (c->st == T_FREE)
        {
          conn_free (r, k);
          return;
        }
      if (!moved)
        break;
    }
  if (rounds == 1000)
    {
      /* the round cap (other connections get their turn) ended a connection that still moves:
       * the last round blocked on nothing, so cw/uw are empty and no event would ever drive it
       * again (a 64 MiB download stalled at 16 MiB: the egress bench). Wait for anything. */
      c->cw = EPOLLIN | EPOLLOUT;
      c->uw = EPOLLIN | EPOLLOUT;
    }
  interests (r, k);
}

void
tls_relay_dispatch (struct tls_relay *r)
{
  struct epoll_event ev[16];
  int n = epoll_wait (r->ep, ev, 16, 0);
  for (int i = 0; i < n; i++)
    {
      size_t k = (size_t) (ev[i].data.u64 / 2);
      if (k >= TCONNS_MAX || !r->c[k])
        continue;
      if (ev[i].data.u64 % 2 == 0 && (ev[i].events & (EPOLLERR | EPOLLHUP)))
        {
          conn_free (r, k); /* the agent reset: nobody to answer */
          continue;
        }
      drive (r, k);
    }
}

/* ALPN (RFC 7301): http/1.1 or nothing; a client offering only h2 fails the handshake */
static int
alpn_select (SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in, unsigned inlen,
             void *arg)
{
  (void) ssl;
  (void) arg;
  for (unsigned i = 0; i < inlen; i += 1u + in[i])
    if (in[i] == 8 && i + 9 <= inlen && memcmp (in + i + 1, "http/1.1", 8) == 0)
      {
        *out = in + i + 1;
        *outlen = 8;
        return SSL_TLSEXT_ERR_OK;
      }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

void
tls_relay_adopt (struct tls_relay *r, int cfd, const struct sockaddr_storage *dst, socklen_t dlen, const char *host,
                 const unsigned char *hello, size_t n)
{
  size_t k = 0;
  while (k < TCONNS_MAX && r->c[k])
    k++;
  X509 *leaf;
  EVP_PKEY *key;
  asbx_err_t e = NULL;
  if (k == TCONNS_MAX || tls_leaf_get (r->leaf, host, &leaf, &key, &e) < 0)
    {
      asbx_error_free (&e);
      close (cfd);
      return;
    }
  struct tconn *c = xmalloc0 (sizeof *c);
  r->c[k] = c;
  c->cfd = cfd;
  c->ufd = -1;
  c->st = T_ACCEPT;
  memcpy (&c->dst, dst, dlen);
  c->dlen = dlen;
  snprintf (c->host, sizeof c->host, "%s", host);
  c->cs = SSL_new (r->sctx);
  c->crbio = BIO_new (BIO_s_mem ());
  BIO *wbio = BIO_new_socket (cfd, BIO_NOCLOSE);
  if (!c->cs || !c->crbio || !wbio || SSL_use_certificate (c->cs, leaf) != 1 || SSL_use_PrivateKey (c->cs, key) != 1
      || BIO_write (c->crbio, hello, (int) n) != (int) n)
    {
      BIO_free (c->crbio);
      BIO_free (wbio);
      c->crbio = NULL;
      ERR_clear_error ();
      conn_free (r, k);
      return;
    }
  BIO_set_mem_eof_return (c->crbio, -1); /* empty = "more to come", until the socket's EOF */
  SSL_set_bio (c->cs, c->crbio, wbio);
  SSL_set_accept_state (c->cs);
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = k * 2 };
  if (epoll_ctl (r->ep, EPOLL_CTL_ADD, cfd, &ev) < 0)
    {
      conn_free (r, k);
      return;
    }
  drive (r, k);
}

/* the PEM certificates of the open file fd into store: how many, or -1 */
static int
load_cafile (X509_STORE *store, int fd)
{
  BIO *b = BIO_new_fd (fd, BIO_NOCLOSE);
  STACK_OF (X509_INFO) *infos = b ? PEM_X509_INFO_read_bio (b, NULL, NULL, NULL) : NULL;
  BIO_free (b);
  if (!infos)
    return -1;
  int n = 0;
  for (int i = 0; i < sk_X509_INFO_num (infos); i++)
    {
      X509_INFO *in = sk_X509_INFO_value (infos, i);
      if (in->x509 && X509_STORE_add_cert (store, in->x509) == 1)
        n++;
    }
  sk_X509_INFO_pop_free (infos, X509_INFO_free);
  return n;
}

struct tls_relay *
tls_relay_new (const char *id, const struct policy_plan *plan, int netns_fd, int audit_fd,
               const struct tls_relay_keys *keys, asbx_err_t *err)
{
  struct tls_relay *r = xmalloc0 (sizeof *r);
  r->id = id;
  r->plan = plan;
  r->netns = netns_fd;
  r->audit_fd = audit_fd;
  r->ep = r->secrets_dirfd = -1;
  r->secrets_envfd = keys->secrets_envfd;
  const char *ca_cert_pem = keys->ca_cert_pem, *ca_key_pem = keys->ca_key_pem;
  if (!ca_cert_pem || !ca_key_pem)
    {
      asbx_error (err, 0, "network.credentials/network.http: the container's egress CA is missing");
      goto fail;
    }
  r->leaf = tls_leaf_new (ca_cert_pem, ca_key_pem, err);
  if (!r->leaf)
    goto fail;
  if (plan->credentials_len)
    {
      const char *dir = plan->secrets_dir ? plan->secrets_dir : "/etc/agentsbx/secrets";
      r->secrets_dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      /* Docker/CRI: the secrets may all be in the runtime's environment, with no directory */
      if (r->secrets_dirfd < 0 && !(errno == ENOENT && r->secrets_envfd >= 0))
        {
          asbx_error (err, errno, "network.credentials: secrets directory %s", dir);
          goto fail;
        }
    }
  r->sctx = SSL_CTX_new (TLS_server_method ());
  if (!r->sctx || SSL_CTX_set_min_proto_version (r->sctx, TLS1_2_VERSION) != 1)
    {
      ssl_fail (err, "server context");
      goto fail;
    }
  SSL_CTX_set_options (r->sctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_mode (r->sctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_alpn_select_cb (r->sctx, alpn_select, NULL);
  r->uctx = SSL_CTX_new (TLS_client_method ());
  if (!r->uctx || SSL_CTX_set_min_proto_version (r->uctx, TLS1_2_VERSION) != 1
      || SSL_CTX_set_default_verify_paths (r->uctx) != 1
      || SSL_CTX_set_alpn_protos (r->uctx, (const unsigned char *) "\x08http/1.1", 9) != 0)
    {
      ssl_fail (err, "upstream context (the host's trust store)");
      goto fail;
    }
  SSL_CTX_set_verify (r->uctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_mode (r->uctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (plan->upstream_ca_file)
    {
      int fd = open (plan->upstream_ca_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
      int n = fd < 0 ? -1 : load_cafile (SSL_CTX_get_cert_store (r->uctx), fd);
      int saved = errno;
      if (fd >= 0)
        close (fd);
      ERR_clear_error ();
      if (n <= 0)
        {
          asbx_error (err, fd < 0 ? saved : 0, "upstreamCaFile %s: %s", plan->upstream_ca_file,
                      fd < 0 ? "cannot open" : "no PEM certificate in it");
          goto fail;
        }
    }
  r->ep = epoll_create1 (EPOLL_CLOEXEC);
  if (r->ep < 0)
    {
      asbx_error (err, errno, "network: TLS interception: epoll_create1");
      goto fail;
    }
  return r;
fail:
  tls_relay_free (r);
  return NULL;
}

void
tls_relay_free (struct tls_relay *r)
{
  if (!r)
    return;
  for (size_t k = 0; k < TCONNS_MAX; k++)
    conn_free (r, k);
  SSL_CTX_free (r->sctx);
  SSL_CTX_free (r->uctx);
  tls_leaf_free (r->leaf);
  if (r->ep >= 0)
    close (r->ep);
  if (r->secrets_dirfd >= 0)
    close (r->secrets_dirfd);
  free (r);
}
