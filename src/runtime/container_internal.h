/* container_internal.h - what the lifecycle operations' files (container.c, container_create.c,
 * container_state.c) share; not for other modules. */
#ifndef ASBX_RUNTIME_CONTAINER_INTERNAL_H
#define ASBX_RUNTIME_CONTAINER_INTERNAL_H

#include <sys/types.h>
#include <sys/un.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "runtime/state.h"

#define OCI_VERSION "1.3.0"

/* state-dir mark: the container has no mount namespace of its own, its mounts below its rootfs
 * are in ours and are detached by delete or a failed create */
#define HOST_MOUNTS_MARK "host-mounts"

static inline void
spec_freep (struct oci_spec **s)
{
  if (*s)
    oci_spec_free (*s);
}
#define cleanup_spec __attribute__ ((cleanup (spec_freep)))

/* Crash-safety test hook: AGENTSBX_TEST_STOP_AT=<step> kills (or stops) us at that step. */
void test_stop_at (const char *step);

/* The OCI state JSON of a container (runtime.md "State") as the hooks get it on stdin: heap
 * string, NULL with *err. status is given as its OCI name. */
char *state_json (const char *id, enum asbx_status status, pid_t pid, const char *bundle, const struct oci_map *ann,
                  asbx_err_t *err);

/* The address of the init's start.sock, through /proc/self/fd/DIRFD (any --root length). 0. */
int start_socket_addr (int dirfd, struct sockaddr_un *addr);

/* The listening start.sock in the state dir `dirfd` (start_socket_addr; backlog 4), for the
 * init's create and the vm tier's supervisor alike. The fd (close-on-exec, the caller's), or
 * -1 with *err. */
int start_socket_listen (int dirfd, asbx_err_t *err);

/* Detach the mounts a container without a mount namespace of its own made below rootfs in
 * ours; best effort, failures are warnings. */
void host_mounts_cleanup (const char *rootfs);

/* The `creating` record: written once the init is in its cgroup (path and created-mask), read
 * by `delete --force` of an entry without state.json; both best effort. */
void creating_record (int dirfd, const char *cgroup_path, unsigned long cgroup_mask);
void creating_cleanup (int dirfd);

#endif
