/* test_splice_pipe.c - linux/splice_pipe.h over real TCP loopback connections (what the egress
 * relay splices): every byte written at one end arrives, in order, at the other through the pipe;
 * an empty source or a full pipe is 0 (EAGAIN), the source's end is -1 with eof set, a gone sink
 * is -1; `done` counts what reached the sink. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "linux/splice_pipe.h"

/* a connected TCP pair on 127.0.0.1: fds[0] the connecting end, fds[1] the accepted one (non-blocking) */
static void
tcp_pair (int fds[2])
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t al = sizeof a;
  int l = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true (l >= 0);
  assert_int_equal (bind (l, (struct sockaddr *) &a, sizeof a), 0);
  assert_int_equal (listen (l, 1), 0);
  assert_int_equal (getsockname (l, (struct sockaddr *) &a, &al), 0);
  fds[0] = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal (connect (fds[0], (struct sockaddr *) &a, sizeof a), 0);
  fds[1] = accept4 (l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  assert_true (fds[1] >= 0);
  close (l);
}

static void
test_relay_in_order (void **state)
{
  (void) state;
  int src[2], dst[2];
  tcp_pair (src); /* written at src[0], spliced from src[1] */
  tcp_pair (dst); /* spliced into dst[1], read at dst[0] */
  struct splice_pipe p;
  splice_pipe_init (&p);
  assert_int_equal (splice_pipe_open (&p, 256u << 10), 0);
  assert_true (p.cap >= 4096);
  bool eof = false;
  assert_int_equal (splice_pipe_fill (&p, src[1], &eof), 0); /* nothing sent yet: EAGAIN */
  assert_false (eof);
  assert_int_equal (splice_pipe_drain (&p, dst[1]), 0); /* nothing held */

  static unsigned char out[1 << 20], in[1 << 20];
  for (size_t i = 0; i < sizeof out; i++)
    out[i] = (unsigned char) (i * 131 + i / 251);
  size_t sent = 0, got = 0;
  while (got < sizeof out)
    {
      if (sent < sizeof out)
        {
          ssize_t n = send (src[0], out + sent, sizeof out - sent, MSG_DONTWAIT);
          if (n > 0)
            sent += (size_t) n;
        }
      ssize_t f = splice_pipe_fill (&p, src[1], &eof);
      assert_true (f >= 0);
      assert_true (p.held <= p.cap);
      assert_true (splice_pipe_drain (&p, dst[1]) >= 0);
      ssize_t r = recv (dst[0], in + got, sizeof in - got, MSG_DONTWAIT);
      if (r > 0)
        got += (size_t) r;
    }
  assert_memory_equal (in, out, sizeof out);
  assert_int_equal (p.done, sizeof out);
  assert_int_equal (p.held, 0);

  close (src[0]); /* the source's end */
  assert_int_equal (splice_pipe_fill (&p, src[1], &eof), -1);
  assert_true (eof);

  close (dst[0]); /* a gone sink: the first bytes may still be queued, then its RST comes back */
  ssize_t d = 0;
  for (int tries = 0; d >= 0 && tries < 100; tries++)
    {
      /* one byte into the pipe by hand (the source is at its end), then to the sink */
      assert_int_equal (write (p.wr, "y", 1), 1);
      p.held++;
      d = splice_pipe_drain (&p, dst[1]);
      usleep (1000);
    }
  assert_int_equal (d, -1);
  splice_pipe_close (&p);
  assert_int_equal (p.rd, -1);
  assert_int_equal (p.wr, -1);
  close (src[1]);
  close (dst[1]);
}

int
main (void)
{
  signal (SIGPIPE, SIG_IGN); /* as the monitor does (splice_pipe.h) */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_relay_in_order),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
