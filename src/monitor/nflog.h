/* nflog.h - `network` audit records of refused connections (POLICY.md §6; issue 7). The
 * filtered-mode table (policy/nft_ruleset.c) sends every packet it is about to reject, rate
 * limited, to NFLOG group POLICY_NFT_LOG_GROUP of the container's network namespace (nfnetlink_log
 * instances are per namespace, so groups never mix between containers); the monitor's DNS stub
 * holds the listening socket and turns each packet into one record
 * {"event":"network","addr","port","proto","decision":"refused","rule"}. */
#ifndef ASBX_RUNTIME_NFLOG_H
#define ASBX_RUNTIME_NFLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/* Open and bind the NFLOG socket for `group` in the CURRENT network namespace (the caller has
 * entered the container's), copying the first 128 bytes of each packet (headers only).
 * Returns the fd (non-blocking, caller owns) or -1 with *err. */
int nflog_open (uint16_t group, asbx_err_t *err);

/* Read every queued packet from fd and write one `network` record each to audit_fd for
 * container id. Never blocks; malformed messages are skipped. */
void nflog_dispatch (int fd, const char *id, int audit_fd);

struct linux_nft;

/* What nflog_unlogged_sync has counted so far; nflog_unlogged_open sets it up. */
struct nflog_unlogged
{
  uint64_t seen;    /* the counter's value last read */
  uint64_t last_ns; /* CLOCK_MONOTONIC of that read */
  int tfd;          /* timerfd: when to read again (the count moved, or a read came too soon) */
};

/* Zero u and make its timerfd (non-blocking; poll it for POLLIN and call nflog_unlogged_sync).
 * Returns the fd (u owns it: nflog_unlogged_close) or -1 with *err. */
int nflog_unlogged_open (struct nflog_unlogged *u, asbx_err_t *err);
void nflog_unlogged_close (struct nflog_unlogged *u);

/* The packets the table refused but its log limit (POLICY_NFT_LOG_RATE) kept from NFLOG: the
 * table counts them in named counter POLICY_NFT_UNLOGGED (policy/nft_ruleset.c); read it with
 * `nft` (a context in the container's namespace) and add what is new since the last read to the
 * audit sink's `suppressed.network` (audit_sink_suppressed_add). Call it on NFLOG activity, when
 * u->tfd fires and with `force` at the end of the container. Bounded work: at most one read a
 * second unless `force`; a read that comes too soon, or that found the count moved (a flood
 * goes on), arms u->tfd for one more a second later, so the count is on record within about a
 * second of the flood's end and costs nothing once it stopped moving. A counter that went down
 * (the table was replaced) counts from its new value. A failed read (no table) counts nothing. */
void nflog_unlogged_sync (struct nflog_unlogged *u, struct linux_nft *nft, bool force);

#endif
