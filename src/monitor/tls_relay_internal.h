/* tls_relay_internal.h - what tls_relay.c (the connections: TLS with both sides, the epoll
 * interests, the driver of the state machine) and tls_relay_http.c (a request's checks and
 * credentials, its body up, the response down, keep-alive) share: the per-connection state and
 * the helpers each calls in the other. Not for other modules: the contract is tls_relay.h. */
#ifndef ASBX_MONITOR_TLS_RELAY_INTERNAL_H
#define ASBX_MONITOR_TLS_RELAY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/openssl_dl.h"

#include "policy/plan.h"
#include "monitor/http_req.h"
#include "monitor/tls_leaf.h"
#include "monitor/tls_relay.h"

#define TCONNS_MAX 256 /* pointers; a tconn is allocated per connection */
#define IO_MAX 16384
#define IN_MAX (HTTP_HEAD_MAX + IO_MAX)
#define OUT_MAX (HTTP_HEAD_MAX + IO_MAX)
#define OUT_SLACK 64    /* room kept in out for the `Connection: close` the response head gets */
#define CRBIO_MAX 65536 /* agent bytes buffered ahead of OpenSSL */
#define CREDS_MAX 16    /* credential headers recorded per request */

enum
{
  T_FREE = 0,
  T_ACCEPT,
  T_HEAD,
  T_CONNECT,
  T_UHS,
  T_FWD,
  T_ERR,
};

enum
{
  R_HEAD = 0, /* the response head (and 1xx heads, passed on) */
  R_BODY,     /* a framed body */
  R_EOF,      /* no framing: until the upstream closes */
  R_COMPLETE, /* the response is complete */
};

struct tconn
{
  int st;
  int cfd, ufd;
  SSL *cs, *us;
  BIO *crbio; /* the agent's bytes, read by the relay from cfd (owned by cs) */
  bool c_eof, u_eof;
  bool keep;       /* the response is framed and the agent did not ask to close: another request may follow */
  bool reparse;    /* bytes after the last request's body wait in `in`: parse them before reading */
  unsigned cw, uw; /* epoll interests the blocked operations wait for */
  struct sockaddr_storage dst;
  socklen_t dlen;
  char host[256];
  /* the agent's plaintext: the request head, then body bytes in passing */
  unsigned char in[IN_MAX];
  size_t in_len, fwd_off, fwd_end; /* in[fwd_off..fwd_end): body bytes checked, to send up */
  struct http_head req;
  struct http_body body;
  bool body_end, body_done; /* the decoder saw the body's end; all of it went up */
  uint64_t max_body;
  unsigned char *uhead; /* the head sent upstream (credentials set: wiped once sent) */
  size_t uhead_len, uhead_off;
  /* the upstream's plaintext: out[out_off..rscan) checked and to send to the agent */
  unsigned char out[OUT_MAX];
  size_t out_off, out_len, rscan;
  int rs;
  struct http_body rbody;
  char *err_resp; /* T_ERR: our response */
  size_t err_len, err_off;
  /* the audit record */
  char path[512];
  int status;
  uint64_t up, down;
  char rule[200];
  const char *creds[CREDS_MAX];
  size_t ncreds;
  bool requested; /* a request head was read: the record is written at the end */
};

struct tls_relay
{
  const char *id;
  const struct policy_plan *plan;
  int netns, audit_fd, ep, secrets_dirfd;
  int secrets_envfd; /* the memfd of the runtime's environment secrets (kept by the monitor), or -1 */
  struct tls_leaf *leaf;
  SSL_CTX *sctx, *uctx;
  struct tconn *c[TCONNS_MAX];
};

/* tls_relay.c: the `http` audit record of c's request, once (when audit.events has network) */
void tls_relay_record (struct tls_relay *r, struct tconn *c);

/* tls_relay.c: close c's upstream side (its SSL, its socket, out of the epoll set) */
void tls_relay_upstream_close (struct tls_relay *r, struct tconn *c);

/* tls_relay.c: our own answer to the agent (code 400, 403 or 502; why into X-Agentsbx-Blocked
 * and the plain-text body, and the record's rule), then the end of the connection (T_ERR) */
void tls_relay_answer (struct tls_relay *r, struct tconn *c, int code, const char *why);

/* tls_relay.c: the result ret of an SSL operation on s (c->cs or c->us): 1 = done, 0 = blocked
 * (the epoll interest it waits for recorded in c->cw / c->uw), -1 = the end or an error */
int tls_relay_io (struct tconn *c, SSL *s, int ret);

/* tls_relay.c: a non-blocking TCP socket of `family` in the container's namespace, marked
 * POLICY_NFT_SPLICE_MARK (as the splice's); -1 on failure */
int tls_relay_upstream_socket (struct tls_relay *r, int family);

/* tls_relay_http.c: a complete request head in c->in (T_HEAD): check it, set the credentials,
 * start the upstream connection (T_CONNECT) - or answer the refusal */
void tls_relay_request (struct tls_relay *r, struct tconn *c);

/* tls_relay_http.c, T_FWD: the request's head and body up / the response down (and the next
 * request on a kept-alive connection); true when something moved */
bool tls_relay_fwd_up (struct tls_relay *r, struct tconn *c);
bool tls_relay_fwd_down (struct tls_relay *r, struct tconn *c);

#endif
