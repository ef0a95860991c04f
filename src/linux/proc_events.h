/* proc_events.h - the kernel's process events connector (netlink NETLINK_CONNECTOR, group
 * CN_IDX_PROC): a multicast of fork/exec/exit (and uid/gid/sid/comm/ptrace/coredump) events of
 * EVERY process on the host. Used by the monitor to follow the container's processes (fork tree
 * and cgroup) for exec audit records, the failed-exec budget and the init's exit status.
 *
 * Requirements (drivers/connector/cn_proc.c): CONFIG_PROC_EVENTS, CAP_NET_ADMIN, and the
 * listener must be in the initial user and pid namespaces; pids in events are in the initial pid
 * namespace. Events can be lost when the socket buffer overflows (recv fails with ENOBUFS): the
 * caller must then resynchronise (e.g. re-read cgroup.procs). */
#ifndef ASBX_LINUX_PROC_EVENTS_H
#define ASBX_LINUX_PROC_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

enum proc_ev_type
{
  PROC_EV_FORK = 1,
  PROC_EV_EXEC,
  PROC_EV_EXIT,
};

struct proc_ev
{
  enum proc_ev_type type;
  pid_t pid;         /* thread id (fork: the child's) */
  pid_t tgid;        /* process id (fork: the child's) */
  pid_t parent_tgid; /* fork: the parent process; exit: the parent at exit */
  int exit_code;     /* exit: the wait(2) status word (WIFEXITED/WEXITSTATUS/WTERMSIG apply) */
  uint64_t ts_ns;    /* CLOCK_BOOTTIME-like ns since boot */
};

/* Called once per fork/exec/exit event; other event kinds are skipped. */
typedef void (*proc_ev_cb) (const struct proc_ev *ev, void *data);

/* Open a NETLINK_CONNECTOR socket (non-blocking, close-on-exec), join CN_IDX_PROC, enlarge the
 * receive buffer (SO_RCVBUFFORCE, `rcvbuf` bytes; 0 = 4 MiB) and send PROC_CN_MCAST_LISTEN.
 * From the return on, every fork/exec/exit event is queued, except the fork of a thread (child
 * pid != child tgid: a socket filter drops it in the kernel, issue 20 - a busy host's threads
 * woke the monitor for nothing). Since Linux 6.6 the listen also names the kinds wanted (fork,
 * exec, exit), so the kernel does not even queue the others (uid/gid/sid/comm/ptrace/coredump);
 * an older kernel ignores that message and sends every kind, which proc_events_parse skips. fd / -1 with *err (EPERM:
 * no CAP_NET_ADMIN or not in the initial namespaces; EPROTONOSUPPORT/ENOENT: kernel without CONFIG_PROC_EVENTS). */
int proc_events_open (size_t rcvbuf, asbx_err_t *err);

/* Read every queued datagram without blocking and call cb for each event. Returns 0 when the
 * queue is empty, 1 when the kernel reported an overflow (events were lost since the last call;
 * reading goes on), -1 with *err on another error. */
int proc_events_drain (int fd, proc_ev_cb cb, void *data, asbx_err_t *err);

/* Parse one netlink datagram (one or more nlmsghdr) and call cb per event; malformed or foreign
 * messages are skipped. Pure (no syscalls): the unit tests feed it crafted buffers. Returns the
 * number of events delivered. */
size_t proc_events_parse (const void *buf, size_t len, proc_ev_cb cb, void *data);

/* Send PROC_CN_MCAST_IGNORE (the kernel counts listeners and stops generating events when none
 * is left) and close fd. NULL-safe for fd < 0. */
void proc_events_close (int fd);

#endif
