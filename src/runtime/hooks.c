/* hooks.c - run OCI hooks: fork, state JSON on stdin, output captured, timeout enforced.
 * No fd of the runtime reaches a hook except stdin/stdout/stderr (close_range before exec). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "runtime/hooks.h"

#define HOOK_OUTPUT_MAX 4096

static void __attribute__ ((noreturn)) hook_child (const struct oci_hook *h, int in_fd, int out_fd)
{
  extern char **environ;
  char *default_argv[] = { h->path, NULL };
  char **argv = h->args_len ? h->args : default_argv;

  if (dup2 (in_fd, 0) < 0 || dup2 (out_fd, 1) < 0 || dup2 (out_fd, 2) < 0)
    _exit (127);
  syscall (SYS_close_range, 3U, ~0U, 0U);
  signal (SIGPIPE, SIG_DFL);
  /* a hook starts as any program does, with no signal blocked (`sandbox` blocks the ones it
   * forwards while a poststart hook runs) */
  sigset_t none;
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  /* a hook without `env` gets the runtime's environment (runc: exec.Cmd with a nil Env); an
   * explicit list, even an empty one, is used as given */
  execve (h->path, argv, h->env ? h->env : environ);
  dprintf (2, "exec `%s`: %s", h->path, strerror (errno));
  _exit (127);
}

/* Wait for the hook, collecting output, for at most timeout_s seconds (<= 0: no limit). */
static int
hook_wait (pid_t pid, int out_fd, int64_t timeout_s, char *out, size_t *out_len, int *status, bool *timed_out)
{
  uint64_t deadline = timeout_s > 0 ? now_ns () + (uint64_t) timeout_s * 1000000000ull : 0;
  bool eof = false;

  *timed_out = false;
  while (!eof)
    {
      struct pollfd p = { .fd = out_fd, .events = POLLIN };
      int ms = -1;
      if (deadline)
        {
          uint64_t now = now_ns ();
          if (now >= deadline)
            {
              *timed_out = true;
              kill (pid, SIGKILL);
              break;
            }
          ms = (int) ((deadline - now) / 1000000ull) + 1;
        }
      int r = poll (&p, 1, ms);
      if (r < 0 && errno != EINTR)
        return -1;
      if (r > 0)
        {
          char buf[1024];
          ssize_t n = read (out_fd, buf, sizeof buf);
          if (n <= 0)
            eof = true;
          else if (*out_len < HOOK_OUTPUT_MAX)
            {
              size_t c = (size_t) n < HOOK_OUTPUT_MAX - *out_len ? (size_t) n : HOOK_OUTPUT_MAX - *out_len;
              memcpy (out + *out_len, buf, c);
              *out_len += c;
            }
        }
    }
  while (waitpid (pid, status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return 0;
}

static int
run_one (const struct oci_hook *h, const char *kind, size_t idx, const char *state_json, asbx_err_t *err)
{
  int in_pipe[2], out_pipe[2];
  char out[HOOK_OUTPUT_MAX + 1];
  size_t out_len = 0;
  int status = 0;
  bool timed_out;
  pid_t pid;

  if (pipe2 (in_pipe, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "%s[%zu]: pipe", kind, idx);
  if (pipe2 (out_pipe, O_CLOEXEC) < 0)
    {
      close (in_pipe[0]);
      close (in_pipe[1]);
      return asbx_error (err, errno, "%s[%zu]: pipe", kind, idx);
    }
  pid = fork ();
  if (pid < 0)
    {
      int e = errno;
      close (in_pipe[0]);
      close (in_pipe[1]);
      close (out_pipe[0]);
      close (out_pipe[1]);
      return asbx_error (err, e, "%s[%zu]: fork", kind, idx);
    }
  if (pid == 0)
    hook_child (h, in_pipe[0], out_pipe[1]);
  close (in_pipe[0]);
  close (out_pipe[1]);
  /* a hook may exit without reading stdin: SIGPIPE is ignored process-wide, EPIPE is fine */
  write_all (in_pipe[1], state_json, strlen (state_json));
  close (in_pipe[1]);
  int r = hook_wait (pid, out_pipe[0], h->has_timeout ? h->timeout : 0, out, &out_len, &status, &timed_out);
  close (out_pipe[0]);
  out[out_len] = '\0';
  while (out_len > 0 && (out[out_len - 1] == '\n' || out[out_len - 1] == ' '))
    out[--out_len] = '\0';
  if (r < 0)
    return asbx_error (err, errno, "%s[%zu] (%s): wait", kind, idx, h->path);
  if (out_len)
    log_debug ("%s[%zu] (%s) output: %s", kind, idx, h->path, out);
  if (timed_out)
    return asbx_error (err, 0, "%s[%zu] (%s): timed out after %lld s", kind, idx, h->path, (long long) h->timeout);
  if (WIFSIGNALED (status))
    return asbx_error (err, 0, "%s[%zu] (%s): killed by signal %d%s%s", kind, idx, h->path, WTERMSIG (status),
                       out_len ? ": " : "", out);
  if (WEXITSTATUS (status) != 0)
    return asbx_error (err, 0, "%s[%zu] (%s): exited with status %d%s%s", kind, idx, h->path, WEXITSTATUS (status),
                       out_len ? ": " : "", out);
  return 0;
}

int
hooks_run (const struct oci_hook *hooks, size_t n, const char *kind, const char *state_json, asbx_err_t *err)
{
  for (size_t i = 0; i < n; i++)
    if (run_one (&hooks[i], kind, i, state_json, err) < 0)
      return -1;
  return 0;
}

int
hooks_run_all_warn (const struct oci_hook *hooks, size_t n, const char *kind, const char *state_json)
{
  int failed = 0;

  for (size_t i = 0; i < n; i++)
    {
      asbx_err_t e = NULL;
      if (run_one (&hooks[i], kind, i, state_json, &e) < 0)
        {
          log_warning ("%s", e->msg);
          asbx_error_free (&e);
          failed++;
        }
    }
  return failed;
}
