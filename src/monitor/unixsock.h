/* unixsock.h - the monitor's half of the unix-socket confinement of network.mode none/filtered
 * (issue 13 §4; the filter is linux/unixsock.h).
 *
 * The filter of the container init and of each `exec`'d process turns every connect(2) into a
 * seccomp user notification; the monitor receives the init's notify fd over a socketpair made
 * at create, an exec's over a connection to UNIXSOCK_EXEC_SOCKET in the state dir. For each
 * notification a worker thread, without ever answering CONTINUE (the kernel would re-read the
 * caller's memory and fd table, which another thread can change after the check):
 *   1. takes a copy of the socket (pidfd_getfd) and one read of the address (process_vm_readv);
 *   2. not AF_UNIX, or an unnamed address: connect(2) on the copy with the copied address;
 *      abstract name: the same when the container has its own network namespace (then the
 *      abstract names are its own), else EPERM;
 *   3. pathname: resolves the path as the caller would (thread-private chroot into
 *      /proc/PID/root, chdir to /proc/PID/cwd) to an O_PATH fd of the socket inode, and allows it
 *      only when that inode is named by network.allowUnixSockets (same st_dev/st_ino), lies under
 *      a writable grant of the policy (allowWrite, tmpfs), or lies on a filesystem no mount of
 *      the monitor's (host) mount namespace shows (a tmpfs of the container's own); then connects
 *      the copy to exactly that inode via /proc/thread-self/fd/N - no second lookup;
 *   4. answers the result (0 or the errno); a refusal is EACCES.
 * With the exec audit event on, execve/execveat arrive on the same fd and go to monitor/execrec.h
 * (copied, then CONTINUE: a log, not a decision).
 * Not covered: the peer of an allowed connection sees the monitor's credentials (SO_PEERCRED:
 * pid of the monitor, uid 0); DAC on the allowed socket is the monitor's (root). */
#ifndef ASBX_MONITOR_UNIXSOCK_H
#define ASBX_MONITOR_UNIXSOCK_H

#include <stdbool.h>

#include "policy/plan.h"

/* true when the plan confines unix sockets (network.mode none or filtered) */
bool unixsock_confined (const struct policy_plan *plan);

/* true when the plan wants every execve to reach the monitor (limits.failedExecs, or the exec
 * audit event: monitor/execrec.h, monitor/execfail.h), under every network.mode */
bool unixsock_exec_notified (const struct policy_plan *plan);

/* true when the container's processes get the supervised filter and the monitor its supervisor:
 * unixsock_confined, or unixsock_exec_notified under network.mode open (the filter then only
 * notifies execve and execveat) */
bool unixsock_supervised (const struct policy_plan *plan);

/* The socket in the container's state dir on which the monitor takes the notify fds of `exec`'d
 * processes (one SOCK_SEQPACKET connection each, one SCM_RIGHTS message). */
#define UNIXSOCK_EXEC_SOCKET "unixsock.sock"

struct unixsock_sup;

/* A supervisor reading the init's notify fd from `chan` (owned from now on), and those of
 * `exec`'d processes from UNIXSOCK_EXEC_SOCKET, created in `state_dirfd` (borrowed). `plan` must
 * outlive it; own_netns: the container has a network namespace of its own. Serves from a thread
 * of its own from now on (see sup_loop); the monitor's loop has nothing to poll. Never fails
 * (allocation aborts; a missing exec socket leaves `exec` with the unsupervised filter; without
 * epoll or the thread the container's connect(2) calls wait - fail closed - and a warning is
 * logged). */
struct unixsock_sup *unixsock_sup_new (const struct policy_plan *plan, int chan, bool own_netns, int state_dirfd);

/* `exec` side: connect to the monitor's UNIXSOCK_EXEC_SOCKET in `state_dirfd`. Returns the
 * connected socket (close-on-exec) or -1 (no such socket: a monitor without one; the caller
 * then uses the unsupervised filter). */
int unixsock_exec_channel (int state_dirfd);

#endif
