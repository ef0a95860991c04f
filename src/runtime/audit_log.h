/* audit_log.h - where a container's audit log is, for `agentsbx audit` (the monitor writes it,
 * monitor/audit.c; the CLI reads it through this, not through monitor/). */
#ifndef ASBX_RUNTIME_AUDIT_LOG_H
#define ASBX_RUNTIME_AUDIT_LOG_H

#include "core/error.h"

/* The path of container `id`'s audit log, `<audit dir>/<id>.jsonl`, the audit dir resolved as
 * the monitor resolves it (monitor/audit.h audit_dir_resolve): audit_dir_flag (the global
 * --audit-dir) when given, else the host config's `auditDir` (config_path, NULL =
 * /etc/agentsbx/config.json), else the default directory. `id` must be validated by the caller.
 * Returns a heap string (caller frees), or NULL with *err: the host config's own error
 * (unreadable file, unknown key, relative auditDir). The file itself is not opened. */
char *runtime_audit_log_path (const char *audit_dir_flag, const char *config_path, const char *id, asbx_err_t *err);

#endif
