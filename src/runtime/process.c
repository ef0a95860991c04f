/* process.c - the last steps of every container process, init and exec alike: cwd, executable
 * lookup, then identity and security in the order the kernel requires, and execve.
 *
 * Ordering (capabilities(7), prctl(2), seccomp(2)): the bounding set is dropped while
 * CAP_SETPCAP is held; PR_SET_KEEPCAPS keeps the permitted set across setresuid(); the final
 * sets are applied after the uid change; no_new_privs next; seccomp (when present) last, right
 * before execve, so the filter needs to allow nothing but the execve itself. Without
 * no_new_privs the OCI filter goes in before the capabilities are dropped (it needs
 * CAP_SYS_ADMIN then), so it must allow the identity steps; the runtime fds are marked
 * close-on-exec before any filter, so a profile lacking close_range still works. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/fdpass.h"
#include "core/util.h"
#include "linux/process.h"
#include "linux/landlock_ruleset.h"
#include "linux/pathsafe.h"
#include "linux/seccomp_bpf.h"
#include "linux/unixsock.h"
#include "runtime/process.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

int
process_connect_console (const char *path, asbx_err_t *err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_close int fd = -1;

  if (strlen (path) >= sizeof addr.sun_path)
    return asbx_error (err, ENAMETOOLONG, "--console-socket `%s`", path);
  strcpy (addr.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    return asbx_error (err, errno, "connect to --console-socket `%s`", path);
  return steal_fd (&fd);
}

int
process_send_fd (int sock, int fd, asbx_err_t *err)
{
  if (fdpass_send (sock, fd, "x", 1) < 0)
    return asbx_error (err, errno, "send the pty master to --console-socket");
  return 0;
}

static const char *
env_get (char **env, const char *name)
{
  size_t n = strlen (name);
  for (char **e = env; e && *e; e++)
    if (strncmp (*e, name, n) == 0 && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

static bool
is_executable (const char *path)
{
  struct stat sb;
  return stat (path, &sb) == 0 && S_ISREG (sb.st_mode) && (sb.st_mode & 0111);
}

/* Resolve process.args[0] against the container's PATH (process.env), as execvp would, so that a
 * missing executable fails `create` clearly instead of the process after `start`. Heap string. */
char *
process_lookup_executable (const struct oci_process *p, asbx_err_t *err)
{
  const char *arg0 = p->args[0];
  const char *path = env_get (p->env, "PATH");

  if (strchr (arg0, '/'))
    {
      if (!is_executable (arg0))
        {
          asbx_error (err, errno ? errno : EACCES, "exec: `%s`", arg0);
          return NULL;
        }
      return xstrdup (arg0);
    }
  if (path == NULL)
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  cleanup_free char *dup = xstrdup (path);
  char *save = NULL;
  for (char *dir = strtok_r (dup, ":", &save); dir; dir = strtok_r (NULL, ":", &save))
    {
      char *cand = xasprintf ("%s/%s", *dir ? dir : ".", arg0);
      if (is_executable (cand))
        return cand;
      free (cand);
    }
  asbx_error (err, 0, "exec: `%s`: executable file not found in $PATH", arg0);
  return NULL;
}

int
process_chdir (const char *cwd, bool create, asbx_err_t *err)
{
  /* After pivot_root (init) or setns (exec) "/" is the container's root. The cwd is resolved
   * from it with RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS and entered with fchdir: a plain chdir
   * follows /proc/self/fd/N to whatever directory fd this process still holds, which can be a
   * host directory of the runtime (CVE-2024-21626 class; `exec --cwd /proc/self/fd/3` reached
   * the state root, found by tests/escape/test_fds.py). runc creates a missing cwd, and so do
   * we, through the same resolution (ps_mkdir_p). */
  cleanup_close int root = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int fd = -1;

  if (root < 0)
    return asbx_error (err, errno, "process.cwd: open /");
  fd = ps_openat2 (root, cwd, O_PATH | O_DIRECTORY, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd < 0 && errno == ENOENT && !create)
    return asbx_error (err, ENOENT, "process.cwd: `%s` does not exist in the container", cwd);
  if (fd < 0 && errno == ENOENT)
    {
      fd = ps_mkdir_p (root, cwd, 0755, err);
      if (fd < 0)
        return asbx_error_wrap (err, "process.cwd `%s`", cwd);
    }
  if (fd < 0)
    return asbx_error (err, errno, "process.cwd: `%s`", cwd);
  if (fchdir (fd) < 0)
    return asbx_error (err, errno, "process.cwd: chdir `%s`", cwd);
  return 0;
}

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN 1UL
#endif

/* HOME for process.env when the spec sets none, as runc does: the home directory of
 * process.user.uid in the container's /etc/passwd, "/" when there is no such entry. Called in
 * the container's root before the user switch and Landlock. The file is the image's: only a
 * regular file is read (a FIFO planted there must not hang the init), at most 1 MiB. Returns a
 * heap string "HOME=...". Found by tests/integration/test_policy_sources.py (probe report vs runc). */
static char *
home_env (uid_t uid)
{
  cleanup_close int fd = open ("/etc/passwd", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  cleanup_free char *buf = NULL;
  struct stat st;
  size_t len = 0;
  ssize_t n;

  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    return xstrdup ("HOME=/");
  buf = xmalloc (1 << 20);
  while (len < (1 << 20) - 1 && (n = read (fd, buf + len, (1 << 20) - 1 - len)) > 0)
    len += (size_t) n;
  buf[len] = '\0';
  for (char *line = buf, *next; line && *line; line = next)
    {
      char *f[7] = { NULL };
      int nf = 0;
      next = strchr (line, '\n');
      if (next)
        *next++ = '\0';
      for (char *p = line; nf < 7; nf++)
        {
          f[nf] = p;
          if (!(p = strchr (p, ':')))
            {
              nf++;
              break;
            }
          *p++ = '\0';
        }
      char *end;
      if (nf >= 6 && f[2][0] && strtoul (f[2], &end, 10) == uid && *end == '\0' && f[5][0])
        return xasprintf ("HOME=%s", f[5]);
    }
  return xstrdup ("HOME=/");
}

/* process.env with HOME added when it has none (a new heap array of borrowed strings, except
 * the last one added). */
static char **
env_with_home (const struct oci_process *proc)
{
  size_t n = 0;
  char **env;
  if (env_get (proc->env, "HOME"))
    return NULL;
  while (proc->env && proc->env[n])
    n++;
  env = xmalloc (sizeof (char *) * (n + 2));
  for (size_t i = 0; i < n; i++)
    env[i] = proc->env[i];
  env[n] = home_env (proc->user.uid);
  env[n + 1] = NULL;
  return env;
}

/* stdio that is a regular file, a pipe or a socket is given to the container's user (runc's
 * fixStdioPermissions), so a non-root process can reopen /dev/stdout or /proc/self/fd/1.
 * Never a character or block device: /dev/null and a host tty keep their owner. A chown the
 * kernel refuses (EINVAL: unmapped id in a user namespace, EPERM, EROFS) leaves it, as runc. */
static int
stdio_chown (const struct oci_user *user, asbx_err_t *err)
{
  for (int fd = 0; fd < 3; fd++)
    {
      struct stat st;
      if (fstat (fd, &st) < 0)
        continue; /* closed */
      if (S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode) || (st.st_uid == user->uid && st.st_gid == user->gid))
        continue;
      if (fchown (fd, user->uid, user->gid) < 0 && errno != EINVAL && errno != EPERM && errno != EROFS)
        return asbx_error (err, errno, "chown stdio fd %d to %u:%u", fd, user->uid, user->gid);
    }
  return 0;
}

int
process_finalize_and_exec (const struct oci_process *proc, bool userns, int preserve_fds, const char *exe,
                           const struct process_layers *layers, asbx_err_t *err)
{
  const struct linux_seccomp *sc = layers->seccomp;
  char **env = env_with_home (proc); /* before the user switch: /etc/passwd may be root-only */

  /* no runtime fd may survive into the container (CVE-2024-21626 class): only stdio and the
   * preserved fds; everything else becomes close-on-exec. First, before any seccomp filter: a
   * profile need not allow close_range or fcntl (runc's order). Needs no privilege, and what
   * the steps below open is O_CLOEXEC or closed again (landlock and listener fds, /proc files). */
  for (int fd = 3; fd < 3 + preserve_fds; fd++)
    if (fcntl (fd, F_SETFD, 0) < 0 && errno != EBADF)
      return asbx_error (err, errno, "--preserve-fds: clear close-on-exec of fd %d", fd);
  if (syscall (SYS_close_range, (unsigned) (3 + preserve_fds), ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    return asbx_error (err, errno, "close_range");
  if (stdio_chown (&proc->user, err) < 0)
    return -1;
  /* without no_new_privs, seccomp(2) needs CAP_SYS_ADMIN: install before capabilities go (runc) */
  if (sc && !proc->no_new_privileges && linux_seccomp_install (sc, layers->listener, layers->process_state, err) < 0)
    return -1;
  if (linux_caps_drop_bounding (proc->capabilities, err) < 0 || linux_caps_keep (err) < 0
      || linux_user_apply (&proc->user, userns, err) < 0 || linux_caps_apply (proc->capabilities, err) < 0
      || linux_nnp_apply (proc, err) < 0)
    return -1;
  linux_umask_apply (&proc->user);
  /* syscalls.denyWriteExecMemory: no mapping writable and executable, none made executable
   * later (prctl(2) PR_SET_MDWE, Linux 6.3); before the filters, which need not allow prctl
   * (a policy always sets no_new_privs, so the OCI filter comes after this too) */
  if (layers->deny_wx && prctl (PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L) < 0)
    return asbx_error (err, errno, "policy syscalls.denyWriteExecMemory: prctl(PR_SET_MDWE) (needs Linux >= 6.3)");
  /* the policy's Landlock ruleset (needs no_new_privs, which a policy always sets) */
  if (layers->landlock && linux_landlock_restrict_self (layers->landlock, err) < 0)
    return asbx_error_wrap (err, "policy filesystem (Landlock)");
  /* with no_new_privs: last step, so the filter needs to allow nothing but execve */
  if (sc && proc->no_new_privileges && linux_seccomp_install (sc, layers->listener, layers->process_state, err) < 0)
    return -1;
  /* the policy's syscall groups: a second filter stacked on the OCI one (the kernel runs both,
   * the most restrictive result wins) */
  if (layers->groups.insns && linux_seccomp_install (&layers->groups, -1, NULL, err) < 0)
    return asbx_error_wrap (err, "policy syscalls.deny");
  /* the unix-socket confinement: last, so the filters above never see its notifications; the
   * notify fd goes to the monitor and is closed here (the program never holds it) */
  if (layers->unixsock.insns && linux_unixsock_install (&layers->unixsock, layers->unixsock_chan, err) < 0)
    return -1;
  if (layers->unixsock_chan >= 0)
    close (layers->unixsock_chan);
  execve (exe, proc->args, env ? env : proc->env);
  return asbx_error (err, errno, "exec `%s`", exe);
}
