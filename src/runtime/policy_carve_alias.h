/* policy_carve_alias.h - the other names a bind mount gives a denied path, for the carve. */
#ifndef ASBX_RUNTIME_POLICY_CARVE_ALIAS_H
#define ASBX_RUNTIME_POLICY_CARVE_ALIAS_H

#include <stddef.h>

#include "linux/mountinfo.h"

/* The paths of the current root other than `path` (absolute, resolved, no symlink) at which a
 * bind mount shows the same file or directory: mountinfo names the candidates (mi: the table of
 * the calling process's mount namespace, read after pivot_root so its points are paths of this
 * root; a mount of the same device whose root is the object's place in its filesystem or above
 * it), and fstat of each candidate, opened beneath rootfd with no symlink, must give the same
 * inode. A ~/.aws bound from /srv/creds is also /srv/creds; a home bound from /srv/homes/bob
 * also /srv/homes/bob. Heap vector of *n heap strings (free each, then it); NULL when none or
 * when `path` does not exist. Never fails: a candidate that cannot be opened is not one. */
char **policy_carve_aliases (int rootfd, const struct mountinfo_entry *mi, size_t nmi, const char *path, size_t *n);

#endif
