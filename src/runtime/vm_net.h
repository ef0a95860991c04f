/* vm_net.h - the vm tier's network (issue 22; docs/security.md "Isolation tiers", docs/policy.md
 * "network in the vm tier"): `network.mode: filtered` for isolation vm, enforced on the host.
 *
 * The guest's only NIC is QEMU's user-mode one (`-netdev user`, libslirp): every connection the
 * guest makes leaves as a socket of the QEMU process. QEMU runs in the container's network
 * namespace on the host, made (or joined, for an engine-given linux.namespaces path) by root
 * before QEMU's jail makes its user namespace, so the namespace belongs to the host's initial
 * user namespace and QEMU (no capability, own user namespace) cannot change it. In that
 * namespace, exactly as for a container: the policy's nftables table (loaded before QEMU
 * starts), the monitor (its DNS stub, SNI/Host relay, NFLOG records, approvals, deferred pasta
 * for a fresh namespace), and the audit log is the host side's. The guest's packets therefore
 * meet the same output/nat rules as a container's: port 53 of any address goes to the stub, an
 * allowed name's address to the relay, anything else is refused (a TCP reset, which slirp
 * passes to the guest as one).
 *
 * slirp's own addresses (10.0.2.0/24): the gateway 10.0.2.2 and every other address of that
 * network but the resolver map to 127.0.0.1 of QEMU's namespace, the container namespace's own
 * loopback (the stub and the relay; never the host's); the resolver 10.0.2.3 goes to the first
 * `nameserver` of QEMU's /etc/resolv.conf, which its jail does not have, so to 127.0.0.1:53, the
 * stub (and the table redirects port 53 of any address there anyway). No host forward, no guest
 * forward, no TFTP, no SMB: none is given; `restrict` stays off because restrict=on drops every
 * outbound connection of the guest (the table is the restriction).
 *
 * The guest side: the manifest's `net` line makes the guest's init configure eth0 statically
 * (VM_NET_GUEST_ADDR, gateway VM_NET_GATEWAY) and run the container in the guest's network
 * namespace with policy_plan.net_outside set: no second table, stub or pasta in the guest, the
 * resolver file names VM_NET_DNS; every other part of the policy (capabilities without
 * CAP_NET_ADMIN/CAP_NET_RAW, unix sockets, seccomp, Landlock, limits) as for the mode. */
#ifndef ASBX_RUNTIME_VM_NET_H
#define ASBX_RUNTIME_VM_NET_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "policy/plan.h"
#include "runtime/egress_share.h"

#define VM_NET_SUBNET "10.0.2.0/24" /* slirp's virtual network: never on a wire */
#define VM_NET_GATEWAY "10.0.2.2"
#define VM_NET_DNS "10.0.2.3"
#define VM_NET_GUEST_ADDR "10.0.2.15"
#define VM_NET_GUEST_PREFIX 24
/* IPv6 (slirp's site-local defaults, spelled out on QEMU's line): the guest's address is static
 * like the IPv4 one, not SLAAC, so that it is usable before the container's first connect */
#define VM_NET_SUBNET6 "fec0::/64"
#define VM_NET_SUBNET6_PREFIX 64
#define VM_NET_GATEWAY6 "fec0::2"
#define VM_NET_DNS6 "fec0::3"
#define VM_NET_GUEST_ADDR6 "fec0::15"
/* written by the guest's init: the container's /etc/resolv.conf under net_outside (policy_net.c) */
#define VM_NET_GUEST_RESOLV "/run/agentsbx-vm-resolv.conf"

/* What a detached caller (runtime/vm_supervisor.h) did with the container's network namespace
 * before QEMU: it made (unshare) or joined (config.json's path) it itself, so that the hooks find
 * it at /proc/<its pid>/ns/net (Docker's libnetwork-setkey wires a fresh one there). QEMU then
 * joins that namespace, and the monitor is started from host_fd's (the runtime's own), as it is
 * for a foreground run: its upstream DNS sockets and pasta live outside the container's. */
struct vm_net_given
{
  int netns_fd; /* the container's namespace the caller is in, or -1 (it asked for none: as `run`) */
  int host_fd;  /* the namespace the caller left (the runtime's own), or -1 with netns_fd */
  bool fresh;   /* netns_fd was made by the caller (unshare), not joined by path */
  bool wired;   /* fresh, and config.json's prestart/createRuntime hooks wire it (an engine's
                   network: Docker's bridge); the monitor then starts no pasta there */
};

struct vm_net
{
  bool on;                              /* network.mode filtered: QEMU gets the NIC, the host side runs the egress */
  bool fresh;                           /* the namespace is this container's own (lo up; pasta is its way out) */
  bool wired;                           /* ...but the engine's hooks wire it: no pasta (vm_net_given) */
  bool keep_dir;                        /* dirfd is the detached container's state dir: delete removes it */
  int netns_fd;                         /* the namespace QEMU joins (config.json's path, or the caller's), or -1:
                                           QEMU's clone makes one */
  int host_fd;                          /* the runtime's own namespace when the caller left it, or -1 */
  struct stat never;                    /* the runtime's own namespace: never the table's target */
  int rootfd, dirfd;                    /* the state root and <root>/<id>, the monitor's state directory */
  int ready_rd, ready_wr, go_rd, go_wr; /* child -> parent "in the namespace", parent -> child "go" */
  pid_t monitor;
  struct egress_share share;
  const char *id;
};

/* Decide and prepare the host side for `plan` (before QEMU's clone): nothing for network.mode
 * none (n->on false); for filtered: the joined namespace opened (never the runtime's own), the
 * egress of another container there refused (not built yet in the vm tier), the state
 * directory <state_root>/<id> reserved (the monitor's: approvals.sock, monitor.pid), the pipes.
 * Refused (EINVAL, not built yet): network.mode open, network.credentials/network.http (the TLS
 * interception's CA would have to be trusted inside the guest). `given`: NULL for a foreground
 * run; a detached create's (borrowed): QEMU joins given->netns_fd (when >= 0), the runtime's own
 * namespace is given->host_fd's, and the state directory is the container's, which exists
 * already (create's; opened, never locked nor removed here). 0 / -1 with *err; on failure
 * nothing is left (vm_net_free is still safe). */
int vm_net_prepare (struct vm_net *n, const char *state_root, const char *id, const struct oci_spec *spec,
                    const struct policy_plan *plan, const struct vm_net_given *given, asbx_err_t *err);

/* clone(2) flags QEMU's child needs for its network namespace: CLONE_NEWNET unless one is joined. */
unsigned long vm_net_clone_flags (const struct vm_net *n);

/* The QEMU arguments of the NIC (a NULL-terminated static list; empty when !n->on). */
const char *const *vm_net_qemu_args (const struct vm_net *n);

/* In QEMU's child, as root, before vm_jail_enter: join the namespace (if one is joined), bring
 * its `lo` up (a fresh one), tell the parent, wait for its go (EOF: the parent failed). 0 / -1
 * with *err. Nothing when !n->on. */
int vm_net_child (struct vm_net *n, asbx_err_t *err);

/* In the parent, after the clone of child `pid`: wait for the child to be in the namespace, load
 * the table there, start the monitor (init = the QEMU process; audit dir of plan; forked from
 * the runtime's own namespace, back in the caller's after), record the
 * namespace's egress owner, then let the child go on. On failure the child is not let go (it
 * exits at EOF). 0 / -1 with *err. */
int vm_net_start (struct vm_net *n, pid_t pid, const struct policy_plan *plan, asbx_err_t *err);

/* After QEMU was reaped: wait for the monitor's final record, and say whether it killed QEMU for
 * the wall clock (its exit_reason "wallclock"). */
bool vm_net_finish (struct vm_net *n);

/* Close, remove the state directory (and the egress record) unless it is a detached
 * container's (its delete does). Idempotent. */
void vm_net_free (struct vm_net *n);

/* The guest side (vm_guest.c, manifest line `net`): lo and eth0 up, VM_NET_GUEST_ADDR/PREFIX on
 * eth0, the default route via VM_NET_GATEWAY, the same statically for IPv6 (VM_NET_GUEST_ADDR6,
 * VM_NET_GATEWAY6: no router advertisement, no duplicate address detection, so no window in which
 * the container's first IPv6 connect fails with ENETUNREACH), and
 * VM_NET_GUEST_RESOLV naming VM_NET_DNS. 0 / -1 with *err. */
int vm_net_guest_setup (asbx_err_t *err);

#endif
