/* cgroup_hugetlb.c - linux.resources.hugepageLimits.
 *
 * Sources: runtime-spec config-linux.md "Huge page limits" (pageSize "<size><unit-prefix>B",
 * e.g. "2MB", "64KB", "1GB"); cgroup-v1/hugetlb.rst (hugetlb.<size>.limit_in_bytes);
 * cgroup-v2.rst "HugeTLB" (hugetlb.<size>.max, and hugetlb.<size>.rsvd.max since 5.7, which we
 * set to the same value when present so reservations cannot exceed the limit either - crun does
 * the same). The page size is only used as part of a file name, so it is checked to be digits
 * followed by KB/MB/GB before use; a size the kernel does not offer is an error naming it. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

static bool
valid_page_size (const char *s)
{
  size_t n = 0;
  while (isdigit ((unsigned char) s[n]))
    n++;
  return n > 0 && n < 8 && (strcmp (s + n, "KB") == 0 || strcmp (s + n, "MB") == 0 || strcmp (s + n, "GB") == 0);
}

int
cgroup_hugetlb_set (const struct cgroup_dir *d, const struct oci_hugepage_limit *l, size_t n, asbx_err_t *err)
{
  for (size_t i = 0; i < n; i++)
    {
      cleanup_free char *file = NULL, *rsvd = NULL;
      char field[64];

      snprintf (field, sizeof field, "hugepageLimits[%zu]", i);
      if (l[i].page_size == NULL || !valid_page_size (l[i].page_size))
        return asbx_error (err, EINVAL, "linux.resources.%s.pageSize: invalid page size `%s` (expected e.g. 2MB)",
                           field, l[i].page_size ? l[i].page_size : "");
      file = xasprintf ("hugetlb.%s.%s", l[i].page_size, d->version == 2 ? "max" : "limit_in_bytes");
      if (!cgroup_dir_has (d, file))
        return asbx_error (err, ENOTSUP,
                           "linux.resources.%s.pageSize: huge page size `%s` is not supported on this "
                           "host (no %s/%s)",
                           field, l[i].page_size, d->where, file);
      if (cgroup_dir_writef (d, field, file, err, "%" PRIu64, l[i].limit) < 0)
        return -1;
      rsvd = xasprintf ("hugetlb.%s.rsvd.%s", l[i].page_size, d->version == 2 ? "max" : "limit_in_bytes");
      if (cgroup_dir_has (d, rsvd) && cgroup_dir_writef (d, field, rsvd, err, "%" PRIu64, l[i].limit) < 0)
        return -1;
    }
  return 0;
}
