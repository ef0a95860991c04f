/* querier.h - who sent this DNS query: the pid and exe of the container process holding the
 * socket with a given local port, for the approval question (monitor/approvals.h; issue 14 §3).
 *
 * Mechanism: NETLINK_SOCK_DIAG (linux/inet_diag.h) opened inside the container's network
 * namespace gives the socket's inode, with an in-kernel filter on the local port (one dump
 * request per family; the kernel walks its socket hash, user space gets only the matches), then
 * the inode is looked for among the fds of the container's member processes (the monitor's set),
 * newest first - never a walk of the host's /proc.
 * Cost bound (the container chooses how many processes and fds it has): one lookup reads at most
 * QUERIER_FDS_PER_LOOKUP fd links and spends at most QUERIER_NS_PER_LOOKUP; all lookups of one
 * container together at most QUERIER_NS_PER_SEC per second. Past a budget the answer is "unknown"
 * (pid 0): the question then carries pid/exe null, it is still asked and decided. */
#ifndef ASBX_MONITOR_QUERIER_H
#define ASBX_MONITOR_QUERIER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/error.h"

#define QUERIER_FDS_PER_LOOKUP 20000
#define QUERIER_NS_PER_LOOKUP 20000000ull /* 20 ms */
#define QUERIER_NS_PER_SEC 100000000ull   /* 100 ms of every second at most */

/* The container's processes: sets *v to an array of n pids (owned by the callee, valid until
 * the caller returns) and returns n. */
typedef size_t (*querier_members_fn) (void *data, const pid_t **v);

struct querier;

/* Open the sock_diag socket inside the network namespace netns_fd (entered and left by this
 * thread with setns). members/data list the processes to search. NULL with *err. */
struct querier *querier_new (int netns_fd, querier_members_fn members, void *data, asbx_err_t *err);

/* Replace the member listing (fn NULL: none, every lookup answers 0). */
void querier_set_members (struct querier *q, querier_members_fn fn, void *data);

/* The holder of the TCP (tcp) or UDP socket whose local address is `from`: its pid (host pid
 * namespace) and exe (readlink of /proc/PID/exe, "" when unreadable) into exe[exelen]. 0 when not
 * found, gone, or over a budget (see above). Never blocks longer than QUERIER_NS_PER_LOOKUP plus
 * one kernel dump batch. */
pid_t querier_find (struct querier *q, bool tcp, const struct sockaddr_storage *from, char *exe, size_t exelen);

void querier_free (struct querier *q);

#endif
