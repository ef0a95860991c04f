/* audit_log.c - where a container's audit log is: the directory the monitor writes to
 * (monitor/audit.c), resolved by the same code, so `agentsbx audit` and the monitor cannot
 * disagree. */
#include <stdlib.h>

#include "core/cleanup.h"
#include "monitor/audit.h"
#include "runtime/audit_log.h"

char *
runtime_audit_log_path (const char *audit_dir_flag, const char *config_path, const char *id, asbx_err_t *err)
{
  cleanup_free char *dir = audit_dir_resolve (audit_dir_flag, config_path, err);
  if (!dir)
    return NULL;
  return audit_path (dir, id);
}
