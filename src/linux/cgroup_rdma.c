/* cgroup_rdma.c - linux.resources.rdma -> rdma.max (v1 and v2 use the same file and syntax:
 * "DEVICE hca_handle=N hca_object=N", "max" for a limit not given).
 * Sources: runtime-spec config-linux.md "RDMA"; cgroup-v1/rdma.rst; cgroup-v2.rst "RDMA".
 * The device name is a map key from config.json written into the file: whitespace refused. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "linux/cgroup_internal.h"

int
cgroup_rdma_set (const struct cgroup_dir *d, const struct oci_rdma *r, size_t n, asbx_err_t *err)
{
  for (size_t i = 0; i < n; i++)
    {
      char h[24] = "max", o[24] = "max", field[64];
      if (r[i].device == NULL || r[i].device[0] == '\0' || strpbrk (r[i].device, " \t\n="))
        return asbx_error (err, EINVAL, "linux.resources.rdma: invalid device name");
      snprintf (field, sizeof field, "rdma[\"%s\"]", r[i].device);
      if (r[i].has_hca_handles)
        snprintf (h, sizeof h, "%u", r[i].hca_handles);
      if (r[i].has_hca_objects)
        snprintf (o, sizeof o, "%u", r[i].hca_objects);
      if (cgroup_dir_writef (d, field, "rdma.max", err, "%s hca_handle=%s hca_object=%s", r[i].device, h, o) < 0)
        return -1;
    }
  return 0;
}
