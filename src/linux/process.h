/* process.h - the process attributes of the container's init (and later exec): identity,
 * capabilities, rlimits, oom score, sysctl, hostname/domainname, no_new_privs.
 * Sources: runtime-spec config.md "Process", "POSIX-platform User", config-linux.md "Sysctl";
 * capabilities(7), setrlimit(2), prctl(2), proc(5).
 * Each function is called once, in the order runtime/init.c lists; none of them forks. */
#ifndef ASBX_LINUX_PROCESS_H
#define ASBX_LINUX_PROCESS_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* Check process.rlimits before anything is created: known type names (RLIMIT_*), soft <= hard,
 * and a hard limit above the caller's current hard limit is an error when the caller lacks
 * CAP_SYS_RESOURCE ("process.rlimits[1]: RLIMIT_NOFILE hard 1048576 exceeds the current hard limit
 * 20000 and this process lacks CAP_SYS_RESOURCE"). Duplicate types are an error (spec: MUST NOT
 * contain duplicates). Returns 0 / -1 with *err. */
int linux_rlimits_check (const struct oci_process *proc, asbx_err_t *err);
/* Apply process.rlimits with setrlimit/prlimit on the calling process. 0 / -1 with *err. */
int linux_rlimits_apply (const struct oci_process *proc, asbx_err_t *err);

/* Validate capability names in every set (unknown name = error naming
 * process.capabilities.bounding[3]); names the running kernel does not know (cap > CAP_LAST_CAP)
 * are skipped with a debug log, as runc does. 0 / -1. */
int linux_caps_check (const struct oci_capabilities *caps, asbx_err_t *err);

/* Drop the bounding set to caps->bounding (PR_CAPBSET_DROP for every other cap). Must run while
 * CAP_SETPCAP is held, before the uid change. A NULL caps means "drop everything" (spec: absent
 * sets are empty). 0 / -1 with *err. */
int linux_caps_drop_bounding (const struct oci_capabilities *caps, asbx_err_t *err);

/* Set PR_SET_KEEPCAPS so permitted caps survive the setresuid() to a non-zero uid. */
int linux_caps_keep (asbx_err_t *err);

/* Set effective/permitted/inheritable (libcap cap_set_proc) and then the ambient set
 * (PR_CAP_AMBIENT_RAISE; clear all first), after the uid/gid change. 0 / -1 with *err. */
int linux_caps_apply (const struct oci_capabilities *caps, asbx_err_t *err);

/* setgroups(additionalGids) (skipped when setgroups is denied in a user namespace and no
 * additional gids are asked for), setresgid(gid), setresuid(uid). 0 / -1 with *err. */
int linux_user_apply (const struct oci_user *user, bool userns, asbx_err_t *err);

/* umask from process.user.umask (default 0022 as runc). */
void linux_umask_apply (const struct oci_user *user);

/* prctl(PR_SET_NO_NEW_PRIVS, 1) when noNewPrivileges. 0 / -1 with *err. */
int linux_nnp_apply (const struct oci_process *proc, asbx_err_t *err);

/* Check process.scheduler (policy and flag names, SCHED_DEADLINE's runtime/deadline) and
 * process.ioPriority (class name, priority 0..7) before anything exists; `where` prefixes the
 * JSON path in messages ("config.json: ", "" for none). linux/sched.c. 0 / -1 with *err (EINVAL). */
int linux_sched_check (const struct oci_process *p, const char *where, asbx_err_t *err);

/* Apply process.scheduler with sched_setattr(2) and process.ioPriority with ioprio_set(2) on the
 * calling thread, before the capabilities are dropped (real-time classes and negative nice need
 * CAP_SYS_NICE; a user namespace has none over the host: EPERM naming the field). Values checked
 * by linux_sched_check. 0 / -1 with *err (the kernel's errno). */
int linux_sched_apply (const struct oci_process *p, asbx_err_t *err);

/* linux.memoryPolicy: check mode, nodes ("0-3,7", required by BIND/INTERLEAVE/
 * WEIGHTED_INTERLEAVE/PREFERRED_MANY, forbidden for DEFAULT/LOCAL) and flags. m NULL = nothing.
 * linux/mempolicy.c. 0 / -1 with *err (EINVAL) naming the JSON path. */
int linux_mempolicy_check (const struct oci_memory_policy *m, asbx_err_t *err);

/* set_mempolicy(2) on the calling thread (inherited by its children, kept across execve). m NULL
 * = nothing. 0 / -1 with *err (EINVAL: a node not online or a mode this kernel lacks). */
int linux_mempolicy_apply (const struct oci_memory_policy *m, asbx_err_t *err);

/* the spec's mode names (index = kernel mode number) and flag names, for `features` */
extern const char *const linux_mempolicy_mode_names[];
extern const char *const linux_mempolicy_flag_names[];

/* Write process.oomScoreAdj to /proc/<pid>/oom_score_adj (pid 0 = self). 0 / -1. */
int linux_oom_score_adj_apply (const struct oci_process *proc, pid_t pid, asbx_err_t *err);

/* Validate linux.sysctl keys against the namespaces the container has (runc's rules:
 * kernel.msg*, kernel.sem, kernel.shm*, fs.mqueue.* need a new ipc ns; net.* needs a new net ns;
 * kernel.hostname/domainname need a new uts ns; others are an error).
 * `ns_new_flags` is the CLONE_NEW* mask of namespaces the container creates. 0 / -1 naming the key. */
int linux_sysctl_check (const struct oci_map *sysctl, unsigned long ns_new_flags, asbx_err_t *err);

/* Write each key to /proc/sys/<key with . -> /> through an fd on a procfs (checked with fstatfs).
 * Runs inside the container's namespaces. 0 / -1 naming the key. */
int linux_sysctl_apply (const struct oci_map *sysctl, asbx_err_t *err);

/* sethostname/setdomainname when given (needs a new uts namespace; checked earlier). 0 / -1. */
int linux_uts_apply (const struct oci_spec *spec, asbx_err_t *err);

/* Bring the loopback device `lo` of the current network namespace up (a no-op when it is up),
 * as runc does in every network namespace it creates. Needs CAP_NET_ADMIN in the namespace.
 * 0 / -1 with *err (errno of the socket or ioctl). Call only for a namespace the runtime made. */
int linux_netns_loopback_up (asbx_err_t *err);

/* --- helpers exposed for tests and for the features document --- */

/* RLIMIT_* name -> resource number (setrlimit(2)); -1 when unknown. All 16 resources. */
int linux_rlimit_from_name (const char *name);
/* resource number -> "RLIMIT_*" (static string) or NULL. */
const char *linux_rlimit_name (int resource);

/* Highest capability number of the running kernel (/proc/sys/kernel/cap_last_cap, falling back
 * to libcap's cap_max_bits() - 1 without procfs). Cached. */
int linux_cap_last_cap (void);
/* "CAP_XXX" -> capability number via libcap; only upper-case CAP_ names are accepted (no
 * numbers, no "all"). 0 / -1 when unknown. The number may exceed linux_cap_last_cap(). */
int linux_cap_from_name (const char *name, int *cap);

/* One key of linux_sysctl_check() (the same rules); 0 / -1 with *err naming the key. `key` must
 * not contain "..", "/" or begin/end with ".". For net.* the caller sets CLONE_NEWNET in
 * ns_new_flags also when it joins a network namespace by path that is not the host's. */
int linux_sysctl_check_key (const char *key, unsigned long ns_new_flags, asbx_err_t *err);

/* linux_sysctl_apply() against a procfs directory fd the caller opened (e.g. a private procfs
 * from fsopen("proc")); procfd is checked with fstatfs(PROC_SUPER_MAGIC), as is every file. */
int linux_sysctl_apply_at (int procfd, const struct oci_map *sysctl, asbx_err_t *err);

#endif
