/* workspace_snap.h - snapshots of a review workspace's upper layer (issue 18; REVIEW.md "The
 * layout": snapshots/<NAME>/upper/ and snapshots/<NAME>/meta.json).
 *
 * The copy is `cp -a` of an overlay upper written in C: directories, regular files (content
 * through copy_file_range, which reflinks or copies in the kernel), symlinks (the target as
 * written, never followed), whiteouts and other device nodes, fifos; owner, mode, times and
 * every extended attribute (the overlay's trusted.overlay.* / user.overlay.* opaque and
 * whiteout marks with them) are kept. Sockets are skipped (overlayfs copies none up). Every
 * entry is reached from its parent's fd with O_NOFOLLOW: the upper's contents are the
 * container's. */
#ifndef ASBX_RUNTIME_WORKSPACE_SNAP_H
#define ASBX_RUNTIME_WORKSPACE_SNAP_H

#include <stdint.h>

#include "core/error.h"

/* Copy the directory src_parent/src_name to dst_parent/dst_name (which must not exist) with
 * everything below it, as described above. *files and *bytes (may be NULL) count the regular
 * files and their bytes. `where` names the source in messages. 0, or -1 with *err (the partial
 * copy is left for the caller to remove). */
int ws_copy_tree (int src_parent, const char *src_name, int dst_parent, const char *dst_name, const char *where,
                  uint64_t *files, uint64_t *bytes, asbx_err_t *err);

/* Write snapshots/<name>/meta.json {"name","created","files","bytes"} in dirfd (the
 * snapshot's directory), atomically. 0, or -1 with *err. */
int ws_snap_meta_write (int dirfd, const char *name, uint64_t files, uint64_t bytes, asbx_err_t *err);

#endif
