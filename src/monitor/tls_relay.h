/* tls_relay.h - the egress's TLS interception (issue 19): for a connection whose TLS server name
 * is a host of network.credentials or network.http (plan.h; exact, lower case), the splice
 * (monitor/splice.h) hands the connection here after its SNI check instead of relaying the bytes.
 *
 * Per connection (HTTP/1.1 only):
 *   1. TLS with the agent, as the host: a leaf of the container's CA (monitor/tls_leaf.h); the
 *      ClientHello the splice already read is fed to OpenSSL first (a memory BIO in front of the
 *      socket's reads). ALPN: only http/1.1 (a client offering only h2 fails the handshake with
 *      no_application_protocol; one offering no ALPN speaks HTTP/1.1).
 *   2. The request head (monitor/http_req.h; anything ambiguous is a 400). Refused with a 403
 *      (a plain-text body saying why, and `X-Agentsbx-Blocked`): a Host other than the TLS server
 *      name (domain fronting; ":443" allowed), an Upgrade, a request the host's network.http
 *      entries do not all allow (monitor/http_rules.h), a body over maxBodyBytes (Content-Length
 *      at once; a chunked body as it passes: the upstream connection is then cut before the
 *      body's end, so the server never sees a complete request).
 *   3. The credentials: every network.credentials entry of the host sets its header (replacing
 *      any the agent sent); `${secret:NAME}` is read from plan->secrets_dir at EACH request
 *      (else from the runtime's environment secrets, monitor/secret_tpl.h)
 *      (openat on a dirfd opened at start, O_NOFOLLOW, a regular file, one line; a trailing
 *      newline dropped), so a rotated secret applies to the next request. A missing secret is a
 *      502 to the agent. Values are never logged, and are wiped from the relay's memory once sent.
 *   4. TLS to the original destination (a socket in the container's namespace, marked, as the
 *      splice makes it: the filter chain applies), verified against the host's trust store and
 *      plan->upstream_ca_file, SNI and SSL_set1_host set to the host: a failure is a 502 with
 *      the reason (the verification error), never a downgrade.
 *   5. The request goes up with `Connection: close` (one request per upstream connection); the
 *      response's head is parsed for its framing (Content-Length, chunked, none for HEAD/204/304,
 *      else until the upstream closes) and passed on with `Connection: keep-alive` when its end
 *      is known that way, the agent spoke HTTP/1.1 without asking to close and its whole body
 *      went up - then the agent's next request (pipelined ones included) is read on the same
 *      connection, with a fresh upstream connection - else with `Connection: close`, and the
 *      connection to the agent ends after it. 1xx responses (100 Continue) are passed on.
 * Every request, allowed or refused, is one `http` audit record (when audit.events has
 * `network`): method, host, path (query string dropped), status, bytesUp (plaintext sent
 * upstream: head and body), bytesDown (plaintext sent to the agent), rule ("allow[N]", "any", or
 * the refusal), credentials (the header names set; never a value).
 * Non-blocking throughout, on its own epoll set (tls_relay_fd) inside the monitor's loop: a
 * stalled agent or upstream holds its own connection only (known limit, as in the splice: no idle
 * timeout yet, so an agent can hold the 64 slots with idle connections - its own egress only).
 * Not supported: HTTP/2 (ALPN refuses it), Upgrade (WebSocket: 403), CONNECT. */
#ifndef ASBX_MONITOR_TLS_RELAY_H
#define ASBX_MONITOR_TLS_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "core/error.h"
#include "policy/plan.h"

struct tls_relay;

/* What the interception holds that the container must never see: the container's egress CA
 * (PEM text, runtime/egress_ca.h) and the memfd of the runtime's environment secrets
 * (runtime/secret_env.h; -1 = none), kept open by the monitor for the container's life. */
struct tls_relay_keys
{
  const char *ca_cert_pem;
  const char *ca_key_pem;
  int secrets_envfd;
};

/* For the container `id` (kept by the caller) and its plan: load the CA (keys->ca_*_pem, see
 * monitor/tls_leaf.h), the upstream trust (the host's default paths, plan->upstream_ca_file),
 * open plan->secrets_dir when the plan has credentials (a directory that does not exist is no
 * error when keys->secrets_envfd holds environment secrets: create checked that every secret is
 * in one of them). netns_fd, audit_fd and keys->secrets_envfd are kept by the caller for the
 * relay's life. NULL with *err ("network.credentials: secrets directory /etc/agentsbx/secrets:
 * No such file or directory"). */
struct tls_relay *tls_relay_new (const char *id, const struct policy_plan *plan, int netns_fd, int audit_fd,
                                 const struct tls_relay_keys *keys, asbx_err_t *err);

/* Whether connections to `host` (lower case, the SNI) are intercepted. */
bool tls_relay_wants (const struct tls_relay *r, const char *host);

/* Take over the accepted client socket cfd (non-blocking; r closes it) whose first bytes
 * hello[0..n) (the ClientHello, and whatever followed) were already read, to the original
 * destination dst. When no slot is free, cfd is closed (the agent sees a reset). */
void tls_relay_adopt (struct tls_relay *r, int cfd, const struct sockaddr_storage *dst, socklen_t dlen,
                      const char *host, const unsigned char *hello, size_t n);

/* One fd to poll for POLLIN (an epoll set over the relay's sockets). */
int tls_relay_fd (const struct tls_relay *r);

/* Handle whatever is ready; never blocks. */
void tls_relay_dispatch (struct tls_relay *r);

void tls_relay_free (struct tls_relay *r);

#endif
