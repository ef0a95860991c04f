/* cgroup_memory.c - linux.resources.memory on the v1 memory controller and cgroup2 memory.*.
 *
 * Sources: runtime-spec config-linux.md "Memory"; cgroup-v1/memory.rst; cgroup-v2.rst "Memory".
 * The spec's swap is memory+swap (v1 memory.memsw.limit_in_bytes); on v2 it is converted to
 * memory.swap.max = swap - limit (cgroup_swap_to_v2).
 * Ordering (v1): the kernel keeps limit <= memsw at every moment, so when both change the one
 * that moves away from the other is written first: raising the limit above the current memsw
 * needs memsw first; lowering needs the limit first (runc's setMemoryAndSwap does the same).
 * Skips (debug-logged): a swap limit equal to the memory limit on a host without swap
 * accounting (no memsw file) means "no swap", which the host gives anyway - runc skips it too.
 * Everything else the kernel lacks is an error naming the field and the file. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "linux/cgroup_internal.h"

#define SET(has, v) ((has) && (v) != 0)

static int
write_limit (const struct cgroup_dir *d, const char *field, const char *file, int64_t v, asbx_err_t *err)
{
  if (v == -1)
    return cgroup_dir_write (d, field, file, d->version == 2 ? "max" : "-1", err);
  if (v < 0)
    return asbx_error (err, EINVAL, "linux.resources.%s: invalid value %" PRId64, field, v);
  return cgroup_dir_writef (d, field, file, err, "%" PRId64, v);
}

static int
v1_limit_and_swap (const struct cgroup_dir *d, const struct oci_memory *m, asbx_err_t *err)
{
  bool set_limit = SET (m->has_limit, m->limit), set_swap = SET (m->has_swap, m->swap);
  bool memsw = cgroup_dir_has (d, "memory.memsw.limit_in_bytes");
  uint64_t cur = 0;

  if (set_swap && !memsw)
    {
      if (m->swap == m->limit || m->swap == -1)
        {
          log_debug ("linux.resources.memory.swap: no swap accounting on this host (%s has no "
                     "memory.memsw.limit_in_bytes); swap %" PRId64 " skipped",
                     d->where, m->swap);
          set_swap = false;
        }
      else
        return asbx_error (err, ENOTSUP,
                           "linux.resources.memory.swap: swap accounting is not enabled on this host (no "
                           "%s/memory.memsw.limit_in_bytes; boot with swapaccount=1)",
                           d->where);
    }
  /* limit -1 without a swap value: lift memsw too, or the old memsw keeps capping memory */
  if (set_limit && m->limit == -1 && !set_swap && memsw)
    return write_limit (d, "memory.swap", "memory.memsw.limit_in_bytes", -1, err) < 0
               ? -1
               : write_limit (d, "memory.limit", "memory.limit_in_bytes", -1, err);
  if (set_limit && set_swap)
    {
      if (cgroup_dir_read_u64 (d, "memory.limit_in_bytes", &cur, err) < 0)
        return -1;
      if (m->swap == -1 || (uint64_t) m->swap > cur)
        return write_limit (d, "memory.swap", "memory.memsw.limit_in_bytes", m->swap, err) < 0
                   ? -1
                   : write_limit (d, "memory.limit", "memory.limit_in_bytes", m->limit, err);
    }
  if (set_limit && write_limit (d, "memory.limit", "memory.limit_in_bytes", m->limit, err) < 0)
    return -1;
  if (set_swap && write_limit (d, "memory.swap", "memory.memsw.limit_in_bytes", m->swap, err) < 0)
    return -1;
  return 0;
}

static int
set_v1 (const struct cgroup_dir *d, const struct oci_memory *m, asbx_err_t *err)
{
  if (v1_limit_and_swap (d, m, err) < 0)
    return -1;
  if (SET (m->has_reservation, m->reservation)
      && write_limit (d, "memory.reservation", "memory.soft_limit_in_bytes", m->reservation, err) < 0)
    return -1;
  if (SET (m->has_kernel, m->kernel)
      && write_limit (d, "memory.kernel", "memory.kmem.limit_in_bytes", m->kernel, err) < 0)
    return -1;
  if (SET (m->has_kernel_tcp, m->kernel_tcp)
      && write_limit (d, "memory.kernelTCP", "memory.kmem.tcp.limit_in_bytes", m->kernel_tcp, err) < 0)
    return -1;
  /* docker sends -1 as uint64 for "unset"; the kernel accepts 0..100 */
  if (m->has_swappiness && m->swappiness != UINT64_MAX)
    {
      if (m->swappiness > 100)
        return asbx_error (err, EINVAL, "linux.resources.memory.swappiness: %" PRIu64 " is not in 0..100",
                           m->swappiness);
      if (cgroup_dir_writef (d, "memory.swappiness", "memory.swappiness", err, "%" PRIu64, m->swappiness) < 0)
        return -1;
    }
  if (m->has_disable_oom_killer && m->disable_oom_killer
      && cgroup_dir_write (d, "memory.disableOOMKiller", "memory.oom_control", "1", err) < 0)
    return -1;
  /* kernels >= 5.x keep use_hierarchy at 1 and refuse 0: a request for 0 is then an error */
  if (m->has_use_hierarchy
      && cgroup_dir_write (d, "memory.useHierarchy", "memory.use_hierarchy", m->use_hierarchy ? "1" : "0", err) < 0)
    return -1;
  return 0;
}

/* v2 fields that have no v2 file: an error unless they carry the "unset" value. */
static int
v2_refuse (const struct oci_memory *m, asbx_err_t *err)
{
  const char *f = NULL;
  if (SET (m->has_kernel, m->kernel) && m->kernel != -1)
    f = "memory.kernel";
  else if (SET (m->has_kernel_tcp, m->kernel_tcp) && m->kernel_tcp != -1)
    f = "memory.kernelTCP";
  else if (m->has_swappiness && m->swappiness != UINT64_MAX)
    f = "memory.swappiness";
  else if (m->has_disable_oom_killer && m->disable_oom_killer)
    f = "memory.disableOOMKiller";
  else if (m->has_use_hierarchy && !m->use_hierarchy)
    f = "memory.useHierarchy";
  if (f)
    return asbx_error (err, ENOTSUP, "linux.resources.%s: not supported on cgroup v2", f);
  return 0;
}

/* The memory.max in force, as the spec's limit: -1 for "max". For an update that changes the
 * swap value only: v2 keeps swap apart from memory, so memory.swap.max = swap - the limit the
 * container already has (runc 1.1.5 refuses such an update on v2; on v1 it is a plain write). */
static int
v2_current_limit (const struct cgroup_dir *d, int64_t *out, asbx_err_t *err)
{
  uint64_t n = 0;

  if (cgroup_dir_read_u64 (d, "memory.max", &n, err) < 0) /* "max" reads as UINT64_MAX */
    return -1;
  *out = n > INT64_MAX ? -1 : (int64_t) n;
  return 0;
}

static int
set_v2 (const struct cgroup_dir *d, const struct oci_memory *m, asbx_err_t *err)
{
  int64_t swap = 0, limit = SET (m->has_limit, m->limit) ? m->limit : 0;

  if (v2_refuse (m, err) < 0)
    return -1;
  if (SET (m->has_swap, m->swap) && m->swap > 0 && limit == 0 && v2_current_limit (d, &limit, err) < 0)
    return -1;
  if (SET (m->has_swap, m->swap) && cgroup_swap_to_v2 (m->swap, limit, &swap, err) < 0)
    return -1;
  if (m->has_check_before_update && m->check_before_update && SET (m->has_limit, m->limit) && m->limit > 0)
    {
      uint64_t cur = 0;
      if (cgroup_dir_read_u64 (d, "memory.current", &cur, err) < 0)
        return -1;
      if (cur > (uint64_t) m->limit)
        return asbx_error (err, EBUSY,
                           "linux.resources.memory.limit: %" PRId64 " is below the current usage %" PRIu64
                           " (checkBeforeUpdate)",
                           m->limit, cur);
    }
  /* swap == limit converts to 0 = "no swap" and is written as 0 (runc does the same) */
  bool set_swap = swap != 0 || (SET (m->has_swap, m->swap) && m->swap > 0);
  if (set_swap && !cgroup_dir_has (d, "memory.swap.max"))
    {
      if (swap > 0)
        return asbx_error (err, ENOTSUP, "linux.resources.memory.swap: swap accounting is off (no %s/memory.swap.max)",
                           d->where);
      /* "max" or "0" without swap accounting is what the host does anyway (runc skips too) */
      log_debug ("linux.resources.memory.swap: no %s/memory.swap.max; swap %" PRId64 " skipped", d->where, m->swap);
      set_swap = false;
    }
  /* swap first: lowering memory.max never depends on memory.swap.max, and vice versa */
  if (set_swap && write_limit (d, "memory.swap", "memory.swap.max", swap, err) < 0)
    return -1;
  if (SET (m->has_limit, m->limit) && write_limit (d, "memory.limit", "memory.max", m->limit, err) < 0)
    return -1;
  if (SET (m->has_reservation, m->reservation)
      && write_limit (d, "memory.reservation", "memory.low", m->reservation, err) < 0)
    return -1;
  return 0;
}

int
cgroup_memory_set (const struct cgroup_dir *d, const struct oci_memory *m, asbx_err_t *err)
{
  if (m == NULL)
    return 0;
  return d->version == 2 ? set_v2 (d, m, err) : set_v1 (d, m, err);
}
