/* idmap.h - idmapped bind mounts made by P for the init (linux/idmap.c, issue 15). */
#ifndef ASBX_LINUX_IDMAP_H
#define ASBX_LINUX_IDMAP_H

#include <stddef.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "linux/rootfs.h"

/* For every spec mount with uidMappings/gidMappings or the idmap/ridmap option: a detached clone
 * of its bind source (relative sources against `bundle`) with MOUNT_ATTR_IDMAP set from a user
 * namespace carrying the mapping (the mount's, else the container's linux.uid/gidMappings).
 * Must run in the host's user and mount namespace with CAP_SYS_ADMIN (P, before spawning).
 * *srcs_out: NULL when no mount is idmapped, else an array of spec->mounts_len prepared sources
 * (LINUX_MOUNT_SRC_IDMAP, close-on-exec, for those; NONE for the others; release with
 * linux_mount_srcs_free). Errors name `name`, the mount index
 * and destination: not a bind mount, only one of uid/gidMappings, no mapping at all, or the
 * kernel's refusal (a filesystem without idmap support: EINVAL). 0 / -1 with *err. */
int linux_idmap_prepare (const struct oci_spec *spec, const char *bundle, const char *name,
                         struct linux_mount_src **srcs_out, asbx_err_t *err);

/* A user namespace carrying the uid/gid maps of `maps` (only its uid_mappings and gid_mappings
 * are read), for MOUNT_ATTR_IDMAP: an fd (O_RDONLY|O_CLOEXEC of /proc/PID/ns/user of a holder
 * that has exited; the caller owns it). Needs CAP_SETUID/CAP_SETGID for maps other than the
 * caller's own ids (host root). -1 with *err. */
int linux_userns_with_maps (const struct oci_linux *maps, asbx_err_t *err);

#endif
