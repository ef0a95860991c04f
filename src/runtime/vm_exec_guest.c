/* vm_exec_guest.c - the guest init's exec sessions (vm_exec.h). Each OPEN forks this binary as
 * `agentsbx exec --detach --pid-file F ... ID CMD` on three pipes: the guest's runtime applies
 * the exec exactly as on a host (namespaces, policy, supervisor), writes the process's pid and
 * exits; the process, orphaned, is reaped by us (PID 1), which ends the session: its pipes
 * drained, then EXIT. An `agentsbx exec` that fails exits non-zero with its message on the
 * stderr pipe and there is no STARTED: the caller reports that message. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "runtime/vm_exec.h"

#define X_DIR "/run/asbx-exec"
#define X_STASH 64

/* the options a caller may hand the guest's exec (the rest, --pid-file, --detach, --console-socket,
 * --preserve-fds, --cgroup, are ours or not built: vm_exec.h); each takes a value unless below */
static const char *const x_opts[] = { "--cwd", "--env",      "--user",          "--additional-gids",
                                      "--cap", "--apparmor", "--process-label", "--process",
                                      NULL };

struct gsess
{
  uint32_t sid;
  pid_t helper; /* the `agentsbx exec`, until it exits */
  pid_t proc;   /* the process, once the helper reported it (0 before) */
  int pidfd;    /* the helper's, then the process's: a wake-up when it ends */
  int in_w;     /* the process's stdin, -1 once closed */
  int out_r, err_r;
  bool in_eof;           /* EOF asked: close in_w once `in` is written */
  uint64_t sigs;         /* signals that came before the process's pid: sent once it is known */
  struct vm_exec_buf in; /* stdin bytes not yet written (raw, not framed) */
  char pidfile[64];
  char procfile[64];
};

struct vm_exec_guest
{
  int port;
  const char *id;
  const char *const *gargv;
  bool port_dead; /* EOF: the host closed its end (the supervisor is gone) */
  struct vm_exec_buf port_in, port_out;
  struct gsess *s[VM_EXEC_MAX_SESSIONS];
  struct
  {
    pid_t pid;
    int status;
  } stash[X_STASH]; /* reaped before their session learnt their pid */
  size_t nstash;
};

static int
wait_code (int st)
{
  return WIFSIGNALED (st) ? 128 + WTERMSIG (st) : WEXITSTATUS (st);
}

struct vm_exec_guest *
vm_exec_guest_new (int port, const char *id, const char *const *gargv)
{
  struct vm_exec_guest *x = xmalloc0 (sizeof *x);
  x->port = port;
  x->id = id;
  x->gargv = gargv;
  (void) fcntl (port, F_SETFL, fcntl (port, F_GETFL) | O_NONBLOCK);
  signal (SIGPIPE, SIG_IGN); /* a closed stdin pipe is EPIPE here; the helper restores it */
  mkdir (X_DIR, 0700);
  return x;
}

static void
send_frame (struct vm_exec_guest *x, uint32_t sid, uint8_t type, const void *p, size_t len)
{
  vm_exec_buf_frame (&x->port_out, sid, type, p, len);
}

static void
close_fd (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

static void
sess_free (struct vm_exec_guest *x, size_t i)
{
  struct gsess *s = x->s[i];
  close_fd (&s->pidfd);
  close_fd (&s->in_w);
  close_fd (&s->out_r);
  close_fd (&s->err_r);
  unlink (s->pidfile);
  unlink (s->procfile);
  vm_exec_buf_free (&s->in);
  free (s);
  x->s[i] = NULL;
}

/* what is in a pipe now, as frames (false at EOF or error: the pipe is closed). `all`: at the
 * session's end, what the pipe holds whatever is queued (a pipe's capacity at most); otherwise
 * up to VM_EXEC_BUF_HIGH queued, the rest at a later wake-up. */
static bool
drain (struct vm_exec_guest *x, struct gsess *s, int *fd, uint8_t type, bool all)
{
  char buf[32768];
  while (*fd >= 0)
    {
      ssize_t r = read (*fd, buf, sizeof buf);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0 && errno == EAGAIN)
        return true;
      if (r <= 0)
        {
          close_fd (fd);
          return false;
        }
      send_frame (x, s->sid, type, buf, (size_t) r);
      if (!all && x->port_out.len >= VM_EXEC_BUF_HIGH)
        return true;
    }
  return false;
}

/* the session ends with `code`: what the pipes still hold, then EXIT. Everything the process
 * wrote before it ended is in the pipes; a descendant that still holds them is not waited for. */
static void
sess_end (struct vm_exec_guest *x, size_t i, int code)
{
  struct gsess *s = x->s[i];
  drain (x, s, &s->out_r, VX_STDOUT, true);
  drain (x, s, &s->err_r, VX_STDERR, true);
  int32_t c = code;
  send_frame (x, s->sid, VX_EXIT, &c, sizeof c);
  sess_free (x, i);
}

static bool
allowed_opt (const char *o)
{
  if (strcmp (o, "--no-new-privs") == 0)
    return true;
  for (size_t i = 0; x_opts[i]; i++)
    if (strcmp (o, x_opts[i]) == 0)
      return true;
  return false;
}

static void
open_fail (struct vm_exec_guest *x, uint32_t sid, const char *msg)
{
  cleanup_free char *m = xasprintf ("agentsbx: isolation vm: exec in the guest: %s\n", msg);
  send_frame (x, sid, VX_STDERR, m, strlen (m));
  int32_t c = 255;
  send_frame (x, sid, VX_EXIT, &c, sizeof c);
}

/* OPEN: the caller's strings, OPTIONS... "--" COMMAND... (vm_exec_client.c) */
static void
sess_open (struct vm_exec_guest *x, uint32_t sid, const char *p, size_t len)
{
  size_t slot = VM_EXEC_MAX_SESSIONS, nstr = 0;
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    if (!x->s[i])
      {
        slot = i;
        break;
      }
  for (size_t i = 0; i < len; i++)
    nstr += p[i] == '\0';
  if (slot == VM_EXEC_MAX_SESSIONS)
    return open_fail (x, sid, "too many exec sessions at once");
  if (!len || p[len - 1] != '\0')
    return open_fail (x, sid, "a malformed request");
  struct gsess *s = xmalloc0 (sizeof *s);
  s->sid = sid;
  s->pidfd = s->in_w = s->out_r = s->err_r = -1;
  snprintf (s->pidfile, sizeof s->pidfile, X_DIR "/%u.pid", sid);
  snprintf (s->procfile, sizeof s->procfile, X_DIR "/%u.json", sid);
  x->s[slot] = s;

  size_t ng = 0;
  while (x->gargv[ng])
    ng++;
  const char **argv = xmalloc0 ((ng + nstr + 8) * sizeof *argv);
  size_t a = 0;
  for (size_t i = 0; i < ng; i++)
    argv[a++] = x->gargv[i];
  argv[a++] = "exec";
  argv[a++] = "--detach";
  argv[a++] = "--pid-file";
  argv[a++] = s->pidfile;
  const char *q = p, *end = p + len;
  bool cmd = false;
  for (; q < end; q += strlen (q) + 1)
    {
      if (!cmd && strcmp (q, "--") == 0)
        {
          argv[a++] = x->id;
          cmd = true;
          continue;
        }
      if (cmd)
        {
          argv[a++] = q;
          continue;
        }
      if (!allowed_opt (q))
        {
          free (argv);
          sess_free (x, slot);
          cleanup_free char *m = xasprintf ("option `%s` is not passed to the guest", q);
          return open_fail (x, sid, m);
        }
      argv[a++] = q;
      if (strcmp (q, "--no-new-privs") == 0)
        continue;
      q += strlen (q) + 1;
      if (q >= end)
        break;
      if (strcmp (argv[a - 1], "--process") == 0)
        {
          /* the process.json itself travels: written here, named to the guest's exec */
          cleanup_close int fd = open (s->procfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
          if (fd < 0 || write_all (fd, q, strlen (q)) < 0)
            {
              free (argv);
              sess_free (x, slot);
              return open_fail (x, sid, "write the process.json");
            }
          argv[a++] = s->procfile;
        }
      else
        argv[a++] = q;
    }
  if (!cmd)
    {
      free (argv);
      sess_free (x, slot);
      return open_fail (x, sid, "a malformed request (no `--`)");
    }
  argv[a] = NULL;

  int in[2] = { -1, -1 }, out[2] = { -1, -1 }, er[2] = { -1, -1 };
  if (pipe2 (in, O_CLOEXEC) < 0 || pipe2 (out, O_CLOEXEC) < 0 || pipe2 (er, O_CLOEXEC) < 0)
    {
      int fds[] = { in[0], in[1], out[0], out[1], er[0], er[1] };
      for (size_t i = 0; i < 6; i++)
        if (fds[i] >= 0)
          close (fds[i]);
      free (argv);
      sess_free (x, slot);
      return open_fail (x, sid, strerror (errno));
    }
  pid_t pid = fork ();
  if (pid == 0)
    {
      signal (SIGPIPE, SIG_DFL);
      if (dup2 (in[0], 0) < 0 || dup2 (out[1], 1) < 0 || dup2 (er[1], 2) < 0)
        _exit (127);
      execv ("/init", (char *const *) argv);
      _exit (127);
    }
  free (argv);
  close (in[0]);
  close (out[1]);
  close (er[1]);
  s->in_w = in[1];
  s->out_r = out[0];
  s->err_r = er[0];
  (void) fcntl (s->in_w, F_SETFL, O_NONBLOCK);
  (void) fcntl (s->out_r, F_SETFL, O_NONBLOCK);
  (void) fcntl (s->err_r, F_SETFL, O_NONBLOCK);
  if (pid < 0)
    {
      sess_free (x, slot);
      return open_fail (x, sid, strerror (errno));
    }
  s->helper = pid;
  s->pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
}

static struct gsess *
sess_of (struct vm_exec_guest *x, uint32_t sid, size_t *slot)
{
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    if (x->s[i] && x->s[i]->sid == sid)
      {
        *slot = i;
        return x->s[i];
      }
  return NULL;
}

static void
stdin_write (struct gsess *s)
{
  if (s->in_w < 0)
    {
      s->in.len = 0;
      return;
    }
  while (s->in.len)
    {
      ssize_t w = write (s->in_w, s->in.data, s->in.len);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        return;
      if (w < 0)
        {
          /* the process closed its stdin: what is left is dropped */
          close_fd (&s->in_w);
          s->in.len = 0;
          return;
        }
      memmove (s->in.data, s->in.data + w, s->in.len - (size_t) w);
      s->in.len -= (size_t) w;
    }
  if (s->in_eof)
    close_fd (&s->in_w);
}

static void
port_frames (struct vm_exec_guest *x)
{
  struct vm_exec_frame f;
  const char *p;
  int n;
  while ((n = vm_exec_buf_next (&x->port_in, &f, &p)) == 1)
    {
      size_t slot = 0;
      struct gsess *s = f.type == VX_OPEN ? NULL : sess_of (x, f.sid, &slot);
      if (f.type == VX_OPEN)
        sess_open (x, f.sid, p, f.len);
      else if (s && f.type == VX_STDIN && f.len == 0)
        {
          s->in_eof = true;
          stdin_write (s);
        }
      else if (s && f.type == VX_STDIN)
        {
          if (s->in_w >= 0)
            {
              if (s->in.cap < s->in.len + f.len)
                {
                  s->in.cap = s->in.len + f.len;
                  s->in.data = xrealloc (s->in.data, s->in.cap);
                }
              memcpy (s->in.data + s->in.len, p, f.len);
              s->in.len += f.len;
            }
          stdin_write (s);
        }
      else if (s && f.type == VX_SIGNAL && f.len == sizeof (uint32_t))
        {
          uint32_t sig;
          memcpy (&sig, p, sizeof sig);
          if (sig > 0 && sig < 65 && s->proc > 0)
            kill (s->proc, (int) sig);
          else if (sig > 0 && sig < 65)
            s->sigs |= 1ull << (sig - 1);
        }
      else if (s && f.type == VX_CLOSE)
        {
          if (s->proc > 0)
            kill (s->proc, SIGKILL); /* reaped later: nobody waits for its EXIT */
          if (s->helper > 0)
            kill (s->helper, SIGKILL);
          sess_free (x, slot);
        }
      vm_exec_buf_consume (&x->port_in, &f);
    }
  if (n < 0)
    log_error ("isolation vm: a malformed frame on %s", VM_EXEC_PORT);
}

static bool
stdin_backlog (const struct vm_exec_guest *x)
{
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    if (x->s[i] && x->s[i]->in.len >= VM_EXEC_BUF_HIGH)
      return true;
  return false;
}

size_t
vm_exec_guest_pollfds (struct vm_exec_guest *x, struct pollfd *p, size_t max)
{
  size_t n = 0;
  if (!x || max < 1)
    return 0;
  p[n++] = (struct pollfd){ .fd = x->port_dead ? -1 : x->port,
                            .events = (short) ((stdin_backlog (x) ? 0 : POLLIN) | (x->port_out.len ? POLLOUT : 0)) };
  bool room = x->port_out.len < VM_EXEC_BUF_HIGH;
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    {
      struct gsess *s = x->s[i];
      if (!s)
        continue;
      /* the pipes once the helper is done: its own output (an error, warnings) comes first and
       * STARTED before anything of the process's */
      bool out = room && s->helper == 0;
      int fds[4] = { s->pidfd, out ? s->out_r : -1, out ? s->err_r : -1, s->in.len ? s->in_w : -1 };
      short ev[4] = { POLLIN, POLLIN, POLLIN, POLLOUT };
      for (size_t k = 0; k < 4 && n < max; k++)
        if (fds[k] >= 0)
          p[n++] = (struct pollfd){ .fd = fds[k], .events = ev[k] };
    }
  return n;
}

/* the helper exited 0: the process's pid from its --pid-file */
static void
helper_done (struct vm_exec_guest *x, size_t i, int st)
{
  struct gsess *s = x->s[i];
  s->helper = 0;
  close_fd (&s->pidfd);
  cleanup_free char *text = NULL;
  asbx_err_t e = NULL;
  int pid = 0;
  if (wait_code (st) != 0)
    return sess_end (x, i, wait_code (st)); /* its message is on the stderr pipe */
  if (read_file_at (AT_FDCWD, s->pidfile, 64, &text, NULL, &e) < 0 || sscanf (text, "%d", &pid) != 1 || pid <= 0)
    {
      asbx_error_free (&e);
      const char m[] = "agentsbx: isolation vm: exec in the guest: no pid file\n";
      send_frame (x, s->sid, VX_STDERR, m, sizeof m - 1);
      return sess_end (x, i, 255);
    }
  s->proc = pid;
  int32_t p32 = pid;
  send_frame (x, s->sid, VX_STARTED, &p32, sizeof p32);
  for (int sig = 1; sig <= 64; sig++)
    if (s->sigs & (1ull << (sig - 1)))
      kill (pid, sig);
  for (size_t k = 0; k < x->nstash; k++)
    if (x->stash[k].pid == pid)
      {
        int code = wait_code (x->stash[k].status);
        x->stash[k] = x->stash[--x->nstash];
        return sess_end (x, i, code);
      }
  s->pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
}

bool
vm_exec_guest_reaped (struct vm_exec_guest *x, pid_t pid, int status)
{
  if (!x)
    return false;
  for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
    {
      struct gsess *s = x->s[i];
      if (s && s->helper == pid)
        {
          helper_done (x, i, status);
          return true;
        }
      if (s && s->proc == pid)
        {
          sess_end (x, i, wait_code (status));
          return true;
        }
    }
  /* perhaps a process whose helper has not been reaped yet: kept for it (oldest dropped) */
  if (x->nstash == X_STASH)
    memmove (x->stash, x->stash + 1, sizeof x->stash[0] * (X_STASH - 1)), x->nstash--;
  x->stash[x->nstash].pid = pid;
  x->stash[x->nstash].status = status;
  x->nstash++;
  return false;
}

void
vm_exec_guest_handle (struct vm_exec_guest *x, const struct pollfd *p, size_t n)
{
  if (!x)
    return;
  for (size_t k = 0; k < n; k++)
    {
      if (!p[k].revents)
        continue;
      if (p[k].fd == x->port)
        {
          if ((p[k].revents & (POLLIN | POLLHUP | POLLERR)) && vm_exec_buf_fill (&x->port_in, x->port) < 0)
            {
              log_debug ("isolation vm: %s closed (%s)", VM_EXEC_PORT, errno ? strerror (errno) : "EOF");
              x->port_dead = true;
            }
          port_frames (x);
          continue;
        }
      for (size_t i = 0; i < VM_EXEC_MAX_SESSIONS; i++)
        {
          struct gsess *s = x->s[i];
          if (!s)
            continue;
          if (p[k].fd == s->out_r)
            drain (x, s, &s->out_r, VX_STDOUT, false);
          else if (p[k].fd == s->err_r)
            drain (x, s, &s->err_r, VX_STDERR, false);
          else if (p[k].fd == s->in_w)
            stdin_write (s);
          else
            continue;
          break;
        }
      /* a pidfd: the init's waitpid loop reaps it (vm_exec_guest_reaped) */
    }
  if (x->port_out.len && !x->port_dead && vm_exec_buf_flush (&x->port_out, x->port) < 0)
    x->port_dead = true;
}
