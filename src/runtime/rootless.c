/* rootless.c - limits when the caller is not root (issue 17).
 *
 * memory, pids and CPU limits are cgroup files; an ordinary user can write only a cgroup
 * subtree delegated to it: an admin-delegated one named by the host config's
 * rootless.cgroupParent, else a transient scope of the caller's systemd user manager
 * (runtime/rootless_cgroup.h). A
 * limit whose controller is not delegated (or, with nothing delegated, any limit the policy or
 * linux.resources sets) is refused, fail closed, unless the policy lists `cgroup` in `degrade`:
 * then it runs without it and the monitor's `policy` record lists what was not enforced under
 * `degradations`. network.mode filtered works as for root:
 * the monitor's short-lived children join the container's user namespace to make the DNS stub's
 * and the relay's sockets and to load the nftables table in its network namespace, and pasta
 * runs as the caller from there (linux/netns_call.h, monitor/pasta.c); `none` and quick mode's
 * `open` are a fresh network namespace holding only a loopback device, as for root. Limits that
 * need no cgroup still hold:
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
#include "runtime/rootless_oci.h"
#include "runtime/rootless_cgroup.h"

bool
rootless_caller (void)
{
  return geteuid () != 0 || rootless_in_userns ();
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
  const char *names[4];
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
  /* without a cgroup the monitor sums the pid namespace's processes (and what their parents
   * reaped), which misses children the kernel reaps itself (SIGCHLD ignored, SA_NOCLDWAIT: 12 s
   * of CPU under a 2 s limit, outside tester): exact only with a cgroup, so it needs one or the
   * degradation like the others. A cgroup v2 directory always has cpu.stat; v1 needs cpuacct. */
  if (pol && plan->cpu_seconds && !rootless_cgroup_has (cgroup, "cpuacct") && !rootless_cgroup_has (cgroup, "cpu"))
    names[n++] = "limits.cpuSeconds";
  if (!n)
    return NULL;
  cleanup_free char *a = xasprintf ("%s%s%s", names[0], n > 1 ? ", " : "", n > 1 ? names[1] : "");
  return xasprintf ("%s%s%s%s%s", a, n > 2 ? ", " : "", n > 2 ? names[2] : "", n > 3 ? ", " : "",
                    n > 3 ? names[3] : "");
}

int
rootless_check (const struct policy_plan *plan, const struct oci_linux *l, const char *cgroup, asbx_err_t *err)
{
  cleanup_free char *what = cgroup_limits (plan, l, cgroup);
  const char *hint = "; --profile rootless is `agent` without those limits (audited)";

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
rootless_pin_degraded (const struct policy_plan *plan)
{
  cleanup_free char *paths = NULL;
  bool accepted = false;

  for (size_t i = 0; rootless_caller () && plan && plan->active && i < plan->degrade_len; i++)
    accepted = accepted || strcmp (plan->degrade[i], "pin") == 0;
  for (size_t i = 0; accepted && i < plan->mounts_len; i++)
    {
      const struct policy_mount *m = &plan->mounts[i];
      if (!m->writable_parent || m->each_child || (m->kind != POLICY_MOUNT_MASK && m->kind != POLICY_MOUNT_BIND_RO))
        continue;
      char *more = xasprintf ("%s%s%s", paths ? paths : "", paths ? ", " : "", m->path);
      free (paths);
      paths = more;
    }
  if (!paths)
    return NULL;
  return xasprintf ("pin: non-root caller, denies inside a writable grant are read-only in the sandbox but not "
                    "pinned on the host (a host replacement drops them; reported at exit), where they exist: %s",
                    paths);
}

char *
rootless_cgroup_degraded (const struct policy_plan *plan, const char *cgroup)
{
  cleanup_free char *what = NULL;

  if (!rootless_caller () || !degrades_cgroup (plan) || !(what = cgroup_limits (plan, NULL, cgroup)))
    return NULL;
  return xasprintf ("cgroup: non-root caller without a delegated cgroup%s, not enforced: %s%s",
                    cgroup ? " for these controllers" : "", what,
                    strstr (what, "limits.cpuSeconds")
                        ? " (cpuSeconds is counted over the pid namespace's processes, which misses children "
                          "the kernel reaps itself)"
                        : "");
}
