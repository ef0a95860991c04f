/* audit_dirs.h - the audit directories sandboxes have used, so each new one hides them all. */
#ifndef ASBX_RUNTIME_AUDIT_DIRS_H
#define ASBX_RUNTIME_AUDIT_DIRS_H

#include "core/error.h"

/* The registry is the file `audit-dirs` in a state root: one absolute real path per line, each
 * an audit directory a container with an agent policy has written to. Only the default audit
 * directory and the one in use were hidden before, so a sandbox with another --audit-dir could
 * be read (or, inside a workspace, rewritten) by the next one (outside tester, 2026-12-01).
 * Entries are never removed: the logs outlive their containers. */

/* Adds the real path of audit_dir to the registry of state_root, unless it is default_dir (the
 * directory a create without --audit-dir uses: every container hides it already, so the common
 * case writes nothing). When the caller is root
 * and state_root is another, to the default state root's (/run/agentsbx) too, so sandboxes with
 * their own --root still see it. Created 0600 under an flock; an entry already there is not
 * repeated. A state root that does not exist yet is created by create itself before this runs.
 * Returns 0, or -1 with *err (errno of open/write). */
int audit_dirs_register (const char *state_root, const char *audit_dir, const char *default_dir, asbx_err_t *err);

/* The registered directories of state_root and of the default state root, deduplicated: a
 * NULL-terminated heap vector of heap strings (free each, then the vector), never NULL. A
 * registry file that is missing is empty; one not owned by the caller or by root, or writable
 * by group or others, is ignored (it could name any directory). */
char **audit_dirs_list (const char *state_root);

/* The audit directory `dir` (absolute) lies in a path only root or the caller can change: each
 * existing directory from / down to it is owned by root or the caller, not a symlink, and not
 * writable by group or others unless sticky (/tmp). A registered directory in a parent another
 * user could write was renamed by that user onto a later sandbox's workspace, whose agent then
 * read and rewrote the logs (outside retest). Returns 0, or -1 with *err (errnum 0) naming the
 * directory that fails and why. Source: the same rule as sshd's StrictModes. */
int audit_dir_check_path (const char *dir, asbx_err_t *err);

/* frees what audit_dirs_list returned (NULL is fine) */
void audit_dirs_free (char **v);

#endif
