/* policy_landlock.h - the agent policy's Landlock ruleset (policy_landlock.c), installed by
 * process_finalize_and_exec; the accepted degradation's description is policy_apply.h's
 * policy_apply_landlock_degraded. */
#ifndef ASBX_RUNTIME_POLICY_LANDLOCK_H
#define ASBX_RUNTIME_POLICY_LANDLOCK_H

#include "core/error.h"
#include "linux/landlock_ruleset.h"
#include "policy/plan.h"
#include "runtime/policy_carve.h"

/* Build the ruleset of plan->fs_rules (read-only rules carved around the denyRead paths,
 * runtime/policy_carve.h) plus the standard devices and the terminal, paths opened in the
 * current root (after pivot_root). Handles what this kernel's Landlock ABI offers; a right it
 * lacks is an error unless the policy lists `landlock` in `degrade` (then a warning). Heap object
 * (caller frees with linux_landlock_free, or hands it to process_finalize_and_exec in struct process_layers) or NULL
 * with *err naming the rule's origin. seen: the homes the init's mount layer listed (or NULL:
 * listed now, as exec does). */
struct linux_landlock *policy_build_landlock (const struct policy_plan *plan, const struct policy_homes_seen *seen,
                                              asbx_err_t *err);

#endif
