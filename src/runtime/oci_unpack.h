/* oci_unpack.h - applying OCI image layers (image-spec layer.md) to a directory with libarchive
 * as the tar reader and our own writer through directory fds.
 *
 * Why not libarchive's archive_write_disk: it resolves each entry's path string from the
 * process's cwd, and its ARCHIVE_EXTRACT_SECURE_SYMLINKS check is an lstat walk before the
 * open (a race with anything else writing the tree) that does not cover hard-link targets the
 * same way. Here every entry is created relative to an fd of its parent directory, opened from
 * the root's fd with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS (or the
 * userspace fallback of linux/pathsafe.h), and the final component is made with O_EXCL /
 * O_NOFOLLOW / *at calls: an entry can neither name a path outside the root nor go through a
 * symlink an earlier entry (or layer) made. */
#ifndef ASBX_RUNTIME_OCI_UNPACK_H
#define ASBX_RUNTIME_OCI_UNPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "runtime/oci_image.h"

struct oci_unpack_stats
{
  uint64_t entries;   /* entries created (files, dirs, links, fifos) */
  uint64_t whiteouts; /* .wh. entries applied (a name or an opaque directory) */
  uint64_t devices;   /* character/block devices and sockets skipped */
  uint64_t xattrs;    /* extended attributes not set (only user.* are) */
  uint64_t setid;     /* files whose setuid/setgid bits were dropped */
};

/* Apply layer `d`, read from blob_fd (its file offset 0 onwards), onto the directory rootfd
 * (an fd of the rootfs being built). The tar stream (gzip, zstd or plain, as d->media_type
 * says; no other compression is enabled) is hashed while it is read, and its digest and byte
 * count must equal d's at the end: bytes changed after an earlier oci_blob_verify are caught
 * too (the caller then discards the whole tree). Whiteouts (`.wh.NAME`, `.wh..wh..opq`) remove
 * what lower layers made, never what this layer made. An entry that is absolute, has a `..`
 * component, or whose parent path goes through a symlink is an error naming the entry and the
 * layer; device nodes and sockets are skipped (counted in *st). Ownership is restored when the
 * caller is root (euid 0), else files belong to the caller (and its directories keep u+rwx).
 * Modes, mtimes and user.* xattrs are restored; setuid/setgid bits of files and security.* / trusted.* xattrs are not
 * (the cache is on the host, reachable by other users: a setuid-root or file-capability binary of the image would be
 * theirs to run). Returns 0 / -1 with *err. */
int oci_unpack_layer (int rootfd, int blob_fd, const struct oci_descriptor *d, struct oci_unpack_stats *st,
                      asbx_err_t *err);

/* Remove `name` in dirfd: unlink, or a directory tree depth first through fds, never following
 * a symlink (a directory the caller cannot write is made 0700 first when not root). ENOENT is
 * success. Returns 0, or -1 with errno. */
int oci_remove_at (int dirfd, const char *name);

#endif
