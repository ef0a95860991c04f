/* policy_apply.c - the agent policy's spec layer (P): the host check the container model
 * (spec/model.h: the read-only root, the narrowed process and cgroup limits, the network
 * namespace, built without syscalls) needs before spawn; see the header for where each layer
 * runs. The other layers are modules of their own: policy_process.c (the syscall-group filter),
 * policy_net.c (nftables, resolv.conf), policy_mounts.c (the mount layer), policy_landlock.c
 * (the Landlock ruleset) and policy_memfd.c (vm.memfd_noexec). */
#include "runtime/policy_apply.h"
#include "runtime/policy_net.h"

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

  if (!m->narrowing.active || !m->narrowing.isolate_net)
    return 0;
  /* a joined (engine-given) namespace is isolated by the nftables table the init loads
   * (policy_apply_network), as a fresh one is - never the runtime's own namespace */
  (void) spec_model_netns (m, &joined);
  return policy_net_check_joined (joined, err);
}
