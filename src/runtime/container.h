/* container.h - the lifecycle operations (runtime-spec runtime.md "Operations"), as the CLI
 * verbs call them. Each operation takes the per-container lock for its whole duration. */
#ifndef ASBX_RUNTIME_CONTAINER_H
#define ASBX_RUNTIME_CONTAINER_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"

struct asbx_global
{
  const char *root; /* state root, default /run/agentsbx */
  bool systemd_cgroup;
  bool rootless;
  bool debug;
  /* agent policy (POLICY.md §1): the ceiling set by the admin for this runtime class */
  const char *profile;     /* --profile NAME */
  const char *policy_file; /* --policy FILE */
  const char *config_path; /* --config FILE (host config), NULL = /etc/agentsbx/config.json */
  const char *audit_dir;   /* --audit-dir DIR, NULL = host config or /var/log/agentsbx */
  const char *criu;        /* --criu PATH (checkpoint/restore), NULL = "criu" in PATH */
  bool vm_guest;           /* we are the init of a vm-tier guest (runtime/vm.h): isolation vm is the VM
                              around us, the container is made as for isolation container */
  bool vm_net_outside;     /* ...and its host enforces the network (runtime/vm_net.h): plan.net_outside */
  bool vm_guest_no_hooks;  /* ... of a detached one (runtime/vm_supervisor.h): the host runs the hooks */
  bool isolation_vm;       /* --isolation vm: every container of this runtime class in the vm tier */
  uid_t vm_uid;            /* --vm-user: QEMU's ids for a root-owned bundle (runtime/vm_jail.h), 0 = none */
  gid_t vm_gid;
};

struct asbx_create_opts
{
  const char *id;
  const char *bundle; /* NULL = cwd */
  const char *console_socket;
  /* foreground `run` only (NULL otherwise): with process.terminal and no console_socket, create
   * makes a socketpair (runtime/tty.h), gives the container side one end as its console socket
   * and stores the other here (-1 when no terminal); the caller receives the pty master on it */
  int *tty_proxy_fd;
  const char *pid_file;
  bool no_pivot;
  bool no_new_keyring;
  int preserve_fds;
  /* agent policy: the profile used when neither a ceiling nor a request names one (`sandbox`
   * passes "agent"; create/run pass NULL = plain OCI) */
  const char *default_profile;
  /* `sandbox --review`: the policy's filesystem.workspace.mode becomes review (issue 18) */
  bool workspace_review;
  /* `sandbox --isolation vm`: the policy's isolation becomes vm (issue 22) */
  bool isolation_vm;
  /* foreground `run` and `sandbox` only (NULL otherwise): under isolation vm, create runs the
   * whole container in a VM (runtime/vm.h), stores its exit status here and returns 1 */
  int *vm_status;
};

/* create: everything up to `created`. *init_pid receives the container init's pid. On failure
 * nothing is left (state dir, cgroup, process). 0 / -1 with *err; 1 when the policy's isolation
 * is vm and o->vm_status is set: the container ran to its end in a VM (nothing is left either). */
int asbx_container_create (const struct asbx_global *g, const struct asbx_create_opts *o, pid_t *init_pid,
                           asbx_err_t *err);

/* start: connect to the init's start.sock, wait until it has exec'd (or report the error it
 * sends), then run poststart hooks. */
int asbx_container_start (const struct asbx_global *g, const char *id, asbx_err_t *err);

/* kill: send sig to the init (or, with all, to every process of its cgroup). */
int asbx_container_kill (const struct asbx_global *g, const char *id, int sig, bool all, asbx_err_t *err);

/* delete: stopped (or created) containers; running ones only with force (SIGKILL first).
 * Runs poststop hooks, removes the cgroup and the state dir. A missing id with force is 0. */
int asbx_container_delete (const struct asbx_global *g, const char *id, bool force, asbx_err_t *err);

/* state: the OCI state JSON (heap string). */
char *asbx_container_state_json (const struct asbx_global *g, const char *id, asbx_err_t *err);

/* list: print every container (format "table" or "json", quiet = ids only) to stdout. */
int asbx_container_list (const struct asbx_global *g, const char *format, bool quiet, asbx_err_t *err);

/* Wait for the init (our child: we are its subreaper) and return the exit code as runc does:
 * the status, or 128 + signal. Forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2/SIGWINCH to it. */
int asbx_container_wait (pid_t pid);

/* Re-execute the running binary from a sealed memfd copy unless already running from one, so
 * no process in the container can ever open or overwrite the runtime binary through
 * /proc/PID/exe (CVE-2019-5736). Before that execve the AGENTSBX_SECRET_* variables leave the
 * environment (runtime/secret_env.h): into a sealed memfd the re-executed runtime takes when
 * keep_secrets (a verb that creates a container and its monitor), else dropped. Returns only if
 * already sealed; on failure exits. */
void asbx_ensure_sealed_exe (char **argv, bool keep_secrets);

/* Tell the cgroup-priming thread (selfexe.c) that the container's process has been moved: it
 * stops at its next wake-up instead of repeating its write until the end of its 100 ms window
 * (each repeat keeps the host's forks on the rwsem's slow path). Safe from any thread, any
 * number of times, and when no thread runs. Source: docs/performance.md "Self-protection". */
void asbx_cgroup_prime_done (void);

#endif
