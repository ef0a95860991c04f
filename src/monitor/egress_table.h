/* egress_table.h - the one loader of the policy's nftables table (network.mode none/filtered). */
#ifndef ASBX_MONITOR_EGRESS_TABLE_H
#define ASBX_MONITOR_EGRESS_TABLE_H

#include <sys/stat.h>

#include "core/error.h"
#include "policy/plan.h"

/* Loads the table policy/nft_ruleset.h writes for `plan` (nothing when the plan has none) into
 * the network namespace `netns` (an fd of it; -1: the caller's own), in one kernel transaction
 * that deletes and re-creates the table, so a second load (the monitor's before every pasta
 * start, after the init's) replaces it with no unfiltered moment. `never`: the runtime's own
 * namespace (dev/ino of /proc/self/ns/net as the runtime saw it), refused as a target whatever
 * went wrong with the namespaces (defence in depth: never firewall the host); NULL: not known.
 * Callers: the init while it holds CAP_NET_ADMIN (runtime/policy_net.c) and the monitor right
 * before pasta (monitor/monitor.c); which of them loads first is decided by init.c alone
 * (network_table_deferred). With netns -1 (the init) the context's netlink socket is closed at the
 * caller's next execve (linux_nft_load_close_at_exec), so only such a caller may pass -1.
 * 0, or -1 with *err naming the mode (EPERM without CAP_NET_ADMIN,
 * EINVAL for the runtime's own namespace or libnftables' refusal). */
int egress_table_load (const struct policy_plan *plan, int netns, const struct stat *never, asbx_err_t *err);

#endif
