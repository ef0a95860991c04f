/* monitor_internal.h - the monitor's state, shared by its files (not a public API):
 * monitor.c (process shape, setup, loop, the CLI side), monitor_events.c (process events and
 * the member set), monitor_limits.c (CPU budget, wall clock, kills, the final record). */
#ifndef ASBX_MONITOR_MONITOR_INTERNAL_H
#define ASBX_MONITOR_MONITOR_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "monitor/audit.h"
#include "monitor/monitor.h"

/* the set of the container's processes (sorted array: n is bounded by the pids limit) */
struct pidset
{
  pid_t *v;
  size_t n, cap;
};

struct mon
{
  const struct monitor_opts *o;
  const struct policy_plan *plan;
  int audit_fd;
  int init_pidfd;
  int dirfd;    /* fresh fd of the state dir (no flock shared with the CLI) */
  int conn;     /* process events, -1 when not needed and unavailable */
  int wall_tfd; /* -1 = no wall clock limit */
  int cpu_tfd;  /* -1 = no cpu limit */
  int cpu_fd;   /* cpuacct.usage (v1, ns) or cpu.stat (v2, usage_usec) */
  bool cpu_v2;
  /* no cgroup (a non-root caller's): cpuSeconds is summed over the processes of the init's pid
   * namespace, identified by the device and inode of /proc/PID/ns/pid (monitor_limits.c) */
  bool cpu_pidns;
  dev_t cpu_ns_dev;
  ino_t cpu_ns_ino;
  int guard_pidfd; /* -1 until the guard runs */
  pid_t guard_pid;
  int guard_wr; /* M's end of the guard pipe */
  struct pidset procs;
  uint64_t failed;
  const char *reason; /* set when the monitor killed the container */
  const char *detail;
  bool have_status;
  int status;
  bool started;
  uint64_t oom_at_start;
  char **cg_paths;            /* the container's cgroup path per hierarchy form, for /proc/PID/cgroup */
  struct dnsstub *dns;        /* network.mode filtered: the DNS stub (monitor/dnsstub.c), else NULL */
  pid_t pasta;                /* filtered in a fresh netns: pasta, our child (monitor/pasta.h), else 0 */
  int pasta_netns;            /* the netns fd while pasta waits for the first DNS activity, else -1 */
  struct denials *den;        /* kernel-reported denials (monitor/denials.c), NULL until set up */
  uint64_t pids_max_at_start; /* pids.events "max" at start: forks refused by pids.max */
  /* the limits thread (monitor_limits.c) and the loop share `reason` and `finished` under lock */
  pthread_mutex_t lock;
  bool finished;              /* mon_finish began: no limit fires any more */
  uint64_t pids_seen;         /* pids.events "max" at the last `limit` record about it */
  char *kaudit_error;         /* enableKernelAudit failed: why (policy record kernelAuditError) */
  struct unixsock_sup *usock; /* the unix-socket confinement's connect supervisor, else NULL */
};

/* monitor.c: write `content` to dirfd/name atomically (temp file + rename). 0 / -1 with errno. */
int mon_write_state_file (int dirfd, const char *name, const char *content);

/* monitor_events.c */
/* Write r to the audit log (always frees r); a failed write is dropped: a detached process has
 * nowhere to report it and enforcement must go on. */
void mon_audit_put (struct mon *m, struct audit_rec *r);
/* denials.c's membership test (denials_member_fn): the init, the member set, or the cgroup. */
bool mon_den_member (pid_t pid, void *data);
/* querier_members_fn (monitor/querier.h): the member set, for the DNS stub's querier lookups. */
size_t mon_members (void *data, const pid_t **v);
/* Rebuild the member set from the cgroup (at start and after lost events). */
void mon_procs_resync (struct mon *m);
/* Read every queued process event: members, exec records, failed-exec budget, init's status. */
void mon_drain_events (struct mon *m);

/* monitor_limits.c */
/* Open the cgroup's CPU usage file (cpuacct.usage or cpu.stat) for limits.cpuSeconds; without a
 * cgroup carrying cpuacct, note the init's pid namespace instead (its own one is required). */
int mon_cpu_open (struct mon *m, asbx_err_t *err);
/* Arm timerfd tfd to fire once after ns nanoseconds (0 counts as 1). */
void mon_timer_arm_ns (int tfd, uint64_t ns);
/* SIGKILL the whole cgroup and the init's pidfd. */
void mon_container_kill (struct mon *m);
/* A limit fired: audit it, remember the reason (the first one counts), kill everything. */
void mon_limit_kill (struct mon *m, const char *reason, const char *limit, uint64_t value, uint64_t used);
/* The CPU timer fired: kill at the budget, else re-arm for the earliest possible exhaustion. */
void mon_cpu_check (struct mon *m);
/* Set m->reason (and m->detail) unless a reason is already there; true when this one was set. */
bool mon_reason_set (struct mon *m, const char *reason, const char *detail);
/* The reason recorded so far, or NULL. */
const char *mon_reason_get (struct mon *m);
/* Start the limits thread: it alone waits on the wall clock and CPU timers and kills, so no
 * work of the loop (events, DNS, approvals) can delay a limit; it also looks at pids.events
 * every 500 ms (a `limit` record when forks were refused). No timer, no cgroup: nothing to start.
 * Call after the guard is forked (the guard must not inherit a thread's locks). 0 / -1 + *err. */
int mon_limits_start (struct mon *m, asbx_err_t *err);
/* The init is gone: exit_reason file and the `exited` record. */
void mon_finish (struct mon *m);

#endif
