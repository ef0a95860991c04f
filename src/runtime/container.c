/* container.c - start/kill/delete/wait: the runtime-spec operations on an existing container,
 * over its locked state dir (runtime/state.h). create is container_create.c; the state and
 * list reports and the `creating` record are container_state.c. Which operation a status
 * allows is the transition table in state.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "linux/cgroup.h"
#include "linux/rootfs.h"
#include "runtime/container.h"
#include "runtime/container_internal.h"
#include "runtime/hooks.h"
#include "monitor/monitor.h"
#include "runtime/policy_pin.h"
#include "runtime/rootless.h"
#include "runtime/rootless_oci.h"
#include "runtime/state.h"
#include "runtime/vm_runrec.h"
#include "runtime/vm_supervisor.h"
#include "runtime/workspace_review.h"

/* Crash-safety test hook (tests/escape/test_robustness.py): AGENTSBX_TEST_STOP_AT=<step>
 * makes the runtime die by SIGKILL at the named step (`<step>:stop` raises SIGSTOP instead), so
 * the tests can prove that `delete --force` recovers from a runtime killed anywhere. Only the
 * runtime's caller sets our environment, and it can kill us anyway: the hook adds no power. */
void
test_stop_at (const char *step)
{
  const char *want = getenv ("AGENTSBX_TEST_STOP_AT");
  size_t n = strlen (step);
  if (want == NULL || strncmp (want, step, n) != 0 || (want[n] != '\0' && strcmp (want + n, ":stop") != 0))
    return;
  raise (want[n] ? SIGSTOP : SIGKILL);
}

/* The init's "start" channel: a listening unix socket in the state dir, bound and connected
 * through /proc/self/fd/DIRFD so the path length does not depend on --root and the id. */
int
start_socket_addr (int dirfd, struct sockaddr_un *addr)
{
  memset (addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  snprintf (addr->sun_path, sizeof addr->sun_path, "/proc/self/fd/%d/start.sock", dirfd);
  return 0;
}

int
start_socket_listen (int dirfd, asbx_err_t *err)
{
  struct sockaddr_un addr;
  cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  start_socket_addr (dirfd, &addr);
  if (fd < 0 || bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (fd, 4) < 0)
    return asbx_error (err, errno, "create start.sock");
  return steal_fd (&fd);
}

/* Connect, send the go byte, then read until EOF: nothing = the process was exec'd; text = the
 * init's error (startContainer hook, identity, exec). */
static int
start_socket_release (int dirfd, const char *id, asbx_err_t *err)
{
  struct sockaddr_un addr;
  cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  cleanup_free char *msg = NULL;
  size_t len = 0;

  start_socket_addr (dirfd, &addr);
  if (fd < 0 || connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    return asbx_error (err, errno == ECONNREFUSED ? 0 : errno, "cannot start container `%s`: its init is gone", id);
  if (write_all (fd, "s", 1) < 0)
    return asbx_error (err, errno, "cannot start container `%s`", id);
  if (read_all_fd (fd, 16384, &msg, &len) < 0)
    return asbx_error (err, errno, "cannot start container `%s`", id);
  unlinkat (dirfd, "start.sock", 0);
  if (len > 0)
    return asbx_error (err, 0, "%s", msg);
  return 0;
}

/* A container without a mount namespace of its own mounted below its rootfs in ours: detach. */
void
host_mounts_cleanup (const char *rootfs)
{
  asbx_err_t e = NULL;
  if (linux_rootfs_host_cleanup (rootfs, &e) < 0)
    {
      log_warning ("cleanup of the container's mounts: %s", e->msg);
      asbx_error_free (&e);
    }
}

static int
pidfd_for (const struct asbx_state *st)
{
  int fd = (int) syscall (SYS_pidfd_open, st->pid, 0);
  if (fd < 0)
    return -1;
  /* the pidfd pins the process: re-check it is still the init we started (pid reuse) */
  if (!asbx_state_alive (st))
    {
      close (fd);
      errno = ESRCH;
      return -1;
    }
  return fd;
}

int
asbx_container_start (const struct asbx_global *g, const char *id, asbx_err_t *err)
{
  struct asbx_opened o;
  cleanup_spec struct oci_spec *spec = NULL;
  cleanup_free char *raw = NULL, *json = NULL;
  size_t raw_len;
  int ret = -1;

  if (asbx_container_open (g->root, id, &o, err) < 0)
    goto out;
  if (!o.has_state)
    {
      asbx_error (err, 0, "cannot start container `%s`: it is still being created", id);
      goto out;
    }
  const enum asbx_status status = asbx_state_status (o.dirfd, &o.st);
  if (!asbx_status_allows (status, ASBX_OP_START))
    {
      asbx_error (err, 0, "cannot start container `%s`: container is %s, not created", id, asbx_status_name (status));
      goto out;
    }
  test_stop_at ("start:opened");
  if (start_socket_release (o.dirfd, id, err) < 0)
    {
      /* runtime.md: a failing startContainer hook stops the container */
      kill (o.st.pid, SIGKILL);
      goto out;
    }
  test_stop_at ("start:released");
  if (read_file_at (o.dirfd, "config.json", 16 << 20, &raw, &raw_len, err) < 0)
    goto out;
  spec = oci_spec_parse (raw, raw_len, "config.json", err);
  if (!spec)
    goto out;
  if (spec->hooks && spec->hooks->poststart_len && !g->vm_guest_no_hooks)
    {
      json = state_json (id, asbx_status_after (ASBX_OP_START), o.st.pid, o.st.bundle, &o.st.annotations, err);
      if (!json)
        goto out;
      /* runtime.md: a failing poststart hook is a warning; the lifecycle continues */
      hooks_run_all_warn (spec->hooks->poststart, spec->hooks->poststart_len, "hooks.poststart", json);
    }
  ret = 0;
out:
  asbx_container_close (&o);
  return ret;
}

/* kill --all without a cgroup (a caller without root, runtime/rootless_oci.h): every process of
 * the container's pid namespace, each through a pidfd taken before its namespace is checked
 * again, so a pid reused meanwhile is never signalled */
static int
kill_pidns (pid_t init, int sig, asbx_err_t *err)
{
  cleanup_free pid_t *pids = NULL;
  struct stat want, st;
  char path[64];
  size_t n = 0;

  if (rootless_pidns_pids (init, &pids, &n, err) < 0)
    return asbx_error_wrap (err, "kill --all");
  snprintf (path, sizeof path, "/proc/%d/ns/pid", (int) init);
  if (stat (path, &want) < 0)
    return asbx_error (err, errno, "kill --all: %s", path);
  for (size_t i = 0; i < n; i++)
    {
      cleanup_close int pfd = (int) syscall (SYS_pidfd_open, pids[i], 0);
      snprintf (path, sizeof path, "/proc/%d/ns/pid", (int) pids[i]);
      if (pfd < 0 || stat (path, &st) < 0 || st.st_ino != want.st_ino || st.st_dev != want.st_dev)
        continue; /* gone (or reused) since it was listed */
      if (syscall (SYS_pidfd_send_signal, pfd, sig, NULL, 0) < 0 && errno != ESRCH)
        return asbx_error (err, errno, "kill --all: signal pid %d", (int) pids[i]);
    }
  return 0;
}

int
asbx_container_kill (const struct asbx_global *g, const char *id, int sig, bool all, asbx_err_t *err)
{
  struct asbx_opened o;
  cleanup_close int pfd = -1;
  int ret = -1;

  if (asbx_container_open (g->root, id, &o, err) < 0)
    goto out;
  if (!o.has_state || !asbx_state_alive (&o.st))
    {
      /* runc's wording: containerd's shim matches "container not running" to treat a kill
       * of an exited container as "already finished" (StopContainer, docker stop) */
      asbx_error (err, 0, "cannot kill `%s`: container not running", id);
      goto out;
    }
  if (all && o.st.cgroup_path)
    {
      ret = cgroup_kill_all (o.st.cgroup_path, sig, err);
      goto out;
    }
  if (all && rootless_caller ())
    {
      ret = kill_pidns (o.st.pid, sig, err);
      goto out;
    }
  pfd = pidfd_for (&o.st);
  if (pfd < 0 || syscall (SYS_pidfd_send_signal, pfd, sig, NULL, 0) < 0)
    {
      asbx_error (err, errno, "kill container `%s`", id);
      goto out;
    }
  ret = 0;
out:
  asbx_container_close (&o);
  return ret;
}

/* SIGKILL the init (and with a cgroup, everything in it) and wait until it is gone. */
static void
kill_and_wait (const struct asbx_state *st)
{
  asbx_err_t e = NULL;
  cleanup_close int pfd = pidfd_for (st);
  if (st->cgroup_path && cgroup_kill_all (st->cgroup_path, SIGKILL, &e) < 0)
    asbx_error_free (&e);
  /* a frozen task does not die until thawed (cgroup-v1 freezer): thaw after the SIGKILL */
  if (st->cgroup_path && cgroup_is_frozen (st->cgroup_path, NULL) == 1
      && cgroup_freeze (st->cgroup_path, false, 5000, &e) < 0)
    asbx_error_free (&e);
  if (pfd < 0)
    return;
  syscall (SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
  struct pollfd p = { .fd = pfd, .events = POLLIN };
  poll (&p, 1, 10000);
  /* reap if it happens to be our child (run) */
  waitpid (st->pid, NULL, WNOHANG);
}

static void
run_poststop (int dirfd, const struct asbx_state *st)
{
  cleanup_free char *raw = NULL, *json = NULL;
  cleanup_spec struct oci_spec *spec = NULL;
  asbx_err_t e = NULL;
  size_t len;

  if (read_file_at (dirfd, "config.json", 16 << 20, &raw, &len, &e) < 0
      || !(spec = oci_spec_parse (raw, len, "config.json", &e)))
    {
      log_warning ("poststop hooks not run: %s", e->msg);
      asbx_error_free (&e);
      return;
    }
  if (!spec->hooks || spec->hooks->poststop_len == 0)
    return;
  json = state_json (st->id, asbx_status_after (ASBX_OP_DELETE), 0, st->bundle, &st->annotations, &e);
  if (!json)
    {
      log_warning ("%s", e->msg);
      asbx_error_free (&e);
      return;
    }
  /* runtime.md: a failing poststop hook is a warning; the others still run, delete continues */
  hooks_run_all_warn (spec->hooks->poststop, spec->hooks->poststop_len, "hooks.poststop", json);
}

int
asbx_container_delete (const struct asbx_global *g, const char *id, bool force, asbx_err_t *err)
{
  struct asbx_opened o;
  int ret = -1;

  /* a vm-tier run whose runner was killed (SIGKILL of a foreground `run`): its QEMU, cgroup and
   * run directory (runtime/vm_runrec.h); a live one's are left to it */
  if (force && asbx_id_validate (id, NULL) == 0)
    (void) vm_runrec_reap_stale (g->root, id);
  if (asbx_container_open (g->root, id, &o, err) < 0)
    {
      if (force && o.dirfd < 0 && *err && strstr ((*err)->msg, "does not exist"))
        {
          asbx_error_free (err);
          ret = 0;
        }
      goto out;
    }
  if (o.has_state)
    {
      const enum asbx_status status = asbx_state_status (o.dirfd, &o.st);
      if (!asbx_status_allows (status, ASBX_OP_DELETE) && !force)
        {
          asbx_error (err, 0, "cannot delete container `%s` that is not stopped: %s", id, asbx_status_name (status));
          goto out;
        }
      test_stop_at ("delete:opened");
      if (status != ASBX_STATUS_STOPPED)
        kill_and_wait (&o.st);
      /* the vm tier: QEMU (it dies with the supervisor) and <root>/vm/<id> */
      vm_supervisor_delete (o.dirfd, g->root, id);
      test_stop_at ("delete:killed");
      if (!g->vm_guest_no_hooks)
        run_poststop (o.dirfd, &o.st);
      if (o.st.rootfs && faccessat (o.dirfd, HOST_MOUNTS_MARK, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        host_mounts_cleanup (o.st.rootfs);
      if (o.st.cgroup_path && cgroup_remove (o.st.cgroup_path, o.st.cgroup_mask, 10000, err) < 0)
        goto out;
      test_stop_at ("delete:cgroup");
    }
  else if (!force)
    {
      asbx_error (err, 0, "cannot delete container `%s`: it is still being created (use --force)", id);
      goto out;
    }
  else
    creating_cleanup (o.dirfd); /* we hold the lock: the create that made this entry died */
  /* the container's processes are gone: its pins of masked files go (policy_pin.h) */
  policy_pin_release (o.rootfd, o.dirfd);
  /* the monitor writes exit_reason and its last audit record after the init is gone: let it
   * finish before the directory goes */
  monitor_wait_exit (o.dirfd, 5000);
  /* its review workspace outlives it, stopped: ready for `workspace diff/apply/discard` */
  ws_review_stopped (o.dirfd, id);
  ret = asbx_state_dir_remove (o.rootfd, id, err);
out:
  asbx_container_close (&o);
  return ret;
}

int
asbx_container_wait (pid_t pid)
{
  static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };
  sigset_t set, old;
  int status;

  /* the signal proxy: we block the signals and forward each to the container's init */
  sigemptyset (&set);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (sigs); i++)
    sigaddset (&set, sigs[i]);
  sigaddset (&set, SIGCHLD);
  sigprocmask (SIG_BLOCK, &set, &old);
  for (;;)
    {
      pid_t r = waitpid (pid, &status, WNOHANG);
      if (r == pid)
        break;
      if (r < 0 && errno != EINTR)
        return 255;
      /* orphans reparented to us (we are a subreaper) stay zombies until we exit: reaping
       * them with waitpid(-1) could race with and steal the init's own status */
      int sig = sigwaitinfo (&set, NULL);
      if (sig > 0 && sig != SIGCHLD)
        kill (pid, sig);
    }
  sigprocmask (SIG_SETMASK, &old, NULL);
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return WEXITSTATUS (status);
}
