/* features_host.h - the `io.agentsbx.*` annotations of `agentsbx features`: what THIS host lets
 * an agent policy enforce, each probed the way the enforcement itself would use it (a throwaway
 * child does what a container's set-up does), never read from a version number. */
#ifndef ASBX_RUNTIME_FEATURES_HOST_H
#define ASBX_RUNTIME_FEATURES_HOST_H

#include <stddef.h>

struct features_host
{
  char **keys, **values; /* parallel heap arrays of heap strings, n entries */
  size_t n;
};

/* Probe the host and fill *h (free with features_host_free). The keys, values and sources:
 * - io.agentsbx.version: this build (PACKAGE_VERSION);
 * - io.agentsbx.isolation: the tiers offered here, "container" or "container,vm" (runtime/vm.h:
 *   qemu-system-x86_64 in PATH and a cached guest kernel); io.agentsbx.isolation.vm.accel "kvm"
 *   (/dev/kvm opens) or "tcg"; io.agentsbx.isolation.vm.error why vm is not offered;
 * - io.agentsbx.landlock.abi: landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION), 0 = none;
 * - io.agentsbx.seccomp.notify: "true" when seccomp(SECCOMP_GET_ACTION_AVAIL) accepts
 *   SECCOMP_RET_USER_NOTIF (the monitor's exec and unix-socket checks need it);
 * - io.agentsbx.nftables: "true" when a child in a new network namespace (and, not root, a new
 *   user namespace) can load an nftables table through libnftables, as the egress filter does;
 *   "false" and io.agentsbx.nftables.error with the reason otherwise;
 * - io.agentsbx.pasta: "true" when pasta is installed (and /dev/net/tun usable by a non-root
 *   caller): the way out of a network namespace agentsbx creates; else "false" and .error;
 * - io.agentsbx.audit.enabled: the kernel's audit_enabled (AUDIT_GET: "0", "1", "2" locked) or
 *   "unavailable" with .error; io.agentsbx.landlock.denials.reported: "true" when the kernel
 *   reports Landlock denials (ABI >= 7 and audit enabled), so `denial` records cover fs;
 * - io.agentsbx.userns.unprivileged: "true" when a child with uid/gid 65534 and no capabilities
 *   can unshare(CLONE_NEWUSER) (what the rootless mode and a non-root `sandbox` need), else
 *   "false" and .error (the errno and, when set, the sysctl that forbids it);
 * - io.agentsbx.cgroup.layout: "unified", "hybrid" or "legacy" (linux/cgroup_layout.c);
 *   io.agentsbx.cgroup.controllers: cgroup v2's root cgroup.controllers, when unified;
 * - io.agentsbx.checkpoint.enabled: "true" (built in; CRIU itself is checked at checkpoint).
 * Never fails: what cannot be probed is reported as such. Forks short-lived children (reaped
 * before return); changes nothing on the host (the namespaces die with the children). */
void features_host_probe (struct features_host *h);

void features_host_free (struct features_host *h);

#endif
