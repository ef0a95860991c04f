/* workspace_audit.h - the `workspace` audit record (issue 18; docs/policy.md §2.7): what a
 * review workspace's diff, apply, snapshot or discard saw or did, path by path. */
#ifndef ASBX_RUNTIME_WORKSPACE_AUDIT_H
#define ASBX_RUNTIME_WORKSPACE_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "monitor/audit.h"
#include "runtime/workspace_walk.h"

/* Build the record {"event":"workspace","op":OP,"paths":[{"op","path","type","size","sha256"
 * [,"oldPath"][,"applied"]}...],"count":N}. `op` is "diff", "apply", "snapshot" or "discard".
 * `applied` (may be NULL) marks, per change, whether apply wrote it: then every path carries
 * "applied": true|false. Deletions that are the source of a rename are left out (the renamed
 * entry names them). Returns the record (caller writes it with audit_rec_write, which frees it,
 * or frees it with audit_rec_free); never NULL. */
struct audit_rec *workspace_audit_record (const char *id, const char *op, const struct ws_changes *c,
                                          const bool *applied);

/* Open container id's audit log for appending, the directory resolved as every command resolves
 * it (audit_dir_resolve: --audit-dir, the host config's auditDir, the default).
 * Returns the fd (caller owns) or -1 with *err. */
int workspace_audit_open (const char *audit_dir, const char *config_path, const char *id, asbx_err_t *err);

#endif
