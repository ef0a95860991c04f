/* policy.h - the agent policy compiler's public API (POLICY.md §1-§3): resolve the sources of a
 * container's policy (ceiling from the runtime flags or the host config, request from the
 * container's annotations), parse, validate, merge (ceiling ∩ request) and compile into one
 * struct policy_plan (plan.h) for the enforcement. Only policy_resolve reads files (the host
 * config, site profiles, --policy); everything else is pure. */
#ifndef ASBX_POLICY_POLICY_H
#define ASBX_POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "policy/plan.h"

#define POLICY_DEFAULT_CONFIG "/etc/agentsbx/config.json"
#define POLICY_DEFAULT_PROFILES_DIR "/etc/agentsbx/profiles"
#define POLICY_DEFAULT_AUDIT_DIR "/var/log/agentsbx"
#define POLICY_DEFAULT_STATE_ROOT "/run/agentsbx"
#define POLICY_DEFAULT_SECRETS_DIR "/etc/agentsbx/secrets" /* host config secretsDir */
#define POLICY_DEFAULT_WORKSPACES_DIR "/var/lib/agentsbx/workspaces"
#define POLICY_ANNOTATION_POLICY "io.agentsbx.policy"
#define POLICY_ANNOTATION_PROFILE "io.agentsbx.profile"

struct policy_inputs
{
  const char *profile_flag; /* global --profile NAME: ceiling */
  const char *policy_flag;  /* global --policy FILE: ceiling */
  const char *config_path;  /* global --config FILE; NULL = /etc/agentsbx/config.json (absent file = no host config) */
  const char *profiles_dir; /* NULL = /etc/agentsbx/profiles */
  const char *audit_dir_flag;          /* global --audit-dir, NULL = from host config or /var/log/agentsbx */
  const char *state_root;              /* global --root, NULL = /run/agentsbx (hidden from the container) */
  const struct oci_map *annotations;   /* io.agentsbx.policy (inline JSON), io.agentsbx.profile (name) = the request */
  const char *sandbox_default_profile; /* `agentsbx sandbox`: ceiling when neither ceiling nor request is given */
  bool workspace_review;               /* `sandbox --review`: filesystem.workspace.mode review added to the
                                          effective policy (a narrowing, always allowed) */
  bool isolation_vm;                   /* `sandbox --isolation vm` and the global `--isolation vm`: isolation vm
                                          added likewise (alone, with no policy at all) */
  const char *user_config;             /* user config file (must exist; "" = none); NULL = the caller's own
                                          ($XDG_CONFIG_HOME or ~/.config/agentsbx/config.json, absent = none)
                                          when euid != 0, none for root */
};

/* Resolve sources, parse, validate, merge, compile (POLICY.md §1).
 * Ceiling: --profile or --policy (exclusive), else the host config's defaultProfile, else
 * in->sandbox_default_profile. Request: annotation io.agentsbx.policy or io.agentsbx.profile
 * (exclusive). No ceiling and no request -> a plan with active=false (plain OCI).
 * A widening request fails with one line per widened field, unless the host config says
 * "onWiden": "clamp" (then plan->clamps lists them). A user config (in->user_config) is read after
 * the host config and may only narrow: its defaultProfile replaces the host config's as the
 * ceiling only when it narrows it, its `restrict` document is intersected with the result; any
 * widening there is refused, never clamped (policy/userconf.h).
 * Errors name the source (file path, "annotation io.agentsbx.policy", "profile agent") and the
 * JSON path. Returns a new plan (policy_plan_free) or NULL with *err set (errnum EINVAL for bad
 * input, the errno of a failed read otherwise). */
struct policy_plan *policy_resolve (const struct policy_inputs *in, asbx_err_t *err);

/* Hide the host directories `dirs` (NULL-terminated, or NULL) from the container too: other
 * sandboxes' audit directories (runtime/audit_dirs.h). Added to p->hidden_paths once each, and
 * only to an active plan (a plain OCI container hides nothing). The caller lists them only for
 * an active plan: the list walks the user database (NSS), which a plain `run` must not pay for
 * (issue 20: libnss_systemd and libm, 0.65 MiB of its RSS). The strings are copied. */
void policy_plan_hide (struct policy_plan *p, const char *const *dirs);

/* The effective policy a container was created with (plan->effective_json, saved in its state
 * dir by create), compiled again as it is: no host config, no ceiling, no clamp, so every process
 * of the container (`exec`) gets exactly the init's layers whatever the host config says now
 * (issue 15). `source` names the document in messages. Returns a new plan (policy_plan_free) or
 * NULL with *err (EINVAL: the saved document does not parse). plan->audit_dir is the default
 * directory: callers that write audit records resolve the directory themselves. */
struct policy_plan *policy_resolve_saved (const char *json, const char *source, asbx_err_t *err);

/* Where review workspaces are kept (issue 18; docs/policy.md "Review workspace"): for root the
 * host config's workspacesDir (config_path, NULL = the default file; absent = none) or
 * /var/lib/agentsbx/workspaces; for a non-root caller $XDG_DATA_HOME/agentsbx/workspaces or
 * ~/.local/share/agentsbx/workspaces (policy_user_workspaces_dir; NULL without a home).
 * Returns a heap path, or NULL with *err (a host config that does not parse). */
char *policy_workspaces_dir (const char *config_path, asbx_err_t *err);
char *policy_user_workspaces_dir (void);

/* The plan as JSON (stable key order; for golden tests and `policy explain`). Heap string. */
char *policy_plan_to_json (const struct policy_plan *p, bool pretty);

/* Validate one policy document (file contents) as `policy check` does: parse, validate, apply
 * extends (built-in and site profiles from profiles_dir, NULL = default). `source` names it in
 * messages. On success returns the canonical JSON of the expanded document (heap), else NULL
 * with *err set. */
char *policy_check (const char *json, size_t len, const char *source, const char *profiles_dir, asbx_err_t *err);

/* Built-in profiles (contrib/profiles/NAME.json compiled in): the JSON text, or NULL. */
const char *policy_builtin_profile (const char *name);

/* The name of built-in profile number `i` (0-based, in the C-locale order of the file names), or
 * NULL past the last: how `agentsbx policy profiles` lists them without a copy of the list. */
const char *policy_builtin_name (size_t i);

#endif
