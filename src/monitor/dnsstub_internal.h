/* dnsstub_internal.h - what dnsstub.c (the stub's sockets, the query side and its decisions)
 * and dnsstub_answer.c (the answer side: each answer address admitted or refused, the nft set
 * updates, the rebuilt answer sent back) share: the stub's state and the few helpers each calls in
 * the other. Not for other modules: the contract is dnsstub.h. */
#ifndef ASBX_MONITOR_DNSSTUB_INTERNAL_H
#define ASBX_MONITOR_DNSSTUB_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "linux/nft.h"
#include "monitor/approvals.h"
#include "monitor/dns_intercept.h"
#include "monitor/dns_rebind.h"
#include "monitor/dns_setlife.h"
#include "monitor/dns_upstream.h"
#include "monitor/dnsstub.h"
#include "monitor/nflog.h"
#include "monitor/querier.h"
#include "monitor/splice.h"

#define PENDING_MAX 256
#define MSG_MAX 4096
#define HELD_MAX 64
#define HELD_MSG 1024
#define ALWAYS_MAX 256
#define CONNS_MAX 32

struct pending
{
  bool used;
  int up_fd; /* while used: this query's own upstream socket (connected; a fresh random port) */
  uint16_t up_id, client_id;
  int stub_fd;
  int conn;     /* -1: UDP (stub_fd, client); else the index of the TCP connection stub_fd */
  uint32_t gen; /* of that connection: a reply never reaches a later connection on the same slot */
  struct sockaddr_storage client;
  socklen_t client_len;
  char name[256];
  unsigned qtype;
  char rule[280];       /* the allowedDomains entry, or approval:allow-once|allow-always */
  bool rd;              /* the client's RD bit */
  unsigned edns;        /* the client's EDNS UDP size (0: none) */
  unsigned char q[300]; /* the query the stub made (dns_build_query), question ending at qend */
  size_t qlen, qend;
  unsigned char cq[262]; /* the client's question (name in its letter case, type, class) */
};

/* a query of an unlisted name, held while the approver decides (approvals `ask`) */
struct held
{
  uint64_t qid; /* 0 = free */
  int stub_fd;
  int conn;
  uint32_t gen;
  struct sockaddr_storage client;
  socklen_t client_len;
  unsigned char msg[HELD_MSG];
  size_t len, qend;
  char name[256];
  unsigned qtype;
};

struct dnsstub
{
  const char *id;
  const struct policy_plan *plan;
  int audit_fd;
  int ep;
  int stub4, stub6;
  int tcp4, tcp6; /* listening: DNS over TCP (RFC 7766), answered from the same stub */
  struct
  {
    int fd;
    uint32_t gen;
    struct sockaddr_storage peer;
    socklen_t peer_len;
    size_t len;
    unsigned char buf[2 + HELD_MSG];
  } conns[CONNS_MAX];
  uint32_t gen;
  /* the TCP connection the query being handled came on (-1: UDP), read by forward/hold/refuse */
  int cur_conn;
  uint32_t cur_gen;
  struct nflog_watch nflog;   /* `network` audit: refused packets from the table (monitor/nflog.h) */
  int netns;                  /* the container's network namespace (the splice makes upstream sockets there) */
  struct splice *splice;      /* the SNI/Host check (monitor/splice.h) */
  struct dns_intercept *icpt; /* the monitor's own resolution of the intercepted names, or NULL */
  struct dns_upstream up;     /* the resolver the queries go to (monitor/dns_upstream.h) */
  struct linux_nft *nft;
  struct pending pend[PENDING_MAX];
  size_t next;
  struct approvals *appr; /* approvals.network ask, else NULL */
  pid_t init_pid;
  struct querier *querier; /* approvals `ask`: who sent a held query (monitor/querier.h) */
  struct held held[HELD_MAX];
  char *always[ALWAYS_MAX]; /* names approved with allow-always: the effective allowlist grows */
  size_t always_len;
  /* the last once-decisions per (name, client socket): the rest of that lookup (glibc sends the
   * A and AAAA queries of one getaddrinfo from one socket) gets the same answer without a new
   * question; a new lookup (new socket) asks again */
  struct
  {
    char name[256];
    struct sockaddr_storage client;
    socklen_t client_len;
    bool allow;
  } recent[16];
  size_t recent_next;
  struct dns_rebind rebind;   /* what an answer may not name (monitor/dns_rebind.h) */
  struct dns_setlife setlife; /* how long the set elements it wrote live (monitor/dns_setlife.h) */
};

/* One `dns` audit record {host, qtype, decision, rule[, addrs][, error]} when the plan audits
 * `dns`; a write failure is dropped (a full disk must not stop the stub). */
void dnsstub_audit (struct dnsstub *d, const char *name, unsigned qtype, const char *decision, const char *rule,
                    char **addrs, size_t naddrs, const char *error);

/* Send the answer m[0..n) to the querier: a datagram to `to` on the stub socket fd (conn < 0),
 * or a length-prefixed message on TCP connection `conn` while it is still the one of generation
 * gen (else dropped); a connection that cannot take it is closed. */
void dnsstub_reply (struct dnsstub *d, int fd, int conn, uint32_t gen, const struct sockaddr_storage *to,
                    socklen_t tolen, const unsigned char *m, size_t n);

/* The pending query p is answered or given up: its upstream socket is closed (ending its epoll
 * registration) and the slot is free. */
void dnsstub_pending_end (struct pending *p);

/* dnsstub_answer.c: the libnftables context in the container's namespace, made at first use;
 * NULL when it cannot be made (then nothing is added to the sets: fail closed). data: the stub
 * (the NFLOG watch's callback form, monitor/nflog.h); the context is owned by it. */
struct linux_nft *dnsstub_nft (void *data);

/* dnsstub_answer.c: splice_intercepted_fn (monitor/splice.h) - data is the stub; the address
 * goes into POLICY_NFT_ICPT4/6; a failure is audited as a `network` record. */
void dnsstub_icpt_set_add (void *data, int family, const unsigned char *addr);

/* dnsstub_answer.c: a datagram on pending query p's upstream socket; see the definition.
 * false when none could be read. */
bool dnsstub_on_answer (struct dnsstub *d, struct pending *p);

#endif
