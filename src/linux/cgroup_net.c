/* cgroup_net.c - linux.resources.network: v1 net_cls (classID) and net_prio (priorities).
 *
 * Sources: runtime-spec config-linux.md "Network"; cgroup-v1/net_cls.rst, net_prio.rst. Both
 * controllers exist only on v1 (cgroup2 has no equivalent files; eBPF replaces them), so on a
 * host where they are not mounted a requested value is an error (cgroup_resources.c). An
 * interface name is written into "NAME PRIO": it must not contain whitespace. */
#include <errno.h>
#include <string.h>

#include "linux/cgroup_internal.h"

int
cgroup_net_cls_set (const struct cgroup_dir *d, const struct oci_network *n, asbx_err_t *err)
{
  if (n == NULL || !n->has_class_id)
    return 0;
  return cgroup_dir_writef (d, "network.classID", "net_cls.classid", err, "%u", n->class_id);
}

int
cgroup_net_prio_set (const struct cgroup_dir *d, const struct oci_network *n, asbx_err_t *err)
{
  for (size_t i = 0; n && i < n->priorities_len; i++)
    {
      const char *name = n->priorities[i].name;
      if (name == NULL || name[0] == '\0' || strpbrk (name, " \t\n") || strlen (name) >= 16)
        return asbx_error (err, EINVAL, "linux.resources.network.priorities[%zu].name: invalid interface name", i);
      if (cgroup_dir_writef (d, "network.priorities", "net_prio.ifpriomap", err, "%s %u", name,
                             n->priorities[i].priority)
          < 0)
        return -1;
    }
  return 0;
}
