/* netns_call.h - run a piece of code inside another network namespace, as root or as the user
 * who owns that namespace's user namespace (issue 17: a non-root caller's filtered network). */
#ifndef ASBX_LINUX_NETNS_CALL_H
#define ASBX_LINUX_NETNS_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* The most fds and output bytes one call hands back. */
#define LINUX_NETNS_FDS_MAX 8
#define LINUX_NETNS_OUT_MAX 8192

/* The code run in the namespace. fds[0..nfds) are -1 on entry; fn stores the fds it made there
 * (sockets, which stay in the namespace they were made in). *out may be set to a heap string
 * (at most LINUX_NETNS_OUT_MAX - 1 bytes are kept). Returns 0, or -1 with *err. fn must not rely
 * on any other change it makes to memory being seen by the caller (it may run in a child). */
typedef int (*linux_netns_fn) (void *arg, int *fds, size_t nfds, char **out, asbx_err_t *err);

/* Run fn(arg, fds, nfds, out, err) with the calling thread in network namespace netns_fd.
 * Root (CAP_SYS_ADMIN in our own user namespace and over our own network namespace's owner):
 * the calling thread enters it with setns(2) and returns to its own namespace afterwards
 * (abort()s if it cannot: never go on in the wrong one; a setns into our own namespace first
 * checks that we could). Otherwise setns(2) refuses (EPERM: it needs CAP_SYS_ADMIN in the caller's user namespace
 * as well as over the target's owner, kernel net/core/net_namespace.c netns_install), and a
 * forked child runs fn instead: it joins the user namespace owning netns_fd first (NS_GET_USERNS;
 * the owner's processes hold every capability there, user_namespaces(7)), then netns_fd, and
 * hands fn's fds (SCM_RIGHTS), its output and its error back over a socketpair; the child then
 * exits and is reaped here. That child is the only process that ever enters those namespaces:
 * the caller stays in its own user and network namespaces (its host-side sockets, pasta's
 * parent). fds: nfds <= LINUX_NETNS_FDS_MAX slots, set to -1 first, owned by the caller on
 * return (also on error: close the ones >= 0). out: NULL or where to put fn's output (heap,
 * caller frees; NULL when none). Returns fn's result, or -1 with *err (errnum EPERM when neither
 * way in is allowed, naming the step). Thread-safe in the fork path; the setns path moves only
 * the calling thread. */
int linux_netns_call (int netns_fd, linux_netns_fn fn, void *arg, int *fds, size_t nfds, char **out, asbx_err_t *err);

/* In a fresh single-threaded child of a non-root caller: join the user namespace owning
 * netns_fd (NS_GET_USERNS; nothing when we are in it already), then netns_fd, for good (there is no way back to the
 * caller's network namespace). 0, or -1 with *err naming the step. */
int linux_netns_enter_owner (int netns_fd, asbx_err_t *err);

/* socket(domain, type, protocol) in netns_fd (see linux_netns_call): the new fd, or -1 with *err. */
int linux_netns_socket (int netns_fd, int domain, int type, int protocol, asbx_err_t *err);

/* A non-blocking, close-on-exec TCP socket of `family` in netns_fd with SO_MARK `mark` (socket(7):
 * the egress's upstream sockets, which the container's nat redirect must skip). The fd, or -1
 * (errno of the failed step). */
int linux_netns_marked_stream (int netns_fd, int family, uint32_t mark);

#endif
