/* nflog.h - `network` audit records of refused connections (POLICY.md §6; issue 7). The
 * filtered-mode table (policy/nft_ruleset.c) sends every packet it is about to reject, rate
 * limited, to NFLOG group POLICY_NFT_LOG_GROUP of the container's network namespace (nfnetlink_log
 * instances are per namespace, so groups never mix between containers); the monitor's DNS stub
 * holds the listening socket and turns each packet into one record
 * {"event":"network","addr","port","proto","decision":"refused","rule"}. */
#ifndef ASBX_RUNTIME_NFLOG_H
#define ASBX_RUNTIME_NFLOG_H

#include <stdint.h>

#include "core/error.h"

/* Open and bind the NFLOG socket for `group` in the CURRENT network namespace (the caller has
 * entered the container's), copying the first 128 bytes of each packet (headers only).
 * Returns the fd (non-blocking, caller owns) or -1 with *err. */
int nflog_open (uint16_t group, asbx_err_t *err);

/* Read every queued packet from fd and write one `network` record each to audit_fd for
 * container id. Never blocks; malformed messages are skipped. */
void nflog_dispatch (int fd, const char *id, int audit_fd);

#endif
