/* userconf.h - internal to src/policy: the per-user config of a non-root caller (issue 17;
 * docs/policy.md "User config"). Read after the host config, and only able to narrow what the
 * host config and the runtime flags resolve: a `defaultProfile` the host config's allows, and a
 * `restrict` document intersected with every policy in force. Everything that would widen, or
 * that is the host admin's (onWiden, auditDir, auditSyslog, enableKernelAudit), is refused. */
#ifndef ASBX_POLICY_USERCONF_H
#define ASBX_POLICY_USERCONF_H

#include <stdbool.h>

#include "core/error.h"
#include "policy/doc.h"

struct user_config
{
  char *path;                /* NULL: no user config */
  char *default_profile;     /* NULL: not set; a valid profile name */
  struct pdoc *restrict_doc; /* NULL: not set; `extends` applied, not normalised */
  char *secrets_dir;         /* "secretsDir": absolute; NULL = userconf_default_secrets_dir () */
};

/* The caller's user config path: $XDG_CONFIG_HOME/agentsbx/config.json when XDG_CONFIG_HOME is
 * absolute (XDG base directory spec), else $HOME/.config/agentsbx/config.json ($HOME not
 * absolute: the passwd entry's home). Heap string, or NULL when no home is known. */
char *userconf_default_path (void);

/* The caller's default secrets directory (network.credentials ${secret:NAME}):
 * $XDG_CONFIG_HOME/agentsbx/secrets or $HOME/.config/agentsbx/secrets, chosen as above. Heap
 * string, or NULL when no home is known. */
char *userconf_default_secrets_dir (void);

/* Load the user config at `path` into *u (zeroed by the caller). An absent file is no user config
 * unless `required`. The file must be a regular file owned by the effective uid and not group- or
 * world-writable (another user could otherwise widen nothing, but narrow the caller's sandboxes
 * against their will, or watch them fail), else refused naming the owner and mode. Keys:
 * defaultProfile (profile name), restrict (a policy document; "version" may be left out),
 * secretsDir (absolute path of the caller's own secrets directory); the
 * host config's own keys are refused naming why; unknown keys are refused. `lookup`/`ud` resolve
 * `extends` of the restrict document and must match the ceiling's. 0, or -1 with *err naming the
 * file and JSON path (errnum EINVAL for bad content, EACCES for a refused owner/mode, the errno
 * of a failed read). */
int userconf_load (struct user_config *u, const char *path, bool required, pdoc_lookup_fn lookup, void *ud,
                   asbx_err_t *err);

void userconf_clear (struct user_config *u);

/* Narrow `eff` (the policy in force, normalised; named `eff_name` in messages) by the user config's
 * restrict document: *out = eff ∩ restrict, never clamped. A widening field is refused with one
 * line per field, each "FILE: restrict.FIELD: VALUE is not allowed by EFF_NAME ...". With no
 * restrict document *out is NULL and 0 is returned. 0 / -1 with *err. */
int userconf_narrow (const struct user_config *u, const struct pdoc *eff, const char *eff_name, struct pdoc **out,
                     asbx_err_t *err);

/* Check that the user's defaultProfile document `user` only narrows the host config's
 * defaultProfile document `sys` (named `sys_name`): *out = sys ∩ user, never clamped. A widening
 * is refused naming FILE, defaultProfile and each widened field. 0 / -1 with *err. */
int userconf_narrow_default (const struct user_config *u, const struct pdoc *sys, const char *sys_name,
                             const struct pdoc *user, struct pdoc **out, asbx_err_t *err);

#endif
