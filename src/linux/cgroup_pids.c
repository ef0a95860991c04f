/* cgroup_pids.c - linux.resources.pids.limit -> pids.max (same file on v1 and v2).
 *
 * Source: runtime-spec config-linux.md "pids"; cgroup-v1/pids.rst. A limit <= 0 other than the
 * "unset" 0 means unlimited ("max"), as runc writes it. Once the cgroup holds pids.max tasks,
 * fork()/clone() in it fail with EAGAIN: this is what stops a fork bomb. */
#include <inttypes.h>

#include "linux/cgroup_internal.h"

int
cgroup_pids_set (const struct cgroup_dir *d, int64_t limit, asbx_err_t *err)
{
  if (limit == 0)
    return 0;
  if (limit < 0)
    return cgroup_dir_write (d, "pids.limit", "pids.max", "max", err);
  return cgroup_dir_writef (d, "pids.limit", "pids.max", err, "%" PRId64, limit);
}
