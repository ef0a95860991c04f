/* spawn.c - P/S/I process creation (see sync.h for the exchange).
 *
 * Why a stage child: joining a pid or time namespace by path (setns) and creating a new pid or
 * time namespace (unshare) only take effect for children, and the runtime itself must keep its
 * own namespaces. S does the namespace work and forks I; I is reparented to P, which is a child
 * subreaper (PR_SET_CHILD_SUBREAPER), so `run` can wait for it and failures can reap it.
 * The cgroup namespace is unshared only after P has moved S into the container's cgroup, so the
 * namespace root is the container's cgroup. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/cgroup.h"
#include "linux/lsm_procattr.h"
#include "linux/ns.h"
#include "runtime/container.h"
#include "runtime/rootless_cgroup.h"
#include "runtime/spawn.h"
#include "runtime/sync.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Runs in S. Never returns. */
static void __attribute__ ((noreturn)) stage_main (struct init_args *a)
{
  asbx_err_t err = NULL;
  struct sync_msg m;
  unsigned long flags = a->ns->new_flags;
  pid_t pid;

  prctl (PR_SET_PDEATHSIG, SIGKILL);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (a->close_fds); i++)
    if (a->close_fds[i] >= 0)
      close (a->close_fds[i]);
  if (sync_recv (a->sync_fd, SYNC_GO, &m, &err) < 0)
    _exit (1);
  if (ns_join_all (a->ns, &err) < 0)
    sync_fail (a->sync_fd, &err);
  if (flags & CLONE_NEWUSER)
    {
      if (unshare (CLONE_NEWUSER) < 0)
        {
          asbx_error (&err, errno, "unshare user namespace");
          sync_fail (a->sync_fd, &err);
        }
      if (sync_send (a->sync_fd, SYNC_USERNS_READY, 0, NULL, &err) < 0
          || sync_recv (a->sync_fd, SYNC_USERNS_MAPPED, &m, &err) < 0)
        sync_fail (a->sync_fd, &err);
    }
  if ((flags & CLONE_NEWUSER) || (a->ns->join_flags & CLONE_NEWUSER))
    {
      /* become root of the user namespace we are in; needed for the mounts that follow */
      if (setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0)
        {
          asbx_error (&err, errno, "switch to uid/gid 0 in the user namespace (is 0 mapped?)");
          sync_fail (a->sync_fd, &err);
        }
    }
  if (unshare ((int) (flags & ~(unsigned long) CLONE_NEWUSER)) < 0)
    {
      asbx_error (&err, errno, "unshare namespaces (flags 0x%lx)", flags & ~(unsigned long) CLONE_NEWUSER);
      sync_fail (a->sync_fd, &err);
    }
  if ((flags & CLONE_NEWTIME) && ns_write_time_offsets (a->spec->linux_, &err) < 0)
    sync_fail (a->sync_fd, &err);
  /* S and I share the sync socket: I must not send CREATE_RUNTIME before S has sent PID, or
   * P reads them out of order ("expected PID, got CREATE_RUNTIME", seen with 50 parallel
   * creates in tests/escape). I waits for EOF on this pipe: S closes it once PID is sent. */
  int order[2];
  if (pipe2 (order, O_CLOEXEC) < 0)
    {
      asbx_error (&err, errno, "pipe");
      sync_fail (a->sync_fd, &err);
    }
  pid = fork ();
  if (pid < 0)
    {
      asbx_error (&err, errno, "fork container init");
      sync_fail (a->sync_fd, &err);
    }
  if (pid == 0)
    {
      char b;
      close (order[1]);
      while (read (order[0], &b, 1) < 0 && errno == EINTR)
        ;
      close (order[0]);
      init_main (a);
    }
  if (sync_send (a->sync_fd, SYNC_PID, pid, NULL, &err) < 0)
    {
      kill (pid, SIGKILL);
      _exit (1);
    }
  /* PID is sent: release I now, not at our exit, whose teardown of our copy of the runtime's
   * memory (exit_mm comes before the files are closed) would stay on I's critical path */
  close (order[1]);
  _exit (0);
}

static void
reap (pid_t pid)
{
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
}

int
spawn_init (struct init_args *a, int psync, pid_t *init_pid, unsigned long *cgroup_mask, asbx_err_t *err)
{
  struct sync_msg m;
  pid_t stage;
  int status;

  if (prctl (PR_SET_CHILD_SUBREAPER, 1) < 0)
    return asbx_error (err, errno, "prctl(PR_SET_CHILD_SUBREAPER)");
  /* whether the LSMs of the requested labels are on, asked here in the host's view and cached
   * for the init, which applies the labels after pivot_root (linux/apparmor.c); a spec without
   * `linux` never gets here (create_check: a new mount namespace is required) */
  linux_lsm_probe (a->model->process->apparmor_profile, a->model->process->selinux_label, a->spec->linux_->mount_label);
  stage = fork ();
  if (stage < 0)
    return asbx_error (err, errno, "fork");
  if (stage == 0)
    {
      close (psync);
      stage_main (a);
    }
  /* the child end now belongs to S and I alone: while P still held it, a stage child or init
   * killed before it could report (SIGKILL from the OOM killer under a tiny memory limit) never
   * gave P the EOF it waits for, and create hung in recv forever */
  close (a->sync_fd);
  a->sync_fd = -1;
  struct timespec t0, t1;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  /* no cgroup: a non-root caller's container without a delegated one (runtime/rootless.h)
   * stays in the caller's */
  int entered = a->cgroup_path ? cgroup_enter (a->cgroup_path, a->cgroup_unit, stage, cgroup_mask, err) : 0;
  asbx_cgroup_prime_done ();
  if (entered < 0)
    goto fail;
  clock_gettime (CLOCK_MONOTONIC, &t1);
  /* the migration's grace period shows here when the priming in selfexe.c came too late */
  log_debug ("cgroup_enter: %ld us", (long) ((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000));
  /* limits before SYNC_GO: the stage child has not run any container code yet. A non-root
   * caller's delegated cgroup gets only what it can hold (rootless_cgroup_narrow: no device
   * filter, no limit of an undelegated controller), written as `update` does. */
  struct oci_resources narrowed = { 0 };
  const struct oci_resources *res = a->model->resources;
  if (a->rootless && res)
    {
      narrowed = *res;
      rootless_cgroup_narrow (a->cgroup_path, &narrowed);
      res = &narrowed;
    }
  if (a->cgroup_path
      && cgroup_apply_resources (a->cgroup_path, a->cgroup_unit, res, a->rootless ? NULL : a->spec->linux_->devices,
                                 a->rootless ? 0 : a->spec->linux_->devices_len, a->rootless, err)
             < 0)
    goto fail;
  if (sync_send (psync, SYNC_GO, 0, NULL, err) < 0)
    goto fail;
  if (a->ns->new_flags & CLONE_NEWUSER)
    {
      if (sync_recv (psync, SYNC_USERNS_READY, &m, err) < 0)
        goto fail;
      if (ns_write_id_maps (stage, a->spec->linux_, err) < 0)
        goto fail;
      if (sync_send (psync, SYNC_USERNS_MAPPED, 0, NULL, err) < 0)
        goto fail;
    }
  if (sync_recv (psync, SYNC_PID, &m, err) < 0)
    goto fail;
  while (waitpid (stage, &status, 0) < 0)
    if (errno != EINTR)
      break;
  *init_pid = m.value;
  return 0;

fail:
  kill (stage, SIGKILL);
  reap (stage);
  /* an init forked just before the failure was reparented to us: reap it too */
  while (waitpid (-1, NULL, WNOHANG) > 0)
    ;
  return -1;
}
