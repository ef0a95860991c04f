/* policy_hostfiles.h - under an agent policy, nothing the container writes on a host-visible
 * path (the workspace, allowWrite binds, engine volumes) can give a host user privilege
 * (issue 13 §1): no setuid/setgid file or directory, no file capability, no device node, and -
 * when the container's ids are the host's (no user namespace, or one that maps host id 0) - no
 * file given away to another owner.
 *
 * Two layers, both applied to every process of a policy container (init and exec):
 *   capabilities: CAP_SETFCAP (writing security.capability, capabilities(7)) and CAP_MKNOD
 *                 (device nodes) are removed from every set whatever capabilities.allow says;
 *                 without an isolating user namespace also CAP_CHOWN (chown to another uid/gid)
 *                 and CAP_FSETID (keeping S_ISUID/S_ISGID across a write or chmod, inode(7));
 *   seccomp:      the mode argument of chmod, fchmod, fchmodat, fchmodat2, open, openat, creat,
 *                 mkdir, mkdirat, mknod, mknodat with S_ISUID or S_ISGID set is refused with
 *                 EPERM; openat2 (its mode lies in memory seccomp cannot read) answers ENOSYS so
 *                 libc falls back to openat; io_uring (IORING_OP_OPENAT/MKDIRAT take a mode)
 *                 answers EPERM; unshare/clone with CLONE_NEWUSER EPERM and clone3 ENOSYS (a
 *                 nested user namespace has CAP_SETFCAP again). The rules join the policy's
 *                 syscall-group filter.
 * docs/security.md "Host privilege through the workspace" and docs/policy.md describe both. */
#ifndef ASBX_RUNTIME_POLICY_HOSTFILES_H
#define ASBX_RUNTIME_POLICY_HOSTFILES_H

#include <stdbool.h>
#include <stddef.h>

#include "libocispec/oci_spec.h"
#include "policy/plan.h"
#include "policy/syscall_groups.h"

/* The seccomp rules above (libseccomp names, one condition each, OR'ed). */
extern const struct policy_syscall_rule policy_hostfile_rules[];
extern const size_t policy_hostfile_rules_len;

/* Whether the container's ids cannot be host root's: `l` creates a new user namespace (no path)
 * whose uidMappings and gidMappings, translated through the runtime's own /proc/self/uid_map and
 * gid_map, cover neither host uid 0 nor host gid 0. A joined user namespace (a path) or no user
 * namespace is not isolating: its mapping is not ours to check. Pure but for reading the
 * runtime's own maps; an unreadable map counts as not isolating (fail closed). */
bool policy_userns_isolating (const struct oci_linux *l);

/* The capability layer is the container model's (spec/model.h spec_narrow_process), for init
 * and exec alike. */

#endif
