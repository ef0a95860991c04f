/* workspace_layout.h - the review workspace's directory (issue 18; the shared design REVIEW.md
 * "The layout"): one directory per container id under the workspaces directory (host config
 * workspacesDir, runtime/../policy/policy.h policy_workspaces_dir):
 *
 *   <workspacesDir>/<id>/           0700, owned by the caller
 *     meta.json                     written atomically (temp file + rename), read with yajl
 *                                   (runtime/workspace_meta.h: the one reader)
 *     lock                          flock(LOCK_EX) by every verb (LOCK_NB for a running container)
 *     upper/ work/                  the overlay's upperdir and workdir, owned by the container's
 *                                   root (its host uid) so that an overlay mounted in the
 *                                   container's user namespace can write them
 *     snapshots/<NAME>/upper/       frozen copies (runtime/workspace_snap.h)
 *     snapshots/<NAME>/meta.json
 *
 * Threat model: the directory is the caller's; every path inside it is reached from the id
 * directory's fd (openat, O_NOFOLLOW), never from a path string built again. The upper's
 * contents were written by the container (hostile): readers of upper/ walk it with
 * RESOLVE_BENEATH|NO_SYMLINKS (runtime/workspace_walk.h, rv-diff), and the copy in
 * workspace_snap.c never follows a symlink. The directory outlives `delete` (review after the
 * run); `workspace apply` and `discard` remove it. */
#ifndef ASBX_RUNTIME_WORKSPACE_LAYOUT_H
#define ASBX_RUNTIME_WORKSPACE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "runtime/workspace_meta.h" /* struct ws_meta, its reader and writer */

#define WS_LOCK "lock"
#define WS_UPPER "upper"
#define WS_WORK "work"
#define WS_SNAPSHOTS "snapshots"

/* The workspaces directory (created 0700 with its parents when `create`), as an O_PATH
 * directory fd; `dir` must be absolute. With !create and a missing directory: -1 with errnum
 * ENOENT. */
int ws_root_open (const char *dir, bool create, asbx_err_t *err);

/* A workspace name (the container id): [A-Za-z0-9._+-]{1,1024}, not starting with '.', as
 * container ids are validated (asbx_id_validate); 0 or -1 with *err (EINVAL). */
int ws_id_check (const char *id, asbx_err_t *err);

/* Open <root>/<id> (O_DIRECTORY|O_NOFOLLOW, owned by us and 0700 — anything else is refused)
 * and take its lock: flock LOCK_EX, LOCK_NB when `nonblock` (EWOULDBLOCK: a running container or
 * another verb holds it). *lockfd: the lock's fd (closing it releases the lock). Returns the
 * directory fd, or -1 with *err (ENOENT: no such workspace). */
int ws_open (int rootfd, const char *id, bool nonblock, int *lockfd, asbx_err_t *err);

/* Create <root>/<id> (mkdirat 0700; EEXIST is returned as -1 with errnum EEXIST so that the
 * caller may resume it with ws_open), its lock file (locked, *lockfd), upper/ and work/ owned
 * by uid/gid (the host ids of the container's root) mode 0755. Returns the directory fd, or
 * -1 with *err; on failure nothing of it is left. */
int ws_create (int rootfd, const char *id, uid_t uid, gid_t gid, int *lockfd, asbx_err_t *err);

/* Remove <dirfd>/<name> and everything below it, never following a symlink (unlinkat per entry
 * from the parent's fd); a name that does not exist is 0. 0, or -1 with *err naming `where`. */
int ws_remove_tree (int dirfd, const char *name, const char *where, asbx_err_t *err);

/* Set meta.json's state (running/stopped) of <workspaces_dir>/<id>, under its lock (blocking).
 * A missing directory is 0 (discarded meanwhile). 0, or -1 with *err. */
int ws_set_state (const char *workspaces_dir, const char *id, const char *state, asbx_err_t *err);

/* The number of entries in <dirfd>/upper (dirfd: the id directory): files, links, whiteouts, and
 * directories that hold nothing else (a new or opaque empty one); 0 without an upper. */
uint64_t ws_upper_changed (int dirfd);

/* [A-Za-z0-9._-]{1,64}, not starting with '.': a snapshot NAME. 0 or -1 with *err (EINVAL). */
int ws_name_check (const char *name, asbx_err_t *err);

#endif
