/* rootfs_cgroup.h - the `cgroup` mount type (runtime-spec config-linux.md "Default Filesystems";
 * runc 1.1 mountCgroupV1/mountCgroupV2). Internal to rootfs.c. */
#ifndef ASBX_LINUX_ROOTFS_CGROUP_H
#define ASBX_LINUX_ROOTFS_CGROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/* Mount the cgroup view at dest_fd (an O_PATH directory fd inside the root).
 * v1 or hybrid host (a `cgroup` entry in /proc/self/mountinfo): a tmpfs (mode 755) at dest, then
 * one directory per host hierarchy (named like the host's mount point: cpu, memory, systemd,
 * "cpu,cpuacct" with cpu and cpuacct symlinks to it) holding, with `new_cgroupns`, a fresh
 * cgroup fs of that hierarchy, else a bind of the container's cgroup directory (cgroup_path, or
 * the calling process' own cgroup from /proc/self/cgroup); the host's cgroup2 (hybrid
 * "unified") the same way. v2 host: a fresh cgroup2 with `new_cgroupns`, else a bind of the
 * container's cgroup. `attrs` (MOUNT_ATTR_*) are applied to every mount; a read-only request makes
 * the tmpfs read-only last. Must run before pivot_root (reads the host's /proc).
 * Returns 0 / -1 with *err naming the hierarchy. */
int rootfs_mount_cgroup (int dest_fd, uint64_t attrs, bool new_cgroupns, const char *cgroup_path, asbx_err_t *err);

#endif
