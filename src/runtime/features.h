/* features.h - the `features` document (runtime-spec features.md): what this build and the running
 * kernel accept, built from the tables the enforcement itself uses (mount options, capabilities,
 * seccomp names, memory-policy names), so the document cannot drift from the code. */
#ifndef ASBX_RUNTIME_FEATURES_H
#define ASBX_RUNTIME_FEATURES_H

#include "core/error.h"

/* The features document as JSON (libocispec/oci_features_to_json; runtime-spec features.md),
 * plus our io.agentsbx.* annotations of this host (features_host.h: probes in short-lived
 * children) and io.github.seccomp.libseccomp.version, the linked libseccomp. Returns a heap
 * string the caller frees, or NULL with *err (EINVAL: a string is not valid UTF-8). */
char *runtime_features_json (asbx_err_t *err);

#endif
