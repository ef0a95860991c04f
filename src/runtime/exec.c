/* exec.c - join a running container and execute a process in it.
 *
 * P (the CLI) validates the container (pid + start time, pidfd), builds the process from the
 * config saved at create (or --process), and forks S, which joins every namespace of the
 * container's init that differs from ours with one setns(pidfd, flags) call (Linux >= 5.8: the
 * kernel orders the joins and applies them atomically) and forks E, so that E appears in the
 * pid (and time) namespace only once it is inside the rest. For a container whose user
 * namespace lies below P's (and no time namespace), P forks E directly instead: P points its pid
 * namespace for children at the container's (setns CLONE_NEWPID: P's own pid stays), forks, and
 * points it back; E, non-dumpable, waits until P has moved it into the container's cgroup, then
 * joins the rest (pidns_for_children says why only then). E sets up the tty, cwd, limits,
 * identity and execs. P is a child subreaper, so E (reparented to it when S exits) can be
 * waited for by `exec` (without --detach), which passes its status back. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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
#include "linux/lsm_procattr.h"
#include "linux/ns.h"
#include "linux/process.h"
#include "linux/rootfs.h"
#include "linux/seccomp_bpf.h"
#include "linux/seccomp_cache.h"
#include "policy/policy.h"
#include "runtime/container.h"
#include "runtime/exec.h"
#include "runtime/policy_apply.h"
#include "runtime/egress_ca.h"
#include "runtime/egress_trust.h"
#include "runtime/policy_hostfiles.h"
#include "spec/model.h"
#include "runtime/process.h"
#include "runtime/state.h"
#include "runtime/sync.h"
#include "runtime/tty.h"
#include "runtime/vm_exec.h"
#include "runtime/vm_supervisor.h"
#include "monitor/unixsock.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

int
asbx_parse_user (const char *s, uint32_t *uid, uint32_t *gid, bool *has_gid, asbx_err_t *err)
{
  cleanup_free char *dup = xstrdup (s);
  char *colon = strchr (dup, ':');
  uint64_t v;

  *has_gid = false;
  if (colon)
    *colon = '\0';
  if (parse_u64 (dup, &v) < 0 || v > UINT32_MAX - 1)
    return asbx_error (err, 0, "invalid --user `%s`: expected uid[:gid] as decimal numbers", s);
  *uid = (uint32_t) v;
  if (colon)
    {
      if (parse_u64 (colon + 1, &v) < 0 || v > UINT32_MAX - 1)
        return asbx_error (err, 0, "invalid --user `%s`: expected uid[:gid] as decimal numbers", s);
      *gid = (uint32_t) v;
      *has_gid = true;
    }
  return 0;
}

/* namespaces of `pid` that differ from ours (same inode = same namespace) */
static int
ns_flags_of (pid_t pid)
{
  static const struct
  {
    const char *n;
    int f;
  } t[] = {
    { "user", CLONE_NEWUSER }, { "mnt", CLONE_NEWNS },  { "pid", CLONE_NEWPID },       { "net", CLONE_NEWNET },
    { "ipc", CLONE_NEWIPC },   { "uts", CLONE_NEWUTS }, { "cgroup", CLONE_NEWCGROUP }, { "time", CLONE_NEWTIME }
  };
  int flags = 0;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (t); i++)
    {
      char p[64];
      struct stat a, b;
      snprintf (p, sizeof p, "/proc/%d/ns/%s", pid, t[i].n);
      if (stat (p, &a) < 0)
        continue;
      snprintf (p, sizeof p, "/proc/self/ns/%s", t[i].n);
      if (stat (p, &b) < 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev)
        flags |= t[i].f;
    }
  return flags;
}

/* The root of `pid` when it is not ours (a container chrooted in our mount namespace): an
 * O_PATH fd; -1 when it is our root; -2 with *err. */
static int
init_root_fd (pid_t pid, asbx_err_t *err)
{
  char p[64];
  struct stat a, b;
  snprintf (p, sizeof p, "/proc/%d/root", (int) pid);
  int fd = open (p, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &a) < 0 || stat ("/", &b) < 0)
    {
      asbx_error (err, errno, "open the container's root %s", p);
      if (fd >= 0)
        close (fd);
      return -2;
    }
  if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    {
      close (fd);
      return -1;
    }
  return fd;
}

static void
strv_append (char ***v, size_t *len, char *s)
{
  *v = xrealloc (*v, sizeof (char *) * (*len + 2));
  (*v)[(*len)++] = s;
  (*v)[*len] = NULL;
}

/* --env KEY=V replaces an existing KEY in the container's env, else appends */
static void
env_set (struct oci_process *p, const char *kv)
{
  const char *eq = strchr (kv, '=');
  size_t klen = eq ? (size_t) (eq - kv) : strlen (kv);
  for (size_t i = 0; i < p->env_len; i++)
    if (strncmp (p->env[i], kv, klen) == 0 && p->env[i][klen] == '=')
      {
        free (p->env[i]);
        p->env[i] = xstrdup (kv);
        return;
      }
  strv_append (&p->env, &p->env_len, xstrdup (kv));
}

static void
caps_add (char ***set, size_t *len, const char *cap)
{
  for (size_t i = 0; i < *len; i++)
    if (strcmp ((*set)[i], cap) == 0)
      return;
  strv_append (set, len, xstrdup (cap));
}

/* runc's exec: the container's process with the command and the flags' overrides */
static int
exec_build_process (const struct asbx_exec_opts *o, struct oci_process *p, asbx_err_t *err)
{
  if (o->args_len == 0)
    return asbx_error (err, 0, "exec: no command given (and no --process)");
  for (size_t i = 0; i < p->args_len; i++)
    free (p->args[i]);
  free (p->args);
  p->args = NULL;
  p->args_len = 0;
  for (size_t i = 0; i < o->args_len; i++)
    strv_append (&p->args, &p->args_len, xstrdup (o->args[i]));
  p->terminal = o->tty;
  if (o->cwd)
    {
      free (p->cwd);
      p->cwd = xstrdup (o->cwd);
    }
  for (size_t i = 0; i < o->env_len; i++)
    env_set (p, o->env[i]);
  if (o->user)
    {
      bool has_gid;
      uint32_t gid = 0;
      if (asbx_parse_user (o->user, &p->user.uid, &gid, &has_gid, err) < 0)
        return -1;
      p->user.gid = has_gid ? gid : 0;
    }
  if (o->add_gids_len)
    {
      p->user.additional_gids = xrealloc (p->user.additional_gids, sizeof (uint32_t) * o->add_gids_len);
      p->user.additional_gids_len = 0;
      for (size_t i = 0; i < o->add_gids_len; i++)
        {
          uint64_t v;
          if (parse_u64 (o->add_gids[i], &v) < 0 || v > UINT32_MAX - 1)
            return asbx_error (err, 0, "invalid --additional-gids `%s`: expected a decimal gid", o->add_gids[i]);
          p->user.additional_gids[p->user.additional_gids_len++] = (uint32_t) v;
        }
    }
  if (o->caps_len)
    {
      if (!p->capabilities)
        p->capabilities = xmalloc0 (sizeof *p->capabilities);
      struct oci_capabilities *c = p->capabilities;
      for (size_t i = 0; i < o->caps_len; i++)
        {
          caps_add (&c->bounding, &c->bounding_len, o->caps[i]);
          caps_add (&c->effective, &c->effective_len, o->caps[i]);
          caps_add (&c->permitted, &c->permitted_len, o->caps[i]);
          /* not inheritable: a cap asked for the exec'd process must not pass on through
           * execve (CVE-2022-29162 class); ambient only where process.json already made the
           * cap inheritable (ambient needs it, as runc) */
          for (size_t k = 0; k < c->inheritable_len; k++)
            if (strcmp (c->inheritable[k], o->caps[i]) == 0)
              caps_add (&c->ambient, &c->ambient_len, o->caps[i]);
        }
    }
  if (o->no_new_privs)
    p->no_new_privileges = true;
  if (o->apparmor)
    {
      free (p->apparmor_profile);
      p->apparmor_profile = xstrdup (o->apparmor);
    }
  if (o->process_label)
    {
      free (p->selinux_label);
      p->selinux_label = xstrdup (o->process_label);
    }
  return 0;
}

/* The effective policy saved at create (state dir policy.json), compiled again as it is, with
 * no ceiling and no host config (policy_resolve_saved): exec'd processes get the init's layers
 * even when /etc/agentsbx/config.json changed or names another defaultProfile. *plan stays NULL
 * for a container without a policy. */
static int
load_policy (int dirfd, struct policy_plan **plan, asbx_err_t *err)
{
  cleanup_free char *json = NULL;
  asbx_err_t e = NULL;
  if (read_file_at (dirfd, "policy.json", 1 << 20, &json, NULL, &e) < 0)
    {
      /* absent: a container without a policy; anything else must not exec unconfined */
      if (e && e->errnum == ENOENT)
        {
          asbx_error_free (&e);
          return 0;
        }
      asbx_error_move (err, &e);
      return asbx_error_wrap (err, "the container's saved policy");
    }
  *plan = policy_resolve_saved (json, "the container's policy.json", err);
  return *plan ? 0 : asbx_error_wrap (err, "the container's saved policy");
}

struct exec_child
{
  const struct oci_process *proc;
  int pidfd;
  int ns_flags;
  int sync_fd;
  int console_fd;
  int preserve_fds;
  bool userns;
  const struct linux_seccomp *seccomp;       /* the container's filter, compiled by P; NULL: none */
  int listener;                              /* seccomp listener socket for NOTIFY rules, or -1 */
  const char *process_state;                 /* containerProcessState JSON for the listener */
  const struct policy_plan *plan;            /* the container's effective policy, or NULL */
  const struct oci_memory_policy *mempolicy; /* the container's linux.memoryPolicy, or NULL */
  char *const *cgroups;                      /* exec --cgroup specs: sub-cgroups of the container's cgroup */
  size_t cgroups_len;
  int root_fd;     /* the init's root when it shares our mount namespace (chroot), else -1 */
  int unixsock_fd; /* connection to the monitor's unix-socket supervisor, or -1 */
};

static void __attribute__ ((noreturn)) exec_process_main (struct exec_child *c)
{
  asbx_err_t err = NULL;
  cleanup_free char *exe = NULL;
  struct process_layers layers = PROCESS_LAYERS_INIT;
  int master = -1;

  /* a session (and process group) of its own, tty or not, as runc's nsexec does: inherited from
   * the runtime, the group would not exist in the container's pid namespace (getpgrp() 0) */
  if (setsid () < 0)
    {
      asbx_error (&err, errno, "setsid");
      sync_fail (c->sync_fd, &err);
    }
  if (c->proc->terminal)
    {
      if (linux_pty_setup (c->proc, &master, &err) < 0 || process_send_fd (c->console_fd, master, &err) < 0)
        sync_fail (c->sync_fd, &err);
      close (master);
    }
  if (linux_rlimits_apply (c->proc, &err) < 0 || process_chdir (c->proc->cwd, false, &err) < 0)
    sync_fail (c->sync_fd, &err);
  /* the process's scheduler and I/O priority, and the container's memory policy, as the init */
  if (linux_sched_apply (c->proc, &err) < 0 || linux_mempolicy_apply (c->mempolicy, &err) < 0)
    sync_fail (c->sync_fd, &err);
  exe = process_lookup_executable (c->proc, &err);
  if (!exe)
    sync_fail (c->sync_fd, &err);
  if (policy_prepare_process (c->plan, NULL, &layers, &err) < 0
      || policy_prepare_unixsock (c->plan, c->unixsock_fd, c->seccomp && c->seccomp->notify, &layers, &err) < 0)
    sync_fail (c->sync_fd, &err);
  /* the exec'd process's LSM labels (its process.json or --apparmor/--process-label), applied by
   * the kernel at execve as for the init (runtime/init.c step 12b); the LSM state was probed in P */
  if (linux_apparmor_apply (c->proc->apparmor_profile, &err) < 0
      || linux_selinux_apply (c->proc->selinux_label, &err) < 0)
    sync_fail (c->sync_fd, &err);
  /* the container's seccomp filter applies to every process in it (as runc's exec) */
  if (c->seccomp)
    {
      layers.seccomp = c->seccomp;
      layers.listener = c->listener;
      layers.process_state = c->process_state;
    }
  /* the sync fd is close-on-exec: P sees READY, then EOF at our execve */
  if (sync_send (c->sync_fd, SYNC_READY, 0, NULL, &err) < 0)
    _exit (1);
  process_finalize_and_exec (c->proc, c->userns, c->preserve_fds, exe, &layers, &err);
  dprintf (2, "agentsbx: %s\n", err ? err->msg : "exec failed");
  _exit (127);
}

/* Join the container's namespaces in `flags` and, for a chrooted container, its root. */
static void
exec_enter (struct exec_child *c, int flags)
{
  asbx_err_t err = NULL;

  if (flags && setns (c->pidfd, flags) < 0)
    {
      asbx_error (&err, errno, "join the container's namespaces (setns 0x%x)", flags);
      sync_fail (c->sync_fd, &err);
    }
  /* a container in our mount namespace (no `mount` entry) lives in a chroot: take its root */
  if (c->root_fd >= 0 && (fchdir (c->root_fd) < 0 || chroot (".") < 0 || chdir ("/") < 0))
    {
      asbx_error (&err, errno, "enter the container's root (chroot)");
      sync_fail (c->sync_fd, &err);
    }
}

static void __attribute__ ((noreturn)) exec_stage_main (struct exec_child *c)
{
  asbx_err_t err = NULL;
  struct sync_msg m;
  pid_t pid;

  int order[2];

  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (sync_recv (c->sync_fd, SYNC_GO, &m, &err) < 0)
    _exit (1);
  exec_enter (c, c->ns_flags);
  /* S and E share the sync socket: E must not send READY before S has sent PID, or P reads
   * them out of order ("expected PID, got READY"). E waits for EOF on this pipe: S closes it
   * once PID is sent. */
  if (pipe2 (order, O_CLOEXEC) < 0)
    {
      asbx_error (&err, errno, "pipe");
      sync_fail (c->sync_fd, &err);
    }
  pid = fork ();
  if (pid < 0)
    {
      asbx_error (&err, errno, "fork");
      sync_fail (c->sync_fd, &err);
    }
  if (pid == 0)
    {
      char b;
      close (order[1]);
      while (read (order[0], &b, 1) < 0 && errno == EINTR)
        ;
      close (order[0]);
      exec_process_main (c);
    }
  sync_send (c->sync_fd, SYNC_PID, pid, NULL, NULL);
  close (order[1]); /* E goes on now, not after our exit's memory teardown (spawn.c) */
  _exit (0);
}

/* E forked by P itself (the direct path): E is born in the container's pid namespace (P set its
 * pid_for_children) and joins the other namespaces after P has moved it into the cgroup. */
static void __attribute__ ((noreturn)) exec_direct_main (struct exec_child *c)
{
  asbx_err_t err = NULL;
  struct sync_msg m;

  /* E is in the container's pid namespace from its birth, but in the host's mount namespace
   * until the setns below: no process without CAP_SYS_PTRACE in P's user namespace may open its
   * /proc/<pid>/root, cwd, fd or exe meanwhile (ptrace_may_access on a non-dumpable mm;
   * CVE-2016-9962's lesson), and the container's processes have none there, since this path is
   * taken only when their user namespace lies below P's (pidns_for_children). execve makes the
   * container's program dumpable again. */
  prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
  /* EOF here when P died before GO */
  if (sync_recv (c->sync_fd, SYNC_GO, &m, &err) < 0)
    _exit (1);
  exec_enter (c, c->ns_flags & ~CLONE_NEWPID);
  exec_process_main (c);
}

/* Set P's pid namespace for children to the container's, so that a fork of P lands in it: the
 * direct path of exec_spawn. setns(CLONE_NEWPID) changes only pid_for_children, never P's own
 * pid (pid_namespaces(7)). Returns an fd of P's own pid namespace, to set it back right after
 * the fork, or -1 when the direct path cannot be taken: a time namespace (setns CLONE_NEWTIME
 * would switch P's own clocks, and needs a single-threaded caller), or P may not join (EPERM: a
 * rootless P and a container with its own user namespace) - then S joins as before. */
static int
pidns_for_children (const struct exec_child *c)
{
  if (c->ns_flags & CLONE_NEWTIME)
    return -1;
  /* E is visible in the container's pid namespace while it still has P's credentials, root and
   * mount namespace: non-dumpable keeps out only processes without CAP_SYS_PTRACE over P's user
   * namespace, so the direct path is for containers whose user namespace lies below P's. A
   * container root without a user namespace of its own (runc's default) holds CAP_SYS_PTRACE
   * over the host's once granted it (`--cap-add SYS_PTRACE`): it opened /proc/<E>/root and
   * wrote host files (outside attack 13). Such containers take the S path, where E appears in
   * the pid namespace only after it has joined the mount namespace. */
  if (!(c->ns_flags & CLONE_NEWUSER) || ns_userns_below_ours (c->pidfd) != 1)
    return -1;
  int self = open ("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
  if (self < 0)
    return -1;
  if ((c->ns_flags & CLONE_NEWPID) && setns (c->pidfd, CLONE_NEWPID) < 0)
    {
      close (self);
      return -1;
    }
  return self;
}

/* Fork S/E and wait until E is about to exec. *pid = E. */
static int
exec_spawn (struct exec_child *c, const char *cgroup_path, pid_t *pid, asbx_err_t *err)
{
  int sp[2];
  struct sync_msg *m = xmalloc (sizeof *m);
  cleanup_free struct sync_msg *mfree = m;
  pid_t stage;

  if (prctl (PR_SET_CHILD_SUBREAPER, 1) < 0)
    return asbx_error (err, errno, "prctl(PR_SET_CHILD_SUBREAPER)");
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
    return asbx_error (err, errno, "socketpair");
  c->sync_fd = sp[1];
  /* whether the labels' LSMs are on, asked in the host's view before entering the container */
  linux_lsm_probe (c->proc->apparmor_profile, c->proc->selinux_label, NULL);
  /* the direct path: P forks E (one fork, one exit and the SYNC_PID message less); else S+E */
  int self_pidns = pidns_for_children (c);
  stage = fork ();
  int fork_errno = errno;
  if (stage == 0)
    {
      close (sp[0]);
      if (self_pidns >= 0)
        exec_direct_main (c);
      exec_stage_main (c);
    }
  if (self_pidns >= 0)
    {
      /* back to our own pid namespace for P's later children; fails only if the kernel is broken */
      bool back = !(c->ns_flags & CLONE_NEWPID) || setns (self_pidns, CLONE_NEWPID) == 0;
      int back_errno = errno;
      close (self_pidns);
      if (!back)
        {
          close (sp[0]);
          close (sp[1]);
          if (stage > 0)
            {
              kill (stage, SIGKILL);
              waitpid (stage, NULL, 0);
            }
          return asbx_error (err, back_errno, "setns back to the runtime's own pid namespace");
        }
    }
  if (stage < 0)
    {
      close (sp[0]);
      close (sp[1]);
      return asbx_error (err, fork_errno, "fork");
    }
  close (sp[1]);
  cleanup_close int psync = sp[0];
  *pid = 0;
  int joined = !cgroup_path     ? 0
               : c->cgroups_len ? cgroup_join_sub (cgroup_path, c->cgroups, c->cgroups_len, stage, err)
                                : cgroup_join (cgroup_path, stage, err);
  asbx_cgroup_prime_done ();
  if (joined < 0)
    goto fail;
  if (self_pidns >= 0)
    {
      *pid = stage;
      stage = 0;
      if (sync_send (psync, SYNC_GO, 0, NULL, err) < 0 || sync_recv (psync, SYNC_READY, m, err) < 0)
        goto fail;
      return 0;
    }
  if (sync_send (psync, SYNC_GO, 0, NULL, err) < 0 || sync_recv (psync, SYNC_PID, m, err) < 0)
    goto fail;
  waitpid (stage, NULL, 0);
  *pid = m->value;
  if (sync_recv (psync, SYNC_READY, m, err) < 0)
    goto fail;
  return 0;
fail:
  if (stage > 0)
    {
      kill (stage, SIGKILL);
      waitpid (stage, NULL, 0);
    }
  if (*pid > 0)
    {
      kill (*pid, SIGKILL);
      waitpid (*pid, NULL, 0);
    }
  return -1;
}

int
asbx_container_exec (const struct asbx_global *g, const struct asbx_exec_opts *o, int *exit_status, asbx_err_t *err)
{
  cleanup_close int pidfd = -1, console = -1, listener = -1, tty = -1, root_fd = -1;
  struct asbx_opened oc = { .rootfd = -1, .dirfd = -1 };
  cleanup_free char *raw = NULL, *praw = NULL, *state_json = NULL, *process_state = NULL;
  struct linux_seccomp filter = { 0 };
  struct policy_plan *plan = NULL;
  struct oci_spec *spec = NULL;
  const struct oci_process *proc = NULL;
  struct oci_process *pfile = NULL; /* the process exec runs (owned): --process or the saved config's + flags */
  size_t len;
  pid_t pid = 0;
  int ret = -1, uchan = -1;

  if (asbx_id_validate (o->id, err) < 0)
    return -1;
  if (asbx_container_open (g->root, o->id, &oc, err) < 0)
    goto out;
  if (!oc.has_state)
    {
      asbx_error (err, 0, "cannot exec in container `%s`: it is still being created", o->id);
      goto out;
    }
  const int dirfd = oc.dirfd;
  const struct asbx_state st = oc.st;
  const enum asbx_status status = asbx_state_status (dirfd, &st);
  if (!asbx_status_allows (status, o->ignore_paused ? ASBX_OP_EXEC_PAUSED : ASBX_OP_EXEC))
    {
      asbx_error (err, 0, "cannot exec in container `%s`: container is %s, not running", o->id,
                  asbx_status_name (status));
      goto out;
    }
  if (vm_supervisor_is_vm (dirfd))
    {
      /* its pid is the host-side supervisor's: the process runs in the guest (runtime/vm_exec.h) */
      ret = vm_exec_client (o, &oc.dirfd, exit_status, err);
      goto out;
    }
  pidfd = (int) syscall (SYS_pidfd_open, st.pid, 0);
  if (pidfd < 0 || !asbx_state_alive (&st))
    {
      asbx_error (err, ESRCH, "cannot exec in container `%s`", o->id);
      goto out;
    }
  if (o->cgroups_len && !st.cgroup_path)
    {
      asbx_error (err, 0, "exec --cgroup: container `%s` has no cgroup", o->id);
      goto out;
    }
  if (read_file_at (dirfd, "config.json", 16 << 20, &raw, &len, err) < 0
      || !(spec = oci_spec_parse (raw, len, "config.json", err)))
    goto out;
  if (o->process_file)
    {
      if (read_file_at (AT_FDCWD, o->process_file, 16 << 20, &praw, &len, err) < 0
          || !(pfile = oci_process_parse (praw, len, o->process_file, err)))
        goto out;
    }
  else
    {
      /* the saved config's process with the flags', a copy: the parsed spec stays as it is */
      pfile = oci_process_dup (spec->process);
      if (exec_build_process (o, pfile, err) < 0)
        goto out;
    }
  proc = pfile;
  if (linux_rlimits_check (proc, err) < 0 || linux_caps_check (proc->capabilities, err) < 0
      || linux_sched_check (proc, o->process_file ? "--process: " : "", err) < 0)
    goto out;
  /* a terminal without --console-socket: in the foreground we are the terminal (runtime/tty.h),
   * detached there is nobody to hand the pty to (runc's wording) */
  if (proc->terminal && !o->console_socket && o->detach)
    {
      asbx_error (err, 0, "cannot allocate tty if agentsbx will detach without setting console socket");
      goto out;
    }
  if (proc->terminal && o->console_socket && (console = process_connect_console (o->console_socket, err)) < 0)
    goto out;
  if (proc->terminal && !o->console_socket && asbx_tty_socketpair (&tty, &console, err) < 0)
    goto out;
  /* the container's agent policy applies to every process in it */
  if (load_policy (dirfd, &plan, err) < 0)
    goto out;
  /* the same narrowing as the init's process in the container model (spec/model.h) */
  struct spec_narrowing narrowing;
  policy_model_narrowing (plan, &narrowing);
  spec_narrow_process (pfile, &narrowing, narrowing.active && policy_userns_isolating (spec->linux_));
  /* intercepted hosts: the trust store the init bound (runtime/egress_trust.h), for this process too */
  if (egress_intercepts (plan))
    {
      char rp[64];
      snprintf (rp, sizeof rp, "/proc/%d/root", (int) st.pid);
      cleanup_close int rfd = open (rp, O_PATH | O_DIRECTORY | O_CLOEXEC);
      cleanup_free char *bundle = rfd >= 0 ? egress_trust_path (rfd) : NULL;
      egress_trust_env (pfile, bundle);
    }
  const struct oci_seccomp *sc = spec->linux_ ? spec->linux_->seccomp : NULL;
  if (sc && linux_seccomp_cache_compile (oc.rootfd, sc, &filter, NULL, err) < 0)
    goto out;
  if (sc && filter.notify)
    {
      struct oci_state ost = { .oci_version = "1.3.0",
                               .id = o->id,
                               .status = "running",
                               .pid = st.pid,
                               .bundle = st.bundle,
                               .annotations = &st.annotations };
      if ((listener = linux_seccomp_listener_connect (sc->listener_path, err)) < 0
          || !(state_json = oci_state_to_json (&ost, false, err))
          || !(process_state = linux_seccomp_process_state (state_json, sc->listener_metadata, err)))
        goto out;
    }

  /* the monitor supervises this process's connect(2) too (monitor/unixsock.h); without its
   * socket (a monitor that has none) the process gets no AF_UNIX sockets at all */
  if (unixsock_supervised (plan))
    uchan = unixsock_exec_channel (dirfd);
  /* the lock is not needed while the process runs: release it so other verbs are not blocked */
  close (oc.dirfd);
  oc.dirfd = -1;
  struct exec_child c = {
    .proc = proc,
    .pidfd = pidfd,
    .ns_flags = ns_flags_of (st.pid),
    .console_fd = console,
    .preserve_fds = o->preserve_fds,
    .seccomp = sc ? &filter : NULL,
    .listener = listener,
    .process_state = process_state,
    .plan = plan,
    .mempolicy = spec->linux_ ? spec->linux_->memory_policy : NULL,
    .cgroups = o->cgroups,
    .cgroups_len = o->cgroups_len,
    .root_fd = -1,
    .unixsock_fd = uchan,
  };
  if (!(c.ns_flags & CLONE_NEWNS) && (root_fd = init_root_fd (st.pid, err)) == -2)
    goto out;
  c.root_fd = root_fd;
  c.userns = c.ns_flags & CLONE_NEWUSER;
  if (exec_spawn (&c, st.cgroup_path, &pid, err) < 0)
    goto out;
  if (o->pid_file && write_pid_file (o->pid_file, pid, err) < 0)
    {
      kill (pid, SIGKILL);
      goto out;
    }
  if (tty >= 0)
    {
      /* E sent the master before it reported READY: it is queued on our end already */
      int master = asbx_tty_recv_master (tty, err);
      if (master < 0)
        {
          kill (pid, SIGKILL);
          goto out;
        }
      *exit_status = asbx_tty_proxy_wait (master, pid);
    }
  else
    *exit_status = o->detach ? 0 : asbx_container_wait (pid);
  ret = 0;
out:
  if (uchan >= 0)
    close (uchan); /* the process has its copy */
  if (plan)
    policy_plan_free (plan);
  linux_seccomp_release (&filter);
  asbx_container_close (&oc);
  if (pfile)
    oci_process_free (pfile);
  if (spec)
    oci_spec_free (spec);
  return ret;
}
