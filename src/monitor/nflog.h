/* nflog.h - `network` audit records of refused connections (POLICY.md §6; issue 7). The
 * filtered-mode table (policy/nft_ruleset.c) sends every packet it is about to reject, rate
 * limited, to NFLOG group POLICY_NFT_LOG_GROUP of the container's network namespace (nfnetlink_log
 * instances are per namespace, so groups never mix between containers); the monitor's DNS stub
 * holds the listening socket and turns each packet into one record
 * {"event":"network","addr","port","proto","decision":"refused","rule"}. */
#ifndef ASBX_MONITOR_NFLOG_H
#define ASBX_MONITOR_NFLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Open and bind the NFLOG socket for `group` in the CURRENT network namespace (the caller has
 * entered the container's), copying the first 128 bytes of each packet (headers only).
 * Returns the fd (non-blocking, caller owns) or -1 with *err. */
int nflog_open (uint16_t group, asbx_err_t *err);

/* Read every queued packet from fd and write one `network` record each to audit_fd for
 * container id. Never blocks; malformed messages are skipped. */
size_t nflog_dispatch (int fd, const char *id, int audit_fd);

struct linux_nft;

/* What unlogged_sync (nflog.c) has counted so far. */
struct nflog_unlogged
{
  uint64_t seen;    /* the counter's value last read */
  uint64_t last_ns; /* CLOCK_MONOTONIC of that read */
  int tfd;          /* timerfd: when to read again (the count moved, or a read came too soon) */
};

/* The `network` audit of one container: its NFLOG socket, and the count of the packets the
 * table refused but its log limit (POLICY_NFT_LOG_RATE) kept from NFLOG: the table counts them
 * in named counter POLICY_NFT_UNLOGGED (policy/nft_ruleset.c); the count is read with `nft` (a
 * context in the container's namespace) and what is new since the last read is added to the
 * audit sink's `suppressed.network` (audit_sink_suppressed_add). Bounded work: at most one read
 * a second unless at the end; a read that comes too soon, or that found the count moved (a flood
 * goes on), arms the timer for one more a second later, so the count is on record within about
 * a second of the flood's end and costs nothing once it stopped moving. A counter that went down
 * (the table was replaced) counts from its new value. A failed read (no table) counts nothing. */
struct nflog_watch
{
  int fd;                         /* the NFLOG socket (nflog_open), -1 = not watching */
  struct nflog_unlogged unlogged; /* refused packets the log limit kept from NFLOG: counted */
  uint64_t packets;               /* NFLOG packet messages received (recorded or not) */
  const char *id;                 /* the container id (borrowed) */
  int audit_fd;                   /* where the records go (borrowed) */
};

/* Nothing watched yet: both fds -1, so nflog_watch_close is safe at once. */
void nflog_watch_init (struct nflog_watch *w);

/* In the CURRENT network namespace (the caller has entered the container's): open the NFLOG
 * socket for POLICY_NFT_LOG_GROUP and the counter's timerfd (both non-blocking; poll both for
 * POLLIN and call nflog_watch_dispatch). id and audit_fd are borrowed for the watch's life.
 * 0, or -1 with *err (what was opened stays in w for nflog_watch_close). */
int nflog_watch_open (struct nflog_watch *w, const char *id, int audit_fd, asbx_err_t *err);

/* nflog_watch_open with the NFLOG socket already made (nflog_open, in the container's namespace,
 * e.g. by a helper: linux/netns_call.h); w owns fd from here on, also on error. 0, or -1 with
 * *err (timerfd_create). */
int nflog_watch_adopt (struct nflog_watch *w, int fd, const char *id, int audit_fd, asbx_err_t *err);

/* Close what w holds (either fd may be -1) and leave it watching nothing; records nothing (call
 * nflog_watch_finish first at the container's end). */
void nflog_watch_close (struct nflog_watch *w);

/* True when fd is one of w's (the NFLOG socket or the counter's timer). */
bool nflog_watch_owns (const struct nflog_watch *w, int fd);

/* The libnftables context in the container's namespace for a counter read, made by the caller
 * on first use; NULL = cannot count (nothing added). */
typedef struct linux_nft *(*nflog_nft_fn) (void *data);

/* fd (one of w's) is readable: write the queued packets' records (NFLOG socket), then read the
 * counter when a second has passed since the last read (see struct nflog_watch) and it can have
 * moved at all: not while the packets seen (received or dropped at the socket) are too few to
 * have emptied the log limit's bucket (POLICY_NFT_LOG_BURST; nflog.c says why that is exact).
 * nft(data) is called only for a read. Never blocks. */
void nflog_watch_dispatch (struct nflog_watch *w, int fd, nflog_nft_fn nft, void *data);

/* The end of the container: the records still queued, and the counter read whatever the time
 * since the last read, if it can have moved (as above). A no-op when w watches nothing. */
void nflog_watch_finish (struct nflog_watch *w, nflog_nft_fn nft, void *data);

/* Right before the table is replaced (the monitor's load before pasta): the same as
 * nflog_watch_finish, then the counter's last value forgotten, since the new table's counter
 * starts at 0. Without it the refused packets counted by the old table were lost (a flood
 * before the first DNS query: 19,445 of 20,000 appeared nowhere, outside attack 13). */
void nflog_watch_before_reload (struct nflog_watch *w, nflog_nft_fn nft, void *data);

#endif
