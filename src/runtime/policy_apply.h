/* policy_apply.h - enforcement of a compiled agent policy (src/policy/plan.h) on top of the OCI
 * spec, in the layers and order of POLICY.md §3:
 *   P (before spawn):  spec_model_build      - read-only root, capabilities ∩ allow, rlimits and
 *                      (spec/model.h)          cgroup limits (the smaller of spec and policy),
 *                                              no_new_privs, a private network namespace, in the
 *                                              container model (the parsed spec stays as it is);
 *                      policy_check_spec       - the network namespace is not the runtime's
 *   I (before pivot):  policy_apply_network  - the nftables table in the container's netns
 *   I (after mounts):  policy_apply_mounts   - rw binds (allowWrite), ro binds (denyWrite),
 *                                              masks (denyRead), tmpfs; through fds on the rootfs
 *   I/E (after pivot): policy_prepare_process - the Landlock ruleset and the syscall-group filter,
 *                                              installed last by process_finalize_and_exec
 * Fail closed: a layer this kernel cannot enforce is an error naming the field and the
 * mechanism, unless the policy lists it in `degrade`.
 * One module per mechanism: policy_apply.c (the spec's host check), policy_process.c (the seccomp
 * filters), policy_net.c (nftables, resolv.conf),
 * policy_mounts.c (the mount layer), policy_landlock.c (+ policy_carve.c: Landlock),
 * policy_memfd.c (vm.memfd_noexec). */
#ifndef ASBX_RUNTIME_POLICY_APPLY_H
#define ASBX_RUNTIME_POLICY_APPLY_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "policy/plan.h"
#include "runtime/policy_carve.h"
#include "spec/model.h"

/* What `plan` asks of the container model (spec/model.h): read-only root, capabilities.allow,
 * network isolation, limits. *out all zero for NULL or an inactive plan; out->caps_allow is
 * borrowed from the plan (it lives as long as the plan). */
void policy_model_narrowing (const struct policy_plan *plan, struct spec_narrowing *out);

/* The spec layer's host check of a model (spec/model.h) built under an active plan with
 * network.mode none/filtered: policy_net_check_joined on its network namespace (records the
 * runtime's own, refuses a joined one that is it). Nothing otherwise. 0 / -1 with *err. */
int policy_check_spec (const struct spec_model *m, asbx_err_t *err);

/* The policy's seccomp filter (what policy_prepare_process installs): the rules of the groups whose
 * POLICY_SYS_* bits are in `deny` (policy/syscall_groups.h), the host-file rules
 * (runtime/policy_hostfiles.h) always, policy_exec_rules when `exec` (filesystem.allowExec set),
 * and the second-view rules of syscalls.denyWriteExecMemory when `wx` (userfaultfd, shared
 * executable mmap, mremap duplicates: EPERM), each answering its errno; everything else allowed;
 * SECCOMP_FILTER_FLAG_LOG. Compiled into *out (caller releases with linux_seccomp_release). 0 / -1 with *err (ENOSYS: a
 * member syscall unknown to the linked libseccomp - fail closed rather than a missing rule). Exposed for
 * tests/unit/test_syscall_groups.c, which runs the program over each member. */
struct linux_seccomp;
int policy_build_groups_filter (unsigned deny, bool exec, bool wx, struct linux_seccomp *out, asbx_err_t *err);

/* network.mode none/filtered: load the policy's nftables table (policy/nft_ruleset.c) into the
 * current network namespace - the container's, fresh or joined (engine-given). Called by the
 * init while it still holds CAP_NET_ADMIN; the container's processes never get it (see
 * spec_narrow_process in spec/model.h), so they cannot change the table. Nothing for `open`. 0 / -1 with *err
 * (EPERM when the init has no CAP_NET_ADMIN over that namespace, e.g. a joined namespace owned
 * by a parent user namespace). */
int policy_apply_network (const struct policy_plan *plan, asbx_err_t *err);

/* network.mode filtered in a namespace this create made (new_netns): bind a read-only file
 * "nameserver 127.0.0.1" (the monitor's DNS stub, monitor/dnsstub.h) over the rootfs's
 * /etc/resolv.conf, through fds (rootfd: O_PATH fd of the prepared rootfs, before pivot_root).
 * No regular file there: nothing done (libc's default is 127.0.0.1 already). In an engine-given
 * namespace the engine's file stays: the table redirects every UDP query to the stub anyway.
 * 0 / -1 with *err. */
int policy_apply_resolv (int rootfd, const struct policy_plan *plan, bool new_netns, asbx_err_t *err);

/* What the mount layer leaves for the init's later steps; owned by the init (one per
 * container), passed to each step that needs it, freed with policy_mount_result_free. */
struct policy_pinned_mask;
struct policy_mount_result
{
  char *missing_grants;              /* "ORIGIN\tPATH\n" lines, or NULL: grants on missing paths */
  char *pin_notes;                   /* "DEV INO PATH\n" lines for P (runtime/policy_pin.h), or NULL */
  struct policy_pinned_mask *pinned; /* the denies P pins on the host, to verify */
  size_t pinned_len;
  struct policy_homes_seen homes; /* the homes listed before the denies, for the carve */
};

/* frees what the result holds and zeroes it (a zeroed result is fine) */
void policy_mount_result_free (struct policy_mount_result *res);

/* Policy mounts beneath rootfd (an O_PATH fd of the prepared rootfs mount, before pivot_root).
 * Optional (`?`) rules on missing paths are skipped; a deny rule on a missing path under a
 * writable grant is an error naming the rule (POLICY.md §2). A non-optional allowWrite grant on
 * a missing path creates nothing (the path stays absent, its parent read-only): it is listed in
 * res->missing_grants as "ORIGIN\tPATH\n" lines, for create to report (issue 15). Denies
 * inside a writable bind grant are noted in res for the pins (res->pin_notes, res->pinned).
 * Then the host directories of plan->hidden_paths are masked, and with allowExec every mount
 * outside it is made noexec (runtime/policy_noexec.h; root_readonly: the spec's root.readonly,
 * which the rootfs code sets on the top mount only when it finalizes). res: zeroed by the caller,
 * filled here. 0 / -1 with *err. */
int policy_apply_mounts (int rootfd, const struct policy_plan *plan, bool root_readonly,
                         struct policy_mount_result *res, asbx_err_t *err);

/* I, after P reported its pins in place (SYNC_PINS_DONE, runtime/policy_pin.h): every deny
 * policy_apply_mounts made inside a writable bind grant (res->pinned) must still be mounted. The
 * host can replace such a file (rename, unlink) until P has pinned it, and the kernel then drops
 * the deny's mount in our namespace; the inode number P checks may be reused by the new file
 * (ext4 does), so P's check alone cannot tell. Each deny's path is reopened beneath rootfd and
 * its mount's unique id (statx STATX_MNT_ID_UNIQUE) compared with the one recorded when it was
 * made; a missing deny is made again on the file now there (pinned: it cannot be replaced any
 * more; no code of the container has run yet), which must be the inode P pinned (same dev and
 * inode number), else EXDEV. `replaced`: PINS_DONE's text, "DEV INO PATH" lines of the paths
 * where P pinned another inode than noted: there the deny must have been dropped (the host
 * replaced the file) and is re-made on that inode; a deny still in place over another file than
 * P's (a different mount or symlink on the host's side) is EXDEV. 0 / -1 with *err (create
 * fails). */
int policy_verify_pinned_masks (struct policy_mount_result *res, int rootfd, const char *replaced, asbx_err_t *err);

/* filesystem.allowExec set: make every memfd of the container's pid namespace noexec, so code
 * the agent wrote cannot run through memfd_create + execveat/fexecve (a memfd is on no mount the
 * allowlist sees). Writes 2 to /proc/sys/vm/memfd_noexec (kernel >= 6.3,
 * Documentation/admin-guide/sysctl/vm.rst and memfd_create(2): per pid namespace, inherited and
 * only raisable below; 2 = MFD_EXEC is refused, every memfd is sealed noexec). The handler acts on the caller's pid
 * namespace, so the init calls this in the container's NEW pid namespace (new_pidns) with CAP_SYS_ADMIN, before the
 * capabilities go; exec'd processes join that namespace and are covered. Nothing without a policy or when allowExec is
 * unset. Fail closed: no new pid namespace, no sysctl (kernel < 6.3) or a refused write (user namespace: /proc/sys is
 * writable only by the host's root) is an error naming filesystem.allowExec. In a user namespace the init does not
 * call it: the runtime does, through policy_apply_memfd_noexec_from_parent. 0 / -1 with *err. */
int policy_apply_memfd_noexec (const struct policy_plan *plan, bool new_pidns, asbx_err_t *err);

/* The same for a container in a user namespace, whose init cannot write /proc/sys (its uid is
 * not host root): called by the runtime (P, host root) after the init exists and before its
 * hooks and process run (on SYNC_CREATE_RUNTIME). A helper joins the init's pid namespace with
 * setns(CLONE_NEWPID) and forks a writer inside it, which does policy_apply_memfd_noexec and the
 * read-back; the helper and the writer exit at once. Nothing without allowExec; no new pid
 * namespace is the same error as above. 0 / -1 with *err. */
int policy_apply_memfd_noexec_from_parent (const struct policy_plan *plan, pid_t init_pid, bool new_pidns,
                                           asbx_err_t *err);

/* The init's check that the parent's write took effect in its pid namespace (reads 2). Nothing
 * without allowExec. 0 / -1 with *err. */
int policy_verify_memfd_noexec (const struct policy_plan *plan, asbx_err_t *err);

/* Build the Landlock ruleset (paths opened in the current root) and compile the syscall-group
 * filter into out->landlock and out->groups (with out->deny_wx: syscalls.denyWriteExecMemory),
 * for process_finalize_and_exec (runtime/process.h). The objects live until exec. Nothing
 * without an active policy. 0 / -1 with *err. */
struct process_layers;
int policy_prepare_process (const struct policy_plan *plan, const struct policy_homes_seen *seen,
                            struct process_layers *out, asbx_err_t *err);

/* What this kernel makes the plan give up, as the monitor's `policy` record lists it in
 * `degradations` (only what is really degraded; the accepted list is `degradeAccepted`): for an
 * accepted `landlock` degradation, "landlock: ABI N, not enforced: fs.refer, ..." when the
 * kernel's Landlock lacks rights the ruleset handles (the same check build_landlock makes), else
 * NULL. The other layers are never degraded by this runtime (a missing one fails create). Heap
 * string (caller frees) or NULL. */
char *policy_apply_landlock_degraded (const struct policy_plan *plan);
/* network.mode none/filtered: compile the unix-socket confinement's filter (linux/unixsock.h)
 * into out->unixsock, its channel into out->unixsock_chan (runtime/process.h). Under open with limits.failedExecs or
 * the exec audit event (unixsock_exec_notified): a filter that only notifies execve/execveat, when `chan`
 * >= 0; with `oci_listener` that is EBUSY for failedExecs, and no filter for exec records alone. `chan` >= 0: the
 * init's channel to the monitor, connect(2) is supervised (the init's socketpair, or exec's connection to the monitor's
 * unixsock.sock); -1 (exec without that channel): AF_UNIX sockets cannot be created at all.
 * `oci_listener`: linux.seccomp has its own listener - the kernel allows one per process, so a
 * supervised filter is refused (EBUSY) rather than failing at start. 0 / -1 with *err. */
int policy_prepare_unixsock (const struct policy_plan *plan, int chan, bool oci_listener, struct process_layers *out,
                             asbx_err_t *err);

#endif
