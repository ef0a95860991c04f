/* cgroup_systemd.h - the systemd cgroup driver (`--systemd-cgroup`, cgroupsPath
 * "slice:prefix:name"): the container's cgroup is a transient scope that systemd creates through
 * its D-Bus API (org.freedesktop.systemd1.Manager.StartTransientUnit); every linux.resources
 * field is still written through the cgroup files by the file-based code (cgroup_resources.c),
 * and the resource fields systemd knows are also given to systemd as unit properties so that a
 * `systemctl daemon-reload` does not reset them (runc's libcontainer/cgroups/systemd does both).
 *
 * The cgroup path is computed from the slice and the unit name ("a-b.slice:p:n" ->
 * "/a.slice/a-b.slice/p-n.scope"), returned by cgroup_resolve_path() like any other path, and
 * checked against /proc/PID/cgroup once systemd has placed the process. cgroup_enter() starts
 * the unit resolved for that path, passed along by the caller (cgroup_systemd_is_pending), and marks
 * the created mask with CGROUP_MASK_SYSTEMD so that cgroup_remove() (in a later `delete`)
 * stops the unit instead of only removing directories.
 *
 * Without libsystemd at build time (no HAVE_LIBSYSTEMD) or without a running systemd, the
 * resolve step fails with a clear error and nothing is created. */
#ifndef ASBX_LINUX_CGROUP_SYSTEMD_H
#define ASBX_LINUX_CGROUP_SYSTEMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* Bit of the created mask (cgroup_enter) meaning "the cgroup is a systemd unit we started".
 * Far above the per-hierarchy bits (CGROUP_MAX_HIERARCHIES = 32) and below bit 63 so the mask
 * stays a positive JSON integer in state.json. */
#define CGROUP_MASK_SYSTEMD (1ul << 48)

/* The default slice and scope prefix when the path leaves them empty (runc: system.slice and
 * its own name). */
#define CGROUP_SYSTEMD_DEFAULT_SLICE "system.slice"
#define CGROUP_SYSTEMD_DEFAULT_PREFIX "agentsbx"

struct cgroup_systemd_unit
{
  char *slice; /* parent slice unit, e.g. "system.slice" */
  char *unit;  /* "prefix-name.scope", or "name" when name ends in ".slice" */
  char *path;  /* cgroup path inside the hierarchy, e.g. "/system.slice/prefix-name.scope" */
};

void cgroup_systemd_unit_clear (struct cgroup_systemd_unit *u);

/* Expand a slice unit name into its cgroup path as systemd.slice(5) defines it: "-" separates
 * the levels, so "a-b-c.slice" -> "/a.slice/a-b.slice/a-b-c.slice" and "-.slice" -> "" (the
 * root). Refused (EINVAL): no ".slice" suffix, '/', a leading/trailing or doubled '-'.
 * Heap string or NULL with *err. */
char *cgroup_systemd_expand_slice (const char *slice, asbx_err_t *err);

/* Parse linux.cgroupsPath (NULL/"" = the defaults with name = id) in the systemd form
 * "slice:prefix:name" into *out (heap members; clear with cgroup_systemd_unit_clear). Empty
 * slice -> system.slice; a name ending in ".slice" makes the unit a slice of that name (the
 * prefix is ignored), else the unit is "prefix-name.scope" ("name.scope" for an empty prefix).
 * Names with '/', control characters or an empty name: EINVAL naming linux.cgroupsPath.
 * Source: runc libcontainer/specconv (the form), systemd.unit(5) (unit names). 0 / -1. */
int cgroup_systemd_parse (const char *cgroups_path, const char *id, struct cgroup_systemd_unit *out, asbx_err_t *err);

/* One unit property as it goes on the wire: name, D-Bus type and value. 't' uint64, 'b'
 * boolean (u), 's' string (s), 'y' for "ay" (bytes/nbytes: a CPU or NUMA node bitmask). */
struct cgroup_sd_prop
{
  const char *name;
  char type;
  uint64_t u;
  const char *s;
  uint8_t *bytes;
  size_t nbytes;
};

/* The unit properties for linux.resources `res` (may be NULL -> none) on a cgroup v2 (`v2`)
 * or v1 host: MemoryMax/MemoryLimit, MemoryLow, MemorySwapMax (v2), CPUWeight/CPUShares,
 * CPUQuotaPerSecUSec (rounded up to 10 ms per second as systemd stores percent) and
 * CPUQuotaPeriodUSec, TasksMax, AllowedCPUs/AllowedMemoryNodes (v2, bitmask "ay").
 * -1 (unlimited) becomes UINT64_MAX ("infinity"). *out heap array (free each .bytes), *n count.
 * Source: systemd.resource-control(5), runc libcontainer/cgroups/systemd/{v1,v2}.go for
 * which fields map to which property. 0 / -1 with *err (a malformed cpus/mems list). */
int cgroup_systemd_resource_props (const struct oci_resources *res, bool v2, struct cgroup_sd_prop **out, size_t *n,
                                   asbx_err_t *err);
void cgroup_sd_props_free (struct cgroup_sd_prop *p, size_t n);

/* Resolve for the systemd driver: parse (cgroup_systemd_parse), refuse when systemd is not
 * running (`systemd_running`) or the build has no libsystemd (ENOTSUP, clear message), and
 * fill *unit (the pending unit: the caller passes it to cgroup_enter() and clears it; a unit
 * it held before is cleared first). Heap path / NULL (then *unit is left as it was). */
char *cgroup_systemd_prepare (const char *cgroups_path, const char *id, bool systemd_running,
                              struct cgroup_systemd_unit *unit, asbx_err_t *err);

/* Whether `path` is the path of the pending unit `unit` (NULL or empty: false). */
bool cgroup_systemd_is_pending (const struct cgroup_systemd_unit *unit, const char *path);

/* Start the pending unit `unit` (cgroup_systemd_prepare) for `path` with `pid` in it (scopes: PIDs=[pid]; slices: the
 * caller writes the pid itself), Slice/Wants, Description, Delegate=yes, DefaultDependencies=no and the accounting
 * switches, wait for its job (JobRemoved, bounded by `timeout_ms`), and check /proc/PID/cgroup names `path`. Errors
 * name the unit and the D-Bus error. Connection: as root systemd's private socket /run/systemd/private (works without
 * dbus-daemon), else the system bus. Source: org.freedesktop.systemd1(5) StartTransientUnit, JobRemoved. 0 / -1. */
int cgroup_systemd_start (const struct cgroup_systemd_unit *unit, const char *path, pid_t pid, int timeout_ms,
                          asbx_err_t *err);

/* If `path` is a unit (the pending one `unit`, may be NULL, or a leaf "*.scope"/"*.slice" whose unit systemd knows
 * with ControlGroup == path), give systemd the resource properties of `res` with
 * SetUnitProperties(runtime=true). 0 also when it is not a systemd unit or there is nothing to
 * set; -1 with *err naming the unit and the D-Bus error. */
int cgroup_systemd_set_resources (const char *path, const struct cgroup_systemd_unit *unit,
                                  const struct oci_resources *res, asbx_err_t *err);

/* The slice of a non-root caller's scopes in its systemd user manager. */
#define CGROUP_SYSTEMD_USER_SLICE "app.slice"

/* A non-root caller's cgroup from its systemd user manager (reached as user_bus_open says:
 * $XDG_RUNTIME_DIR/systemd/private, else the session bus): the pending transient scope
 * "agentsbx-ID.scope" in app.slice, whose path is the manager's ControlGroup (its
 * user@UID.service) + "/app.slice/agentsbx-ID.scope". cgroup_enter() starts it with
 * Delegate=yes (cgroup_systemd_start, over the same user bus), cgroup_apply_resources() gives
 * the manager the limits as properties (MemoryMax, TasksMax, CPUQuota...) then writes the files,
 * cgroup_remove() stops it: the system driver's code, with bus_open() reaching the user manager
 * whenever the effective uid is not 0. Returns the heap path with *unit filled (a unit it held
 * before is cleared); NULL with *err unset when no user manager answers (nothing delegated) or
 * the build has no libsystemd; NULL with *err when it answers wrongly. As crun and Podman do for
 * rootless containers (their systemd cgroup manager over the user bus). */
char *cgroup_systemd_user_prepare (const char *id, struct cgroup_systemd_unit *unit, asbx_err_t *err);

/* Stop the unit whose cgroup is `path` (StopUnit "replace", wait for the job, then
 * ResetFailedUnit so a failed scope is collected); KillUnit(SIGKILL) first, so a process
 * that ignores SIGTERM (a namespace's init) cannot hold the stop for TimeoutStopSec. A unit
 * systemd no longer knows is not an error (an empty scope is collected by systemd when its
 * last process exits), nor is a host where systemd no longer runs. 0 / -1. */
int cgroup_systemd_stop (const char *path, int timeout_ms, asbx_err_t *err);

#endif
