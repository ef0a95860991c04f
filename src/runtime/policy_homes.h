/* policy_homes.h - the home directories a `~/x` policy rule covers in a container's rootfs. */
#ifndef ASBX_RUNTIME_POLICY_HOMES_H
#define ASBX_RUNTIME_POLICY_HOMES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

struct policy_home
{
  char *path;       /* absolute, as written in the rootfs (/home/<entry> or passwd's home field) */
  bool from_passwd; /* found only through /etc/passwd (not a directory entry of /home) */
};

/* Every home directory of the rootfs behind rootfd (an O_PATH fd of the prepared rootfs, before
 * pivot_root): each directory entry of `home_dir` ("/home"), then the home field (6th) of every
 * line of the rootfs's /etc/passwd (a service user such as postgres: /var/lib/postgresql).
 * Each is resolved with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS), so a symlinked home
 * counts as the directory it names inside the rootfs and can lead nowhere else; homes that are
 * missing or not directories are left out, and every directory appears once (by device and
 * inode). /root is left out: the compiler emits `~/x` on /root as a rule of its own.
 * A missing /home or /etc/passwd is no error (a minimal image). Returns the count and *out (a
 * heap array, policy_homes_free) or -1 with *err (a read error, an /etc/passwd over 16 MiB). */
int policy_homes_list (int rootfd, const char *home_dir, struct policy_home **out, asbx_err_t *err);

void policy_homes_free (struct policy_home *v, size_t n);

#endif
