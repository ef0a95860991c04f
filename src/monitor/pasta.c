/* pasta.c - attach pasta (passt's namespace mode) to a container's fresh network namespace; see
 * pasta.h for the contract.
 *
 * Why these flags (passt 2023-03, Debian 12; found by trying, see tests/integration/test_egress.py):
 * - `--netns /proc/self/fd/3 --netns-only`: pasta drops its capabilities before it opens the
 *   target, so opening /proc/PID/ns/net of the container's init (a root process with a full
 *   capability set) fails the ptrace access check with EACCES; a PID argument also makes pasta
 *   join that process's user namespace, which for a container in the initial user namespace is
 *   our own (setns fails, reported as "Failed to open tun socket in namespace"). An fd we opened
 *   ourselves, passed as the /proc/self/fd/N magic link, needs neither: opening our own fd
 *   passes the access check, and --netns-only keeps pasta in the user namespace it runs in
 *   (the initial one, which owns or is an ancestor of the container's netns owner).
 * - `--no-netns-quit`: pasta's "quit when the namespace file is deleted" watch works on bind
 *   mounts only; the monitor kills pasta instead, and PR_SET_PDEATHSIG covers a dead monitor.
 * - `-t none -u none -T none -U none`: no port forwarding in either direction. The defaults
 *   (`auto`) would bind host ports for every port the container listens on, and forward the
 *   host's bound ports into the namespace (the container could reach the host's loopback
 *   services).
 * - `--no-map-gw`: the gateway address is not mapped to the host's loopback, for the same reason.
 * - `--runas 0`: as root, pasta's default drop to `nobody` fails ("Couldn't switch to pasta
 *   namespaces"); it still drops its capabilities and sandboxes itself (seccomp, namespaces).
 * - `-f -P /proc/self/fd/4`: foreground (stays our child: pdeathsig, reaping); the pid "file" is a
 *   pipe, written once the tap device, addresses and routes are set up: our readiness signal.
 * - not root (issue 17): the container's network namespace belongs to its user namespace; the
 *   child joins that user namespace before the exec, so pasta (as the caller, uid 0 there) may
 *   enter the network namespace, and its host side stays in ours.
 * Threat model: pasta parses the container's packets (as it does for Podman); the nftables
 * table in the namespace has already dropped everything the policy does not allow. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/nsfs.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "monitor/pasta.h"

static const char *
find_pasta (void)
{
  static const char *const candidates[] = { "/usr/bin/pasta", "/usr/sbin/pasta", "/usr/local/bin/pasta" };
  const char *env = getenv ("AGENTSBX_PASTA");
  if (env && env[0] == '/')
    return access (env, X_OK) == 0 ? env : NULL;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (candidates); i++)
    if (access (candidates[i], X_OK) == 0)
      return candidates[i];
  return NULL;
}

static void __attribute__ ((noreturn)) child (const char *bin, int netns_fd, int pid_wr, int log_fd, pid_t parent)
{
  char *const argv[] = { (char *) "pasta",
                         (char *) "--config-net",
                         (char *) "--runas",
                         (char *) "0",
                         (char *) "--netns",
                         (char *) "/proc/self/fd/3",
                         (char *) "--netns-only",
                         (char *) "--no-netns-quit",
                         (char *) "-t",
                         (char *) "none",
                         (char *) "-u",
                         (char *) "none",
                         (char *) "-T",
                         (char *) "none",
                         (char *) "-U",
                         (char *) "none",
                         (char *) "--no-map-gw",
                         (char *) "-f",
                         (char *) "-q",
                         (char *) "-P",
                         (char *) "/proc/self/fd/4",
                         NULL };
  char *const envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

  sigset_t none;
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid () != parent)
    _exit (127);
  /* the monitor ignores SIGPIPE, and an ignored signal stays ignored across execve: pasta's
   * `signal (SIGPIPE, SIG_IGN)` then returns SIG_IGN, which it takes for a failure ("Couldn't
   * install signal handlers") */
  signal (SIGPIPE, SIG_DFL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  /* not root (issue 17): the namespace belongs to the container's user namespace, which we own;
   * pasta may enter it only from there (setns of a network namespace needs CAP_SYS_ADMIN in the
   * caller's own user namespace too), so join it first: pasta then runs as the caller, holding
   * capabilities in that namespace only, its host side still in our network namespace */
  if (geteuid () != 0)
    {
      int userns = ioctl (netns_fd, NS_GET_USERNS);
      if (userns < 0 || setns (userns, CLONE_NEWUSER) < 0)
        {
          dprintf (log_fd, "join the user namespace owning the container's network namespace: %s\n", strerror (errno));
          _exit (127);
        }
      close (userns);
    }
  /* above every target number first, so no dup2 below overwrites a source */
  int ns = fcntl (netns_fd, F_DUPFD_CLOEXEC, 10), wr = fcntl (pid_wr, F_DUPFD_CLOEXEC, 10);
  int lg = fcntl (log_fd, F_DUPFD_CLOEXEC, 10);
  if (ns < 0 || wr < 0 || lg < 0 || dup2 (ns, 3) < 0 || dup2 (wr, 4) < 0 || dup2 (lg, 2) < 0)
    _exit (127);
  syscall (SYS_close_range, 5u, ~0u, 0u);
  execve (bin, argv, envp);
  dprintf (2, "exec %s: %s\n", bin, strerror (errno));
  _exit (127);
}

/* the last line pasta wrote to its log, for the error message */
static void
last_line (int log_fd, char *buf, size_t len)
{
  ssize_t n = pread (log_fd, buf, len - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
    buf[--n] = '\0';
  char *nl = strrchr (buf, '\n');
  if (nl)
    memmove (buf, nl + 1, strlen (nl + 1) + 1);
}

int
pasta_available (asbx_err_t *err)
{
  struct stat st;

  if (!find_pasta ())
    return asbx_error (err, ENOENT,
                       "network: pasta is not installed (Debian package passt): a network namespace "
                       "agentsbx creates has no other way out");
  /* pasta's tap device: open(2) of /dev/net/tun is checked against the file's mode even for a
   * process holding every capability in a user namespace (the node's owner is the initial
   * namespace's root). Debian's udev rule makes it 0666; a host without udev may leave 0600. */
  if (geteuid () != 0 && access ("/dev/net/tun", R_OK | W_OK) < 0)
    return asbx_error (err, errno,
                       "network: pasta run as uid %u cannot open /dev/net/tun (mode %04o), its tap device: a "
                       "non-root caller's network.mode filtered needs it readable and writable by every user "
                       "(Debian's udev rule makes it 0666: `chmod 0666 /dev/net/tun` as root), or use a "
                       "policy with network.mode none",
                       (unsigned) geteuid (), stat ("/dev/net/tun", &st) == 0 ? (unsigned) (st.st_mode & 07777) : 0u);
  return 0;
}

pid_t
pasta_start (int netns_fd, int timeout_ms, asbx_err_t *err)
{
  const char *bin = find_pasta ();
  cleanup_close int log_fd = -1;
  int p[2];
  char buf[32], log[512];

  if (pasta_available (err) < 0)
    return -1;
  log_fd = memfd_create ("asbx-pasta-log", MFD_CLOEXEC);
  if (log_fd < 0)
    return asbx_error (err, errno, "network: pasta: memfd_create");
  if (pipe2 (p, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "network: pasta: pipe");
  pid_t parent = getpid ();
  pid_t pid = fork ();
  if (pid < 0)
    {
      int e = errno;
      close (p[0]);
      close (p[1]);
      return asbx_error (err, e, "network: pasta: fork");
    }
  if (pid == 0)
    child (bin, netns_fd, p[1], log_fd, parent);
  close (p[1]);
  struct pollfd pf = { .fd = p[0], .events = POLLIN };
  int r;
  while ((r = poll (&pf, 1, timeout_ms)) < 0 && errno == EINTR)
    ;
  ssize_t n = r > 0 ? read (p[0], buf, sizeof buf - 1) : -1;
  close (p[0]);
  if (n > 0)
    {
      buf[n] = '\0';
      if (atoi (buf) == (int) pid)
        return pid;
    }
  /* no pid line: pasta failed (EOF) or hangs (timeout) */
  int status = 0;
  kill (pid, SIGKILL);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  last_line (log_fd, log, sizeof log);
  if (r == 0)
    return asbx_error (err, ETIMEDOUT, "network: pasta did not configure the namespace within %d ms%s%s", timeout_ms,
                       log[0] ? ": " : "", log);
  return asbx_error (err, 0, "network: pasta exited with status %d%s%s",
                     WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status), log[0] ? ": " : "", log);
}

void
pasta_stop (pid_t pid)
{
  if (pid <= 0)
    return;
  kill (pid, SIGKILL);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
}
