/* mount.h - the new mount API (fsopen/fsconfig/fsmount, open_tree, move_mount, mount_setattr),
 * Linux >= 5.12. Source: the man pages of those calls (Linux 6.x) and
 * Documentation/filesystems/mount_api.rst.
 *
 * Why this API and not mount(2) on "/proc/self/fd/N": every call takes fds, so a mount is
 * created detached and attached onto an O_PATH fd that was resolved inside the root, with no
 * string ever re-resolved and no dependency on a /proc being mounted (after pivot_root the
 * container may have none); mount_setattr also gives the recursive `r*` options and changes only
 * the bits asked for, which keeps flags locked by a user namespace without a statfs dance.
 */
#ifndef ASBX_LINUX_MOUNT_H
#define ASBX_LINUX_MOUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/* Clone the mount tree at dirfd/path (path "" = dirfd itself) as a detached bind mount
 * (open_tree OPEN_TREE_CLONE, AT_RECURSIVE when `recursive`). Returns the mount fd (caller owns)
 * or -1 with *err ("bind SRC: ..."). */
int mnt_clone (int dirfd, const char *path, bool recursive, asbx_err_t *err);

/* Create a new filesystem detached: fsopen(type), fsconfig "source" (when not NULL), each
 * comma-separated `data` item ("k=v" as a string, "k" as a flag), the MOUNTOPTS_SB_* flags,
 * FSCONFIG_CMD_CREATE, then fsmount with `attrs` (MOUNT_ATTR_*). The kernel's fs-context log is
 * appended to the error ("mount tmpfs: Invalid argument (tmpfs: Bad value for 'mode')").
 * Returns the mount fd (caller owns) or -1 with *err. */
int mnt_new_fs (const char *type, const char *source, const char *data, unsigned sb_flags, uint64_t attrs,
                asbx_err_t *err);

/* Reconfigure the superblock of the mount at fd (fspick + fsconfig items + RECONFIGURE), for
 * the `remount` option with data. Returns 0 / -1 with *err. */
/* The error of a failed fsconfig/fsmount step `what` on filesystem `type`, with the
 * filesystem's own messages read from fsfd (the fs context's log). Returns -1. */
int mnt_fs_error (int fsfd, int errnum, const char *type, const char *what, asbx_err_t *err);

int mnt_reconfigure (int fd, const char *data, unsigned sb_flags, asbx_err_t *err);

/* Attach the detached mount mfd on top of the object dest_fd refers to (move_mount with
 * MOVE_MOUNT_F_EMPTY_PATH|MOVE_MOUNT_T_EMPTY_PATH). Returns 0 / -1 with *err. */
int mnt_attach (int mfd, int dest_fd, asbx_err_t *err);

/* mount_setattr(fd, "", AT_EMPTY_PATH [|AT_RECURSIVE], set, clr, propagation). A no-op when
 * everything is 0. Returns 0 / -1 with *err. */
int mnt_setattr (int fd, bool recursive, uint64_t set, uint64_t clr, unsigned long propagation, asbx_err_t *err);

/* The MOUNT_ATTR_* bits (rdonly, nosuid, nodev, noexec, atime mode, nodiratime, nosymfollow)
 * of the mount fd is on, from fstatfs f_flags. -1 with errno on failure. */
int64_t mnt_current_attrs (int fd);

#endif
