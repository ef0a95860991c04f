/* userdirs.h - where a non-root caller's state and audit log live (issue 17, docs/security.md
 * "When the caller is not root"). */
#ifndef ASBX_RUNTIME_USERDIRS_H
#define ASBX_RUNTIME_USERDIRS_H

#include <stdbool.h>

#include "core/error.h"

/* true when the caller's state root and audit directory are its own (the two functions below)
 * unless --root / --audit-dir name others: euid != 0, or euid 0 in a user namespace of someone
 * else's (runtime/rootless.h) with XDG_RUNTIME_DIR set - rootless Podman's conmon calls the
 * runtime there without --root, and crun then uses $XDG_RUNTIME_DIR too. Root of an unprivileged
 * system container (no XDG_RUNTIME_DIR) keeps /run/agentsbx and /var/log/agentsbx, its own there. */
bool asbx_uses_user_dirs (void);

/* The state root of a non-root caller: $XDG_RUNTIME_DIR/agentsbx, or /tmp/agentsbx-<uid> when
 * the variable is unset or empty. The directory is created 0700 if missing; an existing one must
 * be a directory (not a symlink) owned by the caller with no group/other bits, else -1 naming the
 * path (another local user may have made it first: it is never used, nor chmod'ed). Returns a
 * heap string (caller frees) or NULL with *err. The parent must exist ($XDG_RUNTIME_DIR: as the
 * XDG base directory spec says, made by the login manager). */
char *asbx_user_state_root (asbx_err_t *err);

/* The audit directory of a non-root caller: $XDG_STATE_HOME/agentsbx, else
 * $HOME/.local/state/agentsbx ($HOME unset: the passwd entry's home). Not created here (the
 * monitor's audit_open makes missing components 0700). Heap string, or NULL with *err when no
 * home is known. */
char *asbx_user_audit_dir (asbx_err_t *err);

#endif
