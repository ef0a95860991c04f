/* oci_image.h - reading an OCI image layout (image-spec v1.1 image-layout.md): the oci-layout
 * file, index.json, the manifest a tag names, its config and layer descriptors, and the blobs,
 * each checked against its descriptor's sha256 digest and size before it is used.
 *
 * Every file of the layout is opened beneath the layout directory's fd with
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS (linux/pathsafe.h, which falls back
 * to a userspace walk when openat2 is unavailable): a layout handed to root by another user
 * cannot make root read a host file through a symlinked blob. */
#ifndef ASBX_RUNTIME_OCI_IMAGE_H
#define ASBX_RUNTIME_OCI_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/openssl_dl.h"
#include "core/error.h"

#define OCI_MT_INDEX "application/vnd.oci.image.index.v1+json"
#define OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define OCI_MT_LAYER_TAR "application/vnd.oci.image.layer.v1.tar"
#define OCI_MT_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define OCI_MT_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
#define OCI_ANNOT_REF_NAME "org.opencontainers.image.ref.name"

/* the most layers an image may have (Docker and containerd stop at 127/128 too: overlayfs'
 * lowerdir limit); more is refused as a malformed image rather than unpacked for minutes */
#define OCI_MAX_LAYERS 128

/* descriptor.md: only sha256 digests are accepted (the only algorithm the spec requires) */
struct oci_descriptor
{
  char *media_type; /* heap */
  char *digest;     /* heap, "sha256:<64 lowercase hex>" */
  char hex[65];     /* the 64 hex digits of digest */
  int64_t size;     /* bytes */
};

struct oci_image
{
  int layout_fd; /* O_PATH|O_DIRECTORY fd of the layout directory (owned) */
  char *layout;  /* the layout directory as given (heap, for messages) */
  char *tag;     /* the tag asked for, or NULL (heap) */
  struct oci_descriptor manifest;
  struct oci_descriptor config;
  struct oci_descriptor *layers; /* n_layers, bottom (first applied) first */
  size_t n_layers;
};

/* Split `ref` "DIR[:TAG]" of --image. A ref that names an existing directory as a whole is DIR
 * with no tag (a directory may contain ':'); otherwise the text after the last ':' that
 * follows the last '/' is the tag. *dir and *tag (NULL when none) are heap strings (caller
 * frees). Returns 0, or -1 with *err when the tag is empty or not an OCI ref name
 * ([A-Za-z0-9._:@/+-]{1,128}, image-layout.md's annotation grammar, simplified). */
int oci_image_parse_ref (const char *ref, char **dir, char **tag, asbx_err_t *err);

/* Open the layout `dir`, check oci-layout ("imageLayoutVersion": "1.0.0"), and resolve `tag`
 * (NULL: the index must hold exactly one manifest) through index.json: the entry whose
 * annotation org.opencontainers.image.ref.name equals tag; an image index (nested, 4 levels at
 * most) is followed to the manifest for linux and this machine's architecture (amd64 on
 * x86_64, arm64 on aarch64). The index, the manifest and the config are read whole, their
 * digests and sizes verified, the manifest's config and layer descriptors parsed (media types:
 * OCI tar, tar+gzip, tar+zstd, and Docker's tar.gzip equivalent). On success *img is filled
 * (free with oci_image_free); on failure it is left empty and *err names the file, the JSON path
 * and what was expected. Returns 0 / -1. */
int oci_image_open (const char *dir, const char *tag, struct oci_image *img, asbx_err_t *err);

void oci_image_free (struct oci_image *img);

/* Open the blob of descriptor d (blobs/sha256/<hex>, a regular file beneath the layout whose
 * st_size is d->size) for reading. Returns the fd (caller owns) or -1 with *err naming the
 * blob. Does not read it: see oci_blob_verify. */
int oci_blob_open (int layout_fd, const struct oci_descriptor *d, asbx_err_t *err);

/* Read fd from offset 0 to its end (pread: the file offset is kept) and compare the sha256 and
 * the byte count with d. Returns 0, or -1 with *err "blob sha256:...: digest mismatch (the
 * content hashes to sha256:...)" or a size mismatch. */
int oci_blob_verify (int fd, const struct oci_descriptor *d, asbx_err_t *err);

/* A JSON blob (4 MiB at most) read whole into *out (heap, NUL-terminated, caller frees), its
 * digest and size verified on the bytes read. Returns 0 / -1 with *err naming the blob. */
int oci_blob_read (int layout_fd, const struct oci_descriptor *d, char **out, asbx_err_t *err);

/* SHA-256 over a stream (OpenSSL EVP: the layers are large and the host's SHA extensions help) */
struct oci_hash
{
  EVP_MD_CTX *ctx;
  uint64_t bytes; /* fed so far */
};
void oci_hash_init (struct oci_hash *h);
void oci_hash_update (struct oci_hash *h, const void *data, size_t len);
/* writes the lowercase hex (64 + NUL) and frees the context; call once */
void oci_hash_final (struct oci_hash *h, char out[65]);

/* This machine's architecture in the OCI/Go spelling (image-index.md platform.architecture:
 * amd64 on x86_64, arm64 on aarch64, ...; amd64 when uname(2) names none of the known ones). */
const char *oci_host_arch (void);

/* "sha256:" + 64 lowercase hex digits? Then hex_out (may be NULL) gets the hex. */
bool oci_digest_valid (const char *digest, char hex_out[65]);

#endif
