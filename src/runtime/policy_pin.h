/* policy_pin.h - a deny inside a host-visible writable grant survives host-side replacement
 * (issue 13, docs/security.md "Fixed: masks inside a writable grant").
 *
 * A denyWrite/denyRead mask is a mount in the container's mount namespace on the file as it was
 * at create. When the host replaces that file by rename(2) or unlink(2) + create (host `git
 * config` rewrites .git/config through config.lock + rename), the kernel detaches mounts on the
 * old dentry in every other namespace, and the container sees the new, unmasked file. rename(2),
 * unlink(2) and rmdir(2) onto a mount point of the caller's OWN mount namespace fail with EBUSY
 * instead (vfs_rename/vfs_unlink/vfs_rmdir: is_local_mountpoint). So every file or directory a
 * deny masks under a writable bind grant is "pinned": bind-mounted onto itself, read-write, in
 * the runtime's (the host's) mount namespace, for the container's life. In-place writes by the
 * host still work (the container sees them through its read-only mask on the same inode); a
 * replacement fails visibly ("could not commit config file", EBUSY).
 *
 *   I (init, container namespace)           P (runtime, host namespace)
 *   policy_pin_note() per deny under a
 *   bind grant: "dev ino path" of the
 *   inode it masked
 *   policy_pin_send() -- SYNC_PINS ... -->  policy_pin_receive(): map the container path to the
 *                                           host path through the spec's binds, open it beneath
 *                                           the bind source, pin it, check the path reaches the
 *                                           pin, record the pin's unique mount id in <state>/pins
 *   policy_verify_pinned_masks() <-- SYNC_PINS_DONE (the pins on another inode than noted):
 *   every deny still mounted, else re-made on the pinned file (a replacement before the pin
 *   drops it, and the new file can reuse the inode number)
 *
 * Removal (policy_pin_release, at delete, delete --force, failed create) goes through the
 * recorded unique mount id: the path is opened without following any symlink, the fd's mount
 * must be the recorded one (statx STATX_MNT_ID_UNIQUE) and is unmounted through /proc/self/fd,
 * so a path changed meanwhile can never make it unmount another mount. Two containers on one
 * workspace share one pin (the state root is locked while pins are made or released; the last
 * user removes it). Propagation: the pin is made MS_PRIVATE once attached (its copies, which
 * the kernel makes in the peers of a shared parent, go with it on unmount). */
#ifndef ASBX_RUNTIME_POLICY_PIN_H
#define ASBX_RUNTIME_POLICY_PIN_H

#include <stdbool.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "policy/plan.h"

/* I: note in *notes ("DEV INO PATH\n" lines, heap, grown here) that the deny on container path
 * `path` masked the inode of `fd` (an O_PATH fd of the
 * path as resolved in the container, before or after the mask went on). `grant` is the deepest
 * writable grant containing the path (NULL: none): only a bind grant (host-visible) is noted.
 * A path holding a newline is refused (the line protocol). 1 noted, 0 nothing to note, -1 with
 * *err. */
int policy_pin_note (char **notes, const struct policy_mount *grant, const char *path, int fd, asbx_err_t *err);

/* I: send the noted lines (notes: policy_pin_note's, or NULL) to P as SYNC_PINS messages (value
 * 1: more follow; 0: the last, always sent, possibly empty). 0 / -1 with *err. */
int policy_pin_send (const char *notes, int sync_fd, asbx_err_t *err);

struct policy_pin_ctx
{
  const struct oci_spec *spec;    /* mounts: destination -> host source */
  const char *bundle;             /* absolute: base of relative bind sources */
  const char *rootfs;             /* absolute real path of the rootfs (paths under no bind) */
  int state_rootfd;               /* the state root (locked while pins change) */
  int dirfd;                      /* this container's state dir (file `pins`) */
  const struct policy_plan *plan; /* degrade `pin`: what a non-root caller does instead of pinning */
};

/* P: receive the init's SYNC_PINS messages on `psync`, pin the file at each noted path in our
 * mount namespace (see the top), then send SYNC_PINS_DONE. Its text lists "DEV INO PATH" lines
 * of the paths whose host file was not the inode the init noted (replaced on the host since the
 * init masked it, or a different file behind the host path): pinned all the same; the init
 * decides (policy_apply.h policy_verify_pinned_masks: re-mask the pinned file when its mask was
 * dropped, refuse when its mask still covers another file). A pin that the host path does not
 * reach right after it is made (replaced meanwhile) is undone and fails with EXDEV; a path that
 * cannot be pinned (no CAP_SYS_ADMIN in our mount namespace: EPERM) fails with *err naming the
 * policy path and host path: the caller undoes the create (policy_pin_release). A path under no
 * bind (a tmpfs) is no host file: nothing to pin. 0 / -1 with *err. */
int policy_pin_receive (int psync, const struct policy_pin_ctx *ctx, asbx_err_t *err);

/* P (delete, delete --force, failed create): remove the pins recorded in `dirfd`'s `pins` file
 * that no other container of `state_rootfd` records, each only when the mount reached is the
 * recorded one (see the top); the file is removed. Best effort: what cannot be removed is a
 * warning naming the mount. No `pins` file: nothing to do. */
void policy_pin_release (int state_rootfd, int dirfd);

#endif
