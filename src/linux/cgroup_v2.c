/* cgroup_v2.c - what the cgroup2 hierarchy offers beyond v1 (Documentation/admin-guide/
 * cgroup-v2.rst). cgroup.kill (Linux 5.14) kills every process of a cgroup and its descendants
 * atomically with respect to fork, which a read-cgroup.procs-then-kill loop cannot be.
 * The hybrid cgroup2 mount holds every process too, so it is usable there as well. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

int
cgroup_v2_kill (int dirfd, asbx_err_t *err)
{
  cleanup_close int fd = openat (dirfd, "cgroup.kill", O_WRONLY | O_CLOEXEC | O_NOCTTY);

  if (fd < 0)
    {
      if (errno == ENOENT)
        return 1; /* kernel < 5.14: caller falls back to the loop */
      return asbx_error (err, errno, "open cgroup.kill");
    }
  if (write_all (fd, "1", 1) < 0)
    return asbx_error (err, errno, "write cgroup.kill");
  return 0;
}
