/* compile.h - internal to src/policy: effective document -> plan. */
#ifndef ASBX_POLICY_COMPILE_H
#define ASBX_POLICY_COMPILE_H

#include "policy/doc.h"
#include "policy/plan.h"

#define POLICY_AUDIT_ALWAYS (POLICY_AUDIT_LIFECYCLE | POLICY_AUDIT_POLICY | POLICY_AUDIT_DENIAL | POLICY_AUDIT_LIMIT)

/* Compile an effective, normalised document into a new active plan (never fails: every value
 * was validated at parse). sources, audit_dir and clamps are left for the caller. */
struct policy_plan *policy_compile (const struct pdoc *e);

#endif
