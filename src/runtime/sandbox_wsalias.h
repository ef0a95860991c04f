/* sandbox_wsalias.h - the other host paths at which quick mode's workspace is visible. */
#ifndef ASBX_RUNTIME_SANDBOX_WSALIAS_H
#define ASBX_RUNTIME_SANDBOX_WSALIAS_H

#include <stddef.h>

#include "core/error.h"

struct sandbox_ws_aliases
{
  char **whole; /* heap strings: host paths that show the whole workspace */
  size_t n_whole;
  char **part; /* heap strings: host paths that show a directory below it */
  size_t n_part;
};

/* The bind-mount aliases of the directory ws (a realpath), read from the caller's
 * /proc/self/mountinfo: a mount shows a directory of a filesystem (its root, field 4) at its mount
 * point, so the same directory can be visible at several host paths. The workspace's place in
 * its filesystem is the root of the mount it lies on plus its path below that mount point (the
 * mount matched by statx(2) STATX_MNT_ID, so an over-mounted twin is never taken for it).
 *   whole: the other host paths that show the whole workspace
 *           (a mount of the same filesystem whose root is the workspace's place or above it), e.g.
 *           /home/u for `--workspace /srv/x` after `mount --bind /home/u /srv/x`;
 *   part:  the host paths that show a directory below the workspace (a mount whose root lies
 *           inside it), e.g. /opt/y after `mount --bind /srv/x/sub /opt/y`.
 * A path in these lists may itself be over-mounted on the host; callers treat it as visible (fail
 * closed). *out is filled, owned by the caller (sandbox_ws_aliases_free). Returns 0, or -1 with *err:
 * ENOENT/EACCES from opening ws, ENOSYS when the kernel has no STATX_MNT_ID, EIO when mountinfo
 * does not list ws's mount. Source: proc(5) /proc/PID/mountinfo, statx(2). */
int sandbox_ws_aliases (const char *ws, struct sandbox_ws_aliases *out, asbx_err_t *err);

/* frees what sandbox_ws_aliases filled in (a zeroed struct is fine) */
void sandbox_ws_aliases_free (struct sandbox_ws_aliases *a);

#endif
