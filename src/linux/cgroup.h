/* cgroup.h - the container's cgroup: create or join linux.cgroupsPath on cgroup v2, v1 and hybrid
 * hosts, place processes, remove on delete. Applying linux.resources is issue 3; until then
 * cgroup_check_resources() refuses any resource that would need writing (fail closed).
 *
 * Layout is detected once per process from /proc/self/mountinfo and /proc/cgroups:
 *  - unified: one cgroup2 mount (/sys/fs/cgroup), all controllers there;
 *  - legacy: v1 hierarchies only;
 *  - hybrid: v1 controller hierarchies plus a cgroup2 mount (e.g. /sys/fs/cgroup/unified) that
 *    holds only the controllers not bound to v1 (this machine: hugetlb).
 * Sources: cgroups(7), Documentation/admin-guide/cgroup-v2.rst, runtime-spec config-linux.md
 * "Control groups" (cgroupsPath relative = relative to the runtime's own cgroup; absolute = from
 * the hierarchy root; absent = runtime's choice: we use /agentsbx/<id>). */
#ifndef ASBX_LINUX_CGROUP_H
#define ASBX_LINUX_CGROUP_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

enum cgroup_layout
{
  CGROUP_LAYOUT_UNIFIED,
  CGROUP_LAYOUT_LEGACY,
  CGROUP_LAYOUT_HYBRID,
};

/* Detect the host layout (cached after the first call). -1 with *err if no cgroup fs found. */
int cgroup_layout_detect (enum cgroup_layout *out, asbx_err_t *err);

/* Resolve linux.cgroupsPath (may be NULL) for container `id` into the path relative to each
 * hierarchy root, e.g. "/agentsbx/ID" or "/kubepods/pod1/ID". A "slice:prefix:name" path
 * (systemd form) or systemd=true is an error on hosts without systemd (this machine).
 * Returns a heap string or NULL with *err set. */
char *cgroup_resolve_path (const char *cgroups_path, const char *id, bool systemd, asbx_err_t *err);

/* Refuse any linux.resources field that would need a write we do not implement yet; empty
 * objects and zero "unset" values the engines send are accepted. Error names the field:
 * "linux.resources.memory.limit: not supported yet". 0 / -1 with *err. */
int cgroup_check_resources (const struct oci_resources *res, asbx_err_t *err);

/* Create the cgroup in every mounted hierarchy (mkdir -p; existing directories are joined, as
 * runc does) and move `pid` into it (cgroup.procs). *created_mask: bit per hierarchy that this
 * call created the leaf directory in (so delete removes only what we made) - opaque to callers,
 * stored in the state file. 0 / -1 with *err; on failure everything created is removed. */
int cgroup_enter (const char *path, pid_t pid, unsigned long *created_mask, asbx_err_t *err);

/* Move pid into an existing cgroup (exec). 0 / -1. */
int cgroup_join (const char *path, pid_t pid, asbx_err_t *err);

/* Send sig to every process in the cgroup (kill --all); 0 / -1. */
int cgroup_kill_all (const char *path, int sig, asbx_err_t *err);

/* List pids in the cgroup (from the first hierarchy that has it). *pids heap-owned. */
int cgroup_pids (const char *path, pid_t **pids, size_t *n, asbx_err_t *err);

/* Remove the directories we created (created_mask), retrying rmdir on EBUSY for up to
 * `timeout_ms` while the last processes exit. 0 / -1 with *err naming the directory. */
int cgroup_remove (const char *path, unsigned long created_mask, int timeout_ms, asbx_err_t *err);

#endif
