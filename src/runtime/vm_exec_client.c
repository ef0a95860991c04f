/* vm_exec_client.c - the host's `agentsbx exec` into a vm-tier container (vm_exec.h): the
 * options go to the guest's runtime as they were given (it applies them against the same saved
 * config.json and policy), the process's stdio and the caller's signals are relayed over the
 * supervisor's exec.sock. The caller's fds are its own: a stdout that blocks blocks only us. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "runtime/vm_exec.h"

/* the caller's signals the process gets (SIGKILL and SIGSTOP cannot be caught: a killed relay
 * closes its connection and the guest kills the process; vm_exec_host.c CLOSE) */
static const int x_signals[] = { SIGHUP,  SIGINT,  SIGQUIT,  SIGTERM, SIGUSR1, SIGUSR2,
                                 SIGALRM, SIGCONT, SIGWINCH, SIGURG,  SIGPWR };

static void
put (struct vm_exec_buf *b, const char *s)
{
  size_t n = strlen (s) + 1;
  if (b->cap < b->len + n)
    {
      b->cap = (b->len + n) * 2;
      b->data = xrealloc (b->data, b->cap);
    }
  memcpy (b->data + b->len, s, n);
  b->len += n;
}

/* OPEN's payload: OPTIONS... "--" COMMAND... (vm_exec_guest.c reads it) */
static int
open_payload (const struct asbx_exec_opts *o, struct vm_exec_buf *b, asbx_err_t *err)
{
  if (o->tty || o->console_socket)
    return asbx_error (err, EINVAL,
                       "cannot exec in container `%s`: a terminal (-t, --console-socket) is not built in the vm tier "
                       "yet",
                       o->id);
  if (o->preserve_fds > 0 || o->cgroups_len)
    return asbx_error (err, EINVAL, "cannot exec in container `%s`: %s is not built in the vm tier (isolation vm)",
                       o->id, o->preserve_fds > 0 ? "--preserve-fds" : "--cgroup");
  if (o->process_file)
    {
      cleanup_free char *raw = NULL;
      size_t len = 0;
      if (read_file_at (AT_FDCWD, o->process_file, VM_EXEC_MAX_PAYLOAD / 2, &raw, &len, err) < 0)
        return -1;
      struct oci_process *p = oci_process_parse (raw, len, o->process_file, err);
      if (!p)
        return -1;
      bool tty = p->terminal;
      oci_process_free (p);
      if (tty)
        return asbx_error (err, EINVAL,
                           "%s: process.terminal: a terminal is not built in the vm tier (isolation vm) yet",
                           o->process_file);
      if (memchr (raw, '\0', len))
        return asbx_error (err, EINVAL, "%s: a NUL byte in the file", o->process_file);
      put (b, "--process");
      put (b, raw);
    }
  if (o->cwd)
    put (b, "--cwd"), put (b, o->cwd);
  for (size_t i = 0; i < o->env_len; i++)
    put (b, "--env"), put (b, o->env[i]);
  if (o->user)
    put (b, "--user"), put (b, o->user);
  for (size_t i = 0; i < o->add_gids_len; i++)
    put (b, "--additional-gids"), put (b, o->add_gids[i]);
  for (size_t i = 0; i < o->caps_len; i++)
    put (b, "--cap"), put (b, o->caps[i]);
  if (o->no_new_privs)
    put (b, "--no-new-privs");
  if (o->apparmor)
    put (b, "--apparmor"), put (b, o->apparmor);
  if (o->process_label)
    put (b, "--process-label"), put (b, o->process_label);
  put (b, "--");
  for (size_t i = 0; i < o->args_len; i++)
    put (b, o->args[i]);
  if (b->len > VM_EXEC_MAX_PAYLOAD)
    return asbx_error (err, E2BIG, "cannot exec in container `%s`: the command and options exceed %u bytes", o->id,
                       VM_EXEC_MAX_PAYLOAD);
  return 0;
}

struct xc
{
  int conn, sfd;
  int notify;                  /* detached: to the parent, "ok" or the error; -1 once told */
  bool started, in_open;       /* in_open: stdin still read */
  struct vm_exec_buf in, out;  /* frames from / to the supervisor */
  struct vm_exec_buf early;    /* stderr before STARTED: the guest exec's error, if it fails */
  bool out_broken, err_broken; /* our stdout/stderr refused a write: the rest is dropped */
};

static void
relay_write (int fd, bool *broken, const char *p, size_t len)
{
  if (!*broken && write_all (fd, p, len) < 0)
    *broken = true; /* EPIPE (SIGPIPE is ignored by the CLI): nobody reads it any more */
}

/* the guest's error text, without its trailing newline and the "agentsbx: " of its CLI */
static char *
early_text (struct xc *x)
{
  char *t = xmalloc (x->early.len + 1);
  memcpy (t, x->early.data, x->early.len);
  t[x->early.len] = '\0';
  while (*t && t[strlen (t) - 1] == '\n')
    t[strlen (t) - 1] = '\0';
  if (strncmp (t, "agentsbx: ", 10) == 0)
    memmove (t, t + 10, strlen (t + 10) + 1);
  return t;
}

/* One frame from the guest. 1 = the session ended (*status), 0 = go on. */
static int
on_frame (struct xc *x, const struct vm_exec_frame *f, const char *p, const char *pid_file, int *status,
          asbx_err_t *err)
{
  switch (f->type)
    {
    case VX_STARTED:
      x->started = true;
      /* the guest runtime's own stderr before the process ran (a warning): not an error */
      relay_write (2, &x->err_broken, x->early.data, x->early.len);
      x->early.len = 0;
      if (pid_file && x->notify < 0 && write_pid_file (pid_file, getpid (), err) < 0)
        return -1;
      if (x->notify >= 0)
        {
          (void) write_all (x->notify, "", 1);
          close (x->notify);
          x->notify = -1;
        }
      return 0;
    case VX_STDOUT: relay_write (1, &x->out_broken, p, f->len); return 0;
    case VX_STDERR:
      if (!x->started)
        {
          /* kept as the error's text (bounded: the guest's CLI writes one line) */
          size_t n = f->len > 4096 - x->early.len ? 4096 - x->early.len : f->len;
          if (x->early.cap < x->early.len + n)
            {
              x->early.cap = x->early.len + n;
              x->early.data = xrealloc (x->early.data, x->early.cap);
            }
          memcpy (x->early.data + x->early.len, p, n);
          x->early.len += n;
          return 0;
        }
      relay_write (2, &x->err_broken, p, f->len);
      return 0;
    case VX_EXIT:
      {
        int32_t code = 255;
        if (f->len == sizeof code)
          memcpy (&code, p, sizeof code);
        if (!x->started)
          {
            cleanup_free char *t = early_text (x);
            return asbx_error (err, 0, "%s", *t ? t : "isolation vm: exec in the guest failed");
          }
        *status = code < 0 || code > 255 ? 255 : code;
        return 1;
      }
    default: return 0; /* none other comes from the supervisor */
    }
}

/* the session's loop: 0 with *status once EXIT came, -1 with *err */
static int
session (struct xc *x, const char *pid_file, int *status, asbx_err_t *err)
{
  char buf[32768];
  for (;;)
    {
      struct pollfd p[3] = {
        { .fd = x->conn, .events = (short) (POLLIN | (x->out.len ? POLLOUT : 0)) },
        { .fd = x->sfd, .events = POLLIN },
        { .fd = x->in_open && x->started && x->out.len < VM_EXEC_BUF_HIGH ? 0 : -1, .events = POLLIN },
      };
      if (poll (p, 3, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          return asbx_error (err, errno, "isolation vm: exec: poll");
        }
      if (p[2].revents)
        {
          ssize_t r = read (0, buf, sizeof buf);
          if (r < 0 && (errno == EINTR || errno == EAGAIN))
            r = -2;
          if (r >= 0)
            vm_exec_buf_frame (&x->out, 0, VX_STDIN, buf, (size_t) r);
          if (r == 0 || r == -1)
            x->in_open = false; /* EOF (or an unreadable stdin): the process's stdin is closed */
        }
      if (p[1].revents)
        {
          struct signalfd_siginfo si;
          if (read (x->sfd, &si, sizeof si) == (ssize_t) sizeof si)
            {
              uint32_t sig = si.ssi_signo;
              vm_exec_buf_frame (&x->out, 0, VX_SIGNAL, &sig, sizeof sig);
            }
        }
      if (x->out.len && vm_exec_buf_flush (&x->out, x->conn) < 0)
        return asbx_error (err, errno, "isolation vm: exec: the supervisor's connection");
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
        {
          int r = vm_exec_buf_fill (&x->in, x->conn);
          struct vm_exec_frame f;
          const char *pl;
          int n;
          while ((n = vm_exec_buf_next (&x->in, &f, &pl)) == 1)
            {
              int e = on_frame (x, &f, pl, pid_file, status, err);
              vm_exec_buf_consume (&x->in, &f);
              if (e != 0)
                return e < 0 ? -1 : 0;
            }
          if (n < 0)
            return asbx_error (err, EPROTO, "isolation vm: exec: a malformed frame from the supervisor");
          if (r < 0)
            return asbx_error (err, errno,
                               "isolation vm: exec: the VM ended (or its supervisor did) before the process did");
        }
    }
}

static int
connect_exec (int dirfd, const char *id, asbx_err_t *err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  snprintf (addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d/" VM_EXEC_SOCK, dirfd);
  if (fd < 0 || connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    return asbx_error (err, errno,
                       "cannot exec in container `%s`: its VM serves no exec (the VM or its exec channel is gone)", id);
  (void) fcntl (fd, F_SETFL, O_NONBLOCK);
  return steal_fd (&fd);
}

/* the session with the caller's signals forwarded (blocked, read from a signalfd) */
static int
run_session (struct xc *x, const struct vm_exec_buf *open, const char *pid_file, int *status, asbx_err_t *err)
{
  sigset_t set, old;
  sigemptyset (&set);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (x_signals); i++)
    sigaddset (&set, x_signals[i]);
  sigprocmask (SIG_BLOCK, &set, &old);
  x->sfd = signalfd (-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  x->in_open = true;
  vm_exec_buf_frame (&x->out, 0, VX_OPEN, open->data, open->len);
  int r = x->sfd < 0 ? asbx_error (err, errno, "isolation vm: exec: signalfd") : session (x, pid_file, status, err);
  if (x->sfd >= 0)
    close (x->sfd);
  sigprocmask (SIG_SETMASK, &old, NULL);
  vm_exec_buf_free (&x->in);
  vm_exec_buf_free (&x->out);
  vm_exec_buf_free (&x->early);
  return r;
}

int
vm_exec_client (const struct asbx_exec_opts *o, int *dirfd, int *exit_status, asbx_err_t *err)
{
  struct vm_exec_buf open = { 0 };
  struct xc x = { .conn = -1, .sfd = -1, .notify = -1 };
  cleanup_free char *msg = NULL; /* before every goto: --detach's relay's message */
  int ret = -1;

  if (open_payload (o, &open, err) < 0 || (x.conn = connect_exec (*dirfd, o->id, err)) < 0)
    goto out;
  /* connected: the state dir's lock is not held while the process runs (as for a container) */
  close (*dirfd);
  *dirfd = -1;
  if (!o->detach)
    {
      ret = run_session (&x, &open, o->pid_file, exit_status, err);
      goto out;
    }
  /* --detach: a relay of our own is the process on the host (its pid in --pid-file, its exit
   * status the process's), as the process itself is for runc: the engine's shim reaps it */
  int np[2];
  if (pipe2 (np, O_CLOEXEC) < 0)
    {
      asbx_error (err, errno, "isolation vm: exec: pipe");
      goto out;
    }
  fflush (NULL);
  pid_t relay = fork ();
  if (relay < 0)
    {
      asbx_error (err, errno, "isolation vm: exec: fork the relay");
      close (np[0]);
      close (np[1]);
      goto out;
    }
  if (relay == 0)
    {
      asbx_err_t e = NULL;
      int st = 255;
      close (np[0]);
      x.notify = np[1];
      /* only stdio, the connection and the pipe: no lock or state fd of the caller's stays open */
      int keep_lo = x.conn < x.notify ? x.conn : x.notify, keep_hi = x.conn < x.notify ? x.notify : x.conn;
      if (keep_lo > 3)
        close_range (3, (unsigned) keep_lo - 1, 0);
      if (keep_hi - keep_lo > 1)
        close_range ((unsigned) keep_lo + 1, (unsigned) keep_hi - 1, 0);
      close_range ((unsigned) keep_hi + 1, ~0U, 0);
      if (run_session (&x, &open, NULL, &st, &e) < 0)
        {
          if (x.notify >= 0)
            (void) write_all (x.notify, e->msg, strlen (e->msg));
          else
            log_error ("%s", e->msg);
          _exit (255);
        }
      _exit (st);
    }
  close (np[1]);
  size_t len = 0;
  if (read_all_fd (np[0], 16384, &msg, &len) < 0)
    len = 0;
  close (np[0]);
  if (len == 1 && msg[0] == '\0')
    {
      if (o->pid_file && write_pid_file (o->pid_file, relay, err) < 0)
        {
          kill (relay, SIGKILL);
          waitpid (relay, NULL, 0);
          goto out;
        }
      *exit_status = 0;
      ret = 0;
      goto out;
    }
  waitpid (relay, NULL, 0);
  asbx_error (err, 0, "%s", len ? msg : "isolation vm: exec: the relay ended before the process started");
out:
  if (x.conn >= 0)
    close (x.conn);
  vm_exec_buf_free (&open);
  return ret;
}
