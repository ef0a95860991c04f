/* rootless_oci.h - an OCI container of a caller without real root (issue 17, "Rootless OCI";
 * docs/security.md "When the caller is not root"): what is refused up front, and what replaces
 * the cgroup for `ps` and `kill --all` when the container has none. */
#ifndef ASBX_RUNTIME_ROOTLESS_OCI_H
#define ASBX_RUNTIME_ROOTLESS_OCI_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"

struct oci_spec;

/* true when this process runs in a user namespace other than the initial one (its
 * /proc/self/uid_map is not the identity over the full 32-bit range), as the OCI runtime does
 * under rootless Podman, where euid 0 is not the host's root: no cgroup is writable unless
 * delegated and mknod is refused. Cached after the first call; a map that cannot be read
 * counts as the initial namespace (kernels without user namespaces). */
bool rootless_in_userns (void);

/* The caller's uid as the host sees it, for messages: getuid() translated through
 * /proc/self/uid_map (under rootless Podman uid 0 is the user's own uid outside); getuid() when
 * the map cannot be read. */
unsigned rootless_host_uid (void);

/* What a container without a cgroup cannot enforce, checked before anything is made (runc's
 * `--rootless auto`: cgroup errors are ignored only while nothing asks for a cgroup). Called by
 * create only when the container gets no cgroup (a non-root caller without delegation); the
 * memory/pids/CPU limits are rootless_check's (rootless.h). Refused, naming the field:
 * linux.resources.devices[i] allow rules (the devices cgroup), the remaining
 * linux.resources fields (cpu shares/period/realtime/cpus/mems/idle, memory
 * reservation/swap/kernel/swappiness, blockIO, hugepageLimits, network, rdma, unified).
 * Deny rules pass: a container in a user namespace cannot mknod and holds only the device nodes
 * bind-mounted from the host (linux/devices.c). 0, or -1 with *err (errnum 0). */
int rootless_oci_check (const struct oci_spec *spec, const char *config_path, asbx_err_t *err);

/* The processes of the pid namespace whose init is `init` (pid in our namespace), found by
 * comparing /proc/PID/ns/pid with the init's: what `ps` lists for a container without a cgroup.
 * *pids is heap (caller frees), init first. -1 with *err when the container shares our pid
 * namespace (its processes cannot be told from ours without a cgroup) or /proc cannot be
 * read. A process of a nested pid namespace is not listed (its ns/pid differs). */
int rootless_pidns_pids (pid_t init, pid_t **pids, size_t *n, asbx_err_t *err);

#endif
