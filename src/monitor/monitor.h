/* monitor.h - the per-container monitor (POLICY.md §4): a small process forked at `create` that
 * outlives the runtime CLI and enforces what no kernel mechanism enforces by itself:
 * limits.wallClockSeconds, limits.cpuSeconds (sum over the container's cgroup),
 * limits.failedExecs (processes of the container that exited non-zero), and writes the audit
 * log (lifecycle created/started/exited with exitCode + exitReason, policy, exec, limit).
 *
 * Process shape (drawn):
 *
 *   CLI (create) --fork--> C1 --fork--> M (monitor: setsid, stdio /dev/null, only its own fds)
 *        ^                  \_ exits at once          |  --fork--> G (guard)
 *        |                                            |
 *        +---- ready pipe: {ok, pid, message} --------+
 *
 * M holds a pidfd of the container init, a process-events connector socket, timerfds, the audit
 * fd and a fresh (unlocked) fd of the state dir. M and G watch each other: G blocks on a pipe
 * whose only writer is M (EOF = M died) and M holds a pidfd of G. Whichever of them dies first,
 * the other SIGKILLs the whole container (fail closed) and records exitReason "killed". M exits
 * after the init has exited and the final `exited` record is written; it tells G "done" first.
 * Residual: SIGKILL of M and G at the same instant leaves the container unsupervised (it keeps
 * running under its cgroup and pids/memory limits) - the kernel offers no "kill this cgroup when
 * that process dies" primitive for a process that is not the container's parent.
 *
 * Exit code: M is not the init's parent. It takes the wait status from the connector's
 * PROC_EVENT_EXIT for the init pid (sent in do_exit() before the pidfd becomes readable, so it
 * is queued by the time M sees POLLIN); if that event was lost (queue overflow), from
 * /proc/PID/stat field 52 while the init is still a zombie; otherwise exitCode is null. */
#ifndef ASBX_MONITOR_MONITOR_H
#define ASBX_MONITOR_MONITOR_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/plan.h"

struct monitor_opts
{
  const char *id;                 /* container id (already validated) */
  pid_t init_pid;                 /* the container init; must be alive (the caller's child or pinned) */
  const char *cgroup_path;        /* as cgroup_resolve_path() returned; NULL = no cgroup (then
                                     cpuSeconds and failedExecs/exec audit cannot be enforced) */
  int state_dirfd;                /* the container's state dir: monitor.pid and exit_reason go there */
  const char *audit_dir;          /* NULL = plan->audit_dir, then AUDIT_DEFAULT_DIR */
  const struct policy_plan *plan; /* active plan; read by the monitor from its copy of memory */
  bool new_netns;                 /* the container's network namespace is fresh (created by this
                                     create, nobody wires it): `filtered` then gets pasta
                                     (monitor/pasta.h) as its way out */
  const char *missing_grants;     /* "ORIGIN\tPATH\n" lines: allowWrite grants whose path did not
                                     exist at create (policy_apply_mounts), listed as
                                     `missingWrites` in the `policy` record; NULL = none */
  int unixsock_fd;                /* socketpair end on which the init sends the notify fd of its
                                     unix-socket filter (monitor/unixsock.h), or -1; M keeps a copy */
  char *const *degradations;      /* what this host does not enforce although the policy asked
                                     (its `degrade` accepted it): runtime/policy_landlock.c,
                                     runtime/rootless.c; the `policy` record's `degradations` */
  size_t degradations_len;
  const char *egress_ca_cert_pem; /* the container's egress CA (runtime/egress_ca.c), PEM text: the
                                     certificate and its private key, for the TLS interception of
                                     network.credentials/network.http hosts (monitor/tls_relay.h);
                                     the key never touches disk. NULL when the plan intercepts
                                     nothing */
  const char *egress_ca_key_pem;
  int secrets_env_fd; /* the memfd of the runtime's environment secrets (runtime/secret_env.h),
                         or -1: M keeps it (the same open file) for the interception's lookups */
  /* this container shares the egress of another container in its network namespace
   * (runtime/egress_share.h): no DNS stub, no pasta of its own (its `policy` record names the
   * owner); M holds egress_owner_pidfd, a pidfd of the owner's monitor (egress_owner_monitor),
   * and kills the container when that monitor exits (exitReason "killed"): no sharer keeps a
   * namespace without its egress. egress_owner_pidfd is read only when egress_shared. */
  bool egress_shared;
  const char *egress_owner_id;
  pid_t egress_owner_monitor;
  int egress_owner_pidfd;
};

/* Fork the monitor (see above) and wait until it is ready: subscribed to process events, the
 * container's processes listed, timers armed, guard running, `created` and `policy` records
 * written. Writes <state dir>/monitor.pid. On success *monitor_pid is M's pid. On failure
 * nothing is left (M killed if it got that far) and *err says why: the connector missing for a
 * plan that needs it ("limits.failedExecs: needs the process events connector: ..."), no cgroup
 * for cpuSeconds, audit dir not writable. Must be called by root in the initial namespaces.
 * 0 / -1 with *err. */
int monitor_start (const struct monitor_opts *o, pid_t *monitor_pid, asbx_err_t *err);

/* The exitReason the monitor (or its guard) recorded in dirfd's `exit_reason` file, as a heap
 * string ("exited", "killed", "wallclock", "cpu", "memory", "failed-execs", "pids", "audit-full"), or NULL when there
 * is none (not monitored, or not exited yet). */
char *monitor_exit_reason (int state_dirfd);

/* The monitor's pid from dirfd's `monitor.pid`, or 0 when there is none. */
pid_t monitor_pid_read (int state_dirfd);

/* Wait at most timeout_ms for the container's monitor to exit (it writes exit_reason and the
 * final audit record after the init is gone): called before reading exit_reason and before
 * delete removes the state dir. No monitor: returns at once. */
void monitor_wait_exit (int state_dirfd, int timeout_ms);

#endif
