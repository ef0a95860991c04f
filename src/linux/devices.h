/* devices.h - device nodes and /dev symlinks inside the container rootfs.
 * Source: runtime-spec config-linux.md "Devices", "Default Devices", "/dev symbolic links";
 * runc 1.1 createDevices/setupDevSymlinks/setupPtmx behaviour. */
#ifndef ASBX_LINUX_DEVICES_H
#define ASBX_LINUX_DEVICES_H

#include <stdbool.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* Create the default devices (/dev/null zero full random urandom tty, char, 0666, root-owned)
 * and linux.devices (an entry with the same path replaces the default), with mknodat on the
 * parent's fd or, when `userns` (mknod is not permitted there), as an empty file with the host
 * device bind-mounted onto it. uid/gid/fileMode applied. An existing node of another kind at
 * the path (a symlink planted by the image) is removed first.
 * Returns 0 / -1 with *err naming the device ("linux.devices[2] (/dev/fuse): mknod: ..."). */
int linux_devices_create (int rootfd, const struct oci_spec *spec, bool userns, asbx_err_t *err);

/* /dev/fd -> /proc/self/fd, /dev/std{in,out,err} -> /proc/self/fd/{0,1,2}, /dev/core ->
 * /proc/kcore when the host has it, and /dev/ptmx -> pts/ptmx when `devpts` (a devpts is
 * mounted at /dev/pts). Existing entries are kept, except /dev/ptmx, which is replaced.
 * Returns 0 / -1 with *err. */
int linux_devices_symlinks (int rootfd, bool devpts, asbx_err_t *err);

#endif
