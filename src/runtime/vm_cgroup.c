/* vm_cgroup.c - QEMU's host cgroup (vm_cgroup.h for the design and the numbers). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/cgroup.h"
#include "runtime/rootless.h"
#include "runtime/vm_cgroup.h"

#define CFS_PERIOD_US 100000

int
vm_cgroup_prepare (struct vm_cgroup *cg, const struct oci_spec *spec, const char *id, uint64_t guest_mib,
                   unsigned vcpus, double cpus, asbx_err_t *err)
{
  int p[2];
  const char *cp = spec && spec->linux_ && spec->linux_->cgroups_path && spec->linux_->cgroups_path[0]
                       ? spec->linux_->cgroups_path
                       : NULL;
  cleanup_free char *vmid = xasprintf ("vm-%s", id);
  const char *env = getenv ("AGENTSBX_VM_QEMU_LIMIT_MIB");

  *cg = (struct vm_cgroup){ .gate_rd = -1, .gate_wr = -1, .guest_mib = guest_mib, .vcpus = vcpus, .cpus = cpus };
  cg->limit_mib = guest_mib + VM_CGROUP_OVERHEAD_MIB;
  if (env && *env)
    {
      uint64_t v;
      if (parse_u64 (env, &v) < 0 || v == 0 || v > cg->limit_mib)
        return asbx_error (err, EINVAL,
                           "isolation vm: AGENTSBX_VM_QEMU_LIMIT_MIB `%s`: expected a number of MiB from 1 to %" PRIu64
                           " (it may only lower QEMU's memory limit)",
                           env, cg->limit_mib);
      cg->limit_mib = v;
      cg->lowered = true;
    }
  /* a caller without root (runtime/rootless.h): no delegated cgroup is used for QEMU yet */
  if (geteuid () != 0 || rootless_caller ())
    return asbx_error (err, EPERM,
                       "isolation vm: QEMU's memory, pids and CPU limits need a host cgroup, which needs root "
                       "(a delegated cgroup of a caller without root is not used for QEMU yet; QEMU never runs "
                       "without them)");
  if (!(cg->path = cgroup_resolve_path (cp, cp ? id : vmid, false, &cg->unit, err)))
    return asbx_error_wrap (err, "isolation vm: QEMU's cgroup");
  if (strchr (cg->path, '\n'))
    return asbx_error (err, EINVAL, "isolation vm: QEMU's cgroup `%s`: a newline in the path", cg->path);
  if (pipe2 (p, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "isolation vm: pipe");
  cg->gate_rd = p[0];
  cg->gate_wr = p[1];
  return 0;
}

int
vm_cgroup_child_wait (struct vm_cgroup *cg)
{
  char c = 0;
  ssize_t r;
  close (cg->gate_wr);
  cg->gate_wr = -1;
  while ((r = read (cg->gate_rd, &c, 1)) < 0 && errno == EINTR)
    ;
  close (cg->gate_rd);
  cg->gate_rd = -1;
  return r == 1 && c == 'g' ? 0 : -1;
}

int
vm_cgroup_attach (struct vm_cgroup *cg, pid_t pid, asbx_err_t *err)
{
  int64_t bytes = (int64_t) (cg->limit_mib << 20);
  struct oci_memory mem = {
    .has_limit = true, .limit = bytes, .has_swap = true, .swap = bytes /* memory+swap: no swap */
  };
  /* the quota rounded up (no libm here): 1.5 cpus = 150000 us per 100000 us */
  int64_t quota = (int64_t) (cg->cpus * CFS_PERIOD_US);
  if ((double) quota < cg->cpus * CFS_PERIOD_US)
    quota++;
  struct oci_cpu cpu = { .has_quota = true, .quota = quota, .has_period = true, .period = CFS_PERIOD_US };
  struct oci_resources res = { .memory = &mem,
                               .cpu = cg->cpus > 0 ? &cpu : NULL,
                               .has_pids = true,
                               .pids_limit = VM_CGROUP_PIDS_BASE + (int64_t) cg->vcpus };

  close (cg->gate_rd);
  cg->gate_rd = -1;
  if (cgroup_enter (cg->path, cg->unit.path ? &cg->unit : NULL, pid, &cg->mask, err) < 0)
    return asbx_error_wrap (err, "isolation vm: QEMU's cgroup");
  cg->entered = true;
  if (cgroup_apply_resources (cg->path, cg->unit.path ? &cg->unit : NULL, &res, NULL, 0, true, err) < 0)
    return asbx_error_wrap (err,
                            "isolation vm: QEMU's cgroup `%s`: its limits cannot be set, QEMU does not run "
                            "without them",
                            cg->path);
  log_debug ("isolation vm: QEMU in cgroup %s: memory %" PRIu64 " MiB (guest %" PRIu64 " + %u), pids %" PRId64
             ", cpus %g",
             cg->path, cg->limit_mib, cg->guest_mib, VM_CGROUP_OVERHEAD_MIB, res.pids_limit, cg->cpus);
  if (write_all (cg->gate_wr, "g", 1) < 0)
    return asbx_error (err, errno, "isolation vm: release QEMU's child");
  close (cg->gate_wr);
  cg->gate_wr = -1;
  return 0;
}

bool
vm_cgroup_oom_killed (const struct vm_cgroup *cg)
{
  uint64_t n = 0;
  asbx_err_t e = NULL;
  if (!cg->entered || cgroup_oom_count (cg->path, &n, &e) < 0)
    {
      asbx_error_free (&e);
      return false;
    }
  return n > 0;
}

char *
vm_cgroup_record (const struct vm_cgroup *cg)
{
  return cg->entered ? xasprintf ("%lu %s", cg->mask, cg->path) : NULL;
}

void
vm_cgroup_remove_record (const char *rec)
{
  unsigned long mask = 0;
  int off = 0;
  asbx_err_t e = NULL;
  if (!rec || sscanf (rec, "%lu %n", &mask, &off) != 1 || !off || !rec[off])
    return;
  cleanup_free char *path = xstrdup (rec + off);
  path[strcspn (path, "\n")] = '\0';
  if (mask && cgroup_remove (path, mask, 10000, &e) < 0)
    {
      log_warning ("isolation vm: remove QEMU's cgroup: %s", e->msg);
      asbx_error_free (&e);
    }
}

void
vm_cgroup_free (struct vm_cgroup *cg)
{
  if (cg->gate_rd >= 0)
    close (cg->gate_rd);
  if (cg->gate_wr >= 0)
    close (cg->gate_wr);
  cg->gate_rd = cg->gate_wr = -1;
  if (cg->entered && cg->mask)
    {
      asbx_err_t e = NULL;
      if (cgroup_remove (cg->path, cg->mask, 10000, &e) < 0)
        {
          log_warning ("isolation vm: remove QEMU's cgroup: %s", e->msg);
          asbx_error_free (&e);
        }
    }
  cg->entered = false;
  free (cg->path);
  cg->path = NULL;
  cgroup_systemd_unit_clear (&cg->unit);
}
