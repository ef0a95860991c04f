/* hooks.h - POSIX-platform hooks (runtime-spec config.md "POSIX-platform Hooks", runtime.md
 * "Lifecycle"): each hook is executed with the container state JSON on stdin, its args/env
 * exactly as given, killed after `timeout` seconds. The caller decides the namespace (the
 * runtime's for prestart/createRuntime/poststart/poststop, the container's for createContainer/
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

#endif
