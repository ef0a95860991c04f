/* oci_export.h - `agentsbx workspace export ID --oci DIR`: a review workspace's upper layer
 * (REVIEW.md "The layout": <workspacesDir>/<id>/upper) as one OCI image layer, written into an
 * OCI image layout with its config, manifest and index entry (image-spec v1.1).
 *
 * The upper was written by the container and is hostile: it is walked from its directory fd
 * with O_NOFOLLOW|O_DIRECTORY per component (never a path string, never a symlink followed),
 * and a name an OCI layer cannot carry (one that starts with `.wh.`, which every reader would
 * take for a whiteout) is refused, not exported as something else. */
#ifndef ASBX_RUNTIME_OCI_EXPORT_H
#define ASBX_RUNTIME_OCI_EXPORT_H

#include <stdint.h>

#include "core/error.h"

struct oci_layer_out
{
  char digest_hex[65];  /* sha256 of the gzip blob as written */
  char diff_id_hex[65]; /* sha256 of the uncompressed tar (the config's rootfs.diff_ids) */
  int64_t size;         /* bytes of the gzip blob */
  uint64_t files;       /* regular files, symlinks, hard links, fifos */
  uint64_t dirs;
  uint64_t whiteouts; /* deleted names (.wh.NAME) */
  uint64_t opaque;    /* opaque directories (.wh..wh..opq) */
  uint64_t skipped;   /* sockets and device nodes other than whiteouts: not exported */
};

/* Write the changes of the overlayfs upper directory `upperfd` as a tar+gzip layer (pax format,
 * libarchive) to out_fd, every path below `prefix` (relative, clean, "" for the root: the
 * container path the workspace was mounted at). Overlayfs' whiteouts - a character device 0:0,
 * or a zero-size file with the xattr <xattr_ns>.overlay.whiteout (xattr_ns "trusted" or
 * "user", meta.json's "xattr") - become `.wh.NAME`; a directory whose
 * <xattr_ns>.overlay.opaque is "y" gets `.wh..wh..opq`. Entries are sorted by name, mtimes
 * kept to the second, owners and modes as on the host; xattrs are not exported. The output is
 * the same bytes for the same tree (gzip without a timestamp). Returns 0 and fills *out, or -1
 * with *err naming the path (a `.wh.` name in the upper: EINVAL). */
int oci_layer_from_upper (int upperfd, const char *xattr_ns, const char *prefix, int out_fd, struct oci_layer_out *out,
                          asbx_err_t *err);

struct oci_export_opts
{
  const char *workspaces_dir; /* the workspaces directory (absolute); NULL = policy_workspaces_dir
                               * (the host config's workspacesDir, or the caller's default) */
  const char *id;             /* the workspace (container id) */
  const char *out;            /* the OCI layout to write (created when missing) */
  const char *tag;            /* org.opencontainers.image.ref.name of the new manifest; NULL = id */
  const char *base;           /* NULL, or LAYOUT[:TAG]: an image whose layers go below ours */
  const char *path;           /* container path of the workspace; NULL = "/workspace" */
  const char *audit_flag;     /* --audit-dir, NULL = the host config's auditDir or the default */
  const char *config_path;    /* --config, NULL = /etc/agentsbx/config.json */
};

struct oci_export_result
{
  char *manifest_digest; /* heap "sha256:..." */
  struct oci_layer_out layer;
};

/* Export workspace o->id: take its lock (LOCK_EX|LOCK_NB: EWOULDBLOCK while a container or
 * another verb holds it; a meta.json state "running" is refused too), write the layer blob,
 * then (with o->base) copy the base image's verified layer blobs, write the config (the base's
 * with rootfs.diff_ids and history extended, else a new linux/<arch> config), the manifest, and
 * index.json with one entry tagged o->tag (an entry of the same tag is replaced; other entries
 * are kept), plus oci-layout. Every file is written to a temp name and renamed; the index last,
 * so a failed export leaves the layout as it was (at most unreferenced blobs). Then a
 * `workspace` record (op "export": oci, tag, manifest, layer, counts) is appended to the
 * container's audit log (<audit dir>/<id>.jsonl; a failure to write it is a warning: the
 * layout is complete). An existing
 * o->out that is neither empty nor an OCI layout is refused. Returns 0 and fills *r (free
 * r->manifest_digest), or -1 with *err. */
int oci_export_workspace (const struct oci_export_opts *o, struct oci_export_result *r, asbx_err_t *err);

#endif
