/* cgroup_resources.c - linux.resources gate until the controllers are implemented (issue 3).
 *
 * Fail closed (ARCHITECTURE.md §3): a limit the config asks for and we would not write must be an
 * error, never a silent skip. Accepted: absent or empty objects, and the "unset" values engines
 * send (0 for most numbers, -1 = unlimited for memory limits and cpu quota, which is the state of
 * a fresh cgroup anyway), and a device list that is empty or exactly one deny-all rule (a fresh
 * container has no device access through the cgroup we do not write either: the rootfs module
 * creates only the spec's devices). */
#include <errno.h>
#include <string.h>

#include "linux/cgroup_internal.h"

#define NOT_YET(field) asbx_error (err, ENOTSUP, "linux.resources.%s: not supported yet", field)

/* int64 limit that needs a write: set and neither 0 ("unset") nor -1 ("unlimited"). */
#define LIMIT_SET(has, v) ((has) && (v) != 0 && (v) != -1)

static int
check_devices (const struct oci_resources *r, asbx_err_t *err)
{
  const struct oci_device_cgroup *d = r->devices;

  if (r->devices_len == 0)
    return 0;
  if (r->devices_len == 1 && !d->allow && d->access && strcmp (d->access, "rwm") == 0
      && (d->type == NULL || strcmp (d->type, "a") == 0) && (!d->has_major || d->major == -1)
      && (!d->has_minor || d->minor == -1))
    return 0;
  return asbx_error (err, ENOTSUP,
                     "linux.resources.devices: not supported yet (only an empty list or a single deny-all "
                     "{\"allow\": false, \"access\": \"rwm\"} rule is accepted)");
}

static int
check_memory (const struct oci_memory *m, asbx_err_t *err)
{
  if (m == NULL)
    return 0;
  if (LIMIT_SET (m->has_limit, m->limit))
    return NOT_YET ("memory.limit");
  if (LIMIT_SET (m->has_reservation, m->reservation))
    return NOT_YET ("memory.reservation");
  if (LIMIT_SET (m->has_swap, m->swap))
    return NOT_YET ("memory.swap");
  if (LIMIT_SET (m->has_kernel, m->kernel))
    return NOT_YET ("memory.kernel");
  if (LIMIT_SET (m->has_kernel_tcp, m->kernel_tcp))
    return NOT_YET ("memory.kernelTCP");
  /* swappiness 0 is a real value; only docker's old "-1 as uint64" marker means unset */
  if (m->has_swappiness && m->swappiness != UINT64_MAX)
    return NOT_YET ("memory.swappiness");
  if (m->has_disable_oom_killer && m->disable_oom_killer)
    return NOT_YET ("memory.disableOOMKiller");
  return 0; /* useHierarchy, checkBeforeUpdate: no write on their own */
}

static int
check_cpu (const struct oci_cpu *c, asbx_err_t *err)
{
  if (c == NULL)
    return 0;
  if (c->has_shares && c->shares > 0)
    return NOT_YET ("cpu.shares");
  if (LIMIT_SET (c->has_quota, c->quota))
    return NOT_YET ("cpu.quota");
  if (c->has_burst && c->burst > 0)
    return NOT_YET ("cpu.burst");
  if (c->has_period && c->period > 0)
    return NOT_YET ("cpu.period");
  if (c->has_realtime_runtime && c->realtime_runtime != 0)
    return NOT_YET ("cpu.realtimeRuntime");
  if (c->has_realtime_period && c->realtime_period > 0)
    return NOT_YET ("cpu.realtimePeriod");
  if (c->has_idle && c->idle != 0)
    return NOT_YET ("cpu.idle");
  if (c->cpus && c->cpus[0])
    return NOT_YET ("cpu.cpus");
  if (c->mems && c->mems[0])
    return NOT_YET ("cpu.mems");
  return 0;
}

static int
check_block_io (const struct oci_block_io *b, asbx_err_t *err)
{
  if (b == NULL)
    return 0;
  if (b->has_weight && b->weight > 0)
    return NOT_YET ("blockIO.weight");
  if (b->has_leaf_weight && b->leaf_weight > 0)
    return NOT_YET ("blockIO.leafWeight");
  if (b->weight_device_len)
    return NOT_YET ("blockIO.weightDevice");
  if (b->throttle_read_bps_device_len)
    return NOT_YET ("blockIO.throttleReadBpsDevice");
  if (b->throttle_write_bps_device_len)
    return NOT_YET ("blockIO.throttleWriteBpsDevice");
  if (b->throttle_read_iops_device_len)
    return NOT_YET ("blockIO.throttleReadIOPSDevice");
  if (b->throttle_write_iops_device_len)
    return NOT_YET ("blockIO.throttleWriteIOPSDevice");
  return 0;
}

int
cgroup_check_resources (const struct oci_resources *res, asbx_err_t *err)
{
  if (res == NULL)
    return 0;
  if (check_devices (res, err) < 0 || check_memory (res->memory, err) < 0 || check_cpu (res->cpu, err) < 0
      || check_block_io (res->block_io, err) < 0)
    return -1;
  if (res->has_pids && res->pids_limit > 0)
    return NOT_YET ("pids.limit");
  if (res->hugepage_limits_len)
    return NOT_YET ("hugepageLimits");
  if (res->network && ((res->network->has_class_id && res->network->class_id) || res->network->priorities_len))
    return NOT_YET ("network");
  if (res->rdma_len)
    return NOT_YET ("rdma");
  if (res->unified.len)
    return NOT_YET ("unified");
  return 0;
}
