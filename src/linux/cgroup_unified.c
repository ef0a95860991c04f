/* cgroup_unified.c - linux.resources.unified: raw cgroup2 "file": "value" pairs.
 *
 * Source: runtime-spec config-linux.md "Unified": the runtime MUST error when a key names a
 * file that does not exist, or a controller that is not enabled; the key must not name a path
 * outside the container's cgroup. Keys are therefore plain names ("memory.high") without '/',
 * not ".", "..", and not the cgroup core files that would move processes or change the tree
 * (cgroup.procs, cgroup.threads, cgroup.subtree_control, cgroup.kill, cgroup.type): those are
 * the runtime's job. On v1-only hierarchies the spec's rule applies: a key whose controller is
 * not on cgroup2 on this host is an error (cgroup_resources.c decides; this writes). */
#include <errno.h>
#include <string.h>

#include "linux/cgroup_internal.h"

static bool
forbidden (const char *key)
{
  static const char *const core[] = { "cgroup.procs", "cgroup.threads", "cgroup.subtree_control",
                                      "cgroup.kill",  "cgroup.type",    "cgroup.freeze" };
  if (key[0] == '\0' || strchr (key, '/') || strcmp (key, ".") == 0 || strcmp (key, "..") == 0 || !strchr (key, '.'))
    return true;
  for (size_t i = 0; i < sizeof core / sizeof core[0]; i++)
    if (strcmp (key, core[i]) == 0)
      return true;
  return false;
}

int
cgroup_unified_set (const struct cgroup_dir *d, const char *key, const char *value, asbx_err_t *err)
{
  if (forbidden (key))
    return asbx_error (err, EINVAL, "linux.resources.unified[\"%s\"]: not a cgroup file the config may set", key);
  if (!cgroup_dir_has (d, key))
    return asbx_error (err, ENOENT,
                       "linux.resources.unified[\"%s\"]: no such file in %s (controller not enabled or "
                       "unknown key)",
                       key, d->where);
  /* cgroup_dir_write names the field "linux.resources.unified..." through the key */
  return cgroup_dir_write (d, "unified", key, value, err);
}
