/* approvals.c - the approval broker (see approvals.h for the protocol and the rules).
 *
 * Mechanism: one epoll set over a listening unix socket, up to CLIENTS_MAX connected approvers
 * and a timerfd armed for the earliest deadline. Decisions are only ever made in
 * approvals_dispatch (a timeout of 0 arms the timer for "now"), so the DNS stub's callback never
 * runs while the stub is in the middle of handling a query.
 * The socket is bound through /proc/self/fd/DIRFD, the state dir fd the monitor holds, so no
 * path of the state root is resolved again after create. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "monitor/approvals.h"
#include "monitor/audit.h"

#define CLIENTS_MAX 16
#define QUESTIONS_MAX 64
#define LINE_MAX_BYTES 4096

struct client
{
  int fd;
  size_t len;
  char buf[LINE_MAX_BYTES];
};

struct question
{
  uint64_t id; /* 0 = free */
  char host[256];
  int port;
  pid_t pid;
  char exe[256];
  uint64_t deadline_ns;
};

struct approvals
{
  const char *id;
  const struct policy_plan *plan;
  int audit_fd, dirfd;
  int ep, lfd, tfd;
  approvals_decided_fn fn;
  void *data;
  uint64_t next_id;
  struct client cl[CLIENTS_MAX];
  struct question q[QUESTIONS_MAX];
};

const char *
approvals_decision_name (enum approval_decision d)
{
  return d == APPROVAL_ALLOW_ONCE ? "allow-once" : d == APPROVAL_ALLOW_ALWAYS ? "allow-always" : "deny";
}

static void
audit_approval (struct approvals *a, const struct question *q, const char *action, const char *decision, const char *by)
{
  asbx_err_t e = NULL;
  struct audit_rec *r;
  if (!(a->plan->audit_events & POLICY_AUDIT_APPROVAL))
    return;
  r = audit_rec_new (a->id, "approval");
  audit_rec_int (r, "qid", (int64_t) q->id);
  audit_rec_str (r, "kind", "network");
  audit_rec_str (r, "host", q->host);
  audit_rec_str (r, "action", action);
  if (q->pid > 0)
    audit_rec_int (r, "pid", q->pid);
  if (q->exe[0])
    audit_rec_str (r, "exe", q->exe);
  if (decision)
    audit_rec_str (r, "decision", decision);
  if (by)
    audit_rec_str (r, "by", by);
  if (audit_rec_write (r, a->audit_fd, &e) < 0)
    asbx_error_free (&e);
}

/* ---- lines out ---- */

#define G_STR(g, s) yajl_gen_string (g, (const unsigned char *) (s), strlen (s))

static void
send_gen (struct client *c, yajl_gen g)
{
  size_t len;
  cleanup_free char *line = json_gen_finish (g, true, &len);
  /* an approver that does not read is dropped rather than blocking the monitor */
  if (c->fd >= 0 && send (c->fd, line, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) len)
    {
      close (c->fd);
      c->fd = -1;
    }
}

static void
send_question (struct client *c, const struct question *q)
{
  yajl_gen g = json_gen_new (0);
  yajl_gen_map_open (g);
  G_STR (g, "id");
  yajl_gen_integer (g, (long long) q->id);
  G_STR (g, "kind");
  G_STR (g, "network");
  G_STR (g, "host");
  G_STR (g, q->host);
  G_STR (g, "port");
  q->port >= 0 ? yajl_gen_integer (g, q->port) : yajl_gen_null (g);
  G_STR (g, "pid");
  q->pid > 0 ? yajl_gen_integer (g, q->pid) : yajl_gen_null (g);
  G_STR (g, "exe");
  q->exe[0] ? G_STR (g, q->exe) : yajl_gen_null (g);
  yajl_gen_map_close (g);
  send_gen (c, g);
}

static void
send_reply (struct client *c, const char *key, long long id, const char *error)
{
  yajl_gen g = json_gen_new (0);
  yajl_gen_map_open (g);
  G_STR (g, key);
  yajl_gen_integer (g, id);
  if (strcmp (key, "id") == 0)
    {
      G_STR (g, "ok");
      yajl_gen_bool (g, error == NULL);
      if (error)
        {
          G_STR (g, "error");
          G_STR (g, error);
        }
    }
  yajl_gen_map_close (g);
  send_gen (c, g);
}

/* ---- timer and decisions ---- */

static void
rearm (struct approvals *a)
{
  uint64_t min = 0;
  struct itimerspec it = { 0 };
  for (size_t i = 0; i < QUESTIONS_MAX; i++)
    if (a->q[i].id && (!min || a->q[i].deadline_ns < min))
      min = a->q[i].deadline_ns;
  if (min)
    {
      it.it_value.tv_sec = (time_t) (min / 1000000000u);
      it.it_value.tv_nsec = (long) (min % 1000000000u);
      if (!it.it_value.tv_sec && !it.it_value.tv_nsec)
        it.it_value.tv_nsec = 1;
    }
  timerfd_settime (a->tfd, TFD_TIMER_ABSTIME, &it, NULL);
}

static void
decide (struct approvals *a, struct question *q, enum approval_decision d, const char *by)
{
  char host[256];
  uint64_t id = q->id;
  audit_approval (a, q, "decided", approvals_decision_name (d), by);
  snprintf (host, sizeof host, "%s", q->host);
  q->id = 0;
  rearm (a);
  a->fn (a->data, id, host, d);
}

static bool
approver_connected (const struct approvals *a)
{
  for (size_t i = 0; i < CLIENTS_MAX; i++)
    if (a->cl[i].fd >= 0)
      return true;
  return false;
}

static void
on_timer (struct approvals *a)
{
  uint64_t ticks, now;
  struct timespec ts;
  if (read (a->tfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
    return;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  now = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
  bool someone = approver_connected (a);
  for (size_t i = 0; i < QUESTIONS_MAX; i++)
    if (a->q[i].id && a->q[i].deadline_ns <= now)
      decide (a, &a->q[i], a->plan->approvals_on_timeout_allow ? APPROVAL_ALLOW_ONCE : APPROVAL_DENY,
              someone ? "timeout" : "timeout-no-approver");
  rearm (a);
}

uint64_t
approvals_ask (struct approvals *a, const char *host, int port, pid_t pid, const char *exe)
{
  struct question *q = NULL;
  struct timespec ts;
  for (size_t i = 0; i < QUESTIONS_MAX; i++)
    if (a->q[i].id && strcmp (a->q[i].host, host) == 0)
      return a->q[i].id; /* already asked: the answer covers this lookup too */
  for (size_t i = 0; i < QUESTIONS_MAX && !q; i++)
    if (!a->q[i].id)
      q = &a->q[i];
  if (!q)
    return 0;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  *q = (struct question){ .id = ++a->next_id, .port = port, .pid = pid };
  snprintf (q->host, sizeof q->host, "%s", host);
  snprintf (q->exe, sizeof q->exe, "%s", exe ? exe : "");
  q->deadline_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec
                   + a->plan->approvals_timeout_seconds * 1000000000u;
  audit_approval (a, q, "asked", NULL, NULL);
  for (size_t i = 0; i < CLIENTS_MAX; i++)
    if (a->cl[i].fd >= 0)
      send_question (&a->cl[i], q);
  rearm (a);
  return q->id;
}

/* ---- lines in ---- */

static void
on_line (struct approvals *a, struct client *c, const char *line)
{
  static const char *const id_path[] = { "id", NULL }, *const dec_path[] = { "decision", NULL },
                           *const list_path[] = { "list", NULL };
  char ebuf[128];
  yajl_val v = yajl_tree_parse (line, ebuf, sizeof ebuf);
  if (!v || !YAJL_IS_OBJECT (v))
    {
      send_reply (c, "id", 0, "not a JSON object");
      goto out;
    }
  if (YAJL_IS_TRUE (yajl_tree_get (v, (const char **) list_path, yajl_t_any)))
    {
      long long n = 0;
      for (size_t i = 0; i < QUESTIONS_MAX; i++)
        if (a->q[i].id)
          {
            send_question (c, &a->q[i]);
            n++;
          }
      send_reply (c, "listed", n, NULL);
      goto out;
    }
  yajl_val id = yajl_tree_get (v, (const char **) id_path, yajl_t_any);
  yajl_val dec = yajl_tree_get (v, (const char **) dec_path, yajl_t_string);
  uint64_t qid = 0;
  if (id && YAJL_IS_INTEGER (id) && YAJL_GET_INTEGER (id) > 0)
    qid = (uint64_t) YAJL_GET_INTEGER (id);
  else if (id && YAJL_IS_STRING (id))
    parse_u64 (YAJL_GET_STRING (id), &qid);
  const char *ds = dec ? YAJL_GET_STRING (dec) : NULL;
  enum approval_decision d;
  if (ds && strcmp (ds, "allow-once") == 0)
    d = APPROVAL_ALLOW_ONCE;
  else if (ds && strcmp (ds, "allow-always") == 0)
    d = APPROVAL_ALLOW_ALWAYS;
  else if (ds && strcmp (ds, "deny") == 0)
    d = APPROVAL_DENY;
  else
    {
      send_reply (c, "id", (long long) qid, "decision must be allow-once, allow-always or deny");
      goto out;
    }
  for (size_t i = 0; i < QUESTIONS_MAX; i++)
    if (qid && a->q[i].id == qid)
      {
        send_reply (c, "id", (long long) qid, NULL);
        decide (a, &a->q[i], d, "approver");
        goto out;
      }
  send_reply (c, "id", (long long) qid, "no such pending question");
out:
  yajl_tree_free (v);
}

static void
on_client (struct approvals *a, struct client *c)
{
  ssize_t n = recv (c->fd, c->buf + c->len, sizeof c->buf - c->len, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
    {
      close (c->fd);
      c->fd = -1;
      return;
    }
  if (n < 0)
    return;
  c->len += (size_t) n;
  char *nl;
  while (c->fd >= 0 && (nl = memchr (c->buf, '\n', c->len)) != NULL)
    {
      *nl = '\0';
      on_line (a, c, c->buf);
      size_t used = (size_t) (nl + 1 - c->buf);
      memmove (c->buf, nl + 1, c->len - used);
      c->len -= used;
    }
  if (c->fd >= 0 && c->len == sizeof c->buf)
    {
      close (c->fd); /* a line longer than any answer: not an approver */
      c->fd = -1;
    }
}

static void
on_accept (struct approvals *a)
{
  int fd = accept4 (a->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return;
  for (size_t i = 0; i < CLIENTS_MAX; i++)
    if (a->cl[i].fd < 0)
      {
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = i + 2 };
        a->cl[i].fd = fd;
        a->cl[i].len = 0;
        if (epoll_ctl (a->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
          break;
        for (size_t k = 0; k < QUESTIONS_MAX; k++)
          if (a->q[k].id)
            send_question (&a->cl[i], &a->q[k]);
        return;
      }
  close (fd); /* full, or epoll failed: the approver sees EOF */
}

void
approvals_dispatch (struct approvals *a)
{
  struct epoll_event ev[8];
  int n = epoll_wait (a->ep, ev, 8, 0);
  for (int i = 0; i < n; i++)
    {
      uint64_t k = ev[i].data.u64;
      if (k == 0)
        on_accept (a);
      else if (k == 1)
        on_timer (a);
      else if (a->cl[k - 2].fd >= 0)
        on_client (a, &a->cl[k - 2]); /* a closed fd left the epoll set by itself */
    }
}

int
approvals_fd (const struct approvals *a)
{
  return a->ep;
}

struct approvals *
approvals_new (const char *id, int state_dirfd, const struct policy_plan *plan, int audit_fd, approvals_decided_fn fn,
               void *data, asbx_err_t *err)
{
  struct approvals *a = xmalloc0 (sizeof *a);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct epoll_event ev = { .events = EPOLLIN };

  *a = (struct approvals){ .id = id,
                           .plan = plan,
                           .audit_fd = audit_fd,
                           .dirfd = state_dirfd,
                           .ep = -1,
                           .lfd = -1,
                           .tfd = -1,
                           .fn = fn,
                           .data = data };
  for (size_t i = 0; i < CLIENTS_MAX; i++)
    a->cl[i].fd = -1;
  snprintf (sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/approvals.sock", state_dirfd);
  unlinkat (state_dirfd, "approvals.sock", 0);
  a->lfd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (a->lfd < 0 || bind (a->lfd, (struct sockaddr *) &sa, sizeof sa) < 0
      || fchmodat (state_dirfd, "approvals.sock", 0600, 0) < 0 || listen (a->lfd, CLIENTS_MAX) < 0)
    {
      asbx_error (err, errno, "approvals: bind approvals.sock in the state directory");
      goto fail;
    }
  a->tfd = timerfd_create (CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  a->ep = epoll_create1 (EPOLL_CLOEXEC);
  if (a->tfd < 0 || a->ep < 0)
    {
      asbx_error (err, errno, "approvals: timerfd/epoll");
      goto fail;
    }
  ev.data.u64 = 0;
  if (epoll_ctl (a->ep, EPOLL_CTL_ADD, a->lfd, &ev) < 0)
    {
      asbx_error (err, errno, "approvals: epoll_ctl");
      goto fail;
    }
  ev.data.u64 = 1;
  if (epoll_ctl (a->ep, EPOLL_CTL_ADD, a->tfd, &ev) < 0)
    {
      asbx_error (err, errno, "approvals: epoll_ctl");
      goto fail;
    }
  return a;
fail:
  approvals_free (a);
  return NULL;
}

void
approvals_free (struct approvals *a)
{
  if (!a)
    return;
  for (size_t i = 0; i < CLIENTS_MAX; i++)
    if (a->cl[i].fd >= 0)
      close (a->cl[i].fd);
  if (a->lfd >= 0)
    {
      close (a->lfd);
      unlinkat (a->dirfd, "approvals.sock", 0);
    }
  if (a->tfd >= 0)
    close (a->tfd);
  if (a->ep >= 0)
    close (a->ep);
  free (a);
}
