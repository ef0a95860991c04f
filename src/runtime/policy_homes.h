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
  char **names;     /* with POLICY_HOMES_ENTRIES: the home's entry names, sorted; NULL = not read */
  size_t n_names;
};

/* policy_homes_list flags */
#define POLICY_HOMES_ENTRIES 1 /* also read each home's entries (policy_home_may_hold) */

/* Every home directory of the rootfs behind rootfd (an O_PATH fd of the prepared rootfs, before
 * pivot_root): each directory entry of `home_dir` ("/home"), then the home field (6th) of every
 * line of the rootfs's /etc/passwd (a service user such as postgres: /var/lib/postgresql).
 * Each is resolved with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS), so a symlinked home
 * counts as the directory it names inside the rootfs and can lead nowhere else; homes that are
 * missing or not directories are left out, and every directory appears once (by device and
 * inode). /root is left out: the compiler emits `~/x` on /root as a rule of its own. flags:
 * 0 or POLICY_HOMES_ENTRIES; a home whose entries cannot be read keeps names NULL.
 * A missing /home or /etc/passwd is no error (a minimal image). Returns the count and *out (a
 * heap array, policy_homes_free) or -1 with *err (a read error, an /etc/passwd over 16 MiB). */
int policy_homes_list (int rootfd, const char *home_dir, int flags, struct policy_home **out, asbx_err_t *err);

/* Whether <h->path>/<rel> may exist: false only when h's entries were read (POLICY_HOMES_ENTRIES,
 * from the directory the home resolved to) and the first component of rel, a plain name, is not
 * among them. A deny rule's `~/x` is looked up in every home of the rootfs (~80 rules x ~30 homes
 * of Debian's passwd: 2,172 failing openat2 per sandbox of the host's /), nearly all absent;
 * one getdents per home answers them. Exact for the mount layer, which lists the homes before
 * its first deny: a deny mount can only hide names (a mask) or keep them (a read-only bind of a
 * path onto itself), never add one, and the rootfs is not written by the init meanwhile. */
bool policy_home_may_hold (const struct policy_home *h, const char *rel);

void policy_homes_free (struct policy_home *v, size_t n);

#endif
