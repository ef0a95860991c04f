/* tty.c - the foreground terminal proxy for `run`/`exec` with process.terminal and no
 * --console-socket (runc's behaviour, runc's tty.go).
 *
 * Mechanism: a socketpair stands in for the console socket; the container side allocates the
 * pty (so the slave is a pty of the container's devpts) and sends the master back with
 * SCM_RIGHTS. We then poll stdin, the master and a signalfd: bytes go stdin -> master and
 * master -> stdout; SIGWINCH copies our terminal's size to the pty (the kernel then signals
 * the pty's foreground group itself); the other proxied signals go to the process; SIGCHLD
 * ends the loop once our child is reaped.
 * Threat model: the container controls what it writes to the master; we only copy bytes, never
 * interpret them. The caller's terminal is restored on every return path.
 * Ordering: signals are blocked and the signalfd made before the first waitpid, so an exit
 * between the two is not missed; the terminal goes raw only after that. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/fdpass.h"
#include "runtime/tty.h"

int
asbx_tty_socketpair (int *keep, int *give, asbx_err_t *err)
{
  int sp[2];
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
    return asbx_error (err, errno, "socketpair for the terminal");
  *keep = sp[0];
  *give = sp[1];
  return 0;
}

int
asbx_tty_recv_master (int sock, asbx_err_t *err)
{
  char dummy;
  int fd = fdpass_recv (sock, &dummy, 1, 0);
  if (fd < 0 && errno == EPROTO)
    return asbx_error (err, EPROTO, "receive the pty master: no descriptor from the container");
  if (fd < 0)
    return asbx_error (err, errno, "receive the pty master");
  return fd;
}

/* write(2) all of buf; false if the peer is gone (the copy direction then stops) */
static bool
write_all (int fd, const char *buf, size_t len)
{
  while (len > 0)
    {
      ssize_t w = write (fd, buf, len);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        {
          struct pollfd p = { .fd = fd, .events = POLLOUT };
          poll (&p, 1, 1000);
          continue;
        }
      if (w <= 0)
        return false;
      buf += w;
      len -= (size_t) w;
    }
  return true;
}

static void
copy_size (int from, int to)
{
  struct winsize ws;
  if (ioctl (from, TIOCGWINSZ, &ws) == 0)
    ioctl (to, TIOCSWINSZ, &ws);
}

/* After the process exited: copy what is still buffered in the pty (the line discipline hands
 * it over asynchronously) until the slave is closed everywhere (EIO) or nothing came for a
 * while (a process that inherited the slave may keep it open). */
static void
drain (int master)
{
  char buf[8192];
  for (;;)
    {
      struct pollfd p = { .fd = master, .events = POLLIN };
      int r = poll (&p, 1, 200);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return;
      ssize_t n = read (master, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0 || !write_all (STDOUT_FILENO, buf, (size_t) n))
        return;
    }
}

static int
exit_code (int status)
{
  return WIFSIGNALED (status) ? 128 + WTERMSIG (status) : WEXITSTATUS (status);
}

int
asbx_tty_proxy_wait (int master_in, pid_t pid)
{
  static const int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
  cleanup_close int master = master_in, sfd = -1;
  struct termios saved;
  bool raw = false, in_open = true, out_open = true;
  sigset_t set, old;
  int status = 0, code = 255;
  char buf[8192];

  sigemptyset (&set);
  for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
    sigaddset (&set, fwd[i]);
  sigaddset (&set, SIGWINCH);
  sigaddset (&set, SIGCHLD);
  sigprocmask (SIG_BLOCK, &set, &old);
  sfd = signalfd (-1, &set, SFD_CLOEXEC);
  if (isatty (STDIN_FILENO) && tcgetattr (STDIN_FILENO, &saved) == 0)
    {
      struct termios t = saved;
      cfmakeraw (&t);
      raw = tcsetattr (STDIN_FILENO, TCSANOW, &t) == 0;
      copy_size (STDIN_FILENO, master);
    }

  for (;;)
    {
      pid_t r = waitpid (pid, &status, WNOHANG);
      if (r == pid)
        {
          code = exit_code (status);
          if (out_open)
            drain (master);
          break;
        }
      if (r < 0 && errno != EINTR)
        break;
      struct pollfd p[3] = {
        { .fd = sfd, .events = POLLIN },
        { .fd = out_open ? master : -1, .events = POLLIN },
        { .fd = in_open ? STDIN_FILENO : -1, .events = POLLIN },
      };
      if (poll (p, 3, sfd < 0 ? 100 : -1) < 0 && errno != EINTR)
        break;
      if (p[0].revents & POLLIN)
        {
          struct signalfd_siginfo si;
          if (read (sfd, &si, sizeof si) == (ssize_t) sizeof si)
            {
              if (si.ssi_signo == SIGWINCH)
                copy_size (STDIN_FILENO, master);
              else if (si.ssi_signo != SIGCHLD)
                kill (pid, (int) si.ssi_signo);
            }
        }
      if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
        {
          ssize_t n = read (master, buf, sizeof buf);
          if ((n < 0 && errno != EINTR && errno != EAGAIN) || n == 0
              || (n > 0 && !write_all (STDOUT_FILENO, buf, (size_t) n)))
            out_open = false; /* EIO: every slave fd is closed */
        }
      if (p[2].revents & (POLLIN | POLLHUP | POLLERR))
        {
          ssize_t n = read (STDIN_FILENO, buf, sizeof buf);
          /* at EOF runc stops copying and leaves the pty open; so do we */
          if ((n < 0 && errno != EINTR && errno != EAGAIN) || n == 0 || (n > 0 && !write_all (master, buf, (size_t) n)))
            in_open = false;
        }
    }
  if (raw)
    tcsetattr (STDIN_FILENO, TCSANOW, &saved);
  sigprocmask (SIG_SETMASK, &old, NULL);
  return code;
}
