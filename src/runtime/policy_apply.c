/* policy_apply.c - the agent policy's spec layer (P): the host check the container model
 * (spec/model.h: the read-only root, the narrowed process and cgroup limits, the network
 * namespace, built without syscalls) needs before spawn; see the header for where each layer
 * runs. The other layers are modules of their own: policy_process.c (the syscall-group filter),
 * policy_net.c (nftables, resolv.conf), policy_mounts.c (the mount layer), policy_landlock.c
 * (the Landlock ruleset) and policy_memfd.c (vm.memfd_noexec). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/policy_apply.h"
#include "runtime/policy_net.h"
#include "runtime/rootless.h"

/* A pid namespace joined by path (a pod's shared one) is accepted from root, never the runtime's
 * own; from a caller without root, whose other processes are the ones such a namespace would
 * hold (a user's `unshare -Urpf` session: the agent signalled them, outside tester), never. */
static int
check_joined_pid (const struct spec_model *m, asbx_err_t *err)
{
  const struct oci_linux *l = m->spec->linux_;
  const char *path = NULL;
  struct stat a, b;

  for (size_t i = 0; l && i < l->namespaces_len; i++)
    if (strcmp (l->namespaces[i].type, "pid") == 0 && l->namespaces[i].path && *l->namespaces[i].path)
      path = l->namespaces[i].path;
  if (!path)
    return 0;
  if (rootless_caller ())
    return asbx_error (err, EINVAL,
                       "agent policy: linux.namespaces joins the pid namespace `%s`: without root the policy "
                       "needs a new one (a namespace you can join holds your own processes, which the agent "
                       "could signal)",
                       path);
  if (stat (path, &a) == 0 && stat ("/proc/self/ns/pid", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    return asbx_error (err, EINVAL,
                       "agent policy: linux.namespaces joins the pid namespace `%s`, the runtime's own (the "
                       "host's): the policy needs one of its own",
                       path);
  return 0;
}

/* ---- P: the spec ---- */

void
policy_model_narrowing (const struct policy_plan *plan, struct spec_narrowing *out)
{
  *out = (struct spec_narrowing){ 0 };
  if (!plan || !plan->active)
    return;
  *out = (struct spec_narrowing){
    .active = true,
    .rootfs_readonly = plan->rootfs_readonly,
    .restrict_caps = plan->restrict_caps,
    .caps_allow = plan->caps_allow,
    .caps_allow_len = plan->caps_allow_len,
    .isolate_net = plan->net_mode != POLICY_NET_OPEN,
    .netns_runtime = plan->net_outside,
    .memory_bytes = plan->memory_bytes,
    .pids = plan->pids,
    .cpus = plan->cpus,
    .open_files = plan->open_files,
    .file_size_bytes = plan->file_size_bytes,
  };
}

int
policy_check_spec (const struct spec_model *m, asbx_err_t *err)
{
  const char *joined = NULL;

  if (m->narrowing.active && check_joined_pid (m, err) < 0)
    return -1;
  if (!m->narrowing.active || !m->narrowing.isolate_net)
    return 0;
  /* a joined (engine-given) namespace is isolated by the nftables table the init loads
   * (policy_apply_network), as a fresh one is - never the runtime's own namespace */
  (void) spec_model_netns (m, &joined);
  return policy_net_check_joined (joined, err);
}
