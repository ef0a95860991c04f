/* cgroup_convert.c - value conversions between cgroup v1 (what the runtime-spec's fields are
 * modelled on) and cgroup v2 files.
 *
 * Source of the formulas: runc libcontainer/cgroups/utils.go (ConvertCPUSharesToCgroupV2Value,
 * ConvertBlkIOToIOWeightValue, ConvertMemorySwapToCgroupV2Value) and crun
 * src/libcrun/cgroup-resources.c, which agree; engines and tests compare against them, so we
 * match them exactly (integer arithmetic, truncating division). Pure functions: unit-tested. */
#include <errno.h>

#include "linux/cgroup_internal.h"

uint64_t
cgroup_shares_to_weight (uint64_t shares)
{
  /* maps [2, 262144] linearly onto [1, 10000] */
  if (shares == 0)
    return 0;
  if (shares < 2)
    shares = 2;
  return 1 + ((shares - 2) * 9999) / 262142;
}

uint64_t
cgroup_blkio_to_io_weight (uint64_t w)
{
  /* maps [10, 1000] linearly onto [1, 10000] */
  if (w == 0)
    return 0;
  if (w < 10)
    w = 10;
  return 1 + ((w - 10) * 9999) / 990;
}

int
cgroup_swap_to_v2 (int64_t swap, int64_t limit, int64_t *out, asbx_err_t *err)
{
  if (swap == -1 || swap == 0)
    {
      *out = swap;
      return 0;
    }
  if (limit == 0 || limit == -1)
    return asbx_error (err, EINVAL, "linux.resources.memory.swap: a swap limit (%lld) needs a memory limit",
                       (long long) swap);
  if (swap < limit)
    return asbx_error (err, EINVAL,
                       "linux.resources.memory.swap: memory+swap limit (%lld) must be >= the memory limit (%lld)",
                       (long long) swap, (long long) limit);
  *out = swap - limit;
  return 0;
}
