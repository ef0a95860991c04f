/* hooks.h - POSIX-platform hooks (runtime-spec config.md "POSIX-platform Hooks", runtime.md
 * "Lifecycle"): each hook is executed with the container state JSON on stdin, its args/env
 * as given (no `env`: the runtime's environment, as runc), killed after `timeout` seconds. The caller decides the
 * namespace (the runtime's for prestart/createRuntime/poststart/poststop, the container's for createContainer/
 * startContainer) by calling from the right process. */
#ifndef ASBX_RUNTIME_HOOKS_H
#define ASBX_RUNTIME_HOOKS_H

#include <stddef.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* Run hooks[0..n) in order; stop at the first failure. `kind` names the list in errors
 * ("hooks.prestart[1] (/usr/bin/x): exited with status 2: <first 1 KiB of its output>").
 * The hook's stdout/stderr are captured (and logged at debug level). 0 / -1 with *err. */
int hooks_run (const struct oci_hook *hooks, size_t n, const char *kind, const char *state_json, asbx_err_t *err);

/* Run every hook of hooks[0..n), in order, whatever the result of the others: each failure is
 * logged as a warning and the next hook still runs (runtime.md: a failing poststart or poststop
 * hook MUST be logged and the lifecycle continues). Returns the number of hooks that failed. */
int hooks_run_all_warn (const struct oci_hook *hooks, size_t n, const char *kind, const char *state_json);

#endif
