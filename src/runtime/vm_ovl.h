/* vm_ovl.h - an engine's overlayfs rootfs rebuilt for QEMU's jail (runtime/vm_jail.h).
 *
 * Docker, containerd and Podman hand a root-owned rootfs that is an overlayfs mount; overlayfs
 * cannot be idmapped (mount_setattr answers EINVAL), so QEMU, which runs as an unprivileged uid,
 * would read it only with the world's permissions. Instead its layers are read from the mount's
 * record (/proc/self/mountinfo: upperdir, lowerdir) and each is cloned idmapped (the host's 0 on
 * disk appears as QEMU's uid), and in QEMU's mount namespace a new overlay is mounted over those
 * clones, the engine's upper layer as its topmost read-only lower, with an upper and work
 * directory of its own in the run directory (QEMU's uid's). The guest then sees the image and the
 * container's layer as its root's files; what it writes stays in the run directory and goes with
 * it at delete (the engine's layer does not receive it: `docker diff` shows nothing). The layers'
 * clones are detached once the overlay holds them: QEMU never sees them as paths. */
#ifndef ASBX_RUNTIME_VM_OVL_H
#define ASBX_RUNTIME_VM_OVL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/error.h"

struct vm_ovl
{
  int *layers; /* detached idmapped clones (OPEN_TREE_CLONE), topmost first */
  size_t n;
};

/* In the host's mount namespace (P, root): is the mount at `fd` (an O_PATH fd of its root) an
 * overlayfs? Then fill *o with its layers, idmapped through `userns`. Returns 1 when filled, 0 when
 * fd is no overlayfs mount, -1 with *err (a layer that cannot be opened or idmapped, a data-only
 * layer, a record that cannot be read). `path` names it in errors. */
int vm_ovl_layers (int fd, const char *path, int userns, struct vm_ovl *o, asbx_err_t *err);

/* In QEMU's mount namespace, still root (vm_jail_enter): attach o's layers below `scratch` (an
 * empty directory), mount the overlay at `at` (flags: MS_NOSUID|MS_NODEV|MS_RDONLY...) with
 * upper and work directories made in `rundir` and given to uid/gid, then detach the layers.
 * The layer fds are closed. 0 / -1 with *err. */
int vm_ovl_mount (struct vm_ovl *o, const char *scratch, const char *at, const char *rundir, uid_t uid, gid_t gid,
                  unsigned long flags, asbx_err_t *err);

/* Close the fds and free (idempotent). */
void vm_ovl_free (struct vm_ovl *o);

#endif
