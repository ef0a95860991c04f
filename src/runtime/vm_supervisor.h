/* vm_supervisor.h - the vm tier's detached lifecycle: create, start, state, kill, delete of a
 * container whose process runs in a microVM (runtime/vm.h), as runc's verbs do for a container,
 * so that an engine (containerd's shim, Docker, Podman) drives it unchanged.
 *
 * `create` forks a supervisor on the host: the container's pid in state.json. The engine's
 * shim reaps it and takes its exit status as the container's (the process's status, 128+N for
 * a signal, 124 for the wall clock), exactly as it does runc's init. The supervisor boots QEMU
 * (jailed as for `run`: vm_jail.h) with a control channel (virtio-serial port asbx.ctl on a
 * socketpair) and writes its own stdout/stderr (the shim's pipes) to the guest's stdout/stderr
 * ports; the guest creates the container and holds it at its start gate:
 *
 *     create (P)              supervisor (S)                  guest /init (G)
 *     fork S ------------->   boot QEMU
 *            <- "P pid st" -- (QEMU's pid, for delete)
 *                                             <- "created" --  create done
 *            <- "R" --------
 *     prestart, createRuntime hooks (host), state.json (pid S)
 *     start: connect start.sock (S listens on it: `created` while it exists)
 *            -- "s" ------->  -- "start" ----------------->   start
 *                             <- "started" | "error MSG" ---
 *            <- EOF | MSG --
 *     exec: connect exec.sock: sessions on asbx.exec (runtime/vm_exec.h)
 *     kill N: signal S ----> -- "kill N" ----------------->   kill (init, N)
 *                             QEMU exits: exit (status from the guest)
 *     delete: SIGKILL S (QEMU dies with it: PR_SET_PDEATHSIG), then QEMU waited for by its
 *             pid record, <root>/vm/<id> removed, poststop hooks, the state dir.
 *
 * SIGKILL cannot be forwarded: it kills S and with it QEMU (status 137 as for a container). S
 * lives in a network namespace of its own when config.json asks for a new one (hooks such as
 * Docker's libnetwork-setkey act on /proc/<pid>/ns/net). Hooks: prestart, createRuntime,
 * poststart and poststop run on the host, in the runtime's namespaces, with S's pid; none runs in
 * the guest; createContainer and startContainer (to run inside the container, where the host's
 * hook binaries are not) are refused. Not built: pause/resume, ps, update, checkpoint, a
 * terminal, stdin (the process reads /dev/null). */
#ifndef ASBX_RUNTIME_VM_SUPERVISOR_H
#define ASBX_RUNTIME_VM_SUPERVISOR_H

#include <stddef.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "policy/plan.h"
#include "runtime/container.h"

/* The state-dir file holding QEMU's host pid and start time ("PID START\n"); its presence marks a
 * vm-tier container for the verbs that refuse it (exec, pause...). */
#define VM_SUPERVISOR_MARK "vm-qemu"

/* create under isolation vm: reserve the state dir, fork the supervisor, wait until the guest has
 * created the container (a boot: seconds under TCG), run the host's prestart/createRuntime
 * hooks, record state.json (pid = the supervisor), config.json and o->pid_file. `bundle` absolute,
 * `spec` the model's view, `raw` config.json as read. *pid receives the supervisor's pid. On
 * failure nothing is left (state dir, <root>/vm/<id>, processes). 0 / -1 with *err (EINVAL for
 * what is not built: a terminal, createContainer/startContainer hooks). */
int vm_supervisor_create (const struct asbx_global *g, const struct asbx_create_opts *o, const char *bundle,
                          const struct oci_spec *spec, const struct policy_plan *plan, const char *raw, size_t raw_len,
                          pid_t *pid, asbx_err_t *err);

/* delete's part, once the supervisor is gone: SIGKILL QEMU by its record in `dirfd` (pidfd,
 * start time checked) and wait for it, then remove <state_root>/vm/<id>. No record: nothing.
 * Best effort (warnings). */
void vm_supervisor_delete (int dirfd, const char *state_root, const char *id);

/* true when the container of state dir `dirfd` runs in the vm tier (VM_SUPERVISOR_MARK). */
bool vm_supervisor_is_vm (int dirfd);

#endif
