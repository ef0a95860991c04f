/* fdpass.h - passing one file descriptor over a connected unix socket (unix(7) SCM_RIGHTS):
 * the console socket, the pty master of `run`, the unix-socket filter's notify fd, the seccomp
 * listener. One message carries one fd and a payload of at least one byte (a stream socket
 * delivers no ancillary data without one). */
#ifndef ASBX_CORE_FDPASS_H
#define ASBX_CORE_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* Send fd and the len (>= 1) bytes of buf in one sendmsg(MSG_NOSIGNAL) on sock, retrying
 * EINTR. Returns the bytes of buf sent (a short count only on a stream socket) or -1 with
 * errno (EPIPE when the peer is gone, ...). The caller keeps its fd. */
ssize_t fdpass_send (int sock, int fd, const void *buf, size_t len);

/* Receive one message of up to len (>= 1) bytes into buf and the one fd it carries, with
 * MSG_CMSG_CLOEXEC | flags (e.g. MSG_DONTWAIT), retrying EINTR. Returns the fd (the caller
 * owns it) or -1 with errno: recvmsg's (EAGAIN with MSG_DONTWAIT), or EPROTO when the peer
 * closed (EOF) or the message carried no single fd. */
int fdpass_recv (int sock, void *buf, size_t len, int flags);

#endif
