/* rootless.h - what changes in `create` when the caller is not root (issue 17; docs/security.md
 * "When the caller is not root"). */
#ifndef ASBX_RUNTIME_ROOTLESS_H
#define ASBX_RUNTIME_ROOTLESS_H

#include <stdbool.h>

#include "core/error.h"

struct policy_plan;
struct oci_linux;

/* true when agentsbx runs without root (euid != 0): the cgroup is only a delegated one
 * (runtime/rootless_cgroup.h), the state root and audit directory are the caller's own
 * (runtime/userdirs.h) */
bool rootless_caller (void);

/* What a non-root caller's create cannot enforce, refused before anything is made (fail closed).
 * network.mode filtered: the DNS stub and pasta are not set up without root (not yet supported).
 * Limits: memory, pids and CPU limits need the memory, pids and cpu controllers of a cgroup
 * delegated to the caller; cgroup: the container's cgroup (rootless_cgroup_path), or NULL when
 * none is delegated. plan: the resolved policy or NULL; l: the spec's linux section (its
 * resources after the policy narrowed them), or NULL. Returns 0 when every limit set has its
 * controller, or when the policy lists `cgroup` in `degrade` (then rootless_cgroup_degraded()
 * says what is not enforced, for the audit log); else -1 with *err (errnum 0) naming the limits
 * (JSON paths) and both ways out (delegation as the admin, degrade). Never called for root. */
int rootless_check (const struct policy_plan *plan, const struct oci_linux *l, const char *cgroup, asbx_err_t *err);

/* The degradation for the policy record's `degradations` (heap string, caller frees), or NULL
 * when the caller is root, has no limit without a delegated controller (cgroup: the container's
 * cgroup or NULL), or the policy does not degrade `cgroup`. */
char *rootless_cgroup_degraded (const struct policy_plan *plan, const char *cgroup);

#endif
