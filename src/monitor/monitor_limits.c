/* monitor_limits.c - what the monitor enforces by the clock and how it ends (see monitor.c):
 * limits.wallClockSeconds (a CLOCK_BOOTTIME timerfd: suspend does not pause it),
 * limits.cpuSeconds (the cgroup's cumulative CPU time, or without a cgroup the sum over the pid
 * namespace's processes, polled by a timer that sleeps as long as the budget cannot run out), kills, and the final
 * exit_reason + `exited` record. Threat model: the container cannot slow the checks (the monitor is outside its cgroup)
 * and a kill goes to the whole cgroup (cgroup.kill or repeated SIGKILL), so forking away does not help. Ordering: the
 * first reason that fires is the one recorded; processes our own kill ended are not counted as failed execs
 * (monitor_events.c reads m->reason). Threads (issue 14 §3): the two timers are waited on by a thread of their own
 * (SCHED_FIFO when the host allows it), which kills by itself: the loop's work - process events of a fork storm, DNS
 * queries, approval questions - can be as slow as the container makes it without delaying a wall clock or CPU kill. The
 * thread only touches the timers, the cgroup, the audit fd and m->reason (under m->lock). failedExecs is counted from
 * the event stream, whose per-event work is bounded (no /proc walks: monitor/querier.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup.h"
#include "linux/cgroup_internal.h"
#include "linux/proc_ns.h"
#include "monitor/denials.h"
#include "monitor/dnsstub.h"
#include "monitor/monitor_internal.h"

/* ---- CPU usage of the cgroup, or of the pid namespace ---- */

/* No cgroup to measure (a non-root caller without a delegated cpuacct): the container is the
 * init's pid namespace, which it must not share with the host (else "the container's processes"
 * has no boundary the kernel keeps). */
static int
cpu_open_pidns (struct mon *m, asbx_err_t *err)
{
  char p[64];
  struct stat ns, self;

  snprintf (p, sizeof p, "/proc/%d/ns/pid", (int) m->o->init_pid);
  if (stat (p, &ns) < 0 || stat ("/proc/self/ns/pid", &self) < 0)
    return asbx_error (err, errno, "limits.cpuSeconds: stat %s", p);
  if (ns.st_dev == self.st_dev && ns.st_ino == self.st_ino)
    return asbx_error (err, ENOTSUP,
                       "limits.cpuSeconds: the container has no cgroup to measure and shares the host's pid "
                       "namespace, so its processes cannot be told apart: give it a pid namespace or a cgroup");
  m->cpu_pidns = true;
  m->cpu_ns_dev = ns.st_dev;
  m->cpu_ns_ino = ns.st_ino;
  return 0;
}

int
mon_cpu_open (struct mon *m, asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);
  const struct cgroup_hier *h;
  cleanup_close int dfd = -1;

  if (!info)
    return -1;
  h = cgroup_ctl_hier (info, "cpuacct");
  if (!h || h->version != 1)
    h = cgroup_ctl_hier (info, "cgroup2");
  if (!m->o->cgroup_path || (h && !cgroup_path_covers (m->o->cgroup_path, h)))
    return cpu_open_pidns (m, err);
  if (!h)
    return asbx_error (err, ENOTSUP, "limits.cpuSeconds: no cpuacct (v1) or cgroup2 hierarchy on this host");
  if (cgroup_open_in_hier (h, m->o->cgroup_path, false, NULL, &dfd, err) < 0)
    return asbx_error_wrap (err, "limits.cpuSeconds");
  m->cpu_v2 = h->version == 2;
  m->cpu_fd = openat (dfd, m->cpu_v2 ? "cpu.stat" : "cpuacct.usage", O_RDONLY | O_CLOEXEC);
  if (m->cpu_fd < 0)
    return asbx_error (err, errno, "limits.cpuSeconds: open %s of cgroup `%s`",
                       m->cpu_v2 ? "cpu.stat" : "cpuacct.usage", m->o->cgroup_path);
  return 0;
}

/* utime + stime + cutime + cstime of /proc/PID/stat (fields 14-17, clock ticks: proc(5)), or 0.
 * The cumulative pair holds every child this process waited for, with their own waited-for
 * children: so summed over the live processes of the namespace, every process that ran there
 * counts once, alive (its own pair) or reaped (in its reaper's), whoever it was reparented to. */
static uint64_t
ticks_of (int procfd, const char *pid)
{
  char path[300], buf[1024];
  unsigned long long t[4];
  snprintf (path, sizeof path, "%s/stat", pid);
  cleanup_close int fd = openat (procfd, path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read (fd, buf, sizeof buf - 1);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  char *p = strrchr (buf, ')'); /* comm may contain spaces and ')' */
  int field = 2;
  for (; p && *p && field < 14; p++)
    if (*p == ' ')
      field++;
  if (!p || sscanf (p, "%llu %llu %llu %llu", &t[0], &t[1], &t[2], &t[3]) != 4)
    return 0;
  return t[0] + t[1] + t[2] + t[3];
}

/* CPU time of the processes of the init's pid namespace in ns, or -1. Every /proc entry whose
 * ns/pid is that namespace (a process of another user fails the stat: not ours to count).
 * Reaping moves a child's time into its parent's cumulative fields in one step under the
 * kernel's siglock, but this walk is not atomic: a process reaped between reading its parent and
 * itself is missed or counted twice for one look; the maximum seen is kept, so the reading
 * never goes back, and a brief over-count is bounded by one process's time. */
static int
add_ticks (int procfd, pid_t pid, void *arg)
{
  char name[24];
  snprintf (name, sizeof name, "%d", (int) pid);
  *(uint64_t *) arg += ticks_of (procfd, name);
  return 0;
}

static int64_t
pidns_used_ns (struct mon *m)
{
  static uint64_t max_ns;
  uint64_t ticks = 0;
  long hz = sysconf (_SC_CLK_TCK);
  struct stat ns = { .st_dev = m->cpu_ns_dev, .st_ino = m->cpu_ns_ino };

  if (linux_proc_each_in_ns ("pid", &ns, add_ticks, &ticks) < 0)
    return -1;
  uint64_t v = ticks * (1000000000ull / (uint64_t) (hz > 0 ? hz : 100));
  if (v > max_ns)
    max_ns = v;
  return (int64_t) max_ns;
}

/* CPU time used by the cgroup (or the pid namespace) in ns, or -1. */
static int64_t
cpu_used_ns (struct mon *m)
{
  char buf[1024];
  if (m->cpu_pidns)
    return pidns_used_ns (m);
  ssize_t n = pread (m->cpu_fd, buf, sizeof buf - 1, 0);
  uint64_t v;
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  if (!m->cpu_v2)
    return sscanf (buf, "%" SCNu64, &v) == 1 ? (int64_t) v : -1;
  char *p = strstr (buf, "usage_usec ");
  if (!p || sscanf (p + 11, "%" SCNu64, &v) != 1)
    return -1;
  return (int64_t) (v * 1000);
}

void
mon_timer_arm_ns (int tfd, uint64_t ns)
{
  struct itimerspec it = { 0 };
  if (ns == 0)
    ns = 1;
  it.it_value.tv_sec = (time_t) (ns / 1000000000u);
  it.it_value.tv_nsec = (long) (ns % 1000000000u);
  timerfd_settime (tfd, 0, &it, NULL);
}

/* ---- kill ---- */

void
mon_container_kill (struct mon *m)
{
  asbx_err_t e = NULL;
  if (m->o->cgroup_path && cgroup_kill_all (m->o->cgroup_path, SIGKILL, &e) < 0)
    asbx_error_free (&e);
  syscall (SYS_pidfd_send_signal, m->init_pidfd, SIGKILL, NULL, 0);
}

bool
mon_reason_set (struct mon *m, const char *reason, const char *detail)
{
  pthread_mutex_lock (&m->lock);
  bool set = !m->reason && !m->finished;
  if (set)
    {
      m->reason = reason;
      m->detail = detail;
    }
  pthread_mutex_unlock (&m->lock);
  return set;
}

const char *
mon_reason_get (struct mon *m)
{
  pthread_mutex_lock (&m->lock);
  const char *r = m->reason;
  pthread_mutex_unlock (&m->lock);
  return r;
}

/* A limit fired: audit it, remember the reason, kill everything. Only the first reason counts. */
void
mon_limit_kill (struct mon *m, const char *reason, const char *limit, uint64_t value, uint64_t used)
{
  if (!mon_reason_set (m, reason, NULL))
    return;
  struct audit_rec *r = audit_rec_new (m->o->id, "limit");
  audit_rec_str (r, "limit", limit);
  audit_rec_int (r, "value", (int64_t) value);
  audit_rec_int (r, "used", (int64_t) used);
  audit_rec_str (r, "action", "kill");
  mon_audit_put (m, r);
  mon_container_kill (m);
}

void
mon_cpu_check (struct mon *m)
{
  uint64_t limit = m->plan->cpu_seconds * 1000000000ull;
  int64_t used = cpu_used_ns (m);
  long ncpu = sysconf (_SC_NPROCESSORS_ONLN);
  if (used >= 0 && (uint64_t) used >= limit)
    {
      mon_limit_kill (m, "cpu", "cpuSeconds", m->plan->cpu_seconds, (uint64_t) used / 1000000000ull);
      return;
    }
  /* the budget cannot run out faster than remaining / ncpu: sleep that long, within 50 ms..1 s */
  uint64_t next = used < 0 ? 1000000000ull : (limit - (uint64_t) used) / (uint64_t) (ncpu > 0 ? ncpu : 1);
  if (next < 50000000ull)
    next = 50000000ull;
  if (next > 1000000000ull)
    next = 1000000000ull;
  mon_timer_arm_ns (m->cpu_tfd, next);
}

/* ---- the limits thread ---- */

/* Forks refused by pids.max since the last look (pids.events "max" rose): one `limit` record
 * {"limit":"pids","action":"refused","value":pids.max,"used":N refused since start} per look,
 * so a fork bomb is on record within PIDS_LOOK_MS - the kernel reports nothing else. */
#define PIDS_LOOK_MS 500
static void
pids_look (struct mon *m)
{
  uint64_t n;
  pthread_mutex_lock (&m->lock);
  bool news = denials_pids_max_count (m->o->cgroup_path, &n) == 0 && n > m->pids_seen;
  if (news)
    m->pids_seen = n;
  pthread_mutex_unlock (&m->lock);
  if (!news)
    return;
  struct audit_rec *r = audit_rec_new (m->o->id, "limit");
  audit_rec_str (r, "limit", "pids");
  audit_rec_str (r, "action", "refused");
  if (m->plan->pids)
    audit_rec_int (r, "value", (int64_t) m->plan->pids);
  audit_rec_int (r, "used", (int64_t) (n - m->pids_max_at_start));
  mon_audit_put (m, r);
}

static void *
limits_main (void *arg)
{
  struct mon *m = arg;
  struct pollfd p[2] = { { .fd = m->wall_tfd, .events = POLLIN }, { .fd = m->cpu_tfd, .events = POLLIN } };
  uint64_t ticks;
  bool pids = m->o->cgroup_path != NULL;
  sigset_t all;
  sigfillset (&all);
  pthread_sigmask (SIG_BLOCK, &all, NULL);
  for (;;)
    {
      int n = poll (p, 2, pids ? PIDS_LOOK_MS : -1);
      if (pids)
        pids_look (m);
      if (n < 0)
        {
          if (errno != EINTR)
            nanosleep (&(struct timespec){ 0, 10L * 1000 * 1000 }, NULL); /* never a busy loop */
          continue;
        }
      if (p[0].revents & POLLIN && read (m->wall_tfd, &ticks, sizeof ticks) > 0)
        mon_limit_kill (m, "wallclock", "wallClockSeconds", m->plan->wall_clock_seconds, m->plan->wall_clock_seconds);
      if (p[1].revents & POLLIN && read (m->cpu_tfd, &ticks, sizeof ticks) > 0)
        mon_cpu_check (m);
    }
  return NULL;
}

int
mon_limits_start (struct mon *m, asbx_err_t *err)
{
  pthread_t t;
  if (m->wall_tfd < 0 && m->cpu_tfd < 0 && !m->o->cgroup_path)
    return 0;
  int e = pthread_create (&t, NULL, limits_main, m);
  if (e)
    return asbx_error (err, e, "monitor: start the limits thread");
  /* best effort: ahead of the loop and of the container's own threads on a busy CPU (it sleeps
   * on its timers almost always, so it takes nothing from anyone) */
  struct sched_param sp = { .sched_priority = 1 };
  pthread_setschedparam (t, SCHED_FIFO, &sp);
  pthread_detach (t);
  return 0;
}

/* ---- end of the container ---- */

/* Exit status from /proc/PID/stat field 52 while the init is still a zombie (fallback when the
 * connector lost its exit event). true when read. */
static bool
status_from_stat (pid_t pid, int *status)
{
  char buf[4096];
  if (read_proc_small (pid, "stat", buf, sizeof buf) < 0)
    return false;
  char *p = strrchr (buf, ')'); /* comm may contain spaces and ')' */
  int field = 2;
  for (; p && *p; p++)
    if (*p == ' ' && ++field == 52)
      return sscanf (p + 1, "%d", status) == 1;
  return false;
}

void
mon_finish (struct mon *m)
{
  if (m->o->cgroup_path)
    pids_look (m); /* forks refused since the limits thread last looked */
  pthread_mutex_lock (&m->lock);
  m->finished = true;
  const char *reason = m->reason;
  pthread_mutex_unlock (&m->lock);
  struct audit_rec *r;
  asbx_err_t e = NULL;
  uint64_t oom = 0;

  mon_drain_events (m);
  /* the kernel signals the pidfd in exit_notify() and sends the connector's exit event only
   * after it (do_exit): the event may still be on its way. Wait a little for it - the zombie's
   * /proc/PID/stat below is gone once the init's parent reaped it. */
  for (int i = 0; !m->have_status && m->conn >= 0 && i < 20; i++)
    {
      struct pollfd pfd = { .fd = m->conn, .events = POLLIN };
      if (poll (&pfd, 1, 10) > 0)
        mon_drain_events (m);
    }
  denials_finish (m->den);
  dnsstub_finish (m->dns); /* refused packets: the last records, and the count of the unlogged */
  if (!m->have_status)
    m->have_status = status_from_stat (m->o->init_pid, &m->status);
  if (!reason)
    {
      reason = "exited";
      if (m->have_status && WIFSIGNALED (m->status))
        {
          reason = "killed";
          if (m->o->cgroup_path && cgroup_oom_count (m->o->cgroup_path, &oom, &e) == 0 && oom > m->oom_at_start)
            reason = "memory";
          asbx_error_free (&e);
        }
      /* a failure after pids.max refused forks: the pids limit ended it (a clean exit 0 did cope) */
      if (strcmp (reason, "memory") != 0 && m->have_status && m->status != 0 && m->o->cgroup_path
          && denials_pids_max_count (m->o->cgroup_path, &oom) == 0 && oom > m->pids_max_at_start)
        reason = "pids";
    }
  char line[64];
  snprintf (line, sizeof line, "%s\n", reason);
  (void) mon_write_state_file (m->dirfd, "exit_reason", line);
  r = audit_rec_new (m->o->id, "lifecycle");
  audit_rec_str (r, "state", "exited");
  if (m->have_status)
    {
      /* as runc reports it: the exit status, or 128 + the signal */
      int code = WIFSIGNALED (m->status) ? 128 + WTERMSIG (m->status) : WEXITSTATUS (m->status);
      audit_rec_int (r, "exitCode", code);
      if (WIFSIGNALED (m->status))
        audit_rec_int (r, "signal", WTERMSIG (m->status));
    }
  else
    audit_rec_str (r, "exitCode", NULL);
  audit_rec_str (r, "exitReason", reason);
  if (m->detail)
    audit_rec_str (r, "detail", m->detail);
  audit_rec_int (r, "failedExecs", (int64_t) m->failed);
  if (m->cpu_fd >= 0 || m->cpu_pidns)
    audit_rec_int (r, "cpuUsec", cpu_used_ns (m) / 1000);
  audit_sink_counts (r);
  mon_audit_put (m, r);
}
