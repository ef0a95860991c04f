/* oci_cache.h - the unpacked-image cache of `sandbox --image` (docs/man/agentsbx-sandbox.1).
 *
 * <images>/<manifest hex>/rootfs is the image's root filesystem, <images>/<hex>/complete holds
 * "sha256:<hex>\nmodes: no group or other write\n" (no entry of its tree is group/other-writable
 * or sticky). <images> is /var/lib/agentsbx/images for root, else
 * $XDG_DATA_HOME/agentsbx/images (default ~/.local/share/agentsbx/images). An entry is built in
 * <images>/.tmp-<hex>-<pid>-XXXXXX and renamed into place whole, so a concurrent or killed
 * unpack never leaves a half entry under the digest's name; a temp dir whose pid is gone is
 * removed by the next unpack. */
#ifndef ASBX_RUNTIME_OCI_CACHE_H
#define ASBX_RUNTIME_OCI_CACHE_H

#include "core/error.h"

/* The cache directory for the caller (heap string, caller frees), or NULL with *err when no
 * home directory is known (non-root without $HOME and passwd entry). Not created. */
char *oci_cache_dir (asbx_err_t *err);

/* --image REF ("DIR[:TAG]"): open and verify the layout (runtime/oci_image.h), then return the
 * cached rootfs of its manifest, unpacking it first when the cache has no complete entry
 * (every layer's blob verified before and while it is unpacked, runtime/oci_unpack.h).
 * The cache directory must be the caller's (or root's) and writable by no one else: another
 * user who could write there could plant a rootfs under a digest. A cache hit costs the
 * layout's JSON verification and reading the `complete` marker, not the layers. Missing mount
 * points of the sandbox (/proc /dev /sys /tmp /run /workspace) are made in the rootfs at unpack
 * time, so a run writes nothing into the cache. *rootfs_out: heap absolute path of the rootfs;
 * *digest_out (may be NULL): heap "sha256:<hex>" of the manifest. Returns 0 / -1 with *err. */
int oci_cache_rootfs (const char *ref, char **rootfs_out, char **digest_out, asbx_err_t *err);

#endif
