/* seccomp_bpf.h - (named so: src/linux/seccomp.h would shadow <linux/seccomp.h> under -Isrc)
 * linux.seccomp (runtime-spec config-linux.md "Seccomp") compiled with libseccomp into a
 * classic BPF program, and installed with seccomp(2) as the last step before execve.
 *
 * Two phases so that every error of the profile fails `create`:
 *   linux_seccomp_compile()  in the init, before READY: names, actions, operators, archs, flags are
 *                            checked and the program is generated (libseccomp, no kernel state);
 *   linux_seccomp_load()     after `start`, right before execve: one seccomp(2) call.
 * The notify half (listenerPath/listenerMetadata, seccomp_notify.c) connects to the listener during
 * create and hands over the notify fd + the container process state after the load. */
#ifndef ASBX_LINUX_SECCOMP_BPF_H
#define ASBX_LINUX_SECCOMP_BPF_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* A compiled filter: the BPF program and the seccomp(2) flags it is to be installed with. */
struct linux_seccomp
{
  void *insns;                /* struct sock_filter[], heap */
  unsigned short len;         /* number of instructions */
  unsigned int flags;         /* SECCOMP_FILTER_FLAG_* from linux.seccomp.flags (NEW_LISTENER added at load) */
  bool notify;                /* some rule uses SCMP_ACT_NOTIFY: load with SECCOMP_FILTER_FLAG_NEW_LISTENER */
  unsigned int rules;         /* rules added (after skipping unknown names and default-action duplicates) */
  unsigned int skipped_names; /* syscall names the linked libseccomp does not know */
};

/* Compile `s` (linux.seccomp) into *out. Behaviour follows runc 1.1:
 * - defaultAction/action: SCMP_ACT_{KILL,KILL_PROCESS,KILL_THREAD,TRAP,ERRNO,TRACE,ALLOW,LOG,NOTIFY};
 *   ERRNO and TRACE take defaultErrnoRet/errnoRet (default EPERM); errnoRet on other actions is ignored;
 *   NOTIFY cannot be the default action and needs listenerPath;
 * - architectures: SCMP_ARCH_* added to the native one (a foreign-arch call is then matched by the
 *   same rules instead of the bad-arch action, which kills);
 * - flags: SECCOMP_FILTER_FLAG_{TSYNC,LOG,SPEC_ALLOW,WAIT_KILLABLE_RECV}; a flag this kernel lacks
 *   is an error (fail closed) found at compile time by probing seccomp(2);
 * - a rule whose action equals the default action is skipped (libseccomp refuses it);
 * - a syscall name libseccomp does not know is skipped with a debug log;
 * - args: index 0..5, SCMP_CMP_{NE,LT,LE,EQ,GE,GT,MASKED_EQ} (MASKED_EQ: value = mask,
 *   valueTwo = datum); args naming one index more than once become one rule per arg (OR), else
 *   one rule with all of them (AND).
 * Errors name the JSON path: `linux.seccomp.syscalls[3].action: unknown action "SCMP_ACT_FOO"`.
 * Returns 0, or -1 with *err (EINVAL for bad input, the libseccomp errno otherwise). On success
 * the caller owns out->insns (linux_seccomp_release). */
int linux_seccomp_compile (const struct oci_seccomp *s, struct linux_seccomp *out, asbx_err_t *err);

/* Free the program of a compiled filter (NULL-safe, idempotent). */
void linux_seccomp_release (struct linux_seccomp *f);

/* Install the filter on the calling thread with seccomp(SECCOMP_SET_MODE_FILTER). Needs
 * no_new_privs or CAP_SYS_ADMIN in the current user namespace (seccomp(2)); runc's order:
 * without noNewPrivileges the caller loads before dropping capabilities. With a NOTIFY rule the
 * notify fd (close-on-exec) is stored in *notify_fd (else -1). 0 / -1 with *err (EACCES: neither
 * NNP nor CAP_SYS_ADMIN; EINVAL: flag combination refused). */
int linux_seccomp_load (const struct linux_seccomp *f, int *notify_fd, asbx_err_t *err);

/* linux_seccomp_load, then - with a NOTIFY rule - hand the notify fd and `process_state` (from
 * linux_seccomp_process_state, built before the load so nothing allocates under the filter) to the
 * connected `listener` socket, and close the notify fd. `listener` may be -1 when !f->notify.
 * 0 / -1 with *err. */
int linux_seccomp_install (const struct linux_seccomp *f, int listener, const char *process_state, asbx_err_t *err);

/* Kernel support of one SECCOMP_FILTER_FLAG_* value, probed with a NULL program (EFAULT means
 * the flag was accepted, EINVAL that it is unknown) as runc does. */
bool linux_seccomp_flag_supported (unsigned int flag);

/* Tables for `features` (NULL-terminated): the action, operator, architecture and flag names
 * this build accepts. linux_seccomp_supported_flags returns a static NULL-terminated subset
 * of the known flags the running kernel accepts. */
extern const char *const linux_seccomp_action_names[];
extern const char *const linux_seccomp_operator_names[];
extern const char *const linux_seccomp_arch_names[];
extern const char *const linux_seccomp_flag_names[];
const char *const *linux_seccomp_supported_flags (void);

/* --- seccomp_notify.c: listenerPath handshake (config-linux.md "Seccomp", runtime.md) --- */

/* Connect (AF_UNIX, SOCK_STREAM, close-on-exec) to listenerPath. Called during create, while host
 * paths are still reachable, so that a missing listener fails `create`. Returns the socket fd or
 * -1 with *err ("linux.seccomp.listenerPath: connect `/run/x.sock`: No such file or directory"). */
int linux_seccomp_listener_connect (const char *path, asbx_err_t *err);

/* Build the containerProcessState JSON of the spec: {"ociVersion", "fds":["seccompFd"], "pid",
 * "metadata", "state"}. `state_json` is the container's state document (runtime.md "State") as
 * the runtime wrote it; its "pid" (the pid in the runtime's pid namespace) is copied to "pid".
 * Heap string, or NULL with *err (EINVAL: state_json is not a JSON object). */
char *linux_seccomp_process_state (const char *state_json, const char *metadata, asbx_err_t *err);

/* Send `json` as the payload and `notify_fd` with SCM_RIGHTS in one sendmsg on `sock`.
 * 0 / -1 with *err. The caller still owns both fds. */
int linux_seccomp_listener_send (int sock, int notify_fd, const char *json, asbx_err_t *err);

#endif
