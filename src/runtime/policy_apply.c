/* policy_apply.c - the agent policy's spec layer (P): the read-only root, cgroup limits and the
 * network namespace a policy asks of the OCI spec; see the header for where each layer runs. The
 * other layers are modules of their own: policy_process.c (capabilities, no_new_privs, rlimits,
 * the syscall-group filter), policy_net.c (nftables, resolv.conf), policy_mounts.c (the mount
 * layer), policy_landlock.c (the Landlock ruleset) and policy_memfd.c (vm.memfd_noexec).
 *
 * Threat model: the container's code controls the rootfs contents (symlinks, missing paths).
 * Every policy path is resolved with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS) beneath the
 * rootfs fd, and mounts go onto the fd that was resolved, never onto a re-resolved string. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "runtime/policy_apply.h"
#include "runtime/policy_hostfiles.h"
#include "runtime/policy_net.h"

/* ---- P: the spec ---- */

static void
resources_narrow (struct oci_linux *l, const struct policy_plan *plan)
{
  if (!plan->memory_bytes && !plan->pids && plan->cpus <= 0)
    return;
  if (!l->resources)
    l->resources = xmalloc0 (sizeof *l->resources);
  struct oci_resources *r = l->resources;
  if (plan->memory_bytes)
    {
      if (!r->memory)
        r->memory = xmalloc0 (sizeof *r->memory);
      if (!r->memory->has_limit || r->memory->limit <= 0 || (uint64_t) r->memory->limit > plan->memory_bytes)
        r->memory->limit = (int64_t) plan->memory_bytes, r->memory->has_limit = true;
    }
  if (plan->pids && (!r->has_pids || r->pids_limit <= 0 || (uint64_t) r->pids_limit > plan->pids))
    r->pids_limit = (int64_t) plan->pids, r->has_pids = true;
  if (plan->cpus > 0)
    {
      if (!r->cpu)
        r->cpu = xmalloc0 (sizeof *r->cpu);
      uint64_t period = r->cpu->has_period && r->cpu->period ? r->cpu->period : 100000;
      int64_t quota = (int64_t) (plan->cpus * (double) period);
      if (quota < 1000)
        quota = 1000; /* the kernel's minimum cfs quota is 1 ms */
      if (!r->cpu->has_quota || r->cpu->quota <= 0 || r->cpu->quota > quota)
        r->cpu->quota = quota, r->cpu->has_quota = true, r->cpu->period = period, r->cpu->has_period = true;
    }
}

static bool
has_ns (const struct oci_linux *l, const char *type, const char **path)
{
  for (size_t i = 0; i < l->namespaces_len; i++)
    if (strcmp (l->namespaces[i].type, type) == 0)
      {
        *path = l->namespaces[i].path && *l->namespaces[i].path ? l->namespaces[i].path : NULL;
        return true;
      }
  return false;
}

int
policy_apply_spec (struct oci_spec *spec, const struct policy_plan *plan, asbx_err_t *err)
{
  const char *joined = NULL;

  if (!plan || !plan->active)
    return 0;
  /* the mount layer (read-only root, grants, masks) and Landlock's paths are the container's
   * own mount namespace; without a policy agentsbx runs both forms as runc does (issue 15) */
  const char *mnt_path = NULL;
  if (!spec->linux_ || !has_ns (spec->linux_, "mount", &mnt_path))
    return asbx_error (err, EINVAL,
                       "agent policy: linux.namespaces has no `mount` entry: the policy needs a new mount "
                       "namespace (its read-only root, grants and masks are mounts of the container's own "
                       "namespace, never the runtime's)");
  if (mnt_path)
    return asbx_error (err, EINVAL,
                       "agent policy: linux.namespaces joins the mount namespace `%s`: the policy needs a new "
                       "one (its mounts would change a namespace other processes use, and what they mount "
                       "there would bypass the policy)",
                       mnt_path);
  if (plan->rootfs_readonly)
    spec->root->readonly = true;
  policy_apply_process (spec->process, plan);
  policy_hostfiles_narrow (spec->process, plan, spec->linux_);
  resources_narrow (spec->linux_, plan);
  if (plan->net_mode != POLICY_NET_OPEN)
    {
      if (!has_ns (spec->linux_, "network", &joined))
        {
          /* `none`: a fresh network namespace holds only a loopback device */
          struct oci_linux *l = spec->linux_;
          l->namespaces = xrealloc (l->namespaces, sizeof (*l->namespaces) * (l->namespaces_len + 1));
          l->namespaces[l->namespaces_len++] = (struct oci_namespace){ .type = xstrdup ("network") };
        }
      /* a joined (engine-given) namespace is isolated by the nftables table the init loads
       * (policy_apply_network), as a fresh one is - never the runtime's own namespace */
      if (policy_net_check_joined (joined, err) < 0)
        return -1;
    }
  return 0;
}
