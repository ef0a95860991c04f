/* rootless_cgroup.h - the cgroup of a non-root caller's container: below a subtree an admin
 * delegated to the caller (host config "rootless": {"cgroupParent": ...}), else a transient
 * scope of its systemd user manager (docs/policy.md §5a, docs/security.md "When the caller is
 * not root"). */
#ifndef ASBX_RUNTIME_ROOTLESS_CGROUP_H
#define ASBX_RUNTIME_ROOTLESS_CGROUP_H

#include <stdbool.h>

#include "core/error.h"

struct cgroup_systemd_unit;
struct oci_resources;

/* The container's cgroup for a caller that is not root, or NULL.
 * parent_tmpl: the host config's rootless.cgroupParent (NULL: nothing delegated), with %u the
 * caller's user name, %U its uid, %% a '%'. In every mounted hierarchy where that directory
 * exists it must be the caller's own: a directory owned by the effective uid and not writable
 * by others (on cgroup2 also its cgroup.procs and cgroup.subtree_control, what systemd's
 * Delegate=yes and contrib/delegate-cgroup.sh chown); hierarchies without it are left alone.
 * cgroups_path: linux.cgroupsPath or NULL; the container's cgroup is PARENT/cgroupsPath (its
 * components, ".." refused), else PARENT/id.
 * Returns the per-hierarchy list "KEY:/parent/id;..." naming only the delegated hierarchies
 * (linux/cgroup.h; cgroup_enter and cgroup_join skip the others), heap-owned. When nothing is
 * configured or the directory exists in no hierarchy (not delegated to this caller), the
 * caller's systemd user manager on a pure cgroup v2 host: a transient scope with Delegate=yes,
 * its path returned and *unit filled (the pending unit cgroup_enter starts: zeroed by the
 * caller, cleared with cgroup_systemd_unit_clear; cgroups_path is not used then). NULL with
 * *err unset when neither exists; NULL with *err (errnum EPERM for a directory not the
 * caller's, EINVAL for a bad template) naming the host config field and the directory. */
char *rootless_cgroup_path (const char *parent_tmpl, const char *cgroups_path, const char *id,
                            struct cgroup_systemd_unit *unit, asbx_err_t *err);

/* Whether resolved path `path` (rootless_cgroup_path) places the container in the hierarchy
 * that carries `controller` ("memory", "pids", "cpu", "cpuacct", "freezer"). false for NULL. */
bool rootless_cgroup_has (const char *path, const char *controller);

/* What create writes into a non-root caller's cgroup `path`, narrowed in place (r is a shallow
 * copy of linux.resources: pointers are dropped, never freed): no device rules (the devices
 * controller cannot be delegated: v1 devices.allow and cgroup2 BPF programs need CAP_SYS_ADMIN;
 * as in runc's rootless mode the user namespace is the device boundary), and no memory, pids or
 * cpu fields whose controller `path` does not carry - rootless_check refused those unless the
 * policy degrades `cgroup`, and then the audit log lists them. */
void rootless_cgroup_narrow (const char *path, struct oci_resources *r);

#endif
