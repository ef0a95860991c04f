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

#include "linux/seccomp_bpf.h"

struct linux_landlock;
/* What process_finalize_and_exec installs beyond the identity, filled by the caller (init or
 * exec) and passed to it; start from PROCESS_LAYERS_INIT (nothing). */
struct process_layers
{
  /* linux.seccomp (NULL: none), with the connected listener socket and the containerProcessState
   * JSON when a rule uses SCMP_ACT_NOTIFY (-1/NULL otherwise); borrowed, must outlive the exec.
   * Without noNewPrivileges the filter is installed before capabilities are dropped (needs
   * CAP_SYS_ADMIN, as runc), else right before execve. */
  const struct linux_seccomp *seccomp;
  int listener;
  const char *process_state;
  /* the agent policy's layers (policy_prepare_process, runtime/policy_apply.h): the
   * syscall-group filter (insns NULL: none; installed after the OCI filter), a Landlock ruleset
   * (NULL: none; restricted after no_new_privs) and, when deny_wx
   * (syscalls.denyWriteExecMemory), prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN) (kernel >= 6.3;
   * inherited by children and kept across execve, so the whole container is covered; a kernel
   * without it fails the exec with EINVAL, naming the field). Owned by the struct until exec. */
  struct linux_seccomp groups;
  struct linux_landlock *landlock;
  bool deny_wx;
  /* the unix-socket confinement's filter (policy_prepare_unixsock, linux/unixsock.h; insns
   * NULL: none), loaded after every other filter, and the channel its notify fd goes to (-1 for
   * an unsupervised filter or none; closed before execve) */
  struct linux_seccomp unixsock;
  int unixsock_chan;
};
#define PROCESS_LAYERS_INIT                                                                                            \
  {                                                                                                                    \
    .listener = -1, .unixsock_chan = -1                                                                                \
  }

/* Identity (bounding set, uid/gid/groups, capability sets, no_new_privs, umask), fd hygiene
 * (only stdio and fds 3..3+preserve_fds-1 survive), the layers (see struct process_layers) and
 * execve(exe, args, env). Returns only on failure: -1 with *err. */
int process_finalize_and_exec (const struct oci_process *proc, bool userns, int preserve_fds, const char *exe,
                               const struct process_layers *layers, asbx_err_t *err);

#endif
