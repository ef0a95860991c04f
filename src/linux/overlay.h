/* overlay.h - an overlayfs mount whose layers are given as mounts the runtime cloned (the review
 * workspace, issue 18). Source: Documentation/filesystems/overlayfs.rst (Linux 6.x): "lowerdir+",
 * "upperdir" and "workdir" take a file descriptor through fsconfig(FSCONFIG_SET_FD) since 6.13;
 * "index", "redirect_dir", "metacopy", "xino" and "userxattr" as documented there; fs/namespace.c
 * clone_private_mount (what overlayfs does with each layer).
 *
 * Why fds: the lower is the host workspace, a directory a hostile agent (or the user) may
 * rename or replace by a symlink between the runtime's checks and the mount; a layer given as
 * an fd is the directory that was checked, never a path resolved again. On a kernel without
 * FSCONFIG_SET_FD for overlayfs (EINVAL) the same fds are named as "/proc/self/fd/N", which the
 * kernel follows to exactly the open file (a magic link), not to a name.
 *
 * Why clones, attached for a moment: overlayfs takes a private clone of each layer's mount,
 * which the kernel allows only for a mount of the caller's own mount namespace (or the root of
 * an anonymous one its user namespace owns): an fd the runtime opened in the host's namespace
 * is refused (EINVAL, "failed to clone upperpath"). So the runtime clones the layers (open_tree
 * OPEN_TREE_CLONE, as host root: the container's root may not reach them), the init attaches
 * the clones into its own mount namespace on the workspace's mount point, makes the overlay from
 * them and detaches them again before the overlay takes their place. */
#ifndef ASBX_LINUX_OVERLAY_H
#define ASBX_LINUX_OVERLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

struct linux_overlay
{
  int lower_mnt;  /* detached clone of the lower directory */
  int layout_mnt; /* detached clone of the directory holding upper/ and work/ (same mount, as
                     overlayfs requires) */
  int upper_fd;   /* upper/ and work/ opened (O_RDONLY|O_DIRECTORY) beneath layout_mnt by the
                     runtime: once the clone is attached they lie in the container's namespace,
                     and the container's root need not be able to search the 0700 directory */
  int work_fd;
  /* A non-root runtime cannot clone mounts (open_tree OPEN_TREE_CLONE needs CAP_SYS_ADMIN in the
   * host's user namespace): lower_mnt is -1, and the init, whose user namespace maps the caller,
   * opens these realpaths in its own mount namespace (beneath "/", no symlink in the path) and
   * refuses a directory other than the one the runtime pinned (device and inode). */
  const char *lower_path;
  const char *layout_path;
  uint64_t lower_dev, lower_ino, layout_dev, layout_ino;
  bool userxattr; /* mounted in a user namespace: whiteouts and opaque marks in user.overlay.* */
};

/* In the container's mount namespace: make the overlay over dest_fd (the mount point, an
 * O_PATH directory fd; the clones are attached there while the overlay is made, then detached)
 * with index=off, redirect_dir=nofollow (no redirect made or followed), metacopy=off, xino=off (full copies of changed
 * files, renamed directories copied up whole, so that the upper alone says what changed), plus userxattr when asked,
 * and the mount attributes `attrs` (MOUNT_ATTR_*). The mounter's credentials (the caller's) are the ones overlayfs uses
 * for every later copy-up: upper/ and work/ must be writable by them. Needs /proc/self/fd (before pivot_root). Returns
 * the detached overlay mount fd (caller owns; attach it at dest_fd), or -1 with *err naming the step and the kernel's
 * own message. */
int linux_overlay_mount (const struct linux_overlay *o, int dest_fd, uint64_t attrs, asbx_err_t *err);

#endif
