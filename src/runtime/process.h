/* process.h - shared final steps of the container's processes (init and exec). */
#ifndef ASBX_RUNTIME_PROCESS_H
#define ASBX_RUNTIME_PROCESS_H

#include <stdbool.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* Connect to the --console-socket unix socket (runc's protocol). Returns the fd (caller owns)
 * or -1 with *err naming the path. */
int process_connect_console (const char *path, asbx_err_t *err);

/* Send fd over a connected unix socket with SCM_RIGHTS (the --console-socket protocol: one
 * byte of data, one fd). 0 / -1 with *err. */
int process_send_fd (int sock, int fd, asbx_err_t *err);

/* Resolve process.args[0] against PATH from process.env (execvp's rules) in the current root.
 * Heap string, or NULL with *err "exec: `x`: executable file not found in $PATH". */
char *process_lookup_executable (const struct oci_process *p, asbx_err_t *err);

/* chdir to process.cwd in the current root (resolved in it, CVE-2024-21626 class). create:
 * make it when missing (the init, as runc, before the rootfs turns read-only); false (exec, as
 * runc's setns path): a missing cwd is an error naming it, nothing is created. 0 / -1. */
int process_chdir (const char *cwd, bool create, asbx_err_t *err);

struct linux_seccomp;
/* Register the compiled linux.seccomp filter for process_finalize_and_exec (NULL: none), with the
 * connected listener socket and the containerProcessState JSON when a rule uses SCMP_ACT_NOTIFY
 * (-1/NULL otherwise). Pointers are borrowed and must outlive the exec. Without noNewPrivileges
 * the filter is installed before capabilities are dropped (needs CAP_SYS_ADMIN, as runc), else
 * right before execve. */
void process_set_seccomp (const struct linux_seccomp *filter, int listener, const char *process_state);

/* Register the agent policy's layers for process_finalize_and_exec: a Landlock ruleset
 * (restricted after no_new_privs), the syscall-group filter (installed after the OCI filter)
 * and, when deny_wx (syscalls.denyWriteExecMemory), prctl(PR_SET_MDWE,
 * PR_MDWE_REFUSE_EXEC_GAIN) (kernel >= 6.3; inherited by children and kept across execve, so
 * the whole container is covered; a kernel without it fails the exec with EINVAL, naming the
 * field). Either pointer may be NULL. Pointers are borrowed until exec. */
struct linux_landlock;
void process_set_policy (const struct linux_seccomp *groups_filter, struct linux_landlock *landlock, bool deny_wx);

/* The unix-socket confinement's filter (linux/unixsock.h), loaded after every other filter, and
 * the channel its notify fd goes to (-1 for an unsupervised filter). Borrowed until exec. */
void process_set_unixsock (const struct linux_seccomp *filter, int chan);

/* Identity (bounding set, uid/gid/groups, capability sets, no_new_privs, umask), fd hygiene
 * (only stdio and fds 3..3+preserve_fds-1 survive) and execve(exe, args, env).
 * Returns only on failure: -1 with *err. */
int process_finalize_and_exec (const struct oci_process *proc, bool userns, int preserve_fds, const char *exe,
                               asbx_err_t *err);

#endif
