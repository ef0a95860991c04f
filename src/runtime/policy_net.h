/* policy_net.h - the agent policy's network layer (policy_net.c) beyond what policy_apply.h
 * declares (policy_apply_network, policy_apply_resolv): the check of the spec layer (P) that the
 * policy's firewall never lands in the runtime's own network namespace. */
#ifndef ASBX_RUNTIME_POLICY_NET_H
#define ASBX_RUNTIME_POLICY_NET_H

#include "core/error.h"

/* Called by policy_check_spec for network modes none and filtered: records the runtime's own
 * network namespace (stat of /proc/self/ns/net; inherited by the init through fork, where
 * policy_apply_network checks it again before loading the table), then refuses a joined namespace
 * (`path`: linux.namespaces[].path of the network entry, NULL for a fresh one) that is that same
 * namespace - fail closed instead of firewalling the host. 0 / -1 with *err (errno of the stat,
 * or EINVAL naming linux.namespaces). */
int policy_net_check_joined (const char *path, asbx_err_t *err);

#endif
