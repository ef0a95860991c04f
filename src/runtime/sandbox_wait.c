/* sandbox_wait.c - quick mode's wait for its container: signals forwarded, the stop timeout
 * (moved out of sandbox.c, behaviour unchanged). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "runtime/container.h"
#include "runtime/sandbox_wait.h"

/* The stop timeout in seconds: AGENTSBX_STOP_TIMEOUT (set by `sandbox --stop-timeout`), else 10
 * as `docker stop`; an unparsable value falls back to the default. */
long
stop_timeout_s (void)
{
  const char *v = getenv ("AGENTSBX_STOP_TIMEOUT");
  char *end;
  long n;

  if (!v || !*v)
    return 10;
  errno = 0;
  n = strtol (v, &end, 10);
  if (errno || *end || n < 0 || n > 86400)
    return 10;
  return n;
}

static int64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool
is_stop_signal (int sig)
{
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

/* The signals the sandbox forwards to its container (and SIGCHLD, to wake the wait). */
void
forwarded_signals (sigset_t *set)
{
  static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCHLD };
  sigemptyset (set);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (sigs); i++)
    sigaddset (set, sigs[i]);
}

/* Wait for the init (our child) as asbx_container_wait does, forwarding signals to it; the first
 * stop signal (SIGTERM/SIGINT/SIGHUP/SIGQUIT) starts the stop timeout, after which every process
 * of the container's cgroup is SIGKILLed (kill --all). The caller has blocked forwarded_signals()
 * since before `start`, so a signal sent once the command runs is pending here, never the default
 * action. *stop_sig: that signal, 0 if none came; *forced: whether we had to SIGKILL. Returns the
 * init's status (exit code, or 128+N). */
int
sandbox_wait (const struct asbx_global *g, const char *id, pid_t pid, int *stop_sig, bool *forced)
{
  int64_t deadline = 0;
  sigset_t set;
  int status = 0;

  *stop_sig = 0;
  *forced = false;
  forwarded_signals (&set);
  for (;;)
    {
      pid_t r = waitpid (pid, &status, WNOHANG);
      int sig;

      if (r == pid)
        break;
      if (r < 0 && errno != EINTR)
        {
          status = 255 << 8;
          break;
        }
      if (*stop_sig && !*forced)
        {
          int64_t left = deadline - now_ms ();
          if (left <= 0)
            {
              asbx_err_t e = NULL;
              log_debug ("sandbox %s: still running %ld s after signal %d: SIGKILL", id, stop_timeout_s (), *stop_sig);
              if (asbx_container_kill (g, id, SIGKILL, true, &e) < 0)
                {
                  log_debug ("sandbox %s: kill --all: %s", id, e->msg);
                  asbx_error_free (&e);
                  kill (pid, SIGKILL); /* the init at least: its death ends the pid namespace */
                }
              *forced = true;
              continue;
            }
          struct timespec ts = { .tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000 };
          sig = sigtimedwait (&set, NULL, &ts);
        }
      else
        sig = sigwaitinfo (&set, NULL);
      if (sig <= 0 || sig == SIGCHLD)
        continue;
      kill (pid, sig);
      if (is_stop_signal (sig) && !*stop_sig)
        {
          *stop_sig = sig;
          deadline = now_ms () + stop_timeout_s () * 1000;
        }
    }
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return WEXITSTATUS (status);
}
