/* pasta.h - user-mode connectivity for a network namespace agentsbx created itself (issue 7,
 * POLICY.md §2 `network`): `filtered` in a fresh namespace (the `sandbox` quick mode, a bundle
 * asking for a new network namespace nobody wires) needs a way out, and agentsbx must not touch
 * the host's routes, firewall or sysctls to give it one. pasta (Debian's `passt` package, the
 * stack Podman uses) copies the host's default-route interface into the namespace as a tap
 * device and carries the container's flows over ordinary sockets of the host namespace.
 * The container's nftables table filters what enters the tap, so pasta only ever carries what
 * the policy allowed. Run by the monitor as its child; see pasta.c for the flags and why. */
#ifndef ASBX_MONITOR_PASTA_H
#define ASBX_MONITOR_PASTA_H

#include <sys/types.h>

#include "core/error.h"

/* Start pasta attached to the network namespace netns_fd (an fd of /proc/PID/ns/net, kept by
 * the caller) and wait until it has configured the namespace (its pid file, a pipe here, is
 * written after the tap and addresses are up). The child gets PR_SET_PDEATHSIG SIGKILL, so it
 * dies with the caller (the monitor): nothing keeps the namespace alive after the monitor.
 * Binary: $AGENTSBX_PASTA when set (absolute path), else /usr/bin/pasta, /usr/sbin/pasta,
 * /usr/local/bin/pasta. timeout_ms bounds the wait (an upper bound against a hang only).
 * Returns the child's pid, or -1 with *err ("network: pasta: not installed (Debian package
 * passt)", "network: pasta exited with status 1: Couldn't open network namespace ..."). */
pid_t pasta_start (int netns_fd, int timeout_ms, asbx_err_t *err);

/* Whether a pasta binary is there (the same lookup as pasta_start) and, for a non-root caller,
 * whether /dev/net/tun is readable and writable for it (pasta's tap device; Debian's udev makes
 * it 0666). 0, or -1 with *err naming the package or the device: the monitor checks this at create, so a container
 * whose pasta would only be started later (at its first DNS activity, monitor/monitor.c) still fails at create without
 * it. */
int pasta_available (asbx_err_t *err);

/* SIGKILL and reap pasta (pid from pasta_start; <= 0 = nothing). */
void pasta_stop (pid_t pid);

#endif
