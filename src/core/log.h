/* log.h - the runtime's log: text or JSON lines (`level`, `msg`, `time`), as containerd reads
 * runc's `--log FILE --log-format json`. Library code does not log errors (it returns them); it
 * may log debug/warning notes that explain a decision (a skipped field, a fallback). */
#ifndef ASBX_CORE_LOG_H
#define ASBX_CORE_LOG_H

#include "error.h"

enum asbx_log_level
{
  ASBX_LOG_ERROR = 0,
  ASBX_LOG_WARNING,
  ASBX_LOG_INFO,
  ASBX_LOG_DEBUG,
};

enum asbx_log_format
{
  ASBX_LOG_TEXT = 0,
  ASBX_LOG_JSON,
};

/* Configure the log. `path` NULL = stderr; otherwise the file is opened O_APPEND|O_CLOEXEC.
 * Returns 0, or -1 with *err set (file cannot be opened). */
int asbx_log_init (const char *path, enum asbx_log_format format, int debug, asbx_err_t *err);

/* The fd log records go to (stderr or the log file); children that must log through the parent
 * use the sync channel instead. */
int asbx_log_fd (void);

void asbx_log (enum asbx_log_level level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
int asbx_log_debug_enabled (void);

#define log_debug(...) asbx_log (ASBX_LOG_DEBUG, __VA_ARGS__)
#define log_info(...) asbx_log (ASBX_LOG_INFO, __VA_ARGS__)
#define log_warning(...) asbx_log (ASBX_LOG_WARNING, __VA_ARGS__)
#define log_error(...) asbx_log (ASBX_LOG_ERROR, __VA_ARGS__)

/* Print an error once: to the log (as level "error") and, if the log is not stderr, to stderr
 * too in runc's format "agentsbx: MESSAGE" — engines read the log, people read stderr. */
void asbx_log_error_once (const asbx_err_t e);

#endif
