/* vm_exec_host.c - the supervisor's relay of exec sessions (vm_exec.h): callers on exec.sock,
 * each its own session, multiplexed onto the guest's port asbx.exec. S parses and checks every
 * frame a caller sends (only OPEN first, then STDIN and SIGNAL) and rewrites its session id, so
 * a caller can neither speak for another session nor send what only S may (CLOSE). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"
#include "runtime/vm_exec.h"

struct vx_conn
{
  int fd;
  uint32_t sid;
  bool opened; /* its OPEN went to the guest */
  bool ended;  /* the guest's EXIT is queued in `out`: close once it is written */
  struct vm_exec_buf in, out;
};

struct vm_exec_relay
{
  int listen_fd, port_fd;
  struct vm_exec_buf port_in, port_out;
  struct vx_conn *conns[VM_EXEC_MAX_SESSIONS];
  uint32_t next_sid;
};

static void
set_nonblock (int fd)
{
  (void) fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
}

struct vm_exec_relay *
vm_exec_relay_new (int listen_fd, int port_fd)
{
  struct vm_exec_relay *r = xmalloc0 (sizeof *r);
  r->listen_fd = listen_fd;
  r->port_fd = port_fd;
  r->next_sid = 1;
  set_nonblock (listen_fd);
  set_nonblock (port_fd);
  return r;
}

/* the caller is gone (or broke the protocol): the guest kills its process */
static void
conn_drop (struct vm_exec_relay *r, size_t i)
{
  struct vx_conn *c = r->conns[i];
  if (c->opened && !c->ended && r->port_fd >= 0)
    vm_exec_buf_frame (&r->port_out, c->sid, VX_CLOSE, NULL, 0);
  close (c->fd);
  vm_exec_buf_free (&c->in);
  vm_exec_buf_free (&c->out);
  free (c);
  r->conns[i] = NULL;
}

static void
accept_conn (struct vm_exec_relay *r)
{
  int fd = accept4 (r->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return;
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    if (!r->conns[i])
      {
        struct vx_conn *c = xmalloc0 (sizeof *c);
        c->fd = fd;
        c->sid = r->next_sid++;
        r->conns[i] = c;
        return;
      }
  close (fd); /* VM_EXEC_MAX_SESSIONS: the caller sees EOF before STARTED */
}

/* the caller's frames to the guest; false when it broke the protocol */
static bool
conn_frames (struct vm_exec_relay *r, struct vx_conn *c)
{
  struct vm_exec_frame f;
  const char *p;
  int n;
  while ((n = vm_exec_buf_next (&c->in, &f, &p)) == 1)
    {
      bool ok = c->opened ? (f.type == VX_STDIN || f.type == VX_SIGNAL) : f.type == VX_OPEN;
      if (!ok || (f.type == VX_SIGNAL && f.len != sizeof (uint32_t)))
        return false;
      c->opened = true;
      if (!c->ended)
        vm_exec_buf_frame (&r->port_out, c->sid, f.type, p, f.len);
      vm_exec_buf_consume (&c->in, &f);
    }
  return n == 0;
}

static struct vx_conn *
conn_of (struct vm_exec_relay *r, uint32_t sid)
{
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    if (r->conns[i] && r->conns[i]->sid == sid)
      return r->conns[i];
  return NULL;
}

/* the guest's frames to their callers; false when the port broke the protocol */
static bool
port_frames (struct vm_exec_relay *r)
{
  struct vm_exec_frame f;
  const char *p;
  int n;
  while ((n = vm_exec_buf_next (&r->port_in, &f, &p)) == 1)
    {
      struct vx_conn *c = conn_of (r, f.sid);
      bool to_caller = f.type == VX_STARTED || f.type == VX_STDOUT || f.type == VX_STDERR || f.type == VX_EXIT;
      if (c && to_caller && !c->ended)
        {
          vm_exec_buf_frame (&c->out, 0, f.type, p, f.len);
          c->ended = f.type == VX_EXIT;
        }
      vm_exec_buf_consume (&r->port_in, &f);
    }
  return n == 0;
}

static size_t
callers_backlog (const struct vm_exec_relay *r)
{
  size_t most = 0;
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    if (r->conns[i] && r->conns[i]->out.len > most)
      most = r->conns[i]->out.len;
  return most;
}

size_t
vm_exec_relay_pollfds (struct vm_exec_relay *r, struct pollfd *p, size_t max)
{
  size_t n = 0;
  if (!r || max < 2 || r->port_fd < 0)
    return 0; /* port_gone: nothing is left to serve */
  p[n++] = (struct pollfd){ .fd = r->listen_fd, .events = POLLIN };
  p[n++] = (struct pollfd){ .fd = r->port_fd,
                            .events = (short) ((callers_backlog (r) < VM_EXEC_BUF_HIGH ? POLLIN : 0)
                                               | (r->port_out.len ? POLLOUT : 0)) };
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS && n < max; i++)
    {
      struct vx_conn *c = r->conns[i];
      if (c)
        p[n++] = (struct pollfd){ .fd = c->fd,
                                  .events = (short) ((r->port_out.len < VM_EXEC_BUF_HIGH ? POLLIN : 0)
                                                     | (c->out.len ? POLLOUT : 0)) };
    }
  return n;
}

/* The port is closed or broke the protocol: no session can run again, so exec.sock stops
 * listening too (a later `exec` is refused at connect). Kept open, it accepted callers that were
 * never read: poll woke at once for them, forever (outside attack 16: one frame of an unknown
 * type from a guest root, then 100% CPU and every later exec hung). */
static void
port_gone (struct vm_exec_relay *r)
{
  close (r->port_fd);
  r->port_fd = -1;
  if (r->listen_fd >= 0)
    close (r->listen_fd);
  r->listen_fd = -1;
  vm_exec_buf_free (&r->port_out);
  vm_exec_buf_free (&r->port_in);
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    if (r->conns[i])
      conn_drop (r, i); /* EOF before EXIT: the caller reports the VM gone */
}

void
vm_exec_relay_handle (struct vm_exec_relay *r, const struct pollfd *p, size_t n)
{
  if (!r)
    return;
  for (size_t k = 0; k < n; k++)
    {
      if (!p[k].revents || p[k].fd < 0)
        continue;
      if (p[k].fd == r->listen_fd)
        accept_conn (r);
      else if (p[k].fd == r->port_fd)
        {
          if ((p[k].revents & (POLLIN | POLLHUP | POLLERR)) && vm_exec_buf_fill (&r->port_in, r->port_fd) < 0)
            {
              log_debug ("isolation vm: the guest's %s port closed", VM_EXEC_PORT);
              port_gone (r);
            }
          else if (!port_frames (r))
            {
              log_warning ("isolation vm: a malformed frame on %s: exec sessions ended", VM_EXEC_PORT);
              port_gone (r);
            }
        }
      else
        for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
          {
            struct vx_conn *c = r->conns[i];
            if (!c || c->fd != p[k].fd)
              continue;
            if ((p[k].revents & (POLLIN | POLLHUP | POLLERR)) && r->port_fd >= 0
                && (vm_exec_buf_fill (&c->in, c->fd) < 0 || !conn_frames (r, c)))
              conn_drop (r, i);
            break;
          }
    }
  /* write what is queued now rather than at the next wake-up */
  if (r->port_fd >= 0 && r->port_out.len && vm_exec_buf_flush (&r->port_out, r->port_fd) < 0)
    port_gone (r);
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    {
      struct vx_conn *c = r->conns[i];
      if (!c)
        continue;
      /* a caller that stopped reading is dropped, one whose EXIT is written is done */
      bool broken = c->out.len && vm_exec_buf_flush (&c->out, c->fd) < 0;
      if (broken || (c->ended && !c->out.len))
        conn_drop (r, i);
    }
}

void
vm_exec_relay_free (struct vm_exec_relay *r)
{
  if (!r)
    return;
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    if (r->conns[i])
      conn_drop (r, i);
  if (r->listen_fd >= 0)
    close (r->listen_fd);
  if (r->port_fd >= 0)
    close (r->port_fd);
  vm_exec_buf_free (&r->port_in);
  vm_exec_buf_free (&r->port_out);
  free (r);
}
