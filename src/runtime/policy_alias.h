/* policy_alias.h - under filesystem.allowExec, no executable mount shows what the agent can
 * write (issue 13 §2, docs/security.md "The same directory writable in one place and executable
 * in another"). */
#ifndef ASBX_RUNTIME_POLICY_ALIAS_H
#define ASBX_RUNTIME_POLICY_ALIAS_H

#include "core/error.h"
#include "policy/plan.h"

/* The mount-based exec rule, after policy_noexec's passes (rootfd: O_PATH fd of the prepared
 * rootfs mount, before pivot_root; every mount of the container exists). What the agent can
 * write is a region of a filesystem: for each writable Landlock grant of the plan, the subtree
 * of the filesystem it resolves to on a read-write mount (mountinfo's major:minor and root plus
 * the path below the mount point), and the whole of every read-write mount below the grant or
 * anywhere else but the rootfs's top (what Landlock keeps the agent from writing counts too:
 * Landlock may be degraded away; an alias of such a mount is made noexec although the agent
 * could not write it, the strict side). For
 * every visible executable mount X outside the grant on the same device (mountinfo major:minor:
 * btrfs subvolumes and bind mounts share it, an overlayfs or tmpfs has its own):
 *   - X's root at or below the region's root: X shows nothing but writable files, it gets
 *     MOUNT_ATTR_NOEXEC (mount_setattr, its other flags kept, its submounts judged on their own);
 *   - the region's root below X's root: the directory inside X that shows it (X's mount point +
 *     the region root's path below X's root, reached from X's root fd with RESOLVE_BENEATH |
 *     RESOLVE_NO_SYMLINKS, on X itself and checked to be the region's inode) is covered by
 *     a recursive noexec bind of itself; a place already under another mount is not visible
 *     through X and is left alone; a place that cannot be reached is an error naming both.
 * Before that the container's tree is made rprivate, so no host mount propagates in later (an
 * executable alias made on the host after create). Limit: a hard link the host makes of a
 * workspace file below an exec path is one inode at two names; no mount rule sees it.
 * Returns 0 (also when the plan does not restrict exec) / -1 with *err naming filesystem.allowExec. */
int policy_noexec_aliases (int rootfd, const struct policy_plan *plan, asbx_err_t *err);

#endif
