/* netroute.h - the "route of last resort" of a filtered container's fresh network namespace
 * (issue 14 §5): a namespace agentsbx made has only `lo`, so a connection to any other address
 * fails at the route lookup (ENETUNREACH) before any netfilter hook and the policy's table never
 * sees - never logs - it. A veth pair inside the namespace (asbx0 <-> asbx1, both ends in it),
 * the documentation-reserved source addresses 192.0.0.8/32 (RFC 7600, the IPv4 dummy address)
 * and 100::1/128 (RFC 6666, discard-only) on asbx0, and default routes through asbx0 at the
 * highest metric (4294967295: any real default route, pasta's included, wins) give every
 * destination a route, so every attempt reaches the table's output hook: rejected there with an
 * NFLOG record. Nothing can leave: asbx1 is in the same namespace and forwarding is off.
 * Raw rtnetlink (linux/rtnetlink.h, linux/veth.h); the veth module is needed (dummy is not
 * always built). */
#ifndef ASBX_LINUX_NETROUTE_H
#define ASBX_LINUX_NETROUTE_H

#include "core/error.h"

/* Make the pair, addresses and routes in the CURRENT network namespace (the caller is the
 * container's init with CAP_NET_ADMIN there). IPv6 is skipped when the namespace has none
 * (EAFNOSUPPORT, or disable_ipv6: EACCES/EPERM on the address). 0 / -1 with *err naming the
 * step ("network audit: route of last resort: add veth asbx0: Operation not supported"). */
int linux_net_last_resort (asbx_err_t *err);

#endif
