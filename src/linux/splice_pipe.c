/* splice_pipe.c - socket to pipe to socket with splice(2) (see splice_pipe.h).
 *
 * splice(2) needs a pipe at one end, so a socket-to-socket relay takes two calls per batch: the
 * source socket's queued skbs into the pipe (page references, SPLICE_F_MOVE), then the pipe
 * into the sink socket. SPLICE_F_NONBLOCK makes the pipe side non-blocking; the sockets are
 * O_NONBLOCK themselves, so neither call ever waits. One call moves up to the pipe's capacity:
 * a bigger pipe means fewer calls (and fewer epoll wake-ups) per byte. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "linux/splice_pipe.h"

void
splice_pipe_init (struct splice_pipe *p)
{
  *p = (struct splice_pipe){ .rd = -1, .wr = -1 };
}

int
splice_pipe_open (struct splice_pipe *p, size_t want)
{
  int fds[2];
  if (pipe2 (fds, O_NONBLOCK | O_CLOEXEC) < 0)
    return -1;
  p->rd = fds[0];
  p->wr = fds[1];
  p->held = 0;
  if (want && want <= INT32_MAX)
    (void) fcntl (p->wr, F_SETPIPE_SZ, (int) want); /* EPERM/EBUSY: the default stays */
  int cap = fcntl (p->wr, F_GETPIPE_SZ);
  p->cap = cap > 0 ? (size_t) cap : 65536;
  return 0;
}

ssize_t
splice_pipe_fill (struct splice_pipe *p, int fd, bool *eof)
{
  if (p->held >= p->cap)
    return 0;
  ssize_t n = splice (fd, NULL, p->wr, NULL, p->cap - p->held, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (n > 0)
    {
      p->held += (size_t) n;
      return n;
    }
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  *eof = true;
  return -1;
}

ssize_t
splice_pipe_drain (struct splice_pipe *p, int fd)
{
  if (p->held == 0)
    return 0;
  ssize_t n = splice (p->rd, NULL, fd, NULL, p->held, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (n > 0)
    {
      p->held -= (size_t) n;
      p->done += (uint64_t) n;
      return n;
    }
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  if (n == 0)
    errno = EPIPE;
  return -1;
}

void
splice_pipe_close (struct splice_pipe *p)
{
  if (p->rd >= 0)
    close (p->rd);
  if (p->wr >= 0)
    close (p->wr);
  p->rd = p->wr = -1;
  p->held = 0;
}
