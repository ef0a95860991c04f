/* monitor.c - the per-container monitor: timers, CPU budget, failed-exec budget, audit writer.
 *
 * Mechanism (see monitor.h for the process shape): one poll(2) loop over a pidfd of the init,
 * the process-events connector (linux/proc_events.h), two timerfds (wall clock, CPU check) and a
 * pidfd of the guard. Container membership of a process: the init, every process forked by a
 * member (connector FORK events, threads skipped), and - for processes that joined from outside
 * (`exec` enters with setns + cgroup) - a process whose /proc/PID/cgroup names the container's
 * cgroup when it calls execve. The set is rebuilt from cgroup.procs when the connector reports
 * lost events.
 * Threat model: the container is hostile. It cannot see the monitor (other pid namespace, other
 * cgroup) nor its fds; everything read from it (/proc/PID/cmdline, exe) is untrusted text that
 * audit.c sanitises. A container that forks faster than we read only delays accounting (events
 * queue; on overflow we resync); the pids limit bounds it.
 * Ordering: subscribe to events BEFORE reading cgroup.procs (no gap); the wall clock starts at
 * monitor start (create), so a container parked in `created` cannot outlive it either. Kills go
 * to the whole cgroup (cgroup.kill / repeated SIGKILL) and the init's pidfd.
 * Cost of the connector vs eBPF (in words): the connector wakes us for EVERY fork/exec/exit on
 * the host (one ~100-byte datagram each, filtered in user space; an exec of an unknown process
 * costs one read of /proc/PID/cgroup), while an eBPF program on sched_process_{fork,exec,exit}
 * could filter by cgroup in the kernel (bpf_current_task_under_cgroup) and wake us only for the
 * container, at the price of libbpf, BTF and CAP_BPF. On an idle host the difference is noise;
 * on a host doing ~10k forks/s the connector costs the monitor roughly that many syscalls/s.
 * Files: this one (process shape, setup, the loop, the guard, the CLI side), monitor_events.c
 * (the connector stream and the member set), monitor_limits.c (CPU, wall clock, kills, the
 * final record); the shared state is struct mon in monitor_internal.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup.h"
#include "linux/audit_netlink.h"
#include "linux/cgroup_internal.h"
#include "linux/proc_events.h"
#include "monitor/audit.h"
#include "monitor/denials.h"
#include "monitor/dnsstub.h"
#include "monitor/execfail.h"
#include "monitor/tls_relay.h"
#include "monitor/egress_table.h"
#include "monitor/monitor.h"
#include "monitor/monitor_internal.h"
#include "monitor/pasta.h"
#include "monitor/unixsock.h"

/* ---- small state files in the state dir ---- */

int
mon_write_state_file (int dirfd, const char *name, const char *content)
{
  char tmp[64];
  snprintf (tmp, sizeof tmp, ".%s.%d.tmp", name, (int) getpid ());
  cleanup_close int fd = openat (dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || write_all (fd, content, strlen (content)) < 0 || renameat (dirfd, tmp, dirfd, name) < 0)
    {
      int e = errno;
      unlinkat (dirfd, tmp, 0);
      errno = e;
      return -1;
    }
  return 0;
}

static char *
read_state_file (int dirfd, const char *name)
{
  char *buf = NULL;
  size_t len;
  asbx_err_t e = NULL;
  if (read_file_at (dirfd, name, 4096, &buf, &len, &e) < 0)
    {
      asbx_error_free (&e);
      return NULL;
    }
  while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
    buf[--len] = '\0';
  return buf;
}

char *
monitor_exit_reason (int state_dirfd)
{
  return read_state_file (state_dirfd, "exit_reason");
}

pid_t
monitor_pid_read (int state_dirfd)
{
  cleanup_free char *s = read_state_file (state_dirfd, "monitor.pid");
  uint64_t v;
  if (!s || parse_u64 (s, &v) < 0 || v == 0 || v > INT32_MAX)
    return 0;
  return (pid_t) v;
}

/* ---- the guard: kills the container when the monitor dies ---- */

static void __attribute__ ((noreturn)) guard_main (struct mon *m, int rd)
{
  char c = 0;
  ssize_t n;

  prctl (PR_SET_NAME, "asbx-guard", 0, 0, 0);
  do
    n = read (rd, &c, 1);
  while (n < 0 && errno == EINTR);
  if (n == 1 && c == 'd')
    _exit (0); /* the monitor finished normally */
  /* EOF: the monitor is gone (killed, crashed). Fail closed. */
  mon_container_kill (m);
  struct pollfd p = { .fd = m->init_pidfd, .events = POLLIN };
  poll (&p, 1, 10000);
  if (m->conn >= 0)
    {
      mon_drain_events (m);
      proc_events_close (m->conn);
      m->conn = -1;
    }
  m->reason = "killed";
  m->detail = "the monitor died";
  mon_finish (m);
  _exit (0);
}

/* Fork the guard. It shares M's fds by inheritance; only the pipe's read end is its own. */
static int
guard_start (struct mon *m, asbx_err_t *err)
{
  int p[2];
  if (pipe2 (p, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "monitor: guard pipe");
  pid_t pid = fork ();
  if (pid < 0)
    {
      int e = errno;
      close (p[0]);
      close (p[1]);
      return asbx_error (err, e, "monitor: fork guard");
    }
  if (pid == 0)
    {
      close (p[1]);
      guard_main (m, p[0]);
    }
  close (p[0]);
  m->guard_wr = p[1];
  m->guard_pid = pid;
  m->guard_pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
  if (m->guard_pidfd < 0)
    {
      int e = errno;
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
      return asbx_error (err, e, "monitor: pidfd_open guard");
    }
  return 0;
}

/* ---- the loop ---- */

static void pasta_lazy_start (struct mon *m);

/* the owner of the shared egress is gone: said before the container is killed */
static void
audit_egress_owner_gone (struct mon *m)
{
  struct audit_rec *r = audit_rec_new (m->o->id, "network");
  audit_rec_str (r, "warning", "the monitor of the egress owner exited: the container is killed");
  audit_rec_str (r, "egressOwner", m->o->egress_owner_id);
  audit_rec_int (r, "egressOwnerMonitor", m->o->egress_owner_monitor);
  mon_audit_put (m, r);
}

static void __attribute__ ((noreturn)) monitor_loop (struct mon *m)
{
  enum
  {
    P_INIT,
    P_CONN,
    P_GUARD,
    P_DNS,
    P_DEN,
    P_EXEC,
    P_OWNER,
    P_N
  };
  struct pollfd p[P_N] = {
    [P_INIT] = { .fd = m->init_pidfd, .events = POLLIN },
    [P_CONN] = { .fd = m->conn, .events = POLLIN },
    [P_GUARD] = { .fd = m->guard_pidfd, .events = POLLIN },
    [P_DNS] = { .fd = m->dns ? dnsstub_fd (m->dns) : -1, .events = POLLIN },
    [P_DEN] = { .fd = denials_fd (m->den), .events = POLLIN },
    /* execve attempts the supervisor saw (monitor/execfail.h) */
    [P_EXEC] = { .fd = m->usock ? execfail_fd () : -1, .events = POLLIN },
    /* the monitor whose egress this container shares (runtime/egress_share.h) */
    [P_OWNER] = { .fd = m->o->egress_shared ? m->o->egress_owner_pidfd : -1, .events = POLLIN },
  };

  /* the wall clock and CPU timers are the limits thread's (monitor_limits.c) */
  for (;;)
    {
      /* an open run of execve attempts counts once it is old (monitor/execfail.h): wake for it */
      int rc = poll (p, P_N, m->usock ? execfail_timeout_ms () : -1);
      if (rc < 0)
        {
          if (errno == EINTR)
            continue;
          mon_reason_set (m, "killed", "monitor poll failed");
          mon_container_kill (m); /* cannot supervise any more: fail closed */
          p[P_INIT].revents = POLLIN;
        }
      if (rc == 0 || p[P_CONN].revents || p[P_EXEC].revents)
        mon_drain_events (m);
      if (p[P_DEN].revents)
        {
          mon_drain_events (m); /* the forks the records refer to first */
          denials_dispatch (m->den);
        }
      if (p[P_DNS].revents)
        {
          if (m->pasta_netns >= 0 && dnsstub_wants_network (m->dns))
            pasta_lazy_start (m);
          dnsstub_dispatch (m->dns);
        }
      if (p[P_GUARD].revents)
        {
          waitpid (m->guard_pid, NULL, WNOHANG);
          p[P_GUARD].fd = -1;
          mon_reason_set (m, "killed", "the monitor's guard died");
          mon_container_kill (m);
        }
      if (p[P_OWNER].revents)
        {
          /* its stub, relay and sets are gone with it: the namespace's table (if still there)
           * lets nothing new out, but the container must not outlive its egress (fail closed) */
          p[P_OWNER].fd = -1;
          mon_reason_set (m, "killed", "the monitor of the egress owner exited");
          audit_egress_owner_gone (m);
          mon_container_kill (m);
        }
      if (p[P_INIT].revents)
        break;
    }
  mon_finish (m);
  pasta_stop (m->pasta);
  /* tell the guard we are done on purpose, then leave (the guard exits on 'd') */
  if (m->guard_wr >= 0 && write (m->guard_wr, "d", 1) < 0)
    kill (m->guard_pid, SIGKILL);
  proc_events_close (m->conn);
  _exit (0);
}

/* ---- setting the monitor up (in M) ---- */

struct ready_msg
{
  int ok;
  pid_t pid;
  char msg[512];
};

static char **
cgroup_path_forms (const char *path)
{
  /* "/a/b" or the per-hierarchy list "KEY:/a/b;KEY:/c/d" (cgroup_resolve_path) */
  cleanup_free char *copy = xstrdup (path);
  char **v = xmalloc0 (sizeof (char *) * (strlen (path) + 2));
  size_t n = 0;
  char *save = NULL;
  for (char *t = strtok_r (copy, ";", &save); t; t = strtok_r (NULL, ";", &save))
    {
      char *slash = strchr (t, '/');
      if (slash)
        v[n++] = xstrdup (slash);
    }
  return v;
}

/* The policy's nftables table in the container's namespace `netns`, right before pasta gives
 * that namespace a way out. The init leaves it to us in the common case (runtime/init.c step
 * 3c: `filtered` in a namespace agentsbx made, no hooks, loopback allowed): until pasta attaches
 * the namespace has only `lo`, every other destination fails with ENETUNREACH at the route
 * lookup, before any netfilter hook, so a command that never resolves a name never pays for the
 * table (~1.5 ms of CPU: libnftables parse, cache, kernel commit with nat and conntrack set-up).
 * Loaded here before EVERY pasta start, whether the init deferred it or not: the text deletes
 * and re-creates the table in one kernel transaction, so an init-loaded table is replaced with
 * no unfiltered moment (its sets are still empty: the stub fills them only once pasta is up),
 * and no disagreement about who loads it can let pasta attach an unfiltered namespace.
 * Never into the monitor's own network namespace (the runtime's). 0 / -1 with *err. */
static int
network_table_load (struct mon *m, int netns, asbx_err_t *err)
{
  struct stat self; /* the monitor stays in the runtime's network namespace */
  if (stat ("/proc/self/ns/net", &self) < 0)
    return asbx_error (err, errno, "network.mode filtered: stat the runtime's network namespace");
  return egress_table_load (m->plan, netns, &self, err);
}

/* A namespace nobody wires: pasta is its way out (nothing allowed: none needed). An allowed
 * CIDR is reachable at once, so pasta starts now. Names (allowedDomains, approvals) are
 * reachable only after the stub has answered (it fills the table's sets before it answers), so
 * pasta starts at the stub's first activity (pasta_lazy_start), before that activity is handled;
 * refused packets alone (the NFLOG watch: the kernel's MLD reports on the route of last resort,
 * a connect to an unlisted address) are not such activity, since pasta would let none of them out:
 * a command that never resolves anything (most of them, and every `sandbox -- true`) never pays
 * pasta's start (~10-20 ms of exec, tap and route setup) nor its kill and reaping at the end.
 * The binary is looked up now, so a host without it still fails at create. */
static int
pasta_setup (struct mon *m, asbx_err_t *err)
{
  char nspath[64];
  snprintf (nspath, sizeof nspath, "/proc/%d/ns/net", (int) m->o->init_pid);
  cleanup_close int ns = open (nspath, O_RDONLY | O_CLOEXEC);
  if (ns < 0)
    return asbx_error (err, errno, "network: open %s", nspath);
  if (m->plan->allowed_cidrs_len == 0)
    {
      if (pasta_available (err) < 0)
        return -1;
      m->pasta_netns = steal_fd (&ns);
      return 0;
    }
  if (network_table_load (m, ns, err) < 0)
    return -1;
  m->pasta = pasta_start (ns, 20000, err);
  return m->pasta < 0 ? -1 : 0;
}

/* The stub has work (a query, an approver, a TCP connection): load the table, then attach
 * pasta, so the addresses the answer opens are reachable by the time the container gets it. A
 * failure of either is audited; the container then has no way out (fail closed: no pasta
 * without the table), the stub goes on answering. */
static void
pasta_lazy_start (struct mon *m)
{
  asbx_err_t e = NULL;
  if (m->pasta_netns < 0)
    return;
  dnsstub_before_table_reload (m->dns);
  m->pasta = network_table_load (m, m->pasta_netns, &e) < 0 ? -1 : pasta_start (m->pasta_netns, 20000, &e);
  close (m->pasta_netns);
  m->pasta_netns = -1;
  if (m->pasta < 0)
    {
      struct audit_rec *r = audit_rec_new (m->o->id, "network");
      audit_rec_str (r, "warning", e ? e->msg : "pasta failed");
      mon_audit_put (m, r);
      asbx_error_free (&e);
      m->pasta = 0;
    }
}

/* audit_sink_opts.on_full: the audit log's file system is full. audit.onFull kill (the default):
 * no agent runs unaudited - the container is killed (the limit and exited records go to the
 * reserved space); continue: records are dropped and counted, the container goes on. */
static void
mon_audit_full (void *data)
{
  struct mon *m = data;
  if (m->plan->audit_on_full_continue)
    return;
  mon_limit_kill (m, "audit-full", "audit.onFull", 0, 0);
}

static int
mon_setup (struct mon *m, asbx_err_t *err)
{
  const struct policy_plan *pl = m->plan;
  uint64_t oom = 0;
  asbx_err_t e = NULL;

  struct audit_sink_opts so = { .container = m->o->id,
                                .bytes_max = AUDIT_QUOTA_BYTES,
                                .rate = AUDIT_RATE_PER_SEC,
                                .burst = AUDIT_BURST,
                                .on_full = mon_audit_full,
                                .data = m };
  audit_sink_setup (m->audit_fd, &so);
  if (m->o->cgroup_path)
    m->cg_paths = cgroup_path_forms (m->o->cgroup_path);
  /* the supervisor of connect(2) (monitor/unixsock.h); the notify fd arrives at `start` */
  if (m->o->unixsock_fd >= 0 && unixsock_supervised (pl))
    m->usock = unixsock_sup_new (pl, m->o->unixsock_fd, m->o->new_netns, m->dirfd);
  if (m->o->cgroup_path && cgroup_oom_count (m->o->cgroup_path, &oom, &e) == 0)
    m->oom_at_start = oom;
  asbx_error_free (&e);
  if (m->o->cgroup_path && denials_pids_max_count (m->o->cgroup_path, &oom) == 0)
    m->pids_max_at_start = m->pids_seen = oom;
  mon_procs_resync (m);
  if (pl->enable_kernel_audit && linux_audit_enabled (&e) == 0 && linux_audit_enable (&e) < 0)
    m->kaudit_error = xstrdup (e->msg); /* reported in the policy record: never silent */
  asbx_error_free (&e);
  if (pl->audit_events & POLICY_AUDIT_DENIAL)
    m->den = denials_new (m->o->id, m->audit_fd, mon_den_member, m);
  if (pl->wall_clock_seconds)
    {
      m->wall_tfd = timerfd_create (CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
      if (m->wall_tfd < 0)
        return asbx_error (err, errno, "limits.wallClockSeconds: timerfd_create");
      mon_timer_arm_ns (m->wall_tfd, pl->wall_clock_seconds * 1000000000ull);
    }
  if (pl->cpu_seconds)
    {
      if (mon_cpu_open (m, err) < 0)
        return -1;
      m->cpu_tfd = timerfd_create (CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
      if (m->cpu_tfd < 0)
        return asbx_error (err, errno, "limits.cpuSeconds: timerfd_create");
      mon_timer_arm_ns (m->cpu_tfd, 50000000ull);
    }
  if ((pl->credentials_len || pl->http_hosts_len) && pl->net_mode != POLICY_NET_FILTERED)
    return asbx_error (err, 0, "network.credentials/network.http: need network.mode filtered (the egress relay)");
  /* net_outside: a vm-tier guest, whose host runs the stub and relay (runtime/vm_net.h) */
  if (pl->net_mode == POLICY_NET_FILTERED && !m->o->egress_shared && !pl->net_outside)
    {
      const struct tls_relay_keys keys = { .ca_cert_pem = m->o->egress_ca_cert_pem,
                                           .ca_key_pem = m->o->egress_ca_key_pem,
                                           .secrets_envfd = m->o->secrets_env_fd };
      m->dns = dnsstub_new (m->o->id, m->o->init_pid, pl, m->audit_fd, m->dirfd, &keys, err);
      if (!m->dns)
        return -1;
      dnsstub_set_members (m->dns, mon_members, m);
      if (m->o->new_netns
          && (pl->allowed_domains_len || pl->allowed_cidrs_len || pl->approvals_network == POLICY_APPROVAL_ASK)
          && pasta_setup (m, err) < 0)
        return asbx_error_wrap (err, "network.mode filtered");
    }
  if (guard_start (m, err) < 0)
    return -1;
  return mon_limits_start (m, err);
}

/* the paths of the "ORIGIN\tPATH\n" lines, as `missingWrites` */
static void
audit_missing_grants (struct audit_rec *r, const char *lines)
{
  cleanup_free char *dup = xstrdup (lines);
  char *paths[64], *save = NULL;
  size_t n = 0;
  for (char *l = strtok_r (dup, "\n", &save); l && n < ASBX_ARRAY_SIZE (paths); l = strtok_r (NULL, "\n", &save))
    {
      char *tab = strchr (l, '\t');
      if (tab)
        paths[n++] = tab + 1;
    }
  audit_rec_strv (r, "missingWrites", paths, n);
}

static void
audit_created (struct mon *m)
{
  const struct policy_plan *pl = m->plan;
  struct audit_rec *r = audit_rec_new (m->o->id, "lifecycle");
  audit_rec_str (r, "state", "created");
  audit_rec_int (r, "pid", m->o->init_pid);
  audit_rec_int (r, "monitor", getpid ());
  mon_audit_put (m, r);
  r = audit_rec_new (m->o->id, "policy");
  audit_rec_str (r, "digest", pl->digest);
  audit_rec_strv (r, "sources", pl->sources, pl->sources_len);
  audit_rec_strv (r, "clamps", pl->clamps, pl->clamps_len);
  /* what was degraded on this host, not what the policy would accept (issue 14 §5) */
  audit_rec_strv (r, "degradations", m->o->degradations, m->o->degradations_len);
  audit_rec_strv (r, "degradeAccepted", pl->degrade, pl->degrade_len);
  audit_rec_str (r, "kernelDenials", denials_status (m->den));
  if (m->kaudit_error)
    audit_rec_str (r, "kernelAuditError", m->kaudit_error);
  /* what no record will ever show on this host (docs/policy.md §2.7 "What cannot be reported") */
  char *unreported[4];
  size_t nu = 0;
  if (!m->den || strncmp (denials_status (m->den), "landlock", 8) != 0)
    unreported[nu++] = (char *) "fs denials (Landlock): see kernelDenials";
  unreported[nu++] = (char *) "writes refused by read-only mounts (EROFS, /proc/sys)";
  unreported[nu++] = (char *) "reads of paths masked by a bind mount";
  unreported[nu++] = (char *) "failed execve inside a process";
  audit_rec_strv (r, "unreported", unreported, nu);
  if (m->o->missing_grants)
    audit_missing_grants (r, m->o->missing_grants);
  if (m->o->egress_shared)
    {
      /* whose egress this container uses (runtime/egress_share.h): its DNS, connection and
       * approval records are in that container's log */
      audit_rec_str (r, "egressOwner", m->o->egress_owner_id);
      audit_rec_int (r, "egressOwnerMonitor", m->o->egress_owner_monitor);
    }
  mon_audit_put (m, r);
}

/* Keep exactly the fds in keep[] (all >= 3) and /dev/null on 0-2; close everything else, so
 * no fd of the engine (stdio pipes, sockets) stays open in the long-lived monitor. */
static int
close_all_but (int *keep, size_t n)
{
  int null = open ("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0 || dup2 (null, 0) < 0 || dup2 (null, 1) < 0 || dup2 (null, 2) < 0)
    return -1;
  if (null > 2)
    close (null);
  /* sort the fds to keep, then close the gaps between them */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--)
      {
        int t = keep[j];
        keep[j] = keep[j - 1];
        keep[j - 1] = t;
      }
  unsigned lo = 3;
  for (size_t i = 0; i < n; i++)
    {
      if (keep[i] < 0)
        continue;
      if ((unsigned) keep[i] > lo)
        syscall (SYS_close_range, lo, (unsigned) keep[i] - 1, 0);
      lo = (unsigned) keep[i] + 1;
    }
  return (int) syscall (SYS_close_range, lo, ~0u, 0);
}

/* M's body: detach, set up, report readiness on `ready`, loop. Never returns. */
static void __attribute__ ((noreturn)) mon_main (struct mon *m, int ready)
{
  struct ready_msg msg = { .ok = 0, .pid = getpid () };
  asbx_err_t err = NULL;
  sigset_t all;

  setsid ();
  prctl (PR_SET_NAME, "asbx-monitor", 0, 0, 0);
  /* The monitor holds the egress CA's private key and, while a request is relayed, the value of
   * a credential (whose copies may outlive the request in freed memory of the TLS library).
   * None of that may reach a file: no core dump (prctl(2) PR_SET_DUMPABLE 0 also makes its
   * /proc/PID entries root's and refuses ptrace by the caller's uid; RLIMIT_CORE 0 for the
   * pipe-to-program case, which ignores dumpability for the limit) and a working directory of
   * "/" (a relative core_pattern would otherwise write into the caller's directory, which for
   * `sandbox` is the workspace). Seen by an outside tester: a crash left `core` with a
   * bearer token in the workspace. */
  prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (setrlimit (RLIMIT_CORE, &(struct rlimit){ 0, 0 }) < 0 || chdir ("/") < 0)
    _exit (1);
  pthread_mutex_init (&m->lock, NULL);
  sigemptyset (&all);
  sigprocmask (SIG_SETMASK, &all, NULL);
  signal (SIGPIPE, SIG_IGN);
  for (int s = SIGHUP; s <= SIGTERM; s++)
    if (s != SIGKILL && s != SIGPIPE && s != SIGSEGV)
      signal (s, SIG_DFL);
  int keep[] = { m->audit_fd,
                 m->init_pidfd,
                 m->dirfd,
                 m->conn,
                 ready,
                 m->o->unixsock_fd,
                 m->o->secrets_env_fd,
                 m->o->egress_shared ? m->o->egress_owner_pidfd : -1 };
  if (close_all_but (keep, ASBX_ARRAY_SIZE (keep)) < 0)
    asbx_error (&err, errno, "monitor: close inherited fds");
  else if (mon_setup (m, &err) == 0)
    msg.ok = 1;
  if (!msg.ok)
    {
      snprintf (msg.msg, sizeof msg.msg, "%s", err ? err->msg : "monitor setup failed");
      if (write (ready, &msg, sizeof msg) < 0)
        _exit (1);
      _exit (1);
    }
  audit_created (m);
  if (write (ready, &msg, sizeof msg) != (ssize_t) sizeof msg)
    {
      /* the CLI is gone before create finished: it undoes the container; do not supervise */
      kill (m->guard_pid, SIGKILL);
      _exit (1);
    }
  close (ready);
  monitor_loop (m);
}

/* ---- the CLI side ---- */

static int
read_ready (int fd, struct ready_msg *msg)
{
  size_t got = 0;
  while (got < sizeof *msg)
    {
      ssize_t n = read (fd, (char *) msg + got, sizeof *msg - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return -1;
      got += (size_t) n;
    }
  msg->msg[sizeof msg->msg - 1] = '\0';
  return 0;
}

/* Open, in the CLI, everything M needs, so errors are reported before anything is forked. */
static int
mon_open_fds (struct mon *m, asbx_err_t *err)
{
  const struct policy_plan *pl = m->plan;
  bool need_events = pl->failed_execs || (pl->audit_events & POLICY_AUDIT_EXEC);
  asbx_err_t e = NULL;

  m->audit_fd = audit_open (m->o->audit_dir ? m->o->audit_dir : pl->audit_dir, m->o->id, err);
  if (m->audit_fd < 0)
    return -1;
  m->init_pidfd = (int) syscall (SYS_pidfd_open, m->o->init_pid, 0);
  if (m->init_pidfd < 0)
    return asbx_error (err, errno, "monitor: pidfd_open of the init (pid %d)", (int) m->o->init_pid);
  /* a new open file description: the CLI's dir fd carries the container's flock, which the
   * long-lived monitor must not keep */
  m->dirfd = openat (m->o->state_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (m->dirfd < 0)
    return asbx_error (err, errno, "monitor: open the state directory");
  m->conn = proc_events_open (0, &e);
  if (m->conn < 0)
    {
      if (need_events)
        {
          asbx_error_move (err, &e);
          return asbx_error_wrap (err, "%s: needs the process events connector",
                                  pl->failed_execs ? "limits.failedExecs" : "audit.events exec");
        }
      asbx_error_free (&e); /* only the exit code; the /proc fallback remains */
    }
  return 0;
}

static void
mon_close_fds (struct mon *m)
{
  int *fds[] = { &m->audit_fd, &m->init_pidfd, &m->dirfd, &m->conn };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (fds); i++)
    if (*fds[i] >= 0)
      {
        close (*fds[i]); /* plain close: the connector subscription is M's now */
        *fds[i] = -1;
      }
}

int
monitor_start (const struct monitor_opts *o, pid_t *monitor_pid, asbx_err_t *err)
{
  struct mon m = {
    .o = o,
    .plan = o->plan,
    .audit_fd = -1,
    .init_pidfd = -1,
    .dirfd = -1,
    .conn = -1,
    .wall_tfd = -1,
    .cpu_tfd = -1,
    .cpu_fd = -1,
    .guard_pidfd = -1,
    .guard_wr = -1,
    .pasta_netns = -1,
  };
  struct ready_msg msg;
  int ready[2];
  char buf[32];
  int ret = -1;

  if (!o->plan || !o->plan->active)
    return asbx_error (err, EINVAL, "monitor: no active policy plan");
  if (mon_open_fds (&m, err) < 0)
    goto out;
  if (pipe2 (ready, O_CLOEXEC) < 0)
    {
      asbx_error (err, errno, "monitor: pipe");
      goto out;
    }
  pid_t c1 = fork ();
  if (c1 < 0)
    {
      asbx_error (err, errno, "monitor: fork");
      close (ready[0]);
      close (ready[1]);
      goto out;
    }
  if (c1 == 0)
    {
      /* double fork: M is nobody's child of ours, so it never becomes a zombie of the CLI and
       * is reparented to the nearest subreaper (the engine's shim) or init */
      close (ready[0]);
      pid_t c2 = fork ();
      if (c2 == 0)
        mon_main (&m, ready[1]);
      _exit (c2 < 0 ? 1 : 0);
    }
  close (ready[1]);
  while (waitpid (c1, NULL, 0) < 0 && errno == EINTR)
    ;
  int r = read_ready (ready[0], &msg);
  close (ready[0]);
  if (r < 0)
    {
      asbx_error (err, 0, "monitor: exited during setup");
      goto out;
    }
  if (!msg.ok)
    {
      asbx_error (err, 0, "monitor: %s", msg.msg);
      goto out;
    }
  snprintf (buf, sizeof buf, "%d\n", (int) msg.pid);
  if (mon_write_state_file (o->state_dirfd, "monitor.pid", buf) < 0)
    {
      asbx_error (err, errno, "monitor: write monitor.pid");
      kill (msg.pid, SIGKILL); /* its guard then kills the container, which create undoes anyway */
      goto out;
    }
  *monitor_pid = msg.pid;
  ret = 0;
out:
  mon_close_fds (&m);
  return ret;
}

void
monitor_wait_exit (int state_dirfd, int timeout_ms)
{
  pid_t mpid = monitor_pid_read (state_dirfd);
  if (mpid <= 0)
    return;
  int pfd = (int) syscall (SYS_pidfd_open, mpid, 0);
  if (pfd < 0)
    return; /* already gone */
  struct pollfd p = { .fd = pfd, .events = POLLIN };
  while (poll (&p, 1, timeout_ms) < 0 && errno == EINTR)
    ;
  close (pfd);
}
