/* unixsock.h - confinement of unix-domain sockets under network.mode none/filtered (issue 13 §4).
 *
 * This kernel (Landlock ABI 7) has no access right for connect(2) to a pathname unix socket
 * (LANDLOCK_ACCESS_FS_RESOLVE_UNIX is ABI 9), and LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET covers
 * abstract names only. So the confinement is a seccomp filter, stacked last on the process:
 *   - socket(2)/socketpair(2) of AF_UNIX with a type other than SOCK_STREAM/SOCK_SEQPACKET
 *     (SOCK_DGRAM, and SOCK_RAW which af_unix turns into SOCK_DGRAM) fail with EACCES: only a
 *     datagram socket can sendto/sendmsg to a pathname address, and the decision is on syscall
 *     registers, so there is no time-of-check/time-of-use gap;
 *   - supervised (the container init and its descendants): every connect(2) is a
 *     SECCOMP_RET_USER_NOTIF handled by the monitor (monitor/unixsock.c), which performs the
 *     connect itself on a copy of the socket;
 *   - unsupervised (an `exec` that finds no channel to the monitor): socket(AF_UNIX)
 *     fails with EACCES altogether (fail closed);
 *   - io_uring_setup(2) fails with EPERM (ring operations bypass seccomp);
 *   - pidfd_getfd(2) fails with EPERM (an unsupervised process could take a socket out of the
 *     supervised tree and connect it);
 *   - any syscall of a non-native ABI (i386, x32) fails with ENOSYS (socketcall(2) hides its
 *     arguments in memory). */
#ifndef ASBX_LINUX_UNIXSOCK_H
#define ASBX_LINUX_UNIXSOCK_H

#include <stdbool.h>

#include "core/error.h"
#include "linux/seccomp_bpf.h"

/* Compile the filter described above into *out (out->notify set when `supervised`; with
 * `exec_notify` too, execve and execveat are notified as well: monitor/execrec.h). `confine`
 * false (network.mode open): only the execve notification, none of the socket rules above.
 * Pure libseccomp work, no kernel state; the caller owns out->insns (linux_seccomp_release).
 * 0 / -1 with *err (the libseccomp errno). */
int linux_unixsock_filter_compile (bool confine, bool supervised, bool exec_notify, struct linux_seccomp *out,
                                   asbx_err_t *err);

/* Load a filter from linux_unixsock_filter_compile on the calling thread and, when supervised,
 * send its notify fd with SCM_RIGHTS over `chan` (a connected socket whose peer is the monitor),
 * then close the notify fd. Must be the last seccomp filter loaded before execve. 0 / -1 with
 * *err (EBUSY: another filter of the process already has a listener, e.g. linux.seccomp's
 * listenerPath - the kernel allows one per process). */
int linux_unixsock_install (const struct linux_seccomp *f, int chan, asbx_err_t *err);

#endif
