/* denials.c - the monitor's `denial` records from the kernel audit stream (see denials.h).
 *
 * Mechanism: the monitor joins the audit readlog multicast (a copy of every record on the host)
 * and keeps the records of its container:
 * - AUDIT_SECCOMP carries the pid: a member (the monitor's set, plus the last 256 members that
 *   exited: the record is multicast after the denied syscall, often after the exit event).
 * - AUDIT_LANDLOCK_ACCESS carries only the domain id; the domain's first denial comes with an
 *   AUDIT_LANDLOCK_DOMAIN "status=allocated" record naming the pid that created the domain (our
 *   init, an `exec` process, or a nested domain of the agent). A domain created by a member is
 *   the container's; an access record of a not-yet-known domain waits (32 at most) for it.
 * Threat model: the container chooses how many denials it causes: at most DENIALS_MAX records are
 * written per container, then only counted (the log cannot be used to fill the disk). Paths,
 * exe and comm are container-controlled text; audit.c sanitises them. A record of another
 * container is never written here: membership is by pid/domain of this container only (a reused
 * pid within 256 exits could misattribute a record; it is observability, not enforcement).
 * Ordering: the caller drains the process events first; the policy record names what is reported. */
#include <errno.h>
#include <inttypes.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <stddef.h>
#include <poll.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/audit_netlink.h"
#include "linux/cgroup_internal.h"
#include "linux/landlock_ruleset.h"
#include "monitor/audit.h"
#include "monitor/denials.h"

#define RECENT_N 256
#define DOMAINS_N 64
#define PENDING_N 32

struct denials
{
  char *id;
  int log_fd;
  int nl;
  denials_member_fn member;
  void *data;
  char *status;
  pid_t recent[RECENT_N];
  size_t recent_pos;
  uint64_t domains[DOMAINS_N];
  size_t domains_pos;
  struct
  {
    uint64_t domain;
    char *text;
  } pending[PENDING_N];
  size_t pending_pos;
  uint64_t written, suppressed;
  bool lost;
  char buf[16384];
};

struct denials *
denials_new (const char *id, int log_fd, denials_member_fn member, void *data)
{
  struct denials *d = xmalloc0 (sizeof *d);
  asbx_err_t e = NULL;
  d->id = xstrdup (id);
  d->log_fd = log_fd;
  d->member = member;
  d->data = data;
  d->nl = linux_audit_open (&e);
  if (d->nl < 0)
    {
      d->status = xasprintf ("none: %s", e ? e->msg : "audit netlink unavailable");
      asbx_error_free (&e);
      return d;
    }
  int enabled = linux_audit_enabled (&e);
  asbx_error_free (&e);
  int abi = linux_landlock_abi ();
  if (enabled <= 0)
    d->status = xstrdup ("seccomp; not landlock: kernel audit is disabled (audit_enabled=0; auditctl -e 1 or auditd)");
  else if (abi < 7)
    d->status = xasprintf ("seccomp; not landlock: Landlock ABI %d < 7 has no audit", abi);
  else
    d->status = xstrdup ("landlock,seccomp");
  return d;
}

int
denials_fd (const struct denials *d)
{
  return d ? d->nl : -1;
}

const char *
denials_status (const struct denials *d)
{
  return d ? d->status : "none";
}

void
denials_note_exit (struct denials *d, pid_t pid)
{
  if (!d)
    return;
  d->recent[d->recent_pos++ % RECENT_N] = pid;
}

static bool
is_member (struct denials *d, pid_t pid)
{
  if (pid <= 0)
    return false;
  for (size_t i = 0; i < RECENT_N; i++)
    if (d->recent[i] == pid)
      return true;
  return d->member (pid, d->data);
}

static bool
domain_known (const struct denials *d, uint64_t dom)
{
  for (size_t i = 0; i < DOMAINS_N; i++)
    if (d->domains[i] == dom)
      return true;
  return false;
}

static void
put (struct denials *d, struct audit_rec *r)
{
  asbx_err_t e = NULL;
  if (d->written >= DENIALS_MAX)
    {
      d->suppressed++;
      audit_rec_free (r);
      return;
    }
  d->written++;
  if (audit_rec_write (r, d->log_fd, &e) < 0)
    asbx_error_free (&e); /* observability: a lost record does not stop the monitor */
}

static int64_t
field_int (const char *text, const char *key, int base)
{
  cleanup_free char *v = linux_audit_field (text, key, false);
  return v ? (int64_t) strtoll (v, NULL, base) : -1;
}

/* AUDIT_LANDLOCK_ACCESS of a domain of ours: kind from the first blocker's prefix (fs., net.) */
static void
landlock_write (struct denials *d, const char *text)
{
  cleanup_free char *blockers = linux_audit_field (text, "blockers", false);
  cleanup_free char *path = linux_audit_field (text, "path", true);
  cleanup_free char *name = path ? NULL : linux_audit_field (text, "name", true);
  cleanup_free char *daddr = linux_audit_field (text, "daddr", false);
  cleanup_free char *dport = linux_audit_field (text, "dest", false);
  cleanup_free char *saddr = daddr ? NULL : linux_audit_field (text, "saddr", false);
  cleanup_free char *sport = daddr ? NULL : linux_audit_field (text, "src", false);
  cleanup_free char *kind = xstrdup (blockers ? blockers : "fs");
  char *dot = strchr (kind, '.');
  if (dot)
    *dot = '\0';
  struct audit_rec *r = audit_rec_new (d->id, "denial");
  audit_rec_str (r, "kind", kind);
  if (path || name)
    audit_rec_str (r, "path", path ? path : name);
  if (daddr || saddr || dport || sport)
    {
      cleanup_free char *addr = xasprintf ("%s:%s",
                                           daddr   ? daddr
                                           : saddr ? saddr
                                                   : "?",
                                           dport   ? dport
                                           : sport ? sport
                                                   : "?");
      audit_rec_str (r, "addr", addr);
    }
  audit_rec_str (r, "access", blockers);
  audit_rec_str (r, "source", "landlock");
  put (d, r);
}

static void
on_landlock_domain (struct denials *d, const char *text)
{
  cleanup_free char *status = linux_audit_field (text, "status", false);
  cleanup_free char *dom_s = linux_audit_field (text, "domain", false);
  if (!status || !dom_s || strcmp (status, "allocated") != 0)
    return;
  uint64_t dom = strtoull (dom_s, NULL, 16);
  if (domain_known (d, dom) || !is_member (d, (pid_t) field_int (text, "pid", 10)))
    return;
  d->domains[d->domains_pos++ % DOMAINS_N] = dom;
  for (size_t i = 0; i < PENDING_N; i++)
    if (d->pending[i].text && d->pending[i].domain == dom)
      {
        landlock_write (d, d->pending[i].text);
        free (d->pending[i].text);
        d->pending[i].text = NULL;
      }
}

static void
on_landlock_access (struct denials *d, const char *text)
{
  cleanup_free char *dom_s = linux_audit_field (text, "domain", false);
  if (!dom_s)
    return;
  uint64_t dom = strtoull (dom_s, NULL, 16);
  if (domain_known (d, dom))
    {
      landlock_write (d, text);
      return;
    }
  size_t i = d->pending_pos++ % PENDING_N;
  free (d->pending[i].text);
  d->pending[i].domain = dom;
  d->pending[i].text = xstrdup (text);
}

/* SECCOMP_RET_* action of the record's code= field (seccomp(2)) */
static const char *
seccomp_action (uint32_t code)
{
  switch (code & 0xffff0000u)
    {
    case 0x80000000u: return "kill_process";
    case 0x00000000u: return "kill_thread";
    case 0x00030000u: return "trap";
    case 0x00050000u: return "errno";
    case 0x7fc00000u: return "user_notif";
    case 0x7ff00000u: return "trace";
    default: return NULL; /* log / allow: not a denial */
    }
}

static void
on_seccomp (struct denials *d, const char *text)
{
  pid_t pid = (pid_t) field_int (text, "pid", 10);
  int64_t code = field_int (text, "code", 16);
  const char *action = code >= 0 ? seccomp_action ((uint32_t) code) : NULL;
  if (!action || !is_member (d, pid))
    return;
  int64_t arch = field_int (text, "arch", 16), nr = field_int (text, "syscall", 10);
  char *name = arch >= 0 && nr >= 0 ? seccomp_syscall_resolve_num_arch ((uint32_t) arch, (int) nr) : NULL;
  cleanup_free char *exe = linux_audit_field (text, "exe", true);
  cleanup_free char *num = name ? NULL : xasprintf ("%" PRId64, nr);
  struct audit_rec *r = audit_rec_new (d->id, "denial");
  audit_rec_str (r, "kind", "syscall");
  audit_rec_str (r, "syscall", name ? name : num);
  audit_rec_str (r, "access", action);
  /* the record carries the action only (not its errno): the group table in docs/policy.md has it */
  audit_rec_int (r, "pid", pid);
  audit_rec_str (r, "path", exe);
  audit_rec_str (r, "source", "seccomp");
  put (d, r);
  free (name);
}

void
denials_dispatch (struct denials *d)
{
  struct linux_audit_msg m;
  asbx_err_t e = NULL;
  int r;
  if (!d || d->nl < 0)
    return;
  while ((r = linux_audit_recv (d->nl, d->buf, sizeof d->buf, &m, &e)) > 0)
    {
      if (r == 2)
        {
          d->lost = true;
          continue;
        }
      if (m.type == LINUX_AUDIT_SECCOMP)
        on_seccomp (d, m.text);
      else if (m.type == LINUX_AUDIT_LANDLOCK_ACCESS)
        on_landlock_access (d, m.text);
      else if (m.type == LINUX_AUDIT_LANDLOCK_DOMAIN)
        on_landlock_domain (d, m.text);
    }
  if (r < 0)
    asbx_error_free (&e);
}

/* The kernel's audit backlog: how many records wait in kauditd's queue (audit_status.backlog,
 * skb_queue_len(&audit_queue) in kernel/audit.c), through AUDIT_GET on `fd`, a plain
 * NETLINK_AUDIT socket. -1 when it cannot be asked (no CAP_AUDIT_CONTROL, an old or odd reply):
 * the caller then falls back to waiting for quiet. */
static int64_t
audit_backlog (int fd)
{
  struct
  {
    struct nlmsghdr h;
    struct audit_status s;
  } req = { .h = { .nlmsg_len = NLMSG_LENGTH (0), .nlmsg_type = AUDIT_GET, .nlmsg_flags = NLM_F_REQUEST } };
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  char buf[1024] __attribute__ ((aligned (NLMSG_ALIGNTO)));
  const size_t need = offsetof (struct audit_status, backlog) + sizeof (uint32_t);

  if (sendto (fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *) &sa, sizeof sa) < 0)
    return -1;
  for (int i = 0; i < 4; i++)
    {
      ssize_t n = recv (fd, buf, sizeof buf, 0);
      struct nlmsghdr *h = (struct nlmsghdr *) buf;
      if (n < 0 || !NLMSG_OK (h, (size_t) n))
        return -1;
      if (h->nlmsg_type == NLMSG_ERROR)
        {
          if (((struct nlmsgerr *) NLMSG_DATA (h))->error)
            return -1;
          continue;
        }
      if (h->nlmsg_type == AUDIT_GET && h->nlmsg_len >= NLMSG_LENGTH (need))
        return ((struct audit_status *) NLMSG_DATA (h))->backlog;
    }
  return -1;
}

/* Records the container caused are all queued by the time it has exited: seccomp and Landlock
 * call audit_log_end in the denied syscall itself, which appends to kauditd's queue. kauditd
 * multicasts each record right after taking it off that queue, so an empty queue means they
 * have reached our socket, but for a record kauditd has just dequeued and not yet sent: 1 ms
 * more covers that step. While the queue holds records (this host's, anyone's) we wait for them
 * as before: 10 ms of quiet, 200 ms at most. */
static void
wait_for_late_records (struct denials *d)
{
  struct pollfd p = { .fd = d->nl, .events = POLLIN };
  cleanup_close int ctl = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
  if (ctl >= 0)
    {
      struct timeval tv = { .tv_usec = 200000 };
      (void) setsockopt (ctl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
  for (int i = 0; i < 20; i++)
    {
      denials_dispatch (d);
      int64_t backlog = ctl >= 0 ? audit_backlog (ctl) : -1;
      if (poll (&p, 1, backlog == 0 ? 1 : 10) <= 0)
        break;
    }
  denials_dispatch (d);
}

void
denials_finish (struct denials *d)
{
  if (!d)
    return;
  if (d->nl >= 0)
    wait_for_late_records (d);
  if (d->suppressed || d->lost)
    {
      struct audit_rec *r = audit_rec_new (d->id, "denial");
      audit_rec_int (r, "suppressed", (int64_t) d->suppressed);
      if (d->lost)
        audit_rec_str (r, "warning", "kernel audit records lost (socket buffer overflow)");
      d->written = 0; /* this one summary line always goes out */
      put (d, r);
    }
}

void
denials_free (struct denials *d)
{
  if (!d)
    return;
  if (d->nl >= 0)
    close (d->nl);
  for (size_t i = 0; i < PENDING_N; i++)
    free (d->pending[i].text);
  free (d->status);
  free (d->id);
  free (d);
}

int
denials_pids_max_count (const char *path, uint64_t *count)
{
  struct cgroup_dir cd = CGROUP_DIR_INIT;
  cleanup_free char *s = NULL;
  asbx_err_t e = NULL;
  int r = cgroup_ctl_open (path, "pids", &cd, &e);
  if (r == 0)
    r = cgroup_dir_read (&cd, "pids.events", &s, &e);
  cgroup_dir_clear (&cd);
  asbx_error_free (&e);
  if (r != 0 || !s)
    return -1;
  /* "max N" (v2 also has "max.imposed N" on newer kernels: match the line start exactly) */
  for (const char *p = s; p && *p; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL)
    if (strncmp (p, "max ", 4) == 0)
      {
        *count = strtoull (p + 4, NULL, 10);
        return 0;
      }
  *count = 0;
  return 0;
}
