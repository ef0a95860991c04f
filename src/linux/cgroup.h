/* cgroup.h - the container's cgroup: create or join linux.cgroupsPath on cgroup v2, v1 and hybrid
 * hosts, place processes, apply linux.resources (one file per controller: cgroup_memory.c,
 * cgroup_cpu.c, ...), freeze/thaw, statistics and OOM events, remove on delete.
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
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

struct cgroup_systemd_unit; /* cgroup_systemd.h */

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
 * (systemd form) or systemd=true selects the systemd driver (cgroup_systemd.h): the unit's
 * cgroup path ("/system.slice/prefix-name.scope"), which cgroup_enter() then asks systemd to
 * create; a clear ENOTSUP error where systemd does not run or the build lacks libsystemd.
 * *unit (zeroed by the caller) receives
 * that unit (the caller clears it with cgroup_systemd_unit_clear and hands it to cgroup_enter
 * and cgroup_apply_resources); it stays empty for the cgroupfs driver. Returns a heap string
 * or NULL with *err set. */
char *cgroup_resolve_path (const char *cgroups_path, const char *id, bool systemd, struct cgroup_systemd_unit *unit,
                           asbx_err_t *err);

/* Checks of linux.resources that need no cgroup (device rules well-formed). The rest is checked
 * by the kernel when cgroup_apply_resources() writes. 0 / -1 with *err naming the field. */
int cgroup_check_resources (const struct oci_resources *res, asbx_err_t *err);

/* Write linux.resources (may be NULL) into the container's cgroup `path` (as resolved by
 * cgroup_resolve_path; `unit` the systemd unit it resolved, or NULL: see cgroup_systemd_set_resources). devs =
 * linux.devices (allowed rwm in the device filter, as runc does). update=false (create): the device filter is always
 * installed (deny all, the config's rules, the default devices). update=true: only the fields present are written,
 * devices only when rules are given. Errors name the field and the file: "linux.resources.memory.limit: write `1` to
 * /sys/fs/cgroup/memory/x/memory.limit_in_bytes: ...". A controller missing on this host for a field that is set:
 * ENOTSUP. 0 / -1 with *err. Source: runtime-spec config-linux.md "Control groups" and its subsections. */
int cgroup_apply_resources (const char *path, const struct cgroup_systemd_unit *unit, const struct oci_resources *res,
                            const struct oci_device *devs, size_t ndevs, bool update, asbx_err_t *err);

/* Freeze (true) or thaw (false) every process of the cgroup: v1 freezer.state FROZEN/THAWED,
 * v2 cgroup.freeze 1/0; waits (bounded, `timeout_ms`) until the kernel reports the state
 * reached. Source: cgroup-v1/freezer-subsystem.rst, cgroup-v2.rst "cgroup.freeze". 0 / -1. */
int cgroup_freeze (const char *path, bool freeze, int timeout_ms, asbx_err_t *err);

/* 1 when the cgroup is frozen (v1 FROZEN/FREEZING, v2 cgroup.events frozen 1), 0 when not or
 * there is no freezer, -1 with *err. */
int cgroup_is_frozen (const char *path, asbx_err_t *err);

/* Statistics as runc's `events --stats` prints them: the JSON object
 * {"type":"stats","id":ID,"data":{"cpu":...,"memory":...,"pids":...,"blkio":...,"hugetlb":...}}
 * (runc libcontainer/cgroups/stats.go + types/events.go field names). Heap string / NULL. */
char *cgroup_stats_json (const char *path, const char *id, asbx_err_t *err);

/* An fd that becomes readable (poll POLLIN) when the memory controller records an OOM kill:
 * v1 an eventfd registered on memory.oom_control through cgroup.event_control (read 8 bytes
 * per event), v2 the memory.events file (POLLPRI on change; use cgroup_oom_count). *v2 says which.
 * Source: cgroup-v1/memory.rst "OOM Control", cgroup-v2.rst "memory.events". fd / -1. */
int cgroup_oom_fd (const char *path, bool *v2, asbx_err_t *err);

/* The oom_kill count of memory.events (v2) or memory.oom_control (v1, kernel >= 4.13). */
int cgroup_oom_count (const char *path, uint64_t *count, asbx_err_t *err);

/* Create the cgroup in every mounted hierarchy (mkdir -p; existing directories are joined, as
 * runc does) and move `pid` into it (cgroup.procs). *created_mask: bit per hierarchy that this
 * call created the leaf directory in (so delete removes only what we made) - opaque to callers,
 * stored in the state file. `unit`: the systemd unit cgroup_resolve_path gave for `path` (systemd
 * starts it with pid in it first), or NULL. 0 / -1 with *err; on failure everything created is
 * removed. */
int cgroup_enter (const char *path, const struct cgroup_systemd_unit *unit, pid_t pid, unsigned long *created_mask,
                  asbx_err_t *err);

/* Move pid into an existing cgroup (exec). 0 / -1. */
int cgroup_join (const char *path, pid_t pid, asbx_err_t *err);

/* Move pid into sub-cgroups of the container's cgroup `path` (exec --cgroup, runc's syntax):
 * specs[i] is "PATH" for every hierarchy or "CONTROLLERS:PATH" for the v1 hierarchy carrying
 * them; hierarchies no spec names get `path` itself. PATH is relative to `path`; `..` is refused
 * (EINVAL), as is a controller no v1 hierarchy carries. The sub-cgroups must exist (ENOENT
 * naming the path). linux/cgroup_sub.c. 0 / -1 with *err. */
int cgroup_join_sub (const char *path, char *const *specs, size_t n, pid_t pid, asbx_err_t *err);

/* Send sig to every process in the cgroup (kill --all); 0 / -1. */
int cgroup_kill_all (const char *path, int sig, asbx_err_t *err);

/* List pids in the cgroup (from the first hierarchy that has it). *pids heap-owned. */
int cgroup_pids (const char *path, pid_t **pids, size_t *n, asbx_err_t *err);

/* Remove the directories we created (created_mask), retrying rmdir on EBUSY for up to
 * `timeout_ms` while the last processes exit. 0 / -1 with *err naming the directory. */
int cgroup_remove (const char *path, unsigned long created_mask, int timeout_ms, asbx_err_t *err);

#endif
