/* proc_events.c - netlink process events connector (CN_IDX_PROC).
 *
 * Mechanism: drivers/connector/cn_proc.c multicasts one netlink datagram per event:
 *   struct nlmsghdr | struct cn_msg (id CN_IDX_PROC/CN_VAL_PROC) | struct proc_event
 * A listener subscribes by binding to multicast group CN_IDX_PROC and sending
 * PROC_CN_MCAST_LISTEN; the kernel only builds events while at least one listener is counted.
 * Threat model: the datagrams come from the kernel (nl_pid 0); anything else on the socket (a
 * forged unicast from a local process) is dropped by checking the sender address. Events are
 * host-wide: filtering to one container is the caller's job.
 * Ordering: an exit event is sent from do_exit() before the task is reaped and before its pidfd
 * becomes readable, so after a pidfd POLLIN the matching exit event is already queued. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/filter.h>
#include <linux/netlink.h>

#include "core/cleanup.h"
#include "linux/proc_events.h"

static int
send_mcast_op (int fd, enum proc_cn_mcast_op op)
{
  struct
  {
    struct nlmsghdr nl;
    struct cn_msg cn;
    enum proc_cn_mcast_op op;
  } __attribute__ ((packed)) msg;
  struct sockaddr_nl to = { .nl_family = AF_NETLINK, .nl_pid = 0 };

  memset (&msg, 0, sizeof msg);
  msg.nl.nlmsg_len = sizeof msg;
  msg.nl.nlmsg_type = NLMSG_DONE;
  msg.nl.nlmsg_pid = 0;
  msg.cn.id.idx = CN_IDX_PROC;
  msg.cn.id.val = CN_VAL_PROC;
  msg.cn.len = sizeof (enum proc_cn_mcast_op);
  msg.op = op;
  if (sendto (fd, &msg, sizeof msg, 0, (struct sockaddr *) &to, sizeof to) < 0)
    return -1;
  return 0;
}

/* Linux 6.6's listen message (struct proc_input there; the build's headers may be older): the
 * operation and a mask of the event kinds this socket receives (cn_proc.c cn_filter) */
struct listen_mask
{
  struct nlmsghdr nl;
  struct cn_msg cn;
  uint32_t mcast_op;
  uint32_t event_type;
} __attribute__ ((packed));

static int
send_listen_mask (int fd)
{
  struct listen_mask msg;
  struct sockaddr_nl to = { .nl_family = AF_NETLINK, .nl_pid = 0 };
  memset (&msg, 0, sizeof msg);
  msg.nl.nlmsg_len = sizeof msg;
  msg.nl.nlmsg_type = NLMSG_DONE;
  msg.cn.id.idx = CN_IDX_PROC;
  msg.cn.id.val = CN_VAL_PROC;
  msg.cn.len = 2 * sizeof (uint32_t);
  msg.mcast_op = PROC_CN_MCAST_LISTEN;
  msg.event_type = PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_EXIT;
  return sendto (fd, &msg, sizeof msg, 0, (struct sockaddr *) &to, sizeof to) < 0 ? -1 : 0;
}

/* The socket filter: a fork event whose child is a thread (child_pid != child_tgid) is dropped,
 * every other datagram kept. Classic BPF loads words in network byte order: the constant is the
 * host-order value read that way, and the two pids are compared read the same way. */
#define PE_OFF (NLMSG_HDRLEN + sizeof (struct cn_msg))
#define FORK_OFF (PE_OFF + offsetof (struct proc_event, event_data.fork))
static int
attach_thread_fork_filter (int fd)
{
  struct sock_filter code[] = {
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, PE_OFF + offsetof (struct proc_event, what)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, htonl (PROC_EVENT_FORK), 0, 5),
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, FORK_OFF + offsetof (struct fork_proc_event, child_tgid)),
    BPF_STMT (BPF_ST, 0),
    BPF_STMT (BPF_LDX | BPF_W | BPF_MEM, 0),
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, FORK_OFF + offsetof (struct fork_proc_event, child_pid)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_X, 0, 0, 1),
    BPF_STMT (BPF_RET | BPF_K, 0xffffffffu), /* kept whole */
    BPF_STMT (BPF_RET | BPF_K, 0),           /* a thread's fork: dropped */
  };
  struct sock_fprog prog = { .len = sizeof code / sizeof code[0], .filter = code };
  return setsockopt (fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
}

int
proc_events_open (size_t rcvbuf, asbx_err_t *err)
{
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC, .nl_pid = 0 };
  cleanup_close int fd = socket (AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR);
  int size = (int) (rcvbuf ? rcvbuf : 4u << 20);

  if (fd < 0)
    return asbx_error (err, errno, "process events connector: socket(NETLINK_CONNECTOR)");
  /* a burst of forks on a busy host must not overflow the queue before we drain it; FORCE
   * (CAP_NET_ADMIN, which listening needs anyway) ignores net.core.rmem_max */
  if (setsockopt (fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
    (void) setsockopt (fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  /* before the group is joined: no thread fork is ever queued */
  if (attach_thread_fork_filter (fd) < 0)
    return asbx_error (err, errno, "process events connector: SO_ATTACH_FILTER");
  if (bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
    return asbx_error (err, errno, "process events connector: join group CN_IDX_PROC");
  /* the plain listen first (every kernel: counted as a listener, every kind), then the masked
   * one, which a 6.6+ kernel applies to this socket (not counted twice) and an older one ignores
   * (it takes only the plain form): events flow either way */
  if (send_mcast_op (fd, PROC_CN_MCAST_LISTEN) < 0)
    return asbx_error (err, errno, "process events connector: PROC_CN_MCAST_LISTEN");
  if (send_listen_mask (fd) < 0)
    return asbx_error (err, errno, "process events connector: PROC_CN_MCAST_LISTEN (event kinds)");
  return steal_fd (&fd);
}

static bool
parse_event (const struct proc_event *pe, struct proc_ev *ev)
{
  memset (ev, 0, sizeof *ev);
  ev->ts_ns = pe->timestamp_ns;
  switch (pe->what)
    {
    case PROC_EVENT_FORK:
      ev->type = PROC_EV_FORK;
      ev->pid = pe->event_data.fork.child_pid;
      ev->tgid = pe->event_data.fork.child_tgid;
      ev->parent_tgid = pe->event_data.fork.parent_tgid;
      return true;
    case PROC_EVENT_EXEC:
      ev->type = PROC_EV_EXEC;
      ev->pid = pe->event_data.exec.process_pid;
      ev->tgid = pe->event_data.exec.process_tgid;
      return true;
    case PROC_EVENT_EXIT:
      ev->type = PROC_EV_EXIT;
      ev->pid = pe->event_data.exit.process_pid;
      ev->tgid = pe->event_data.exit.process_tgid;
      ev->parent_tgid = pe->event_data.exit.parent_tgid;
      ev->exit_code = (int) pe->event_data.exit.exit_code;
      return true;
    default: return false;
    }
}

size_t
proc_events_parse (const void *buf, size_t len, proc_ev_cb cb, void *data)
{
  size_t delivered = 0;
  int rem = (int) len;

  for (const struct nlmsghdr *nh = buf; NLMSG_OK (nh, rem); nh = NLMSG_NEXT (nh, rem))
    {
      if (nh->nlmsg_type == NLMSG_NOOP || nh->nlmsg_type == NLMSG_ERROR)
        continue;
      if (nh->nlmsg_len < NLMSG_LENGTH (sizeof (struct cn_msg)))
        continue;
      const struct cn_msg *cn = NLMSG_DATA (nh);
      if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC)
        continue;
      /* the exit member is the largest one we read; shorter (older ABI) events are skipped */
      size_t need = offsetof (struct proc_event, event_data) + sizeof (struct exit_proc_event);
      if (cn->len < need || nh->nlmsg_len < NLMSG_LENGTH (sizeof (struct cn_msg) + need))
        continue;
      struct proc_event pe;
      memcpy (&pe, cn->data, sizeof pe < cn->len ? sizeof pe : cn->len);
      struct proc_ev ev;
      if (!parse_event (&pe, &ev))
        continue;
      cb (&ev, data);
      delivered++;
    }
  return delivered;
}

int
proc_events_drain (int fd, proc_ev_cb cb, void *data, asbx_err_t *err)
{
  /* 8-byte aligned: nlmsghdr and proc_event are read in place by NLMSG_* */
  __attribute__ ((aligned (8))) char buf[8192];
  int ret = 0;

  for (;;)
    {
      struct sockaddr_nl from = { 0 };
      socklen_t flen = sizeof from;
      ssize_t n = recvfrom (fd, buf, sizeof buf, 0, (struct sockaddr *) &from, &flen);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN)
            return ret;
          if (errno == ENOBUFS)
            {
              ret = 1; /* lost events; the queue is usable again */
              continue;
            }
          return asbx_error (err, errno, "process events connector: recv");
        }
      if (flen != sizeof from || from.nl_pid != 0)
        continue; /* not from the kernel */
      proc_events_parse (buf, (size_t) n, cb, data);
    }
}

void
proc_events_close (int fd)
{
  if (fd < 0)
    return;
  (void) send_mcast_op (fd, PROC_CN_MCAST_IGNORE);
  close (fd);
}
