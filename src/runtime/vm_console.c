/* vm_console.c - the guest's serial console, bounded (vm_console.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "runtime/vm_console.h"

int
vm_console_open (struct vm_console *c, const char *dir, int *qemu_end, asbx_err_t *err)
{
  int sp[2];
  *c = (struct vm_console){ .rd = -1, .log = -1 };
  cleanup_free char *p = xasprintf ("%s/console.log", dir);
  c->log = open (p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (c->log < 0)
    return asbx_error (err, errno, "isolation vm: create %s", p);
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
    {
      int e = errno;
      close (c->log);
      c->log = -1;
      return asbx_error (err, e, "isolation vm: the console's socketpair");
    }
  c->rd = sp[0];
  /* above QEMU's fixed fds (vm_jail.h): the child's dup2s onto 3..7 must not hit it */
  *qemu_end = fcntl (sp[1], F_DUPFD_CLOEXEC, 10);
  close (sp[1]);
  if (*qemu_end < 0)
    {
      int e = errno;
      vm_console_finish (c);
      return asbx_error (err, e, "isolation vm: dup");
    }
  return 0;
}

/* keep the last VM_CONSOLE_TAIL bytes; n is one read's, below VM_CONSOLE_TAIL (reader's buf) */
static void
ring_put (struct vm_console *c, const char *p, size_t n)
{
  if (!c->tail)
    c->tail = xmalloc (VM_CONSOLE_TAIL);
  size_t first = VM_CONSOLE_TAIL - c->tail_pos < n ? VM_CONSOLE_TAIL - c->tail_pos : n;
  memcpy (c->tail + c->tail_pos, p, first);
  memcpy (c->tail, p + first, n - first);
  c->tail_pos = (c->tail_pos + n) % VM_CONSOLE_TAIL;
  c->tail_len = c->tail_len + n > VM_CONSOLE_TAIL ? VM_CONSOLE_TAIL : c->tail_len + n;
}

static void *
reader (void *arg)
{
  struct vm_console *c = arg;
  char buf[16384];
  for (;;)
    {
      ssize_t r = read (c->rd, buf, sizeof buf);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      size_t n = (size_t) r, head = 0;
      if (c->seen < VM_CONSOLE_HEAD)
        head = VM_CONSOLE_HEAD - c->seen < n ? (size_t) (VM_CONSOLE_HEAD - c->seen) : n;
      if (head && write_all (c->log, buf, head) < 0)
        log_debug ("isolation vm: write console.log: %s", strerror (errno));
      if (n > head)
        ring_put (c, buf + head, n - head);
      c->seen += n;
    }
  if (c->tail_len)
    {
      uint64_t dropped = c->seen - VM_CONSOLE_HEAD - c->tail_len;
      cleanup_free char *line = xasprintf ("\n[agentsbx: %" PRIu64 " bytes of the console dropped here]\n", dropped);
      size_t start = c->tail_len < VM_CONSOLE_TAIL ? 0 : c->tail_pos;
      (void) write_all (c->log, line, strlen (line));
      (void) write_all (c->log, c->tail + start, c->tail_len - start);
      if (start)
        (void) write_all (c->log, c->tail, start);
    }
  return NULL;
}

int
vm_console_start (struct vm_console *c, asbx_err_t *err)
{
  sigset_t all, old;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  int r = pthread_create (&c->thread, NULL, reader, c);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (r != 0)
    return asbx_error (err, r, "isolation vm: the console's reader thread");
  c->running = true;
  return 0;
}

void
vm_console_finish (struct vm_console *c)
{
  if (c->running)
    {
      /* QEMU's end is closed once it has exited: EOF comes at once. Should a copy of it have
       * leaked into another process, the reader is woken after 2 s rather than waited for */
      struct timespec t;
      clock_gettime (CLOCK_REALTIME, &t);
      t.tv_sec += 2;
      if (pthread_timedjoin_np (c->thread, NULL, &t) != 0)
        {
          shutdown (c->rd, SHUT_RDWR);
          pthread_join (c->thread, NULL);
        }
      c->running = false;
    }
  if (c->rd >= 0)
    close (c->rd);
  if (c->log >= 0)
    close (c->log);
  c->rd = c->log = -1;
  free (c->tail);
  c->tail = NULL;
}
