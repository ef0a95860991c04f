/* cgroup_v1.c - what the v1 (legacy) hierarchies need beyond mkdir + cgroup.procs.
 *
 * Source: Documentation/admin-guide/cgroup-v1/cpusets.rst. A new cpuset cgroup starts with empty
 * cpuset.cpus and cpuset.mems (unless the parent has cgroup.clone_children), and attaching a task
 * to it fails with ENOSPC. runc copies the parent's values into every level it walks; so do we.
 * Ordering: parent before child (the walk in cgroup.c goes top-down), before the pid is written. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

/* Copy one cpuset file from parent to child when the child's is empty. */
static int
cpuset_copy (int parentfd, int dirfd, const char *file, const char *name, asbx_err_t *err)
{
  cleanup_free char *cur = NULL, *par = NULL;
  size_t len = 0;

  if (read_file_at (dirfd, file, 4096, &cur, &len, err) < 0)
    return asbx_error_wrap (err, "cgroup cpuset `%s`", name);
  if (cur[strspn (cur, " \n")] != '\0')
    return 0; /* already set: respect what an administrator configured */
  if (read_file_at (parentfd, file, 4096, &par, &len, err) < 0)
    return asbx_error_wrap (err, "cgroup cpuset parent of `%s`", name);
  if (par[strspn (par, " \n")] == '\0')
    return asbx_error (err, ENOSPC, "cgroup cpuset parent of `%s` has an empty %s", name, file);
  if (write_file_at (dirfd, file, par, len, err) < 0)
    return asbx_error_wrap (err, "cgroup cpuset `%s`", name);
  return 0;
}

int
cgroup_v1_cpuset_fill (int parentfd, int dirfd, const char *name, asbx_err_t *err)
{
  /* mems before cpus is what the kernel does not care about; both are needed. Names without
   * the "cpuset." prefix exist with the noprefix mount option (rare): try both. */
  const char *cpus = "cpuset.cpus", *mems = "cpuset.mems";
  if (faccessat (dirfd, cpus, F_OK, 0) < 0 && faccessat (dirfd, "cpus", F_OK, 0) == 0)
    cpus = "cpus", mems = "mems";
  if (cpuset_copy (parentfd, dirfd, cpus, name, err) < 0)
    return -1;
  return cpuset_copy (parentfd, dirfd, mems, name, err);
}
