/* splice_internal.h - what splice.c (the connections and the relay) and splice_http.c (the
 * framing check of a plain-HTTP client stream) share: the per-connection state and the few
 * helpers each calls in the other. Not for other modules: the contract is splice.h. */
#ifndef ASBX_MONITOR_SPLICE_INTERNAL_H
#define ASBX_MONITOR_SPLICE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "linux/splice_pipe.h"
#include "monitor/splice.h"

/* connections at once (a package manager opens 100 in parallel); a free slot costs its struct
 * only: the buffers are allocated at accept and freed at close */
#define CONNS_MAX 512
#define HELLO_MAX SPLICE_HELLO_MAX /* monitor/sni_parse.h */
#define BUF_MAX 16384
/* the capacity asked of a direction's splice(2) pipe (linux/splice_pipe.h) while fewer than
 * PIPES_BIG pipes have it; the others keep the kernel's default (64 KiB): the container opens the
 * connections, and this bounds the pipes' memory at about 8 MiB + 64 KiB per direction */
#define PIPE_WANT (256u << 10)
#define PIPES_BIG 32u

enum
{
  ST_FREE = 0,
  ST_HELLO,
  ST_CONNECTING,
  ST_RELAY
};

struct rbuf
{
  unsigned char *b; /* BUF_MAX bytes while the connection is open, else NULL */
  size_t off, len;
  size_t chk;  /* c2u: bytes before b[chk] are checked and may be sent (off <= chk <= len) */
  size_t hold; /* c2u, while conn.bstart: bytes from b[hold] wait for the body check (hold <= chk) */
};

/* where the client's HTTP stream is (see the file comment) */
enum
{
  H_HEAD = 0, /* at the start of a request */
  H_BODY,     /* `left` Content-Length bytes to go */
  H_CSIZE,    /* chunked: a chunk-size line */
  H_CDATA,    /* chunked: `left` data bytes */
  H_CCRLF,    /* chunked: the CRLF after the data */
  H_TRAILER,  /* chunked: trailer lines until an empty one */
  H_WAIT101,  /* after an Upgrade request: nothing more until the server's status line */
  H_OPAQUE,   /* TLS, or an upgraded connection: not HTTP any more */
  H_REFUSED,  /* a request was refused: the rest of the client's bytes are dropped */
};

struct conn
{
  int state;
  int cfd, ufd;
  struct sockaddr_storage dst;
  socklen_t dlen;
  bool c_eof, u_eof;
  bool c_shut, u_shut;      /* SHUT_WR passed on to the client / the upstream: once each */
  int hs;                   /* H_*: the client's HTTP stream */
  bool upgrade, refuse_403; /* the current request asks for Upgrade; a 403 follows the responses */
  bool bstart;              /* at the start of a body or chunk: not yet seen not to read as a request */
  bool expect100;           /* the current request has `Expect: 100-continue`: its head is not held */
  uint64_t left;            /* bytes of body or chunk data still to pass */
  unsigned heads;           /* request heads let through on this connection */
  char host[256];           /* the last Host checked on this connection (audited when it changes) */
  char status[12];          /* H_WAIT101: the first bytes of the server's answer */
  char blocked[300];        /* H_REFUSED: the X-Agentsbx-Blocked value of the 403 to come */
  size_t status_len;
  struct rbuf c2u, u2c; /* c2u holds the hello first */
  /* once a direction's bytes need no more looking at, they go through a pipe with splice(2)
   * instead of the rbuf (splice.c: u2c unless a 101 is awaited, c2u once opaque); a pipe is
   * opened at its first use; at most one of a direction's rbuf and pipe holds bytes */
  struct splice_pipe c2u_pipe, u2c_pipe;
  bool c2u_bulk, u2c_bulk; /* a read filled the whole rbuf: more is coming, worth a pipe (a small
                            * answer is cheaper through the rbuf than pipe2 + fcntl + 2 splices) */
  uint32_t ev_c, ev_u;     /* the epoll interests registered for cfd and ufd (changed only when they differ) */
};

struct splice
{
  const char *id;
  const struct policy_plan *plan;
  int audit_fd, netns, ep, l4, l6;
  /* one upstream socket per family (v4, v6) made ahead, in the container's namespace and
   * marked (upstream_socket): the next connection's connect does not wait for the namespace
   * round trip, which is done while the previous one's SYN is out; -1 when none */
  int spare[2];
  unsigned pipes_big;            /* open pipes with more than the default capacity (PIPES_BIG at most) */
  struct tls_relay *tls;         /* the interception (monitor/tls_relay.h); NULL when nothing is intercepted */
  splice_intercepted_fn on_icpt; /* splice_on_intercepted */
  void *on_icpt_data;
  struct conn c[CONNS_MAX];
  /* names whose answers the DNS stub let through, until their TTL ends: what may be named */
  struct
  {
    char name[256];
    uint64_t until_ns;
  } resolved[256];
  /* the intercepted addresses: every address an answer for an intercepted name (a
   * network.credentials/http host) gave - the container's through the stub, the monitor's own
   * (monitor/dns_intercept.h: each such name resolved at start and again when its TTL ends),
   * and those reached through a CNAME chain that passes an intercepted name. Another name's TLS
   * or HTTP to one of them is refused, since behind that SNI/Host the server may route the
   * request to the intercepted host unchecked (outside test: SNI of an allowed name to the API's
   * address carried refused methods and bodies to it). Kept for the container's life, not the
   * answer's TTL: after it the address may still be the intercepted host's (outside retest: 62 s
   * after a 60 s answer another name reached it); a stale entry only refuses other names there.
   * When full, the entry seen longest ago makes room. */
  struct
  {
    struct in6_addr addr; /* IPv4 as v4-mapped */
    uint64_t seen_ns;     /* 0: a free entry */
    char host[256];       /* the intercepted name it was an address of (audited) */
  } intercepted_addrs[512];
};

/* the refusal of plain HTTP to a host the TLS relay intercepts (monitor/tls_relay.h) */
#define SPLICE_PLAIN_INTERCEPTED "http: plain HTTP to an intercepted host (HTTPS only)"
/* the refusal of another name on an address an intercepted host's answer gave */
#define SPLICE_OTHER_NAME_INTERCEPTED "sni: another name on an intercepted host's address"

/* splice.c: the intercepted host whose address c's destination is (see intercepted_addrs), or
 * NULL */
const char *splice_dst_intercepted (const struct splice *s, const struct conn *c);

/* splice.c: `host` (lowercase) was let through by the DNS stub and its answer still lives */
bool splice_name_allowed (struct splice *s, const char *host);

/* splice.c: one `network` audit record {addr, port, proto, host, decision, rule} of c's
 * original destination (when the policy audits network events); host may be NULL */
void splice_audit_conn (struct splice *s, struct conn *c, const char *host, const char *decision, const char *rule);

/* splice.c: the X-Agentsbx-Blocked value of a refusal (without the host name of "host not
 * allowed: "); a static string or a suffix of rule */
const char *splice_blocked_why (const char *host, const char *rule);

/* splice_http.c: check one complete request head h[0..n) (ending in CRLF CRLF) for unambiguous
 * framing, and an Upgrade only as c's first request (no head let through yet: c->heads), and
 * set c->hs/left/upgrade for what follows it. NULL, or the audit rule of the refusal. */
const char *splice_http_head (struct conn *c, const unsigned char *h, size_t n);

/* splice_http.c: advance c->c2u.chk over every complete, checked part of the client's stream;
 * a request that fails the check is refused (audited, the 403 queued behind the responses). */
void splice_http_scan (struct splice *s, struct conn *c);

/* splice_http.c: H_WAIT101, the server's first bytes p[0..n) after an Upgrade request: opaque
 * after a 101, else HTTP again. */
void splice_http_status (struct conn *c, const unsigned char *p, size_t n);

#endif
