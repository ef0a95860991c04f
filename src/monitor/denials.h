/* denials.h - `denial` records in the audit log from what the kernel reports (POLICY.md §6):
 * Landlock denials (fs, net) and the policy's seccomp group answers (syscall), read from the
 * kernel audit multicast (linux/audit_netlink.h) by the per-container monitor; and the pids.max
 * counter for the `pids` exit reason.
 *
 * Observability, not enforcement: when the kernel cannot report (no CONFIG_AUDIT, no
 * CAP_AUDIT_READ, audit disabled for Landlock), the container runs exactly as enforced and the
 * `policy` record's `kernelDenials` field says what is and is not reported. Denial records are
 * capped per container (DENIALS_MAX); the rest are counted in one final record. */
#ifndef ASBX_MONITOR_DENIALS_H
#define ASBX_MONITOR_DENIALS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define DENIALS_MAX 1000

struct denials;

/* Membership test supplied by the monitor: is `pid` (initial pid namespace) a process of the
 * container (or was it, recently)? */
typedef bool (*denials_member_fn) (pid_t pid, void *data);

/* Subscribe to the kernel audit stream. Never fails: without it the object only answers
 * denials_status with the reason. `id` is copied; `log_fd` is the audit log (borrowed). */
struct denials *denials_new (const char *id, int log_fd, denials_member_fn member, void *data);

/* The fd to poll (POLLIN), or -1 when not subscribed. */
int denials_fd (const struct denials *d);

/* What is reported, for the policy record: "landlock,seccomp", or "seccomp" followed by why
 * Landlock is not, or "none: <reason>". Valid while d lives. */
const char *denials_status (const struct denials *d);

/* A member process exited: remembered (last 256) so its late audit records still match. */
void denials_note_exit (struct denials *d, pid_t pid);

/* Read the queued records and write the container's `denial` records. Call after draining the
 * process-events connector (so forks the records refer to are known). */
void denials_dispatch (struct denials *d);

/* At the container's end: wait briefly for records kauditd has not delivered yet (1 ms when its
 * queue is empty, AUDIT_GET backlog 0; else 10 ms of quiet; 200 ms at most), dispatch them,
 * write the count of suppressed records. */
void denials_finish (struct denials *d);

void denials_free (struct denials *d);

/* The pids controller's count of forks refused by pids.max in cgroup `path` (v2 pids.events
 * "max", v1 pids.events "max"). 0 / -1 (no pids controller, unreadable). */
int denials_pids_max_count (const char *path, uint64_t *count);

#endif
