/* vm_net.c - the vm tier's network, host and guest sides (vm_net.h for the design).
 *
 * Threat model: the guest (its kernel included) is hostile and speaks to slirp inside QEMU; QEMU
 * itself may be compromised through it. Neither can reach the namespace's table, the monitor or
 * pasta: the namespace is owned by the host's user namespace, QEMU holds no capability in any
 * user namespace that owns it, and the monitor is another process of root's. A compromised QEMU
 * has exactly the container's egress: sockets in that namespace, filtered by the table.
 * Ordering: the namespace exists (joined or cloned, by root) before QEMU's user namespace
 * (joining a root-owned network namespace from inside an unprivileged user namespace is
 * refused); the table is loaded and the monitor ready before QEMU runs, so the guest's first
 * packet already meets both. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/ipv6.h> /* struct in6_ifreq (ipv6(7)) */
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/process.h"
#include "monitor/egress_table.h"
#include "monitor/monitor.h"
#include "runtime/egress_ca.h"
#include "runtime/state.h"
#include "runtime/vm_net.h"

#define NET_WAIT_MS 30000 /* an upper bound against a hung child, never a measure */

static void
close_fd (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

/* linux.namespaces' network path (the model's: the policy added an entry without one), or NULL */
static const char *
netns_path (const struct oci_spec *spec)
{
  for (size_t i = 0; spec->linux_ && i < spec->linux_->namespaces_len; i++)
    if (strcmp (spec->linux_->namespaces[i].type, "network") == 0)
      return spec->linux_->namespaces[i].path && *spec->linux_->namespaces[i].path ? spec->linux_->namespaces[i].path
                                                                                   : NULL;
  return NULL;
}

static bool
same_file (const struct stat *a, const struct stat *b)
{
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int
open_joined (struct vm_net *n, const char *path, asbx_err_t *err)
{
  struct stat a;
  n->netns_fd = open (path, O_RDONLY | O_CLOEXEC);
  if (n->netns_fd < 0)
    return asbx_error (err, errno, "isolation vm: linux.namespaces network path %s", path);
  /* policy_check_spec refused it already; checked again on the fd QEMU will join */
  if (fstat (n->netns_fd, &a) < 0)
    return asbx_error (err, errno, "isolation vm: stat the network namespace %s", path);
  if (same_file (&a, &n->never))
    return asbx_error (err, EINVAL, "isolation vm: linux.namespaces network path %s is the runtime's own", path);
  return 0;
}

/* a detached caller's namespaces (vm_net_given): the borrowed fds duplicated (ours to close),
 * never the runtime's own */
static int
take_given (struct vm_net *n, const struct vm_net_given *g, const char *path, asbx_err_t *err)
{
  struct stat a;
  if (g->host_fd < 0)
    return asbx_error (err, EBADF, "isolation vm: the supervisor kept no fd of the runtime's network namespace");
  if ((n->netns_fd = fcntl (g->netns_fd, F_DUPFD_CLOEXEC, 0)) < 0
      || (n->host_fd = fcntl (g->host_fd, F_DUPFD_CLOEXEC, 0)) < 0)
    return asbx_error (err, errno, "isolation vm: dup the supervisor's network namespaces");
  if (fstat (n->host_fd, &n->never) < 0 || fstat (n->netns_fd, &a) < 0)
    return asbx_error (err, errno, "isolation vm: stat the supervisor's network namespaces");
  if (same_file (&a, &n->never))
    return asbx_error (err, EINVAL, "isolation vm: the network namespace %s is the runtime's own",
                       path ? path : "the supervisor made");
  n->fresh = g->fresh;
  n->wired = g->fresh && g->wired;
  return 0;
}

int
vm_net_prepare (struct vm_net *n, const char *state_root, const char *id, const struct oci_spec *spec,
                const struct policy_plan *plan, const struct vm_net_given *given, asbx_err_t *err)
{
  int p[2], q[2];
  *n = (struct vm_net){ .netns_fd = -1,
                        .host_fd = -1,
                        .rootfd = -1,
                        .dirfd = -1,
                        .ready_rd = -1,
                        .ready_wr = -1,
                        .go_rd = -1,
                        .go_wr = -1,
                        .id = id };
  egress_share_init (&n->share);
  if (!plan->active || plan->net_mode == POLICY_NET_NONE)
    return 0;
  if (plan->net_mode != POLICY_NET_FILTERED)
    return asbx_error (err, EINVAL,
                       "isolation vm: network.mode \"%s\" is not built yet in the vm tier (\"none\" and \"filtered\" "
                       "are)",
                       policy_net_mode_names[plan->net_mode]);
  if (egress_intercepts (plan))
    return asbx_error (err, EINVAL,
                       "isolation vm: network.credentials and network.http are not built yet in the vm tier (the "
                       "egress CA would have to be trusted inside the guest)");
  n->on = true;
  const char *path = netns_path (spec);
  if (given && given->netns_fd >= 0)
    {
      if (take_given (n, given, path, err) < 0)
        return -1;
    }
  else if (stat ("/proc/self/ns/net", &n->never) < 0)
    return asbx_error (err, errno, "isolation vm: stat the runtime's network namespace");
  else if (path && open_joined (n, path, err) < 0)
    return -1;
  else if (!path)
    n->fresh = true; /* QEMU's clone makes it */
  n->rootfd = asbx_root_open (state_root, true, err);
  if (n->rootfd < 0)
    return -1;
  /* a joined namespace whose egress another live container runs: its stub holds 127.0.0.1:53
   * there; sharing it is not built for the vm tier (refused, never a second egress) */
  if (egress_share_prepare (n->rootfd, id, plan, n->fresh ? -1 : n->netns_fd, path, &n->share, err) < 0)
    return -1;
  if (n->share.shared)
    return asbx_error (err, EINVAL,
                       "isolation vm: the network namespace %s runs the egress of container `%s`: sharing it is not "
                       "built yet in the vm tier",
                       path, n->share.owner_id);
  if (given)
    {
      /* the detached container's own (create holds its lock, then the verbs; delete removes it) */
      n->keep_dir = true;
      n->dirfd = openat (n->rootfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (n->dirfd < 0)
        return asbx_error (err, errno, "isolation vm: open the state directory of `%s`", id);
    }
  else if ((n->dirfd = asbx_state_dir_create (n->rootfd, id, err)) < 0)
    return -1;
  if (pipe2 (p, O_CLOEXEC) < 0 || pipe2 (q, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "isolation vm: pipe");
  n->ready_rd = p[0], n->ready_wr = p[1], n->go_rd = q[0], n->go_wr = q[1];
  return 0;
}

unsigned long
vm_net_clone_flags (const struct vm_net *n)
{
  return n->netns_fd >= 0 ? 0 : CLONE_NEWNET;
}

const char *const *
vm_net_qemu_args (const struct vm_net *n)
{
  /* slirp's defaults spelled out; no hostfwd/guestfwd/tftp/smb/bootfile: nothing reaches the
   * guest from outside, and the guest reaches nothing but through sockets in the namespace */
  static const char *const args[] = {
    "-netdev",
    "user,id=n0,restrict=off,ipv4=on,ipv6=on,net=" VM_NET_SUBNET ",host=" VM_NET_GATEWAY ",dns=" VM_NET_DNS
    ",dhcpstart=" VM_NET_GUEST_ADDR ",ipv6-net=" VM_NET_SUBNET6 ",ipv6-host=" VM_NET_GATEWAY6 ",ipv6-dns=" VM_NET_DNS6,
    "-device",
    "virtio-net-device,netdev=n0",
    NULL,
  };
  static const char *const none[] = { NULL };
  return n->on ? args : none;
}

int
vm_net_child (struct vm_net *n, asbx_err_t *err)
{
  char c = 0;
  if (!n->on)
    return 0;
  close_fd (&n->ready_rd);
  close_fd (&n->go_wr);
  if (n->netns_fd >= 0 && setns (n->netns_fd, CLONE_NEWNET) < 0)
    return asbx_error (err, errno, "isolation vm: join the container's network namespace");
  if (n->fresh && linux_netns_loopback_up (err) < 0)
    return -1;
  close_fd (&n->netns_fd);
  if (write (n->ready_wr, "r", 1) != 1)
    return asbx_error (err, errno, "isolation vm: tell the runtime the namespace is ready");
  close_fd (&n->ready_wr);
  ssize_t r;
  while ((r = read (n->go_rd, &c, 1)) < 0 && errno == EINTR)
    ;
  close_fd (&n->go_rd);
  if (r != 1 || c != 'g')
    return asbx_error (err, ECANCELED, "isolation vm: the runtime did not start the host side of the network");
  return 0;
}

int
vm_net_start (struct vm_net *n, pid_t pid, const struct policy_plan *plan, asbx_err_t *err)
{
  char c = 0, nspath[64];
  if (!n->on)
    return 0;
  close_fd (&n->ready_wr);
  close_fd (&n->go_rd);
  struct pollfd pf = { .fd = n->ready_rd, .events = POLLIN };
  int pr;
  while ((pr = poll (&pf, 1, NET_WAIT_MS)) < 0 && errno == EINTR)
    ;
  if (pr <= 0 || read (n->ready_rd, &c, 1) != 1 || c != 'r')
    return asbx_error (err, EIO, "isolation vm: QEMU's child did not reach the container's network namespace");
  snprintf (nspath, sizeof nspath, "/proc/%d/ns/net", (int) pid);
  cleanup_close int ns = open (nspath, O_RDONLY | O_CLOEXEC);
  if (ns < 0)
    return asbx_error (err, errno, "isolation vm: open %s", nspath);
  /* now, not at the stub's first activity (the container tier's deferral): the guest may ask any
   * resolver address, which only the table's nat rule sends to the stub */
  if (egress_table_load (plan, ns, &n->never, err) < 0)
    return -1;
  struct monitor_opts mo = {
    .id = n->id,
    .init_pid = pid, /* QEMU: the monitor ends with it, kills it for a limit or a dead guard */
    .state_dirfd = n->dirfd,
    .plan = plan,
    /* pasta (deferred) is the way out of a fresh one nobody wires, as for a container's; an
     * engine's hooks wiring it (Docker's bridge) give it its own, and a second is never added */
    .new_netns = n->fresh && !n->wired,
    .unixsock_fd = -1,
    .secrets_env_fd = -1,
    .egress_owner_pidfd = -1,
  };
  /* a detached caller sits in the container's namespace: the monitor forks from the runtime's
   * own (its upstream DNS sockets and pasta are outside the container's), as for `run` */
  if (n->host_fd >= 0 && setns (n->host_fd, CLONE_NEWNET) < 0)
    return asbx_error (err, errno, "isolation vm: back to the runtime's network namespace for the monitor");
  int mr = monitor_start (&mo, &n->monitor, err);
  if (n->host_fd >= 0 && setns (n->netns_fd, CLONE_NEWNET) < 0)
    {
      if (mr < 0)
        asbx_error_free (err);
      return asbx_error (err, errno, "isolation vm: back to the container's network namespace");
    }
  if (mr < 0)
    return asbx_error_wrap (err, "isolation vm: the policy monitor");
  if (egress_share_record (n->rootfd, n->dirfd, &n->share, n->id, pid, n->monitor, NULL, err) < 0)
    return -1;
  egress_share_release (&n->share);
  if (write (n->go_wr, "g", 1) != 1)
    return asbx_error (err, errno, "isolation vm: let QEMU start");
  close_fd (&n->go_wr);
  return 0;
}

bool
vm_net_finish (struct vm_net *n)
{
  if (!n->on || n->dirfd < 0 || n->monitor <= 0)
    return false;
  monitor_wait_exit (n->dirfd, 10000);
  cleanup_free char *why = monitor_exit_reason (n->dirfd);
  return why && strcmp (why, "wallclock") == 0;
}

void
vm_net_free (struct vm_net *n)
{
  asbx_err_t e = NULL;
  int *fds[] = { &n->netns_fd, &n->host_fd, &n->ready_rd, &n->ready_wr, &n->go_rd, &n->go_wr };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (fds); i++)
    close_fd (fds[i]);
  egress_share_release (&n->share); /* the lock first: the state dir's removal takes it */
  if (n->dirfd >= 0)
    {
      /* a monitor still running (a failed start) ends with QEMU, which the caller has reaped */
      if (n->monitor > 0)
        monitor_wait_exit (n->dirfd, 10000);
      close_fd (&n->dirfd);
      if (!n->keep_dir && asbx_state_dir_remove (n->rootfd, n->id, &e) < 0)
        asbx_error_free (&e);
    }
  close_fd (&n->rootfd);
  n->on = false;
}

/* ---- the guest side ---- */

static int
if_up (int s, const char *name, asbx_err_t *err)
{
  struct ifreq ifr = { 0 };
  snprintf (ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
  if (ioctl (s, SIOCGIFFLAGS, &ifr) < 0)
    return asbx_error (err, errno, "vm guest: the flags of %s", name);
  ifr.ifr_flags |= IFF_UP;
  if (ioctl (s, SIOCSIFFLAGS, &ifr) < 0)
    return asbx_error (err, errno, "vm guest: bring %s up", name);
  return 0;
}

static void
sin_set (struct sockaddr *sa, const char *addr)
{
  struct sockaddr_in *in = (struct sockaddr_in *) sa;
  in->sin_family = AF_INET;
  inet_pton (AF_INET, addr, &in->sin_addr);
}

/* eth0's IPv6 is static: router advertisements, SLAAC and duplicate address detection off
 * before the link comes up, so the address is usable at once (slirp's prefix is never on a wire:
 * no other node can hold it) */
static int
ipv6_knobs (asbx_err_t *err)
{
  static const char *const knobs[] = { "accept_dad", "accept_ra", "autoconf" };
  for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
    {
      cleanup_free char *p = xasprintf ("/proc/sys/net/ipv6/conf/eth0/%s", knobs[i]);
      if (write_file_at (AT_FDCWD, p, "0", 1, err) < 0)
        return -1;
    }
  return 0;
}

/* then, with the link up, the address and the default route (ipv6(7)'s ioctls) */
static int
ipv6_setup (unsigned ifindex, asbx_err_t *err)
{
  cleanup_close int s6 = socket (AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s6 < 0)
    return asbx_error (err, errno, "vm guest: an IPv6 socket");
  struct in6_ifreq ifr6 = { .ifr6_prefixlen = VM_NET_SUBNET6_PREFIX, .ifr6_ifindex = (int) ifindex };
  inet_pton (AF_INET6, VM_NET_GUEST_ADDR6, &ifr6.ifr6_addr);
  if (ioctl (s6, SIOCSIFADDR, &ifr6) < 0)
    return asbx_error (err, errno, "vm guest: address %s on eth0", VM_NET_GUEST_ADDR6);
  struct in6_rtmsg rt6 = { .rtmsg_flags = RTF_UP | RTF_GATEWAY, .rtmsg_metric = 1, .rtmsg_ifindex = (int) ifindex };
  inet_pton (AF_INET6, VM_NET_GATEWAY6, &rt6.rtmsg_gateway);
  if (ioctl (s6, SIOCADDRT, &rt6) < 0)
    return asbx_error (err, errno, "vm guest: default route via %s", VM_NET_GATEWAY6);
  return 0;
}

int
vm_net_guest_setup (asbx_err_t *err)
{
  struct ifreq ifr = { 0 };
  struct rtentry rt = { 0 };
  char mask[INET_ADDRSTRLEN];
  uint32_t m = htonl (~0u << (32 - VM_NET_GUEST_PREFIX));
  cleanup_close int s = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return asbx_error (err, errno, "vm guest: socket");
  if (if_up (s, "lo", err) < 0)
    return -1;
  /* the virtio-net device shows up once its driver has probed it (modules loaded just before) */
  snprintf (ifr.ifr_name, sizeof ifr.ifr_name, "eth0");
  for (int i = 0; i < 200 && ioctl (s, SIOCGIFFLAGS, &ifr) < 0; i++)
    usleep (10000);
  sin_set (&ifr.ifr_addr, VM_NET_GUEST_ADDR);
  if (ioctl (s, SIOCSIFADDR, &ifr) < 0)
    return asbx_error (err, errno, "vm guest: address %s on eth0", VM_NET_GUEST_ADDR);
  inet_ntop (AF_INET, &m, mask, sizeof mask);
  sin_set (&ifr.ifr_netmask, mask);
  if (ioctl (s, SIOCSIFNETMASK, &ifr) < 0)
    return asbx_error (err, errno, "vm guest: netmask of eth0");
  unsigned ifindex = if_nametoindex ("eth0");
  if (ifindex == 0)
    return asbx_error (err, errno, "vm guest: the index of eth0");
  /* before the link is up: with DAD or RA still on, the first connect could race them */
  if (ipv6_knobs (err) < 0 || if_up (s, "eth0", err) < 0 || ipv6_setup (ifindex, err) < 0)
    return -1;
  sin_set (&rt.rt_dst, "0.0.0.0");
  sin_set (&rt.rt_genmask, "0.0.0.0");
  sin_set (&rt.rt_gateway, VM_NET_GATEWAY);
  rt.rt_flags = RTF_UP | RTF_GATEWAY;
  rt.rt_dev = (char *) "eth0";
  if (ioctl (s, SIOCADDRT, &rt) < 0)
    return asbx_error (err, errno, "vm guest: default route via %s", VM_NET_GATEWAY);
  static const char resolv[] =
      "# agentsbx: network.mode filtered, the host's DNS stub (isolation vm)\nnameserver " VM_NET_DNS "\n";
  cleanup_close int fd = open (VM_NET_GUEST_RESOLV, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 || write_all (fd, resolv, sizeof resolv - 1) < 0)
    return asbx_error (err, errno, "vm guest: write %s", VM_NET_GUEST_RESOLV);
  return 0;
}
