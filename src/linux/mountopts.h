/* mountopts.h - OCI mount options (config.md "Mounts", runc's specconv table) -> what the
 * mount code applies. Pure: no syscalls, unit-tested in tests/unit/test_mountopts.c.
 *
 * The runtime mounts with the new mount API (see mount.h), so per-mount flags are expressed as
 * MOUNT_ATTR_* bits for mount_setattr(2)/fsmount(2): `attr_set`/`attr_clr` apply to the top
 * mount only (what mount(2) with MS_REMOUNT|MS_BIND would do), `rattr_set`/`rattr_clr` apply
 * with AT_RECURSIVE (the `r*` options of runtime-spec 1.1). Superblock options (sync, dirsync,
 * mand) become fsconfig flags; every option this table does not know is passed to the
 * filesystem as data ("mode=755", "size=65536k", "newinstance"...).
 */
#ifndef ASBX_LINUX_MOUNTOPTS_H
#define ASBX_LINUX_MOUNTOPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* superblock flags passed to fsconfig(FSCONFIG_SET_FLAG) when a new filesystem is created */
#define MOUNTOPTS_SB_SYNC 0x1u
#define MOUNTOPTS_SB_DIRSYNC 0x2u
#define MOUNTOPTS_SB_MAND 0x4u
#define MOUNTOPTS_SB_LAZYTIME 0x8u

struct mount_opts
{
  bool bind;      /* "bind" or "rbind" (the mount type "bind" is handled by the caller) */
  bool recursive; /* "rbind" */
  bool remount;   /* "remount": change the mount already at the destination */
  bool idmap;     /* "idmap" / "ridmap" (runtime-spec 1.2): refused by the caller, not supported */
  bool ridmap;
  bool tmpcopyup;                /* crun extension: refused by the caller */
  uint64_t attr_set, attr_clr;   /* MOUNT_ATTR_* on the top mount */
  uint64_t rattr_set, rattr_clr; /* MOUNT_ATTR_* with AT_RECURSIVE */
  unsigned long propagation;     /* MS_PRIVATE | MS_SHARED | MS_SLAVE | MS_UNBINDABLE, 0 = unchanged */
  bool propagation_recursive;    /* rprivate, rshared, ... */
  unsigned sb_set;               /* MOUNTOPTS_SB_* */
  char *data;                    /* unknown options joined by ',' (heap, NULL when none) */
};

/* Parse `n` options in order; a later option overrides an earlier one touching the same flag
 * ("ro","rw" -> rw), as mount(8) does. Never fails on unknown options (they become data); fails
 * with EINVAL only on an empty option string. *out is zeroed first; on success free it with
 * mount_opts_free(). Returns 0 / -1 with *err ("mount option \"\": empty"). */
int mount_opts_parse (char *const *options, size_t n, struct mount_opts *out, asbx_err_t *err);

void mount_opts_free (struct mount_opts *o);

/* The option names mount_opts_parse recognises (its one table), sorted in C order, NULL-terminated,
 * static (built on the first call; not thread-safe before that). */
const char *const *mount_opts_names (void);

/* The `features` document's mountOptions (runtime-spec features.md), derived from the same table:
 * every recognised option but tmpcopyup (rootfs.c refuses it, ENOTSUP), plus "defaults" (listed as
 * runc lists it; mount_opts_parse does not know it, so it reaches the filesystem as data). Sorted,
 * NULL-terminated, static (as mount_opts_names). */
const char *const *mount_opts_feature_names (void);

#endif
