/* fdpass.c - SCM_RIGHTS send/receive of one fd; see fdpass.h. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "fdpass.h"

union fd_cmsg
{
  char buf[CMSG_SPACE (sizeof (int))];
  struct cmsghdr align;
};

ssize_t
fdpass_send (int sock, int fd, const void *buf, size_t len)
{
  struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
  union fd_cmsg u;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
  struct cmsghdr *c = CMSG_FIRSTHDR (&msg);
  ssize_t w;

  memset (u.buf, 0, sizeof u.buf);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN (sizeof (int));
  memcpy (CMSG_DATA (c), &fd, sizeof (int));
  while ((w = sendmsg (sock, &msg, MSG_NOSIGNAL)) < 0)
    if (errno != EINTR)
      return -1;
  return w;
}

int
fdpass_recv (int sock, void *buf, size_t len, int flags)
{
  struct iovec iov = { .iov_base = buf, .iov_len = len };
  union fd_cmsg u;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
  ssize_t n;
  int fd;

  memset (u.buf, 0, sizeof u.buf);
  while ((n = recvmsg (sock, &msg, MSG_CMSG_CLOEXEC | flags)) < 0)
    if (errno != EINTR)
      return -1;
  struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR (&msg) : NULL;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN (sizeof (int)))
    {
      errno = EPROTO;
      return -1;
    }
  memcpy (&fd, CMSG_DATA (c), sizeof fd);
  return fd;
}
