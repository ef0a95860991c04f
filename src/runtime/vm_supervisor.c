/* vm_supervisor.c - the vm tier's detached lifecycle (vm_supervisor.h for the exchange).
 *
 * Ordering: the state dir and start.sock exist before the supervisor is forked (it inherits the
 * listening socket, never the state dir's locked fd: the lock is the create's, then the verbs');
 * state.json is written only after the guest reported `created`, so a failed boot leaves a
 * `creating` entry that this create removes itself. The supervisor blocks the signals it
 * forwards only once QEMU runs (QEMU must not inherit a blocked mask). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "runtime/container_internal.h"
#include "runtime/hooks.h"
#include "runtime/state.h"
#include "runtime/vm.h"
#include "runtime/vm_cgroup.h"
#include "runtime/vm_exec.h"
#include "runtime/vm_runrec.h"
#include "runtime/vm_supervisor.h"

/* the signals S forwards to the container's init: every catchable one that is not a fault of S
 * itself, nor SIGCHLD (QEMU's) or SIGPIPE (ignored) */
static const int fwd_signals[] = { SIGHUP,   SIGINT,    SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM,
                                   SIGWINCH, SIGCONT,   SIGTSTP, SIGTTIN, SIGTTOU, SIGURG,  SIGXCPU,
                                   SIGXFSZ,  SIGVTALRM, SIGPROF, SIGIO,   SIGPWR };

struct sup
{
  int ready;                  /* to P: "P pid start", then "R" or "E message"; -1 once "R" is sent */
  int startfd;                /* listening start.sock, -1 once `start` came */
  int conn;                   /* the `start` verb's connection while the guest starts, or -1 */
  int ctl;                    /* our end of asbx.ctl */
  struct vm_exec_relay *exec; /* exec.sock and asbx.exec (runtime/vm_exec.h) */
  char buf[512];
  size_t len;
};

static void
sup_send (int fd, const char *line)
{
  /* asbx.ctl is non-blocking: when the guest does not read it, the line is dropped (a signal
   * the guest would not have handled anyway) and the loop goes on */
  if (fd >= 0 && write_all (fd, line, strlen (line)) < 0)
    log_debug ("isolation vm: supervisor: write: %s%s", strerror (errno),
               errno == EAGAIN ? " (the guest does not read its control port: line dropped)" : "");
}

/* one line the guest sent on asbx.ctl */
static void
sup_guest_line (struct sup *s, const char *line)
{
  if (strcmp (line, "created") == 0 && s->ready >= 0)
    {
      sup_send (s->ready, "R\n");
      close (s->ready);
      s->ready = -1;
    }
  else if (strcmp (line, "started") == 0 && s->conn >= 0)
    {
      close (s->conn); /* EOF with nothing sent: started (container.c start_socket_release) */
      s->conn = -1;
    }
  else if (strncmp (line, "error ", 6) == 0 && s->conn >= 0)
    {
      sup_send (s->conn, line + 6);
      close (s->conn);
      s->conn = -1;
    }
}

/* false at EOF of asbx.ctl */
static bool
sup_read_ctl (struct sup *s)
{
  ssize_t r = read (s->ctl, s->buf + s->len, sizeof s->buf - 1 - s->len);
  if (r < 0 && (errno == EINTR || errno == EAGAIN))
    return true;
  if (r <= 0)
    return false;
  s->len += (size_t) r;
  s->buf[s->len] = '\0';
  char *nl;
  while ((nl = strchr (s->buf, '\n')) != NULL)
    {
      *nl = '\0';
      sup_guest_line (s, s->buf);
      s->len -= (size_t) (nl + 1 - s->buf);
      memmove (s->buf, nl + 1, s->len + 1);
    }
  if (s->len == sizeof s->buf - 1)
    s->len = 0; /* no line of the guest's is this long: dropped */
  return true;
}

/* `start` connected: take its byte, tell the guest; the listening socket is done */
static void
sup_accept_start (struct sup *s)
{
  char c;
  int fd = accept4 (s->startfd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0)
    return;
  if (read (fd, &c, 1) != 1)
    {
      close (fd);
      return;
    }
  s->conn = fd;
  close (s->startfd);
  s->startfd = -1;
  sup_send (s->ctl, "start\n");
}

static int
poll_timeout (uint64_t deadline_ns)
{
  if (!deadline_ns)
    return -1;
  uint64_t now = now_ns ();
  return now >= deadline_ns ? 0 : (int) ((deadline_ns - now) / 1000000 + 1);
}

/* vm_attach.wait: the supervisor's event loop while QEMU runs */
static int
sup_wait (struct vm_attach *a, pid_t qemu, uint64_t deadline_ns)
{
  struct sup *s = a->arg;
  sigset_t set;
  int st = 0;
  char line[64];

  close (a->ctl_fd); /* QEMU has them */
  a->ctl_fd = -1;
  close (a->exec_fd);
  a->exec_fd = -1;
  /* QEMU's pid and start time, and its cgroup for delete to remove (runtime/vm_cgroup.h) */
  cleanup_free char *rec = xasprintf ("P %d %llu %s\n", (int) qemu, (unsigned long long) asbx_pid_start_time (qemu),
                                      a->cgroup ? a->cgroup : "");
  sup_send (s->ready, rec);
  sigemptyset (&set);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (fwd_signals); i++)
    sigaddset (&set, fwd_signals[i]);
  sigprocmask (SIG_BLOCK, &set, NULL);
  cleanup_close int sfd = signalfd (-1, &set, SFD_CLOEXEC);
  cleanup_close int pfd = (int) syscall (SYS_pidfd_open, qemu, 0);
  for (;;)
    {
      struct pollfd p[5 + 2 + VM_EXEC_MAX_SESSIONS] = {
        { .fd = pfd, .events = POLLIN }, { .fd = s->ctl, .events = POLLIN },
        { .fd = sfd, .events = POLLIN }, { .fd = s->ready < 0 ? s->startfd : -1, .events = POLLIN },
        { .fd = s->ready, .events = 0 }, /* POLLERR/POLLHUP: the create is gone */
      };
      /* exec sessions once the container runs (the guest serves them after `start`) */
      size_t nx = s->ready < 0 && s->startfd < 0 ? vm_exec_relay_pollfds (s->exec, p + 5, ASBX_ARRAY_SIZE (p) - 5) : 0;
      int n = poll (p, (nfds_t) (5 + nx), poll_timeout (deadline_ns));
      if (n < 0 && errno != EINTR)
        break;
      if (deadline_ns && now_ns () >= deadline_ns)
        {
          if (s->ready >= 0)
            {
              sup_send (s->ready, "E isolation vm: limits.wallClockSeconds ran out while the VM booted\n");
              close (s->ready);
              s->ready = -1;
            }
          kill (qemu, SIGKILL);
          while (waitpid (qemu, &st, 0) < 0 && errno == EINTR)
            ;
          return -1;
        }
      if (n <= 0)
        continue;
      if (p[0].revents || pfd < 0)
        break;
      if (p[4].revents & (POLLERR | POLLHUP))
        {
          kill (qemu, SIGKILL); /* nobody will ever start this container */
          break;
        }
      if (p[1].revents && !sup_read_ctl (s))
        {
          close (s->ctl);
          s->ctl = -1;
        }
      if (p[2].revents)
        {
          struct signalfd_siginfo si;
          if (read (sfd, &si, sizeof si) == (ssize_t) sizeof si)
            {
              snprintf (line, sizeof line, "kill %u\n", si.ssi_signo);
              sup_send (s->ctl, line);
            }
        }
      if (p[3].revents)
        sup_accept_start (s);
      vm_exec_relay_handle (s->exec, p + 5, nx);
    }
  while (waitpid (qemu, &st, 0) < 0 && errno == EINTR)
    ;
  if (s->conn >= 0)
    sup_send (s->conn, "isolation vm: the VM ended before the container started");
  return st;
}

/* the network namespace config.json asks for, before QEMU (hooks see it as the container's):
 * made or joined here, then handed to vm_net (runtime/vm_net.h, vm_net_given) with the one left,
 * the runtime's own, from which the monitor of network.mode filtered is forked; QEMU joins S's */
static int
sup_netns (const struct oci_spec *spec, struct vm_net_given *g, asbx_err_t *err)
{
  for (size_t i = 0; spec->linux_ && i < spec->linux_->namespaces_len; i++)
    {
      const struct oci_namespace *ns = &spec->linux_->namespaces[i];
      if (strcmp (ns->type, "network") != 0)
        continue;
      g->host_fd = open ("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
      if (g->host_fd < 0)
        return asbx_error (err, errno, "isolation vm: open the runtime's network namespace");
      g->fresh = !ns->path || !*ns->path;
      /* the hooks that run before start with our pid wire a fresh one (Docker's libnetwork-setkey) */
      g->wired = spec->hooks && (spec->hooks->prestart_len || spec->hooks->create_runtime_len);
      if (g->fresh)
        {
          if (unshare (CLONE_NEWNET) < 0)
            return asbx_error (err, errno, "isolation vm: a network namespace");
        }
      else
        {
          cleanup_close int fd = open (ns->path, O_RDONLY | O_CLOEXEC);
          if (fd < 0 || setns (fd, CLONE_NEWNET) < 0)
            return asbx_error (err, errno, "isolation vm: join the network namespace %s", ns->path);
        }
      g->netns_fd = open ("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
      if (g->netns_fd < 0)
        return asbx_error (err, errno, "isolation vm: open the container's network namespace");
      return 0;
    }
  return 0;
}

struct sup_args
{
  const struct asbx_global *g;
  const char *id, *bundle;
  const struct oci_spec *spec;
  const struct policy_plan *plan;
};

static _Noreturn void
supervisor_main (const struct sup_args *sa, int startfd, int execfd, int ready)
{
  asbx_err_t err = NULL;
  int sp[2], xp[2], status = 255;
  struct sup s = { .ready = ready, .startfd = startfd, .conn = -1, .ctl = -1 };
  struct vm_net_given net = { .netns_fd = -1, .host_fd = -1 };

  setsid (); /* no terminal's job control reaches it (runc's detached init likewise) */
  if (sup_netns (sa->spec, &net, &err) < 0 || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0
      || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, xp) < 0)
    {
      if (!err)
        asbx_error (&err, errno, "isolation vm: socketpair");
      goto fail;
    }
  s.ctl = sp[0];
  /* never block on the guest: a guest that stops reading asbx.ctl while the host keeps sending
   * signals filled the socket, the supervisor blocked in write and its loop no longer checked
   * the wall clock (outside attack 14). A line that does not fit is dropped (sup_send) */
  (void) fcntl (s.ctl, F_SETFL, fcntl (s.ctl, F_GETFL) | O_NONBLOCK);
  /* above QEMU's fixed fds (vm_jail.h): vm_run_attached dup2s it to VM_JAIL_CTL_FD */
  int qfd = fcntl (sp[1], F_DUPFD_CLOEXEC, 10);
  close (sp[1]);
  int qxfd = fcntl (xp[1], F_DUPFD_CLOEXEC, 10);
  close (xp[1]);
  s.exec = vm_exec_relay_new (execfd, xp[0]);
  struct vm_attach att = { .ctl_fd = qfd,
                           .exec_fd = qxfd,
                           .wait = sup_wait,
                           .arg = &s,
                           .as_uid = sa->g->vm_uid,
                           .as_gid = sa->g->vm_gid,
                           .net = net };
  if (qfd < 0 || qxfd < 0)
    asbx_error (&err, errno, "isolation vm: dup");
  else if (vm_run_attached (sa->g->root, sa->id, sa->bundle, sa->spec, sa->plan, &att, &status, &err) == 0)
    _exit (status & 0xff);
fail:
  if (s.ready >= 0)
    {
      cleanup_free char *line = xasprintf ("E %s\n", err ? err->msg : "isolation vm: the supervisor failed");
      sup_send (s.ready, line);
    }
  else if (err)
    log_error ("%s", err->msg);
  _exit (255);
}

/* P's end: the lines of S until "R" (0), "E msg" or EOF (-1 with *err); "P" is recorded */
static int
await_ready (int fd, int dirfd, asbx_err_t *err)
{
  char buf[16384] = { 0 }; /* cppcheck: uninitvar (len 0 reads nothing) */
  size_t len = 0;
  for (;;)
    {
      char *nl;
      while ((nl = memchr (buf, '\n', len)) != NULL)
        {
          *nl = '\0';
          if (strcmp (buf, "R") == 0)
            return 0;
          if (strncmp (buf, "E ", 2) == 0)
            return asbx_error (err, 0, "%s", buf + 2);
          if (strncmp (buf, "P ", 2) == 0)
            {
              cleanup_free char *rec = xasprintf ("%s\n", buf + 2);
              cleanup_close int mfd = openat (dirfd, VM_SUPERVISOR_MARK,
                                              O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
              if (mfd < 0 || write_all (mfd, rec, strlen (rec)) < 0)
                return asbx_error (err, errno, "state directory: write %s", VM_SUPERVISOR_MARK);
            }
          len -= (size_t) (nl + 1 - buf);
          memmove (buf, nl + 1, len);
        }
      if (len == sizeof buf)
        return asbx_error (err, EIO, "isolation vm: a line from the supervisor too long");
      ssize_t r = read (fd, buf + len, sizeof buf - len);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return asbx_error (err, r < 0 ? errno : 0,
                           "isolation vm: the supervisor ended before the guest created "
                           "the container");
      len += (size_t) r;
    }
}

/* exec.sock in the state dir (runtime/vm_exec.h), bound as start.sock is: through
 * /proc/self/fd/DIRFD, so the path's length does not depend on --root and the id */
static int
exec_socket_listen (int dirfd, asbx_err_t *err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  snprintf (addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d/" VM_EXEC_SOCK, dirfd);
  if (fd < 0 || bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (fd, 16) < 0)
    return asbx_error (err, errno, "create " VM_EXEC_SOCK);
  return steal_fd (&fd);
}

static int
refuse_unbuilt (const struct oci_spec *spec, asbx_err_t *err)
{
  if (spec->process && spec->process->terminal)
    return asbx_error (err, EINVAL,
                       "isolation vm: process.terminal is not built yet in the vm tier (create/start; a foreground "
                       "`run` neither)");
  if (spec->hooks && (spec->hooks->create_container_len || spec->hooks->start_container_len))
    return asbx_error (err, EINVAL,
                       "isolation vm: hooks.createContainer and hooks.startContainer are not built in the vm tier "
                       "(they would run inside the guest, where the host's hook binaries are not)");
  return 0;
}

/* SIGKILL S and wait for it (our child until create returns) */
static void
reap (pid_t pid)
{
  kill (pid, SIGKILL);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
}

static int
record (const struct asbx_create_opts *o, int dirfd, pid_t pid, const char *bundle, const struct oci_spec *spec,
        const char *raw, size_t raw_len, asbx_err_t *err)
{
  cleanup_free char *created = asbx_rfc3339_now ();
  cleanup_free char *json = state_json (o->id, ASBX_STATUS_CREATED, pid, bundle, &spec->annotations, err);
  struct asbx_state st = {
    .id = (char *) o->id,
    .pid = pid,
    .pid_start = asbx_pid_start_time (pid),
    .bundle = (char *) bundle,
    .created = created,
    .owner = getuid (),
    .annotations = spec->annotations,
  };
  if (!json)
    return -1;
  if (spec->hooks
      && (hooks_run (spec->hooks->prestart, spec->hooks->prestart_len, "hooks.prestart", json, err) < 0
          || hooks_run (spec->hooks->create_runtime, spec->hooks->create_runtime_len, "hooks.createRuntime", json, err)
                 < 0))
    return -1;
  if (st.pid_start == 0)
    return asbx_error (err, 0, "isolation vm: the supervisor exited during create");
  if (asbx_state_write (dirfd, &st, err) < 0)
    return -1;
  cleanup_close int cfd = openat (dirfd, "config.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (cfd < 0 || write_all (cfd, raw, raw_len) < 0)
    return asbx_error (err, errno, "save config.json in the state directory");
  if (o->pid_file && write_pid_file (o->pid_file, pid, err) < 0)
    return -1;
  return 0;
}

int
vm_supervisor_create (const struct asbx_global *g, const struct asbx_create_opts *o, const char *bundle,
                      const struct oci_spec *spec, const struct policy_plan *plan, const char *raw, size_t raw_len,
                      pid_t *pid, asbx_err_t *err)
{
  cleanup_close int rootfd = -1, dirfd = -1, startfd = -1, execfd = -1, rd = -1;
  int p[2];
  pid_t sup = -1;

  if (refuse_unbuilt (spec, err) < 0)
    return -1;
  if ((rootfd = asbx_root_open (g->root, true, err)) < 0 || (dirfd = asbx_state_dir_create (rootfd, o->id, err)) < 0)
    return -1;
  if ((startfd = start_socket_listen (dirfd, err)) < 0 || (execfd = exec_socket_listen (dirfd, err)) < 0)
    goto undo;
  if (pipe2 (p, O_CLOEXEC) < 0)
    {
      asbx_error (err, errno, "isolation vm: pipe");
      goto undo;
    }
  rd = p[0];
  fflush (NULL);
  sup = fork ();
  if (sup < 0)
    {
      asbx_error (err, errno, "isolation vm: fork the supervisor");
      close (p[1]);
      goto undo;
    }
  if (sup == 0)
    {
      struct sup_args sa = { .g = g, .id = o->id, .bundle = bundle, .spec = spec, .plan = plan };
      close (rd);
      close (dirfd); /* the lock stays with the create, then the verbs */
      close (rootfd);
      supervisor_main (&sa, startfd, execfd, p[1]);
    }
  close (p[1]);
  close (startfd);
  startfd = -1;
  close (execfd);
  execfd = -1;
  if (await_ready (rd, dirfd, err) < 0 || record (o, dirfd, sup, bundle, spec, raw, raw_len, err) < 0)
    goto undo;
  *pid = sup;
  return 0;
undo:
  if (sup > 0)
    reap (sup);
  vm_supervisor_delete (dirfd, g->root, o->id);
  /* a supervisor killed before it reported QEMU's pid: its run directory (QEMU died with it) */
  vm_run_dir_remove (g->root, o->id);
  asbx_err_t e = NULL;
  if (asbx_state_dir_remove (rootfd, o->id, &e) < 0)
    {
      log_warning ("cleanup after failed create: %s", e->msg);
      asbx_error_free (&e);
    }
  return -1;
}

bool
vm_supervisor_is_vm (int dirfd)
{
  return faccessat (dirfd, VM_SUPERVISOR_MARK, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

void
vm_supervisor_delete (int dirfd, const char *state_root, const char *id)
{
  cleanup_free char *rec = NULL;
  int qpid = 0;
  unsigned long long start = 0;
  asbx_err_t e = NULL;

  if (dirfd < 0 || read_file_at (dirfd, VM_SUPERVISOR_MARK, 8192, &rec, NULL, &e) < 0)
    {
      /* not the vm tier (a foreground `run` of the same id may own <root>/vm/<id>) */
      asbx_error_free (&e);
      return;
    }
  int off = 0;
  if (sscanf (rec, "%d %llu %n", &qpid, &start, &off) >= 2 && qpid > 0)
    vm_runrec_kill_qemu ((pid_t) qpid, start);
  /* QEMU's cgroup (the supervisor removes it when QEMU ends; not when it was killed) */
  if (off > 0)
    vm_cgroup_remove_record (rec + off);
  vm_run_dir_remove (state_root, id);
}
