/* error.h - error objects that chain context ("outer: inner") and carry errno.
 *
 * Convention (ARCHITECTURE.md §3): a fallible function returns int < 0 (or NULL) and takes
 * `asbx_err_t *err` as its last argument. On failure it sets *err exactly once at the failure site
 * (errno captured right after the failing call); callers crossing a module boundary add context
 * with asbx_error_wrap(). On success *err is untouched. Library code never prints: only the CLI
 * does, once, with asbx_error_print()/log.
 */
#ifndef ASBX_CORE_ERROR_H
#define ASBX_CORE_ERROR_H

#include <stdarg.h>

struct asbx_error
{
  int errnum; /* errno of the root cause, 0 when none */
  int status; /* exit status the CLI should use (default 1) */
  char *msg;  /* full chained message, heap-owned */
};
typedef struct asbx_error *asbx_err_t;

/* Set *err to a new error. `errnum` is an errno value appended as ": strerror" (0 for none).
 * Returns -1 always so callers can `return asbx_error(err, errno, "...")`. If *err is already set,
 * the old error is freed (a bug in the caller, but never a leak). err may be NULL (error dropped). */
int asbx_error (asbx_err_t *err, int errnum, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

/* Prefix the existing error with context: "context: previous message". Returns -1.
 * If *err is unset, behaves like asbx_error(err, 0, ...). */
int asbx_error_wrap (asbx_err_t *err, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Free *err and set it to NULL. NULL-safe. */
void asbx_error_free (asbx_err_t *err);

/* Move the error out of *src into *dst (dst's old error freed). */
void asbx_error_move (asbx_err_t *dst, asbx_err_t *src);

#endif
