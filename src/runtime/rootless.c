/* rootless.c - limits when the caller is not root (issue 17).
 *
 * memory, pids and CPU limits are cgroup files; an ordinary user can write only a cgroup
 * subtree delegated to it: an admin-delegated one named by the host config's
 * rootless.cgroupParent, else a transient scope of the caller's systemd user manager
 * (runtime/rootless_cgroup.h). A
 * limit whose controller is not delegated (or, with nothing delegated, any limit the policy or
 * linux.resources sets) is refused, fail closed, unless the policy lists `cgroup` in `degrade`:
 * then it runs without it and the monitor's `policy` record lists what was not enforced under
 * `degradations`. network.mode filtered is refused (see
 * rootless_check); `none` and quick mode's `open` are a fresh network namespace holding only a
 * loopback device, as for root. Limits that need no cgroup still hold:
 * wallClockSeconds is the monitor's timer (it SIGKILLs the pid namespace's init, and the kernel
 * kills every process of the namespace with it), cpuSeconds is summed by the monitor over the pid
 * namespace's processes without a cgroup (monitor_limits.c), failedExecs and the exec audit are
 * the process events connector's, rlimits (openFiles, fileSizeBytes) are setrlimit in the init. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "policy/plan.h"
#include "runtime/rootless.h"
#include "runtime/rootless_cgroup.h"

bool
rootless_caller (void)
{
  return geteuid () != 0;
}

static bool
degrades_cgroup (const struct policy_plan *plan)
{
  for (size_t i = 0; plan && plan->active && i < plan->degrade_len; i++)
    if (strcmp (plan->degrade[i], "cgroup") == 0)
      return true;
  return false;
}

/* the limits a cgroup would enforce and `cgroup` (rootless_cgroup_path, NULL: none) does not
 * carry the controller of, as the policy's field names (or the spec's when the policy did not
 * set it), comma separated; NULL when none */
static char *
cgroup_limits (const struct policy_plan *plan, const struct oci_linux *l, const char *cgroup)
{
  const struct oci_resources *r = l ? l->resources : NULL;
  bool pol = plan && plan->active;
  const char *names[3];
  size_t n = 0;

  if (rootless_cgroup_has (cgroup, "memory"))
    ;
  else if (pol && plan->memory_bytes)
    names[n++] = "limits.memoryBytes";
  else if (r && r->memory && r->memory->has_limit && r->memory->limit > 0)
    names[n++] = "linux.resources.memory.limit";
  if (rootless_cgroup_has (cgroup, "pids"))
    ;
  else if (pol && plan->pids)
    names[n++] = "limits.pids";
  else if (r && r->has_pids && r->pids_limit > 0)
    names[n++] = "linux.resources.pids.limit";
  if (rootless_cgroup_has (cgroup, "cpu"))
    ;
  else if (pol && plan->cpus > 0)
    names[n++] = "limits.cpus";
  else if (r && r->cpu && r->cpu->has_quota && r->cpu->quota > 0)
    names[n++] = "linux.resources.cpu.quota";
  if (!n)
    return NULL;
  return xasprintf ("%s%s%s%s%s", names[0], n > 1 ? ", " : "", n > 1 ? names[1] : "", n > 2 ? ", " : "",
                    n > 2 ? names[2] : "");
}

int
rootless_check (const struct policy_plan *plan, const struct oci_linux *l, const char *cgroup, asbx_err_t *err)
{
  cleanup_free char *what = cgroup_limits (plan, l, cgroup);
  bool filtered = plan && plan->active && plan->net_mode == POLICY_NET_FILTERED;
  const char *hint = "; --profile rootless is `agent` without network and without those limits (audited)";

  /* filtered: the monitor's DNS stub and pasta enter the container's network namespace, which
   * is owned by the container's user namespace: a non-root monitor has no CAP_SYS_ADMIN there
   * (it would have to join that user namespace first, not done yet). Refused up front, never a
   * namespace without its filter. */
  if (filtered)
    return asbx_error (err, 0,
                       "network.mode filtered needs the DNS stub and pasta in the container's network "
                       "namespace, which agentsbx run by a non-root user (uid %u) does not set up: not yet "
                       "supported. Use --profile rootless (`agent` with network.mode none and without "
                       "memory/pids/CPU limits, audited), a policy of your own with network.mode none, or run "
                       "as root",
                       (unsigned) geteuid ());
  if (!what || degrades_cgroup (plan))
    return 0;
  if (cgroup)
    return asbx_error (err, 0,
                       "%s: need%s a cgroup controller that is not delegated to you (uid %u): the host config's "
                       "rootless.cgroupParent exists, yours, only in some hierarchies (%s). The admin delegates "
                       "the missing ones with `contrib/delegate-cgroup.sh USER`, or list \"cgroup\" in the "
                       "policy's \"degrade\" to run without %s (recorded in the audit log)",
                       what, strchr (what, ',') ? "" : "s", (unsigned) geteuid (), cgroup,
                       strchr (what, ',') ? "them" : "it");
  return asbx_error (
      err, 0,
      "%s: need%s a cgroup, and none is delegated to agentsbx run by a non-root user (uid %u). "
      "Delegate one: as the admin run `contrib/delegate-cgroup.sh USER` and set \"rootless\": "
      "{\"cgroupParent\": \"/agentsbx-users/%%u\"} in /etc/agentsbx/config.json; or, on a cgroup v2 "
      "host, run it in your systemd user manager's session (XDG_RUNTIME_DIR set; `loginctl "
      "enable-linger USER` for one without a login), which gives agentsbx a delegated scope "
      "(docs/security.md \"When the caller is not root\"); or run as root; or accept running without memory/pids/CPU "
      "limits by listing \"cgroup\" in the policy's \"degrade\" (recorded in the audit log)%s",
      what, strchr (what, ',') ? "" : "s", (unsigned) geteuid (), plan && plan->active ? hint : "");
}

char *
rootless_cgroup_degraded (const struct policy_plan *plan, const char *cgroup)
{
  cleanup_free char *what = NULL;

  if (!rootless_caller () || !degrades_cgroup (plan) || !(what = cgroup_limits (plan, NULL, cgroup)))
    return NULL;
  return xasprintf ("cgroup: non-root caller without a delegated cgroup%s, not enforced: %s",
                    cgroup ? " for these controllers" : "", what);
}
