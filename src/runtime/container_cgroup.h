/* container_cgroup.h - operations on a running container's cgroup: update, pause/resume, ps,
 * events. Each opens the container through its state dir (state.h) under the per-container
 * lock, checks the status the operation needs, and calls linux/cgroup.h. Same conventions and
 * messages as container.h ("container `x` does not exist", "... is not running"). */
#ifndef ASBX_RUNTIME_CONTAINER_CGROUP_H
#define ASBX_RUNTIME_CONTAINER_CGROUP_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "runtime/container.h"

/* Parse a linux.resources JSON object (runc update -r) from text; `name` names it in errors.
 * Returns a heap struct (oci_resources_free) or NULL with *err naming the JSON path. */
struct oci_resources *asbx_resources_parse (const char *json, size_t len, const char *name, asbx_err_t *err);

/* update: write the given fields (only those) into a created/running/paused container's cgroup
 * (runc update). 0 / -1 with *err naming the field and file. */
int asbx_container_update (const struct asbx_global *g, const char *id, const struct oci_resources *res,
                           asbx_err_t *err);

/* pause (freeze=true) / resume: refuse when not running (pause) or not paused (resume), as runc.
 * 0 / -1. */
int asbx_container_pause (const struct asbx_global *g, const char *id, bool freeze, asbx_err_t *err);

/* The container's pids (cgroup.procs order). *pids heap. 0 / -1. */
int asbx_container_pids (const struct asbx_global *g, const char *id, pid_t **pids, size_t *n, asbx_err_t *err);

/* events: print one stats JSON line (`stats_once`), or every `interval_ms` a stats line plus an
 * {"type":"oom","id":ID} line per OOM kill, to out, until the container stops. 0 / -1. */
int asbx_container_events (const struct asbx_global *g, const char *id, bool stats_once, int interval_ms, FILE *out,
                           asbx_err_t *err);

#endif
