/* cgroup_cpu.c - linux.resources.cpu: the cpu controller (shares, CFS quota/period/burst,
 * realtime runtime/period, idle) and the cpuset controller (cpus, mems).
 *
 * Sources: runtime-spec config-linux.md "CPU"; sched-bwc.rst (CFS bandwidth: cpu.cfs_quota_us,
 * cpu.cfs_period_us, cpu.cfs_burst_us on v1; "cpu.max" = "$QUOTA $PERIOD" and cpu.max.burst on
 * v2); sched-rt-group.rst (v1 only: cpu.rt_period_us, cpu.rt_runtime_us - cgroup v2 has no RT
 * group scheduling interface, so a realtime value there is an error); cpusets.rst.
 * v2 weights: cpu.weight = cgroup_shares_to_weight(shares) (runc/crun formula).
 * Ordering (v1): the period is written before the quota and the rt period before the rt runtime
 * so a runtime/quota is always checked against its final period. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

#define RT_ANCESTORS_MAX 32

/* A realtime runtime the parent cannot give (sched-rt-group.rst: a group's runtime is bounded by
 * its parent's, and the runtime's own /agentsbx parent starts with 0) is given to the ancestors
 * first, top-down, from the nearest one that has enough (the hierarchy's root has 950000 by
 * default), as crun does; runc fails there. `where` is the container's cgroup directory. An
 * ancestor the kernel refuses (its siblings already use the budget) is the error. 0 / -1. */
static int
rt_runtime_raise_ancestors (const char *where, int64_t want, asbx_err_t *err)
{
  cleanup_free char *p = xstrdup (where);
  char *anc[RT_ANCESTORS_MAX];
  size_t n = 0;
  char *slash;
  int r = 0;

  while (n < RT_ANCESTORS_MAX && (slash = strrchr (p, '/')) != NULL && slash != p)
    {
      cleanup_free char *raw = NULL;
      int64_t cur;
      *slash = '\0';
      cleanup_free char *file = xasprintf ("%s/cpu.rt_runtime_us", p);
      if (read_file_at (AT_FDCWD, file, 64, &raw, NULL, NULL) < 0) /* above the hierarchy's root */
        break;
      raw[strcspn (raw, "\n")] = '\0';
      if (parse_i64 (raw, &cur) < 0 || cur == -1 || cur >= want)
        break;
      anc[n++] = xstrdup (p);
    }
  while (n > 0)
    {
      cleanup_free char *dir = anc[--n];
      cleanup_free char *file = xasprintf ("%s/cpu.rt_runtime_us", dir);
      cleanup_free char *val = xasprintf ("%" PRId64, want);
      if (r == 0 && write_file_at (AT_FDCWD, file, val, strlen (val), err) < 0)
        r = asbx_error_wrap (err, "linux.resources.cpu.realtimeRuntime: give the parent cgroup %s the runtime", dir);
    }
  return r;
}

static int
set_rt_runtime (const struct cgroup_dir *d, int64_t want, asbx_err_t *err)
{
  asbx_err_t first = NULL;

  if (cgroup_dir_writef (d, "cpu.realtimeRuntime", "cpu.rt_runtime_us", &first, "%" PRId64, want) == 0)
    return 0;
  if (first->errnum != EINVAL || want <= 0 || d->where == NULL)
    {
      asbx_error_move (err, &first);
      return -1;
    }
  if (rt_runtime_raise_ancestors (d->where, want, err) < 0)
    {
      asbx_error_free (&first);
      return -1;
    }
  asbx_error_free (&first);
  return cgroup_dir_writef (d, "cpu.realtimeRuntime", "cpu.rt_runtime_us", err, "%" PRId64, want);
}

static int
set_v1 (const struct cgroup_dir *d, const struct oci_cpu *c, asbx_err_t *err)
{
  if (c->has_shares && c->shares != 0
      && cgroup_dir_writef (d, "cpu.shares", "cpu.shares", err, "%" PRIu64, c->shares) < 0)
    return -1;
  if (c->has_period && c->period != 0
      && cgroup_dir_writef (d, "cpu.period", "cpu.cfs_period_us", err, "%" PRIu64, c->period) < 0)
    return -1;
  if (c->has_quota && c->quota != 0)
    {
      if (c->quota < -1)
        return asbx_error (err, EINVAL, "linux.resources.cpu.quota: invalid value %" PRId64, c->quota);
      if (cgroup_dir_writef (d, "cpu.quota", "cpu.cfs_quota_us", err, "%" PRId64, c->quota) < 0)
        return -1;
    }
  if (c->has_burst && cgroup_dir_writef (d, "cpu.burst", "cpu.cfs_burst_us", err, "%" PRIu64, c->burst) < 0)
    return -1;
  if (c->has_realtime_period && c->realtime_period != 0
      && cgroup_dir_writef (d, "cpu.realtimePeriod", "cpu.rt_period_us", err, "%" PRIu64, c->realtime_period) < 0)
    return -1;
  if (c->has_realtime_runtime && c->realtime_runtime != 0 && set_rt_runtime (d, c->realtime_runtime, err) < 0)
    return -1;
  if (c->has_idle && cgroup_dir_writef (d, "cpu.idle", "cpu.idle", err, "%" PRId64, c->idle) < 0)
    return -1;
  return 0;
}

static int
set_v2 (const struct cgroup_dir *d, const struct oci_cpu *c, asbx_err_t *err)
{
  if ((c->has_realtime_runtime && c->realtime_runtime != 0) || (c->has_realtime_period && c->realtime_period != 0))
    return asbx_error (err, ENOTSUP,
                       "linux.resources.cpu.%s: realtime scheduling groups are not supported on "
                       "cgroup v2",
                       c->has_realtime_runtime && c->realtime_runtime ? "realtimeRuntime" : "realtimePeriod");
  if (c->has_shares && c->shares != 0
      && cgroup_dir_writef (d, "cpu.shares", "cpu.weight", err, "%" PRIu64, cgroup_shares_to_weight (c->shares)) < 0)
    return -1;
  /* cpu.max: "max" or the quota, then the period when given (runc writes the same strings) */
  if ((c->has_quota && c->quota != 0) || (c->has_period && c->period != 0))
    {
      cleanup_free char *v = NULL;
      if (c->has_quota && c->quota < -1)
        return asbx_error (err, EINVAL, "linux.resources.cpu.quota: invalid value %" PRId64, c->quota);
      if (c->has_period && c->period != 0)
        v = c->has_quota && c->quota > 0 ? xasprintf ("%" PRId64 " %" PRIu64, c->quota, c->period)
                                         : xasprintf ("max %" PRIu64, c->period);
      else
        v = c->quota > 0 ? xasprintf ("%" PRId64, c->quota) : xstrdup ("max");
      if (cgroup_dir_write (d, c->has_quota && c->quota ? "cpu.quota" : "cpu.period", "cpu.max", v, err) < 0)
        return -1;
    }
  if (c->has_burst && cgroup_dir_writef (d, "cpu.burst", "cpu.max.burst", err, "%" PRIu64, c->burst) < 0)
    return -1;
  if (c->has_idle && cgroup_dir_writef (d, "cpu.idle", "cpu.idle", err, "%" PRId64, c->idle) < 0)
    return -1;
  return 0;
}

int
cgroup_cpu_set (const struct cgroup_dir *d, const struct oci_cpu *c, asbx_err_t *err)
{
  if (c == NULL)
    return 0;
  return d->version == 2 ? set_v2 (d, c, err) : set_v1 (d, c, err);
}

int
cgroup_cpuset_set (const struct cgroup_dir *d, const struct oci_cpu *c, asbx_err_t *err)
{
  /* same file names on v1 and v2 (v2 adds cpuset.cpus.effective/partition, not config) */
  if (c == NULL)
    return 0;
  if (c->cpus && c->cpus[0] && cgroup_dir_write (d, "cpu.cpus", "cpuset.cpus", c->cpus, err) < 0)
    return -1;
  if (c->mems && c->mems[0] && cgroup_dir_write (d, "cpu.mems", "cpuset.mems", c->mems, err) < 0)
    return -1;
  return 0;
}
