/* cgroup_resources.c - apply linux.resources: which controller each field needs, in which
 * order the controllers are written, and the errors for what this host cannot do.
 *
 * Fail closed (ARCHITECTURE.md §3): a field whose controller is missing on this host, or whose
 * file the kernel lacks, is an error naming the field - never a silent skip. The "unset" values
 * engines send (0 for most numbers; swappiness = -1 as uint64) need nothing and are accepted
 * everywhere. The skips runc makes (swap equal to the limit without swap accounting) are in
 * the controller files, debug-logged.
 * Ordering: called by the runtime after the stage child was moved into the cgroup and before
 * the container's init runs any user code (spawn.c), so no user process ever runs unlimited.
 * Controllers are written cpuset first (cpus/mems must be valid before tasks are constrained),
 * devices last (a device rule change never has to wait for another controller). On `update`
 * only the fields present are written (the per-controller writers guarantee it). */
#include <errno.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"
#include "linux/cgroup_systemd.h"

#define SET(has, v) ((has) && (v) != 0)

static bool
needs_memory (const struct oci_memory *m)
{
  return m
         && (SET (m->has_limit, m->limit) || SET (m->has_reservation, m->reservation) || SET (m->has_swap, m->swap)
             || SET (m->has_kernel, m->kernel) || SET (m->has_kernel_tcp, m->kernel_tcp)
             || (m->has_swappiness && m->swappiness != UINT64_MAX)
             || (m->has_disable_oom_killer && m->disable_oom_killer) || m->has_use_hierarchy
             || (m->has_check_before_update && m->check_before_update));
}

static bool
needs_cpu (const struct oci_cpu *c)
{
  return c
         && (SET (c->has_shares, c->shares) || SET (c->has_quota, c->quota) || SET (c->has_period, c->period)
             || c->has_burst || SET (c->has_realtime_runtime, c->realtime_runtime)
             || SET (c->has_realtime_period, c->realtime_period) || c->has_idle);
}

static bool
needs_cpuset (const struct oci_cpu *c)
{
  return c && ((c->cpus && c->cpus[0]) || (c->mems && c->mems[0]));
}

static bool
needs_blkio (const struct oci_block_io *b)
{
  return b
         && (SET (b->has_weight, b->weight) || SET (b->has_leaf_weight, b->leaf_weight) || b->weight_device_len
             || b->throttle_read_bps_device_len || b->throttle_write_bps_device_len || b->throttle_read_iops_device_len
             || b->throttle_write_iops_device_len);
}

int
cgroup_check_resources (const struct oci_resources *res, asbx_err_t *err)
{
  cleanup_free struct cgroup_dev_rule *rules = NULL;
  size_t n = 0;

  /* static checks only (no cgroup yet): the device rules parse; the rest needs the files */
  if (res == NULL)
    return 0;
  return cgroup_dev_rules_build (res->devices, res->devices_len, NULL, 0, &rules, &n, err);
}

typedef int (*set_fn) (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err);

static int
set_memory (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_memory_set (d, r->memory, err);
}
static int
set_cpu (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_cpu_set (d, r->cpu, err);
}
static int
set_cpuset (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_cpuset_set (d, r->cpu, err);
}
static int
set_pids (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_pids_set (d, r->pids_limit, err);
}
static int
set_blkio (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_blkio_set (d, r->block_io, err);
}
static int
set_hugetlb (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_hugetlb_set (d, r->hugepage_limits, r->hugepage_limits_len, err);
}
static int
set_net_cls (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_net_cls_set (d, r->network, err);
}
static int
set_net_prio (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_net_prio_set (d, r->network, err);
}
static int
set_rdma (const struct cgroup_dir *d, const struct oci_resources *r, asbx_err_t *err)
{
  return cgroup_rdma_set (d, r->rdma, r->rdma_len, err);
}

/* Open the controller and run fn; a missing controller is an error naming the field. */
static int
with_ctl (const char *path, const char *ctl, const char *field, const struct oci_resources *r, set_fn fn,
          asbx_err_t *err)
{
  struct cgroup_dir d = CGROUP_DIR_INIT;
  int ret = cgroup_ctl_open (path, ctl, &d, err);

  if (ret == 1)
    return asbx_error (err, ENOTSUP,
                       "linux.resources.%s: the %s controller is not available on this host "
                       "(not mounted as cgroup v1 and not enabled on cgroup2)",
                       field, ctl);
  if (ret == 0)
    ret = fn (&d, r, err);
  cgroup_dir_clear (&d);
  return ret;
}

static int
apply_unified (const char *path, const struct oci_map *u, asbx_err_t *err)
{
  for (size_t i = 0; i < u->len; i++)
    {
      cleanup_free char *ctl = xstrdup (u->keys[i]);
      struct cgroup_dir d = CGROUP_DIR_INIT;
      int r;

      ctl[strcspn (ctl, ".")] = '\0';
      r = cgroup_ctl_open (path, strcmp (ctl, "cgroup") == 0 ? "cgroup2" : ctl, &d, err);
      if (r == 1)
        return asbx_error (err, ENOTSUP,
                           "linux.resources.unified[\"%s\"]: the %s controller is not available on "
                           "cgroup v2 on this host",
                           u->keys[i], ctl);
      if (r == 0 && d.version != 2)
        r = asbx_error (err, ENOTSUP,
                        "linux.resources.unified[\"%s\"]: the %s controller is bound to cgroup v1 on "
                        "this host (unified keys are cgroup v2 files)",
                        u->keys[i], ctl);
      if (r == 0)
        r = cgroup_unified_set (&d, u->keys[i], u->values[i], err);
      cgroup_dir_clear (&d);
      if (r < 0)
        return -1;
    }
  return 0;
}

static int
apply_devices (const char *path, const struct oci_resources *r, const struct oci_device *devs, size_t ndevs,
               asbx_err_t *err)
{
  cleanup_free struct cgroup_dev_rule *rules = NULL;
  struct cgroup_dir d = CGROUP_DIR_INIT;
  size_t n = 0;
  int ret;

  if (cgroup_dev_rules_build (r ? r->devices : NULL, r ? r->devices_len : 0, devs, ndevs, &rules, &n, err) < 0)
    return -1;
  /* v1 devices controller when mounted (hybrid hosts too, as runc); else the cgroup2 BPF hook */
  ret = cgroup_ctl_open (path, "devices", &d, err);
  if (ret == 1)
    ret = cgroup_ctl_open (path, "cgroup2", &d, err);
  if (ret == 1)
    return asbx_error (err, ENOTSUP, "linux.resources.devices: neither a devices controller nor cgroup2 on this host");
  if (ret == 0)
    ret = d.version == 2 ? cgroup_devices_bpf_attach (d.fd, rules, n, err) : cgroup_devices_v1_set (&d, rules, n, err);
  cgroup_dir_clear (&d);
  return ret;
}

int
cgroup_apply_resources (const char *path, const struct cgroup_systemd_unit *unit, const struct oci_resources *r,
                        const struct oci_device *devs, size_t ndevs, bool update, asbx_err_t *err)
{
  /* systemd driver: the unit's properties first, then the files (cgroup_systemd.h) */
  if (cgroup_systemd_set_resources (path, unit, r, err) < 0)
    return -1;
  if (r)
    {
      if (needs_cpuset (r->cpu) && with_ctl (path, "cpuset", "cpu.cpus", r, set_cpuset, err) < 0)
        return -1;
      if (needs_memory (r->memory) && with_ctl (path, "memory", "memory", r, set_memory, err) < 0)
        return -1;
      if (needs_cpu (r->cpu) && with_ctl (path, "cpu", "cpu", r, set_cpu, err) < 0)
        return -1;
      if (SET (r->has_pids, r->pids_limit) && with_ctl (path, "pids", "pids.limit", r, set_pids, err) < 0)
        return -1;
      if (needs_blkio (r->block_io) && with_ctl (path, "blkio", "blockIO", r, set_blkio, err) < 0)
        return -1;
      if (r->hugepage_limits_len && with_ctl (path, "hugetlb", "hugepageLimits", r, set_hugetlb, err) < 0)
        return -1;
      if (r->network && r->network->has_class_id
          && with_ctl (path, "net_cls", "network.classID", r, set_net_cls, err) < 0)
        return -1;
      if (r->network && r->network->priorities_len
          && with_ctl (path, "net_prio", "network.priorities", r, set_net_prio, err) < 0)
        return -1;
      if (r->rdma_len && with_ctl (path, "rdma", "rdma", r, set_rdma, err) < 0)
        return -1;
      if (r->unified.len && apply_unified (path, &r->unified, err) < 0)
        return -1;
    }
  /* create always installs the device filter (default deny + defaults); update only when the
   * new resources carry rules */
  if ((!update || (r && r->devices_len)) && apply_devices (path, r, devs, ndevs, err) < 0)
    return -1;
  return 0;
}
