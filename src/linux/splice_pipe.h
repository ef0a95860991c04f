/* splice_pipe.h - a zero-copy byte stream from one socket to another: splice(2) through a pipe
 * (the kernel moves page references; nothing is copied through user space). For the egress
 * relay once a direction's bytes are opaque to it (monitor/splice.c). */
#ifndef ASBX_LINUX_SPLICE_PIPE_H
#define ASBX_LINUX_SPLICE_PIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct splice_pipe
{
  int rd, wr;    /* the pipe's ends, -1 when not open */
  size_t held;   /* bytes in the pipe: read from the source, not yet written to the sink */
  size_t cap;    /* the pipe's capacity (F_GETPIPE_SZ) */
  uint64_t done; /* bytes written to the sink since open: what the relay passed */
};

/* The pipe closed (rd = wr = -1, counts 0): call before splice_pipe_open or _close. */
void splice_pipe_init (struct splice_pipe *p);

/* Open p's pipe (O_NONBLOCK, O_CLOEXEC) and ask for want bytes of capacity (F_SETPIPE_SZ; 0
 * asks nothing; a refusal - fs.pipe-max-size, or the caller's fs.pipe-user-pages-soft spent -
 * keeps the default, 16 pages). Returns 0, or -1 with errno (pipe2: EMFILE, ENFILE). */
int splice_pipe_open (struct splice_pipe *p, size_t want);

/* Move what fd (a non-blocking socket) has into the pipe, up to its free room. Returns the
 * bytes moved (> 0), 0 when nothing is to be had now (EAGAIN: fd empty or the pipe full), or -1
 * at fd's end (*eof set: 0 from splice) or on an error (errno; *eof set too: nothing more comes
 * from fd). */
ssize_t splice_pipe_fill (struct splice_pipe *p, int fd, bool *eof);

/* Move the pipe's bytes to fd (a non-blocking socket). Returns the bytes moved (>= 0; 0: fd's
 * send buffer is full, EAGAIN, or the pipe is empty), or -1 with errno (EPIPE, ECONNRESET: the
 * peer is gone). splice(2) has no MSG_NOSIGNAL: the caller ignores SIGPIPE (the monitor does,
 * monitor.c), else a gone peer kills it. */
ssize_t splice_pipe_drain (struct splice_pipe *p, int fd);

/* Close p's pipe (its bytes are dropped); p is closed as after splice_pipe_init, `done` kept. */
void splice_pipe_close (struct splice_pipe *p);

#endif
