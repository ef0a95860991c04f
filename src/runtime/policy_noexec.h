/* policy_noexec.h - the exec allowlist at the mount layer (issue 13 §2). */
#ifndef ASBX_RUNTIME_POLICY_NOEXEC_H
#define ASBX_RUNTIME_POLICY_NOEXEC_H

#include <stdbool.h>

#include "core/error.h"
#include "policy/plan.h"

/* True when the plan restricts where code may run (filesystem.allowExec set): some Landlock
 * rule grants access without EXECUTE. With allowExec unset the compiler gives every read/write
 * rule EXEC ("exec anywhere readable", policy/compile.c compile_landlock). */
bool policy_exec_restricted (const struct policy_plan *plan);

/* filesystem.allowExec set: make every mount of the container's tree noexec except where an
 * allowExec path lies (rootfd: O_PATH fd of the prepared rootfs mount, before pivot_root, after
 * the policy's own mounts). Landlock's EXECUTE right covers execve(2) only; noexec is what the
 * kernel checks for mmap(PROT_EXEC) and mprotect(PROT_EXEC) of a file (mm/mmap.c do_mmap,
 * path_noexec: EPERM) and for ld.so mapping a program it was handed, so a library the agent
 * wrote, or one it reaches through another path of the same host directory (the workspace seen
 * read-only under /home or /srv), cannot be loaded. Steps: (1) every mount of the tree
 * (/proc/self/mountinfo, matched to the mount actually visible at its mount point by statx
 * STATX_MNT_ID) whose mount point is not inside an allowExec path gets MOUNT_ATTR_NOEXEC, alone
 * (non-recursive); (2) every allowExec path that now lies on a mount step 1 made noexec is
 * bound onto itself (recursive clone: the mounts beneath it keep their own flags) and that one
 * bind gets its exec right back. A mount that was noexec before (an OCI "noexec" option) stays
 * so. A bind out of the rootfs's top mount also gets MOUNT_ATTR_RDONLY when root_readonly (the
 * spec's root.readonly, applied to the top mount only later, when the rootfs is finalized).
 * Then policy_noexec_aliases (policy_alias.h): no exec mount shows what the agent can write.
 * 0 / -1 with *err naming filesystem.allowExec. */
int policy_apply_noexec (int rootfd, const struct policy_plan *plan, bool root_readonly, asbx_err_t *err);

/* Shared with policy_alias.c: whether `path` is `dir` or below it (absolute, normalised strings;
 * "/" contains everything). */
bool policy_path_within (const char *dir, const char *path);

#endif
