/* init.c - the container init (I): the one place that knows the order in which mechanisms are
 * applied. Each step is one call into a linux/ module; the comments say why it sits where it does.
 *
 * I starts in all of the container's namespaces (S created/joined them), in its cgroup, still
 * with full capabilities in its user namespace and with the host's mount tree visible. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/keyctl.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/netroute.h"
#include "linux/process.h"
#include "linux/rootfs.h"
#include "linux/lsm_procattr.h"
#include "linux/seccomp_bpf.h"
#include "linux/seccomp_cache.h"
#include "runtime/hooks.h"
#include "runtime/policy_apply.h"
#include "runtime/policy_pin.h"
#include "runtime/process.h"
#include "runtime/rootless_oci.h"
#include "runtime/egress_ca.h"
#include "runtime/egress_trust.h"
#include "runtime/spawn.h"
#include "runtime/sync.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Step 3c is left to the monitor (monitor/monitor.c network_table_load, before every pasta
 * start) when the table can change nothing until then: `filtered` in a network namespace we
 * made (only `lo`; a container holding CAP_NET_ADMIN could delete the table anyway), no OCI
 * hooks (a prestart/createRuntime/poststart hook could wire it, CNI style), loopback allowed (with allowLocalBinding
 * false the table filters `lo` from the start) and no allowed CIDRs (pasta would attach at create anyway). Until pasta
 * attaches, any other destination fails with ENETUNREACH at the route lookup, before netfilter. Known difference: the
 * table's nat rule sends port 53 of ANY address to the stub; without it a resolver hard-coded to another loopback
 * address (127.0.0.53) is refused rather than redirected (the container's resolv.conf names 127.0.0.1: step 3d). */
/* `filtered` with `network` audit in a namespace we made: routes of last resort
 * (linux/netroute.h), so that an attempt to reach an unlisted address is rejected - and logged -
 * by the table instead of failing at the route lookup unseen (issue 14 §5). Costs the table's
 * deferral (~1.5 ms of CPU per container) and ~5 netlink round trips. */
static bool
last_resort_routes (const struct init_args *a)
{
  const struct policy_plan *pl = a->plan;
  return pl && pl->active && pl->net_mode == POLICY_NET_FILTERED && (pl->audit_events & POLICY_AUDIT_NETWORK)
         && (a->ns->new_flags & CLONE_NEWNET);
}

static bool
network_table_deferred (const struct init_args *a)
{
  const struct policy_plan *pl = a->plan;
  const struct oci_hooks *h = a->spec->hooks;

  if (!pl || !pl->active || pl->net_mode != POLICY_NET_FILTERED || !pl->allow_local_binding || pl->allowed_cidrs_len)
    return false;
  if (last_resort_routes (a))
    return false; /* the routes need the table first */
  if (!(a->ns->new_flags & CLONE_NEWNET))
    return false;
  return !h
         || !(h->prestart_len || h->create_runtime_len || h->create_container_len || h->start_container_len
              || h->poststart_len || h->poststop_len);
}

/* Block until `start` connects to start.sock; returns the connection (close-on-exec: `start`
 * sees EOF when we exec) on which errors after this point are reported. */
static int
wait_for_start (int start_fd, asbx_err_t *err)
{
  for (;;)
    {
      char c;
      int conn = accept4 (start_fd, NULL, NULL, SOCK_CLOEXEC);
      if (conn < 0)
        {
          if (errno == EINTR || errno == ECONNABORTED)
            continue;
          return asbx_error (err, errno, "accept on start.sock");
        }
      if (read (conn, &c, 1) == 1)
        return conn;
      close (conn); /* a connection that sent nothing is not `start` */
    }
}

static void __attribute__ ((noreturn)) fail (struct init_args *a, asbx_err_t *err) { sync_fail (a->sync_fd, err); }

/* After `start` connected (start_conn: its connection, -1 when none): errors go to `start` over it. */
static void __attribute__ ((noreturn)) fail_after_start (int start_conn, asbx_err_t *err)
{
  const char *msg = err && *err ? (*err)->msg : "container init failed";
  if (start_conn < 0 || write_all (start_conn, msg, strlen (msg)) < 0)
    dprintf (2, "agentsbx: %s\n", msg);
  _exit (127);
}

void
init_main (struct init_args *a)
{
  const struct oci_spec *spec = a->spec;
  const struct oci_process *proc = a->model->process;
  asbx_err_t err = NULL;
  struct sync_msg m;
  cleanup_close int rootfd = -1;
  int master = -1;
  const char *state_json;
  cleanup_free char *exe = NULL;
  const struct oci_seccomp *seccomp = spec->linux_ ? spec->linux_->seccomp : NULL;
  struct linux_seccomp filter = { 0 };
  int listener = -1;
  char *process_state = NULL;
  struct process_layers layers = PROCESS_LAYERS_INIT;
  struct policy_mount_result mres = { 0 }; /* from step 3b, for the pins (4) and the carve (10b) */

  /* No PR_SET_PDEATHSIG here: our parent S exits at once, and the init must outlive `create`.
   * If P dies during create, the next sync_recv sees EOF and we exit. */
  /* 1. a new session: the container's process group leader, and needed for a controlling tty */
  if (setsid () < 0)
    {
      asbx_error (&err, errno, "setsid");
      fail (a, &err);
    }
  /* 2. session keyring, so the container cannot read the host's (runc's --no-new-keyring) */
  if (!a->no_new_keyring && syscall (SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS)
    {
      asbx_error (&err, errno, "join a new session keyring");
      fail (a, &err);
    }
  /* 2b. linux.seccomp: P compiled it (through the state root's cache) before forking us; we take
   * that program. Compiling here stays the fallback, so a bad profile always fails `create`.
   * It is installed last. */
  if (seccomp && a->seccomp_filter && a->seccomp_filter->insns)
    filter = *a->seccomp_filter; /* our copy of P's program (fork): ours to use until exec */
  else if (seccomp && linux_seccomp_compile (seccomp, &filter, &err) < 0)
    fail (a, &err);
  /* 3. the filesystem view, while the host's paths (mount sources) are still reachable */
  struct linux_rootfs_opts ro = {
    .spec = spec,
    .rootfs = a->rootfs,
    .bundle = a->bundle,
    /* in a user namespace made by someone else (rootless Podman's) mknod is refused as in ours:
     * device nodes are bind-mounted (runtime/rootless_oci.h) */
    .userns = ((a->ns->new_flags | a->ns->join_flags) & CLONE_NEWUSER) || rootless_in_userns (),
    .new_cgroupns = a->ns->new_flags & CLONE_NEWCGROUP,
    .cgroup_path = a->cgroup_path,
    .readonly_recursive = a->plan && a->plan->active && a->plan->rootfs_readonly,
    .srcs = a->mount_srcs,
    .host_mntns = !((a->ns->new_flags | a->ns->join_flags) & CLONE_NEWNS),
  };
  if (linux_rootfs_prepare (&ro, &rootfd, &err) < 0)
    fail (a, &err);
  /* 3b. the policy's mounts: grants (rw binds) then denies (ro binds, masks) on top */
  if (policy_apply_mounts (rootfd, a->plan, a->model->root_readonly, &mres, &err) < 0)
    fail (a, &err);
  /* 3b'. a network namespace made here has `lo` up, policy or not (runc does) */
  if ((a->ns->new_flags & CLONE_NEWNET) && linux_netns_loopback_up (&err) < 0)
    fail (a, &err);
  /* 3c. the network policy's nftables table, while we hold CAP_NET_ADMIN (the container never
   * does) and before pivot_root, so libnftables reads only the host's files; in an engine-given
   * namespace as in a fresh one. Before the hooks: nothing of the container's runs unfiltered.
   * Except where nothing can leave before pasta attaches: then the monitor loads it right
   * before pasta (network_table_deferred). */
  if (!a->egress_shared && !network_table_deferred (a) && policy_apply_network (a->plan, &err) < 0)
    fail (a, &err);
  if (last_resort_routes (a) && linux_net_last_resort (&err) < 0)
    fail (a, &err);
  /* 3d. filtered in a namespace nobody else wires: the resolver is the monitor's DNS stub */
  if (policy_apply_resolv (rootfd, a->plan, (a->ns->new_flags & CLONE_NEWNET) != 0, &err) < 0)
    fail (a, &err);
  /* 3d'. intercepted hosts: the container's CA joins its trust store (runtime/egress_trust.h);
   * the key (our copy of P's memory) is wiped before any of the container's code runs */
  if (a->egress_ca)
    {
      cleanup_free char *bundle = NULL;
      egress_ca_wipe_key (a->egress_ca);
      if (egress_trust_apply (rootfd, a->egress_ca->cert_pem, &bundle, &err) < 0)
        fail (a, &err);
      egress_trust_env (a->model->process, bundle);
    }
  /* 3e. allowExec: memfds noexec in the container's pid namespace, while we hold CAP_SYS_ADMIN;
   * before any of the container's code (hooks included) runs. The host's /proc is fine: the
   * sysctl acts on the writer's pid namespace. */
  bool userns = (a->ns->new_flags | a->ns->join_flags) & CLONE_NEWUSER;
  /* a caller without root in a user namespace of someone else's (rootless Podman) cannot write
   * the sysctl either: as for its own user namespace, memfd_create stays refused by seccomp */
  if (!userns && !a->rootless && policy_apply_memfd_noexec (a->plan, (a->ns->new_flags & CLONE_NEWPID) != 0, &err) < 0)
    fail (a, &err);
  /* 4. prestart + createRuntime hooks run in the runtime's namespaces: P runs them */
  if (policy_pin_send (mres.pin_notes, a->sync_fd, &err) < 0 || sync_recv (a->sync_fd, SYNC_PINS_DONE, &m, &err) < 0
      || policy_verify_pinned_masks (&mres, rootfd, m.text, &err) < 0
      || sync_send (a->sync_fd, SYNC_CREATE_RUNTIME, 0, mres.missing_grants, &err) < 0
      || sync_recv (a->sync_fd, SYNC_HOOKS_DONE, &m, &err) < 0)
    fail (a, &err);
  /* 4a. in a user namespace P wrote vm.memfd_noexec for us (policy_apply.h): check it did */
  if (userns && !a->rootless && policy_verify_memfd_noexec (a->plan, &err) < 0)
    fail (a, &err);
  /* P sends the state JSON (with our pid as the runtime sees it) for the in-container hooks */
  state_json = xstrdup (m.text);
  /* 4b. seccomp listener: connect while listenerPath (a host path) is reachable, so a missing
   * listener fails `create`; the notify fd is sent after the filter is installed */
  if (seccomp && filter.notify)
    {
      listener = linux_seccomp_listener_connect (seccomp->listener_path, &err);
      if (listener < 0)
        fail (a, &err);
      process_state = linux_seccomp_process_state (state_json, seccomp->listener_metadata, &err);
      if (process_state == NULL)
        fail (a, &err);
    }
  /* 5. createContainer hooks: container namespaces, before pivot_root (runtime.md) */
  if (spec->hooks
      && hooks_run (spec->hooks->create_container, spec->hooks->create_container_len, "hooks.createContainer",
                    state_json, &err)
             < 0)
    fail (a, &err);
  /* 6. the rootfs becomes "/": from here on no host path is reachable */
  if ((ro.host_mntns ? linux_rootfs_chroot (rootfd, &err) : linux_rootfs_pivot (rootfd, a->no_pivot, &err)) < 0)
    fail (a, &err);
  /* 7. the console must exist before /dev may become read-only in finalize */
  if (proc->terminal)
    {
      if (linux_console_setup (spec, &master, &err) < 0 || process_send_fd (a->console_fd, master, &err) < 0)
        fail (a, &err);
      close (master);
      close (a->console_fd);
    }
  /* 8. namespace-scoped settings, while /proc/sys is still writable */
  if (linux_uts_apply (spec, &err) < 0 || (spec->linux_ && linux_sysctl_apply (&spec->linux_->sysctl, &err) < 0))
    fail (a, &err);
  /* 8b. a missing process.cwd is created (runc does), while the root is still writable */
  if (process_chdir (proc->cwd, true, &err) < 0)
    fail (a, &err);
  /* 9. masked and read-only paths (/proc/sys among them), read-only root */
  if (linux_rootfs_finalize (spec, &err) < 0)
    fail (a, &err);
  /* 10. per-process limits before anything of the user's runs */
  if (linux_rlimits_apply (proc, &err) < 0 || linux_oom_score_adj_apply (proc, 0, &err) < 0)
    fail (a, &err);
  /* 10a. scheduling class, I/O priority and NUMA memory policy: inherited by what we exec; set
   * while CAP_SYS_NICE is still held (issue 15) */
  if (linux_sched_apply (proc, &err) < 0
      || linux_mempolicy_apply (spec->linux_ ? spec->linux_->memory_policy : NULL, &err) < 0)
    fail (a, &err);
  if (process_chdir (proc->cwd, false, &err) < 0)
    fail (a, &err);
  exe = process_lookup_executable (proc, &err);
  if (!exe)
    fail (a, &err);
  /* 10b. the policy's process layers (Landlock paths resolve in the container's root now),
   * built before READY so an unenforceable policy fails `create` */
  if (policy_prepare_process (a->plan, &mres.homes, &layers, &err) < 0
      || policy_prepare_unixsock (a->plan, a->unixsock_fd, seccomp && filter.notify, &layers, &err) < 0)
    fail (a, &err);
  policy_mount_result_free (&mres); /* its last reader was the carve */
  /* 11. created: tell P, then wait for `start` */
  if (sync_send (a->sync_fd, SYNC_READY, 0, NULL, &err) < 0)
    _exit (1);
  close (a->sync_fd);
  int start_conn = wait_for_start (a->start_fd, &err);
  if (start_conn < 0)
    fail_after_start (start_conn, &err);
  close (a->start_fd);
  /* 12. startContainer hooks: container namespaces, before the user process (runtime.md) */
  if (spec->hooks
      && hooks_run (spec->hooks->start_container, spec->hooks->start_container_len, "hooks.startContainer", state_json,
                    &err)
             < 0)
    fail_after_start (start_conn, &err);
  /* 12b. LSM exec labels, applied by the kernel at execve; after the hooks, which would inherit a
   * pending exec label. Ignored (debug log) when the LSM is not enabled, as runc. */
  if (linux_apparmor_apply (proc->apparmor_profile, &err) < 0 || linux_selinux_apply (proc->selinux_label, &err) < 0)
    fail_after_start (start_conn, &err);
  /* 13. identity, security and exec: shared with `exec` (runtime/process.c); seccomp is
   * installed there, last (or before the capabilities go when noNewPrivileges is false) */
  if (seccomp)
    {
      layers.seccomp = &filter;
      layers.listener = listener;
      layers.process_state = process_state;
    }
  process_finalize_and_exec (proc, ro.userns, a->preserve_fds, exe, &layers, &err);
  fail_after_start (start_conn, &err);
}
