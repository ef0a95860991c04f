/* pathsafe.h - resolve paths inside an attacker-controlled root through fds.
 *
 * Every lookup is openat2(rootfd, path, ..., RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS): symlinks and
 * ".." are resolved as if rootfd were "/", and /proc magic links are refused, so no path inside
 * the image can name a host file. Source: openat2(2), path_resolution(7).
 */
#ifndef ASBX_LINUX_PATHSAFE_H
#define ASBX_LINUX_PATHSAFE_H

#include <linux/openat2.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

/* openat2(2) with O_CLOEXEC added; retried on EAGAIN (a concurrent rename made the kernel
 * give up, see openat2(2)). When openat2 is unavailable - ENOSYS (kernel < 5.6, or a seccomp
 * filter), or EPERM from a filter, told apart from a real EPERM by a harmless probe call -
 * resolution is done by ps_openat2_fallback() instead, with the same result.
 * Returns the fd, or -1 with errno. */
int ps_openat2 (int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);

/* Userspace emulation of openat2(2) (src/linux/pathsafe_fallback.c): component by component
 * from O_PATH fds with O_NOFOLLOW, symlinks spliced by hand (40 at most), ".." kept beneath the
 * root and re-checked against concurrent renames, procfs magic links refused.
 * `resolve` must contain RESOLVE_IN_ROOT or RESOLVE_BENEATH, optionally RESOLVE_NO_SYMLINKS and
 * RESOLVE_NO_MAGICLINKS; anything else is EINVAL (fail closed). `flags`/`mode` as open(2);
 * O_CLOEXEC is always added. Returns a new fd (caller owns) or -1 with errno as openat2 would
 * set it (ENOENT, ENOTDIR, ELOOP, EXDEV, ...), or EAGAIN when the tree changed under the walk
 * (ps_openat2 retries). */
int ps_openat2_fallback (int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);

/* Open `path` (absolute or relative, both taken from the root) inside rootfd with `flags`
 * (O_PATH, O_DIRECTORY, O_NOFOLLOW... ; O_CLOEXEC is added). Returns the fd (caller owns) or -1
 * with errno (ENOENT, ENOTDIR, ELOOP for a magic link, EXDEV...) and *err naming the path. */
int ps_open_in_root (int rootfd, const char *path, int flags, asbx_err_t *err);

/* Open (O_PATH, beneath rootfd, RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS) the object a mount must
 * cover: linux.maskedPaths / linux.readonlyPaths entries. A missing path may be skipped
 * (config-linux.md), a path that is missing only because a symlink on the way dangles may not:
 * a concurrent RENAME_EXCHANGE of the path with a dangling symlink would otherwise turn "cover
 * this directory" into "skip it" (issue 13 §5). So after ENOENT/ENOTDIR the path is looked up
 * again with RESOLVE_NO_SYMLINKS: missing again = really missing (-1, errno ENOENT/ENOTDIR);
 * ELOOP = a symlink is on the way (-1, errno ELOOP: the caller refuses); found = it changed
 * between the lookups: start again (16 times at most, then -1 with EAGAIN).
 * Returns the fd (caller owns) or -1 with errno. */
int ps_open_cover_target (int rootfd, const char *path);

/* Lexically clean `path` ("//a/./b/../c" -> "/a/c", ".." never leaves "/"); always absolute.
 * Returns a heap string. */
char *ps_clean (const char *path);

/* mkdir -p inside the root: the existing prefix is resolved with RESOLVE_IN_ROOT, each missing
 * component is created with mkdirat on its parent's fd and re-opened from that fd with
 * RESOLVE_NO_SYMLINKS, so a swap to a symlink between the two steps is refused.
 * Returns an O_PATH|O_DIRECTORY fd of the directory (caller owns) or -1 with *err. */
int ps_mkdir_p (int rootfd, const char *path, mode_t mode, asbx_err_t *err);

/* Split a cleaned absolute path: *parent_fd = O_PATH fd of the (created) parent directory,
 * *base = pointer into a heap copy returned in *buf (caller frees). Fails for "/".
 * Returns 0 / -1 with *err. */
int ps_open_parent (int rootfd, const char *path, mode_t dir_mode, int *parent_fd, char **buf, const char **base,
                    asbx_err_t *err);

/* Make sure a regular-file-ish mount target exists: create an empty file (mode, O_EXCL through
 * the parent fd; an existing non-directory is kept) and return an O_PATH fd of it (caller owns),
 * or -1 with *err. */
int ps_create_file (int rootfd, const char *path, mode_t mode, asbx_err_t *err);

/* fstatfs(fd) and compare f_type with `magic` (PROC_SUPER_MAGIC, TMPFS_MAGIC, ...).
 * Returns 0 when equal, -1 with *err (EXDEV when it differs) naming `what`. */
int ps_check_fstype (int fd, long magic, const char *what, asbx_err_t *err);

#endif
