/* validate.h - checks on a parsed config.json that need no syscalls: required fields, the
 * runtime-spec's rules on namespace combinations, and fields this build cannot enforce yet
 * (an error, never a silent skip). Source: runtime-spec config.md, config-linux.md. */
#ifndef ASBX_SPEC_VALIDATE_H
#define ASBX_SPEC_VALIDATE_H

#include <stdbool.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

struct spec_host
{
  bool apparmor_enabled; /* /sys/module/apparmor/parameters/enabled == Y */
  bool selinux_enabled;  /* selinuxfs mounted */
};

/* Validate for create/run. `host`: the host's LSM state, probed by the caller (the runtime).
 * Not checked here (the mechanism modules' checks, which the caller runs next):
 * process.scheduler/ioPriority (linux_sched_check), linux.memoryPolicy (linux_mempolicy_check). `name` prefixes errors
 * ("config.json: linux.uidMappings: ..."). 0 / -1 with *err (errnum 0). */
int spec_validate (const struct oci_spec *spec, const struct spec_host *host, const char *name, asbx_err_t *err);

#endif
