/* policy_net.c - the agent policy's network layer: the runtime's own network namespace kept free
 * of the policy's firewall, the nftables table in the container's and the stub's resolv.conf;
 * see policy_apply.h and policy_net.h. */
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/mount.h"
#include "linux/pathsafe.h"
#include "runtime/policy_apply.h"
#include "monitor/egress_table.h"
#include "runtime/policy_net.h"
#include "runtime/vm_net.h"

/* The network namespace the runtime was started in (the host's, or its caller's): captured in P
 * by policy_check_spec, inherited by the init through fork. A `none`/`filtered` table (output
 * policy drop, port 53 redirected) must never land there: it would cut the host off. */
static struct stat runtime_netns;
static bool runtime_netns_known;

static int
same_netns_as_runtime (const struct stat *st)
{
  return runtime_netns_known && st->st_dev == runtime_netns.st_dev && st->st_ino == runtime_netns.st_ino;
}

/* A joined network namespace (`linux.namespaces[].path`) that is the runtime's own is refused
 * for network modes none and filtered: fail closed instead of firewalling the host. */
int
policy_net_check_joined (const char *path, asbx_err_t *err)
{
  struct stat st;

  if (stat ("/proc/self/ns/net", &runtime_netns) < 0)
    return asbx_error (err, errno, "policy network: stat /proc/self/ns/net");
  runtime_netns_known = true;
  if (!path)
    return 0;
  if (stat (path, &st) < 0)
    return asbx_error (err, errno, "linux.namespaces: network path %s", path);
  if (same_netns_as_runtime (&st))
    return asbx_error (err, EINVAL,
                       "linux.namespaces: network path %s is the runtime's own (host) network namespace; the "
                       "policy's network mode (none/filtered) would load its firewall there - refused (use "
                       "network.mode open for host networking, or give the container its own namespace)",
                       path);
  return 0;
}

int
policy_apply_network (const struct policy_plan *plan, asbx_err_t *err)
{
  /* defence in depth: whatever went wrong with the namespaces, never into the runtime's own */
  return egress_table_load (plan, -1, runtime_netns_known ? &runtime_netns : NULL, err);
}

/* The resolver file of a filtered container in a fresh namespace: the stub's address. The file
 * is made in a private detached tmpfs (never on the host or in the rootfs), cloned as a
 * read-only single-file bind and attached onto the fd of the rootfs's /etc/resolv.conf. */
int
policy_apply_resolv (int rootfd, const struct policy_plan *plan, bool new_netns, asbx_err_t *err)
{
  static const char text[] = "# agentsbx: network.mode filtered, the monitor's DNS stub\nnameserver 127.0.0.1\n";
  struct stat st;

  if (!plan || !plan->active || plan->net_mode != POLICY_NET_FILTERED || (!new_netns && !plan->net_outside))
    return 0;
  cleanup_close int target = ps_openat2 (rootfd, "/etc/resolv.conf", O_PATH | O_CLOEXEC, 0,
                                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (target < 0 || fstat (target, &st) < 0 || !S_ISREG (st.st_mode))
    {
      /* no file (or a dangling link): libc then asks 127.0.0.1 by itself, the stub (in a vm-tier
       * guest nothing is there: no resolution, the host's stub is never bypassed) */
      log_debug ("policy network: no regular /etc/resolv.conf in the rootfs, left as it is");
      return 0;
    }
  if (plan->net_outside)
    {
      /* a vm-tier guest: the file its init wrote on its /run (runtime/vm_net.h), naming slirp's
       * resolver, i.e. the host's stub. Cloned from our own namespace: the guest's 6.1 kernel
       * refuses open_tree(OPEN_TREE_CLONE) of a detached tmpfs (EINVAL) */
      cleanup_close int vf = mnt_clone (AT_FDCWD, VM_NET_GUEST_RESOLV, false, err);
      if (vf < 0 || mnt_setattr (vf, false, MOUNT_ATTR_RDONLY, 0, 0, err) < 0 || mnt_attach (vf, target, err) < 0)
        return asbx_error_wrap (err, "policy network: bind the host stub's resolv.conf over /etc/resolv.conf");
      return 0;
    }
  cleanup_close int fs = mnt_new_fs ("tmpfs", "tmpfs", "size=4k,mode=755", 0,
                                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
  if (fs < 0)
    return asbx_error_wrap (err, "policy network: /etc/resolv.conf");
  cleanup_close int f = openat (fs, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (f < 0 || write_all (f, text, sizeof text - 1) < 0)
    return asbx_error (err, errno, "policy network: write the stub's resolv.conf");
  cleanup_close int file = mnt_clone (fs, "resolv.conf", false, err);
  if (file < 0 || mnt_setattr (file, false, MOUNT_ATTR_RDONLY, 0, 0, err) < 0 || mnt_attach (file, target, err) < 0)
    return asbx_error_wrap (err, "policy network: bind the stub's resolv.conf over /etc/resolv.conf");
  return 0;
}
