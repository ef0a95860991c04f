/* rootless.h - what changes in `create` when the caller is not root (issue 17; docs/security.md
 * "When the caller is not root"). */
#ifndef ASBX_RUNTIME_ROOTLESS_H
#define ASBX_RUNTIME_ROOTLESS_H

#include <stdbool.h>

#include "core/error.h"

struct policy_plan;
struct oci_linux;

/* true when agentsbx runs without the host's root: euid != 0, or euid 0 in a user namespace other
 * than the initial one (rootless Podman runs its OCI runtime so; runtime/rootless_oci.h). No cgroup
 * is made; for euid != 0 the state root and audit directory are the caller's own
 * (runtime/userdirs.h) */
bool rootless_caller (void);

/* What a non-root caller's create cannot enforce, refused before anything is made (fail closed).
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

/* Likewise for `pin` (runtime/policy_pin.c): the deny paths inside a writable grant that a
 * non-root caller's create does not pin on the host, when the policy degrades `pin`; NULL when
 * the caller is root, the policy does not degrade `pin` or has no such deny. Heap string. The
 * paths are the policy's (a `?` path missing at create is listed all the same). */
char *rootless_pin_degraded (const struct policy_plan *plan);

#endif
