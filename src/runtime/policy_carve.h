/* policy_carve.h - Landlock read rights carved out around the `denyRead` paths of a read-only
 * area (issue 13, docs/security.md: a mask is a mount on the file as it was at create).
 *
 * A denyRead mask is a mount on the inode the path named at create. When the host replaces that
 * file (rename over it, delete and recreate) the kernel detaches the mount in the container's
 * namespace, and a credential created after create has nothing to mount over. So instead of one
 * hierarchy rule (READ on "/"), a read-only rule whose hierarchy contains denied paths is carved:
 * along each ancestor of a denied path the ancestor itself gets only fs.read_dir, each of its
 * other entries the rule's full rights (read, and execute where the rule grants it), recursing
 * toward the denied path; the denied name gets no rule. A replacement inode at a denied name, or
 * a file created there later, has no right at all. Consequence: a file the host creates directly
 * in a carved ancestor directory after create is unreadable in the sandbox (docs/policy.md).
 *
 * Paths are resolved in the container's view (after pivot_root, rootfd = "/") component by
 * component through fds; an ancestor that is a symlink is followed (the rule goes where the file
 * really is: Landlock checks the opened object's own ancestry), and a denied path that is itself a
 * symlink is carved both at its name and at its target. Denied paths under a writable grant are
 * not carved (the deny under a grant is pinned by runtime/policy_mounts.c). */
#ifndef ASBX_RUNTIME_POLICY_CARVE_H
#define ASBX_RUNTIME_POLICY_CARVE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "linux/landlock_ruleset.h"
#include "policy/plan.h"
#include "runtime/policy_homes.h"

/* Most Landlock rules one ruleset's carves may add (every entry of every carved directory is one
 * rule): beyond it create fails rather than fall back to the hierarchy rule. */
#define POLICY_CARVE_MAX_RULES 65536

struct policy_carve;

/* The homes listed for the `~/x` rules of `dir` ("/home") while the policy mounts were applied
 * (before a denyRead of /etc/passwd could hide them), for the carve built later by the same init
 * (runtime/policy_apply.h struct policy_mount_result). */
struct policy_homes_seen
{
  char *dir;    /* heap, or NULL: none kept */
  char **paths; /* heap strings */
  size_t n;
  char **aliases; /* heap strings: other names a bind mount gave a denied target (the mount
                     layer's mask_aliases), carved like the target */
  size_t naliases;
};

/* notes that `path` (a container path) shows a denied target under another name */
void policy_homes_seen_alias (struct policy_homes_seen *seen, const char *path);

/* fills *seen (freed first) with a copy of dir and the n homes of v */
void policy_homes_seen_set (struct policy_homes_seen *seen, const char *dir, const struct policy_home *v, int n);

/* frees what *seen holds and zeroes it */
void policy_homes_seen_free (struct policy_homes_seen *seen);

/* The denied paths to carve for `plan`: every denyRead (POLICY_MOUNT_MASK) path, `~/x` expanded
 * over the kept homes (or those listed now beneath rootfd), that no writable grant covers,
 * resolved beneath rootfd (the container's root, an O_PATH directory fd). NULL with *err on a
 * resolution error (a symlink loop, an unreadable /etc/passwd); heap, policy_carve_free. */
struct policy_carve *policy_carve_collect (int rootfd, const struct policy_plan *plan,
                                           const struct policy_homes_seen *seen, asbx_err_t *err);

/* Add the Landlock rules of the read-only rule on `path` (rights: its fs rights, without any
 * write right) to `ll`, carved around the collected denied paths beneath it. *carved = false:
 * no denied path lies beneath `path`, nothing was added and the caller adds the hierarchy rule;
 * true: the carve was added (or `path` itself is denied and gets no rule). A missing `path` is
 * *carved = false. -1 with *err when the carve cannot be built: an enumeration error other than
 * EACCES/EPERM (a directory the init may not list gets no rights beneath it, which only denies
 * more), or more than POLICY_CARVE_MAX_RULES rules (E2BIG). */
int policy_carve_rule (struct policy_carve *c, struct linux_landlock *ll, int rootfd, const char *path, uint64_t rights,
                       bool *carved, asbx_err_t *err);

/* Rules the carves of `c` added so far (for the debug log and docs/performance.md). */
size_t policy_carve_rules (const struct policy_carve *c);

void policy_carve_free (struct policy_carve *c);

#endif
