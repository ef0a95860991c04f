/* container_create.c - create: every step up to the runtime-spec status `created`.
 *
 * Failure policy: create either reaches `created` or leaves nothing (state dir, cgroup, process):
 * every resource acquired is released in create_undo(). The steps, in order: parse config.json,
 * resolve the agent policy and narrow the spec, check what needs no resources, reserve the state
 * dir, open the start socket and console, compile seccomp, prepare mounts, spawn the init
 * (runtime/spawn.h), run the runtime's hooks on its request, record the state, start the
 * monitor, write --pid-file. */
#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "linux/cgroup.h"
#include "linux/cgroup_systemd.h"
#include "runtime/rootless.h"
#include "runtime/rootless_oci.h"
#include "runtime/rootless_cgroup.h"
#include "linux/idmap.h"
#include "linux/ns.h"
#include "linux/process.h"
#include "linux/rootfs.h"
#include "linux/seccomp_cache.h"
#include "policy/policy.h"
#include "monitor/audit.h"
#include "runtime/audit_dirs.h"
#include "runtime/userdirs.h"
#include "runtime/container.h"
#include "runtime/container_internal.h"
#include "runtime/egress_ca.h"
#include "runtime/egress_share.h"
#include "runtime/hooks.h"
#include "monitor/monitor.h"
#include "runtime/policy_apply.h"
#include "runtime/vm.h"
#include "runtime/vm_supervisor.h"
#include "runtime/process.h"
#include "runtime/secret_env.h"
#include "runtime/spawn.h"
#include "runtime/policy_pin.h"
#include "runtime/state.h"
#include "runtime/sync.h"
#include "runtime/tty.h"
#include "runtime/workspace_review.h"
#include "monitor/unixsock.h"
#include "runtime/policy_hostfiles.h"
#include "spec/model.h"
#include "spec/validate.h"

/* The host's LSM state for spec_validate (sysfs; spec/ makes no syscalls). */
static void
host_lsm_probe (struct spec_host *h)
{
  cleanup_free char *aa = NULL;
  h->apparmor_enabled = read_file_at (AT_FDCWD, "/sys/module/apparmor/parameters/enabled", 64, &aa, NULL, NULL) == 0
                        && aa[0] == 'Y';
  h->selinux_enabled = access ("/sys/fs/selinux/enforce", F_OK) == 0;
}

/* Checks that need no resources: parse, validate, scheduler/memory policy,
 * rlimits/caps/sysctl/resources. */
static int
create_check (const struct asbx_global *g, const struct oci_spec *spec, const char *config_path, struct ns_plan *ns,
              asbx_err_t *err)
{
  struct spec_host host;
  cleanup_free char *where = xasprintf ("%s: ", config_path);
  host_lsm_probe (&host);
  if (spec_validate (spec, &host, config_path, err) < 0)
    return -1;
  if (linux_sched_check (spec->process, where, err) < 0)
    return -1;
  if (linux_mempolicy_check (spec->linux_->memory_policy, err) < 0)
    return asbx_error_wrap (err, "%s", config_path);
  if (linux_rlimits_check (spec->process, err) < 0 || linux_caps_check (spec->process->capabilities, err) < 0)
    return asbx_error_wrap (err, "%s", config_path);
  if (ns_plan_build (spec->linux_, ns, err) < 0)
    return asbx_error_wrap (err, "%s", config_path);
  /* a vm-tier guest whose host filters its NIC (runtime/vm_net.h): the container stays in the
   * guest kernel's only network namespace, which is the container's own (an engine's net.*
   * sysctls, Docker's ip_unprivileged_port_start of a bridge network, reach only the VM) */
  unsigned long sysctl_ns = ns->new_flags | (g && g->vm_guest && g->vm_net_outside ? CLONE_NEWNET : 0);
  if (linux_sysctl_check (&spec->linux_->sysctl, sysctl_ns, err) < 0)
    return asbx_error_wrap (err, "%s", config_path);
  if (spec->linux_->resources && cgroup_check_resources (spec->linux_->resources, err) < 0)
    return asbx_error_wrap (err, "%s", config_path);
  if (spec->process->terminal && g == NULL)
    return -1;
  return 0;
}

struct create_ctx
{
  int rootfd;
  int dirfd;
  const char *id;
  char *cgroup_path;
  struct cgroup_systemd_unit cgroup_unit; /* the systemd driver's unit for cgroup_path, or empty */
  unsigned long cgroup_mask;
  pid_t init_pid;
  bool new_netns;                /* this create makes the network namespace (nobody wires it): for the monitor */
  char *missing_grants;          /* "ORIGIN\tPATH\n" lines from the init (policy_apply_mounts), or NULL */
  const char *host_mntns_rootfs; /* no mount namespace of its own: its mounts below this rootfs are
                                    in ours, detached on undo (state file `host-mounts`) */
  /* per spec mount: the sources prepared here (idmapped clones; bind clones around the spawn) */
  struct linux_mount_src *mount_srcs;
  int unixsock_fd;            /* the monitor's end of the unix-socket confinement channel, or -1 */
  struct egress_ca egress_ca; /* the plan intercepts: the container's CA (runtime/egress_ca.h);
                                 sharing an egress: the owner's certificate only */
  struct egress_share share;  /* one egress per network namespace (runtime/egress_share.h) */
  struct ws_review ws;        /* the review workspace's layout and layer fds (runtime/workspace_review.h) */
};

/* An allowWrite grant whose path is missing creates nothing: the path stays read-only (or
 * absent). Say so at create, on stderr (the log too when it is a file) and, through the monitor,
 * in the audit log, rather than only in `policy explain` (issue 15). */
static void
report_missing_grants (const char *lines)
{
  cleanup_free char *dup = xstrdup (lines);
  char *save = NULL;
  for (char *l = strtok_r (dup, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      char *tab = strchr (l, '\t');
      if (!tab)
        continue;
      *tab = '\0';
      log_warning ("policy %s: `%s` does not exist in the container at create: the grant creates nothing, the path "
                   "is not writable",
                   l, tab + 1);
      if (asbx_log_fd () != STDERR_FILENO)
        fprintf (stderr,
                 "agentsbx: warning: policy %s: `%s` does not exist in the container at create: the grant creates "
                 "nothing, the path is not writable\n",
                 l, tab + 1);
    }
}

/* Mount work P does before spawning: without a mount namespace of its own, the `host-mounts`
 * mark (written before anything is mounted, so delete or undo detaches what the init mounts);
 * the idmapped binds, made here in the host's user and mount namespace (linux/idmap.h). */
static int
create_mount_prep (struct create_ctx *c, const struct ns_plan *ns, const struct oci_spec *spec, const char *bundle,
                   const char *rootfs, const char *config_path, const struct policy_plan *plan, asbx_err_t *err)
{
  if (!((ns->new_flags | ns->join_flags) & CLONE_NEWNS))
    {
      cleanup_close int mfd = openat (c->dirfd, HOST_MOUNTS_MARK, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (mfd < 0)
        return asbx_error (err, errno, "state directory: create %s", HOST_MOUNTS_MARK);
      c->host_mntns_rootfs = rootfs;
    }
  if (linux_idmap_prepare (spec, bundle, config_path, &c->mount_srcs, err) < 0)
    return -1;
  /* filesystem.workspace.mode review: the workspace's bind becomes an overlay */
  return ws_review_prepare (plan, spec, ns, c->id, config_path, c->dirfd, &c->mount_srcs, &c->ws, err);
}

static void
create_undo (struct create_ctx *c)
{
  asbx_err_t e = NULL;
  if (c->init_pid > 0)
    {
      kill (c->init_pid, SIGKILL);
      while (waitpid (c->init_pid, NULL, 0) < 0 && errno == EINTR)
        ;
    }
  if (c->host_mntns_rootfs)
    host_mounts_cleanup (c->host_mntns_rootfs);
  if (c->cgroup_path && c->cgroup_mask && cgroup_remove (c->cgroup_path, c->cgroup_mask, 5000, &e) < 0)
    {
      log_warning ("cleanup after failed create: %s", e->msg);
      asbx_error_free (&e);
    }
  if (c->dirfd >= 0)
    policy_pin_release (c->rootfd, c->dirfd); /* after the init is gone */
  if (c->dirfd >= 0 && asbx_state_dir_remove (c->rootfd, c->id, &e) < 0)
    {
      log_warning ("cleanup after failed create: %s", e->msg);
      asbx_error_free (&e);
    }
}

/* prestart + createRuntime hooks, run here in the runtime's namespaces on the init's request */
static int
create_runtime_hooks (const struct oci_spec *spec, const char *json, asbx_err_t *err)
{
  if (!spec->hooks)
    return 0;
  if (hooks_run (spec->hooks->prestart, spec->hooks->prestart_len, "hooks.prestart", json, err) < 0)
    return -1;
  return hooks_run (spec->hooks->create_runtime, spec->hooks->create_runtime_len, "hooks.createRuntime", json, err);
}

/* systemd socket activation (sd_listen_fds(3)): the number of fds LISTEN_FDS passes on (1..1024),
 * 0 for none or a value out of range; they are preserved (fds 3..) and named in the process's
 * environment by the model (spec/model.h), as runc does */
static unsigned
listen_fds_count (int *preserve)
{
  const char *lf = getenv ("LISTEN_FDS");
  uint64_t n;
  if (!lf || parse_u64 (lf, &n) < 0 || n == 0 || n > 1024)
    return 0;
  if ((int) n > *preserve)
    *preserve = (int) n;
  return (unsigned) n;
}

/* After the exchange with S/I failed: a process the memory controller killed (SIGKILL) cannot
 * send its error, so P only saw EOF. When the container's memory cgroup counted an OOM kill,
 * say so, with the limit that caused it (runc refuses such a limit when writing it; here the
 * cgroup is still empty then and the kernel takes the value). Best effort: no controller, no
 * counter (v1 before 4.13) or no kill leaves *err as it is; so does a cgroup this create only
 * joined (created mask 0), whose counter may hold kills from before. */
static void
explain_oom_kill (const struct create_ctx *c, const struct oci_spec *spec, asbx_err_t *err)
{
  const struct oci_resources *res = spec && spec->linux_ ? spec->linux_->resources : NULL;
  asbx_err_t e = NULL;
  uint64_t kills = 0;

  if (!c->cgroup_path || !c->cgroup_mask || !*err || cgroup_oom_count (c->cgroup_path, &kills, &e) < 0)
    {
      asbx_error_free (&e);
      return;
    }
  if (kills == 0)
    return;
  if (res && res->memory && res->memory->has_limit && res->memory->limit >= 0)
    asbx_error_wrap (err,
                     "the container's init was killed by SIGKILL (OOM killer) during setup "
                     "(linux.resources.memory.limit %lld bytes too small?)",
                     (long long) res->memory->limit);
  else
    asbx_error_wrap (err, "the container's init was killed by SIGKILL (OOM killer) during setup (cgroup %s)",
                     c->cgroup_path);
}

static int
create_spawned (const struct asbx_global *g, const struct asbx_create_opts *o, const struct oci_spec *spec,
                struct create_ctx *c, struct init_args *a, const char *bundle, asbx_err_t *err)
{
  int sp[2];
  struct sync_msg *m = xmalloc (sizeof *m);
  cleanup_free struct sync_msg *mfree = m;
  cleanup_free char *json = NULL;
  cleanup_close int psync = -1;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
    return asbx_error (err, errno, "socketpair");
  psync = sp[0];
  a->sync_fd = sp[1];
  /* in a new user namespace the bind sources are opened here, as the host's root: the init's
   * mapped root may not reach them (runc does the same) */
  if (a->ns->new_flags & CLONE_NEWUSER)
    linux_rootfs_open_bind_sources (spec, bundle, &c->mount_srcs);
  a->mount_srcs = c->mount_srcs;
  int r = spawn_init (a, psync, &c->init_pid, &c->cgroup_mask, err);
  linux_rootfs_close_bind_sources (c->mount_srcs, spec->mounts_len);
  ws_review_spawned (&c->ws);
  if (a->sync_fd >= 0) /* spawn_init closes it once S is forked */
    close (a->sync_fd);
  if (r < 0)
    return -1;
  creating_record (c->dirfd, c->cgroup_path, c->cgroup_mask);
  test_stop_at ("create:spawned");
  /* the files the init masked inside writable binds: pinned in our namespace (policy_pin.h) */
  struct policy_pin_ctx pc = {
    .spec = spec, .bundle = bundle, .rootfs = a->rootfs, .state_rootfd = c->rootfd, .dirfd = c->dirfd, .plan = a->plan
  };
  if (policy_pin_receive (psync, &pc, err) < 0)
    return -1;
  test_stop_at ("create:pinned");
  if (sync_recv (psync, SYNC_CREATE_RUNTIME, m, err) < 0)
    return -1;
  if (m->text[0])
    {
      c->missing_grants = xstrdup (m->text);
      report_missing_grants (c->missing_grants);
    }
  /* an init in a user namespace cannot write /proc/sys: the memfd sysctl is ours to set; a
   * non-root runtime cannot either (the kernel lets only global root write vm.* sysctls): then
   * the policy's seccomp rules refusing memfd_create/memfd_secret (policy/syscall_groups.c
   * policy_exec_rules, loaded under the same condition) are what holds */
  if (((a->ns->new_flags | a->ns->join_flags) & CLONE_NEWUSER) && !a->rootless
      && policy_apply_memfd_noexec_from_parent (a->plan, c->init_pid, (a->ns->new_flags & CLONE_NEWPID) != 0, err) < 0)
    return -1;
  /* runtime.md / runtime-tools hooks_stdin: the state on a prestart/createRuntime (and
   * createContainer/startContainer) hook's stdin says "created", as runc's does */
  json = state_json (o->id, asbx_status_after (ASBX_OP_CREATE), c->init_pid, bundle, &spec->annotations, err);
  if (!json || create_runtime_hooks (spec, json, err) < 0)
    return -1;
  test_stop_at ("create:hooks");
  if (sync_send (psync, SYNC_HOOKS_DONE, 0, json, err) < 0)
    return -1;
  if (sync_recv (psync, SYNC_READY, m, err) < 0)
    return -1;
  test_stop_at ("create:ready");
  (void) g;
  return 0;
}

static int
create_record (const struct asbx_global *g, const struct asbx_create_opts *o, const struct oci_spec *spec,
               struct create_ctx *c, const char *bundle, const char *rootfs, const char *raw, size_t raw_len,
               const struct policy_plan *plan, asbx_err_t *err)
{
  cleanup_free char *created = asbx_rfc3339_now ();
  struct asbx_state st = {
    .id = (char *) o->id,
    .pid = c->init_pid,
    .pid_start = asbx_pid_start_time (c->init_pid),
    .bundle = (char *) bundle,
    .rootfs = (char *) rootfs,
    .created = created,
    .cgroup_path = c->cgroup_path,
    .cgroup_mask = c->cgroup_mask,
    .systemd_cgroup = g->systemd_cgroup,
    .owner = getuid (),
    .annotations = spec->annotations,
  };
  if (st.pid_start == 0)
    return asbx_error (err, 0, "container init exited during create");
  if (plan && plan->active)
    {
      /* the effective policy, for exec (the same layers for every process) and `policy explain` */
      cleanup_close int pfd = openat (c->dirfd, "policy.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                                      0600);
      if (pfd < 0 || write_all (pfd, plan->effective_json, strlen (plan->effective_json)) < 0)
        return asbx_error (err, errno, "save policy.json in the state directory");
      /* what was degraded on this host, not what the policy would accept (issue 14 §5) */
      cleanup_free char *ll_degr = policy_apply_landlock_degraded (plan);
      cleanup_free char *cg_degr = rootless_cgroup_degraded (plan, c->cgroup_path);
      cleanup_free char *pin_degr = rootless_pin_degraded (plan);
      char *degr[3];
      size_t nd = 0;
      if (ll_degr)
        degr[nd++] = ll_degr;
      if (cg_degr)
        degr[nd++] = cg_degr;
      if (pin_degr)
        degr[nd++] = pin_degr;
      struct monitor_opts mo = { .id = o->id,
                                 .init_pid = c->init_pid,
                                 .cgroup_path = c->cgroup_path,
                                 .state_dirfd = c->dirfd,
                                 .audit_dir = g->audit_dir,
                                 .plan = plan,
                                 .new_netns = c->new_netns,
                                 .missing_grants = c->missing_grants,
                                 .unixsock_fd = c->unixsock_fd,
                                 .degradations = nd ? degr : NULL,
                                 .degradations_len = nd,
                                 .egress_ca_cert_pem = c->egress_ca.cert_pem,
                                 .egress_ca_key_pem = c->egress_ca.key_pem,
                                 .secrets_env_fd = plan->credentials_len ? secret_env_fd () : -1,
                                 .egress_shared = c->share.shared,
                                 .egress_owner_id = c->share.owner_id,
                                 .egress_owner_monitor = c->share.owner_monitor,
                                 .egress_owner_pidfd = c->share.owner_pidfd };
      pid_t mpid;
      int mr = monitor_start (&mo, &mpid, err);
      egress_ca_wipe_key (&c->egress_ca); /* the monitor has its copy; the key is nowhere else */
      if (mr < 0)
        return asbx_error_wrap (err, "policy monitor");
      /* the namespace's egress is this container's: recorded for the containers joining it */
      if (egress_share_record (c->rootfd, c->dirfd, &c->share, o->id, c->init_pid, mpid, c->egress_ca.cert_pem, err)
          < 0)
        return -1;
    }
  if (asbx_state_write (c->dirfd, &st, err) < 0)
    return -1;
  test_stop_at ("create:recorded");
  /* delete runs poststop hooks from the config as it was at create, not as the bundle is now */
  cleanup_close int cfd = openat (c->dirfd, "config.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (cfd < 0 || write_all (cfd, raw, raw_len) < 0)
    return asbx_error (err, errno, "save config.json in the state directory");
  if (o->pid_file && write_pid_file (o->pid_file, c->init_pid, err) < 0)
    return -1;
  return 0;
}

/* egress_share_prepare for this create: the joined network namespace's fd from the ns plan (the
 * one the init joins). Sharing: the init trusts the owner's CA (its relay mints the leaves). */
static int
create_egress_share (struct create_ctx *c, const struct spec_model *model, const struct ns_plan *ns,
                     const struct policy_plan *plan, asbx_err_t *err)
{
  const char *path = NULL;
  int fd = -1;

  (void) spec_model_netns (model, &path);
  for (size_t i = 0; i < ns->len; i++)
    if (ns->entries[i].clone_flag == CLONE_NEWNET)
      fd = ns->entries[i].fd;
  if (egress_share_prepare (c->rootfd, c->id, plan, fd, path, &c->share, err) < 0
      || egress_share_table_ensure (&c->share, plan, fd, err) < 0)
    return -1;
  if (!c->share.shared || !egress_intercepts (plan))
    return 0;
  if (!c->share.owner_ca_pem)
    return asbx_error (err, EINVAL, "egress: the owner `%s` of the network namespace's egress recorded no CA",
                       c->share.owner_id);
  c->egress_ca.cert_pem = xstrdup (c->share.owner_ca_pem);
  return 0;
}

/* audit_dirs_register against the default audit directory of this caller */
static int
register_audit_dir (const struct asbx_global *g, const char *dir, asbx_err_t *err)
{
  cleanup_free char *def = asbx_uses_user_dirs () ? asbx_user_audit_dir (err)
                                                  : audit_dir_resolve (NULL, g->config_path, err);
  if (!def)
    return -1;
  return audit_dirs_register (g->root, dir, def, err);
}

int
asbx_container_create (const struct asbx_global *g, const struct asbx_create_opts *o, pid_t *init_pid, asbx_err_t *err)
{
  char bundle[PATH_MAX], rootfs[PATH_MAX];
  cleanup_free char *config_path = NULL, *raw = NULL, *rootfs_in = NULL;
  cleanup_spec struct oci_spec *parsed = NULL;
  const struct oci_spec *spec = NULL; /* the model's view of it (spec/model.h), once built */
  struct spec_model *model = NULL;
  cleanup_close int rootfd = -1, dirfd = -1, startfd = -1, console = -1;
  struct ns_plan ns = { 0 };
  struct policy_plan *plan = NULL;
  char **audit_used = NULL; /* other containers' audit dirs (runtime/audit_dirs.h) */
  struct create_ctx c = {
    .rootfd = -1,
    .dirfd = -1,
    .id = o->id,
    .unixsock_fd = -1,
    .ws = { .dirfd = -1, .lockfd = -1, .ovl = { .lower_mnt = -1, .layout_mnt = -1, .upper_fd = -1, .work_fd = -1 } }
  };
  struct linux_seccomp sc_filter = { 0 }; /* linux.seccomp compiled here, for the init (init_args) */
  int r_spawn;
  size_t raw_len;
  int preserve = o->preserve_fds;
  int ret = -1;

  egress_share_init (&c.share);
  if (asbx_id_validate (o->id, err) < 0)
    return -1;
  if (realpath (o->bundle ? o->bundle : ".", bundle) == NULL)
    return asbx_error (err, errno, "bundle `%s`", o->bundle ? o->bundle : ".");
  config_path = xasprintf ("%s/config.json", bundle);
  if (read_file_at (AT_FDCWD, config_path, 16 << 20, &raw, &raw_len, err) < 0)
    return -1;
  parsed = oci_spec_parse (raw, raw_len, config_path, err);
  if (!parsed)
    return -1;
  /* a detached vm-tier guest: the host runs the hooks (runtime/vm_supervisor.h); restored at out */
  struct oci_hooks *hooks_aside = NULL;
  if (g->vm_guest_no_hooks)
    hooks_aside = steal_ptr (&parsed->hooks);
  /* the agent policy: ceiling (runtime flags, host config) ∩ request (annotations); the model
   * (config.json narrowed by the plan; the parsed spec stays as it is) is built before any check,
   * so every later step sees only the effective configuration */
  struct policy_inputs pin = {
    .profile_flag = g->profile,
    .policy_flag = g->policy_file,
    .config_path = g->config_path,
    .audit_dir_flag = g->audit_dir,
    .state_root = g->root,
    .annotations = &parsed->annotations,
    .sandbox_default_profile = o->default_profile,
    .workspace_review = o->workspace_review,
    .isolation_vm = o->isolation_vm || g->isolation_vm,
  };
  plan = policy_resolve (&pin, err);
  if (!plan)
    goto out;
  if (g->vm_guest && g->vm_net_outside && plan->active)
    plan->net_outside = true; /* the VM's host filters its NIC (runtime/vm_net.h) */
  if (plan->active)
    {
      audit_used = audit_dirs_list (g->root);
      policy_plan_hide (plan, (const char *const *) audit_used);
    }
  if (plan->active && plan->audit_dir && audit_dir_check_path (plan->audit_dir, err) < 0)
    goto out;
  /* every secret a credential names exists in a private secrets dir (its value is not read) */
  if (egress_secrets_check (plan, err) < 0)
    goto out;
  struct spec_model_host mh = { .listen_fds = listen_fds_count (&preserve) };
  mh.userns_isolating = plan->active && policy_userns_isolating (parsed->linux_);
  struct spec_narrowing narrowing;
  policy_model_narrowing (plan, &narrowing);
  if (spec_model_build (parsed, &narrowing, &mh, &model, err) < 0 || policy_check_spec (model, err) < 0)
    goto out;
  spec = &model->view;
  if (plan->isolation == POLICY_ISOLATION_VM && !g->vm_guest)
    {
      /* the vm tier (runtime/vm.h): the whole run happens here, in a VM that applies this same
       * config.json and policy inside; the guest's own create takes the branch below. create
       * (and run --detach): a supervisor holds the VM for the other verbs (vm_supervisor.h) */
      if (o->default_profile && !o->isolation_vm)
        {
          /* a sandbox's bundle is made for a VM (QEMU's uid, the shared view) only when it knows:
           * a policy asking for the tier by itself gets no VM of a bundle made for a container */
          asbx_error (err, EINVAL,
                      "isolation vm: the policy asks for the vm tier: give sandbox --isolation vm (its bundle "
                      "is then made for a VM: runtime/sandbox.c)");
          goto out;
        }
      if (!o->vm_status)
        {
          if (vm_supervisor_create (g, o, bundle, spec, plan, raw, raw_len, init_pid, err) == 0)
            ret = 0;
          else
            asbx_error_wrap (err, "%s", config_path);
        }
      else if (vm_run (g->root, o->id, bundle, spec, plan, o->vm_status, err) == 0)
        ret = 1;
      goto out;
    }
  if (create_check (g, spec, config_path, &ns, err) < 0)
    goto out;
  c.new_netns = (ns.new_flags & CLONE_NEWNET) != 0;
  rootfs_in = spec->root->path[0] == '/' ? xstrdup (spec->root->path) : xasprintf ("%s/%s", bundle, spec->root->path);
  if (realpath (rootfs_in, rootfs) == NULL)
    {
      asbx_error (err, errno, "%s: root.path: `%s`", config_path, rootfs_in);
      goto out;
    }
  if (o->tty_proxy_fd)
    *o->tty_proxy_fd = -1;
  if (spec->process->terminal && !o->console_socket && !o->tty_proxy_fd)
    {
      /* runc's wording: a detached container (create, run -d) cannot use our terminal */
      asbx_error (
          err, 0,
          "%s: process.terminal is true: cannot allocate tty if agentsbx will detach without setting console socket",
          config_path);
      goto out;
    }
  /* a non-root caller: only a delegated cgroup (runtime/rootless_cgroup.h), no filtered network
   * (runtime/rootless.h); what it cannot enforce is refused or degraded */
  if (rootless_caller ()
      && ((c.cgroup_path = rootless_cgroup_path (plan->rootless_cgroup_parent, spec->linux_->cgroups_path, o->id,
                                                 &c.cgroup_unit, err))
              == NULL
          && *err))
    goto out;
  if (rootless_caller () && rootless_check (plan, spec->linux_, c.cgroup_path, err) < 0)
    goto out;
  if (!rootless_caller ()
      && !(c.cgroup_path = cgroup_resolve_path (spec->linux_->cgroups_path, o->id, g->systemd_cgroup, &c.cgroup_unit,
                                                err)))
    goto out;
  /* no cgroup: what else linux.resources asks cannot be enforced (runtime/rootless_oci.h) */
  if (!c.cgroup_path && rootless_caller () && rootless_oci_check (spec, config_path, err) < 0)
    goto out;

  /* From here on, resources exist: undo on failure. */
  rootfd = asbx_root_open (g->root, true, err);
  if (rootfd < 0)
    goto out;
  c.rootfd = rootfd;
  dirfd = asbx_state_dir_create (rootfd, o->id, err);
  if (dirfd < 0)
    goto out;
  c.dirfd = dirfd;
  test_stop_at ("create:state-dir");
  startfd = start_socket_listen (dirfd, err);
  if (startfd < 0)
    goto undo;
  if (o->console_socket && spec->process->terminal && (console = process_connect_console (o->console_socket, err)) < 0)
    goto undo;
  if (!o->console_socket && spec->process->terminal && asbx_tty_socketpair (o->tty_proxy_fd, &console, err) < 0)
    goto undo;

  /* linux.seccomp is compiled here, where the state root's cache (linux/seccomp_cache.h) is
   * reachable; the init inherits the program through fork and takes it instead of compiling */
  if (spec->linux_ && spec->linux_->seccomp
      && linux_seccomp_cache_compile (rootfd, spec->linux_->seccomp, &sc_filter, NULL, err) < 0)
    goto undo;
  if (create_mount_prep (&c, &ns, spec, bundle, rootfs, config_path, plan, err) < 0)
    goto undo;
  /* a joined namespace whose egress is another live container's: shared or refused */
  if (create_egress_share (&c, model, &ns, plan, err) < 0)
    goto undo;
  /* the container's own CA for the intercepted hosts, before the init that trusts it */
  if (!c.share.shared && egress_intercepts (plan) && egress_ca_make (plan, o->id, &c.egress_ca, err) < 0)
    goto undo;
  struct init_args a = {
    .mount_srcs = c.mount_srcs,
    .model = model,
    .spec = spec,
    .ns = &ns,
    .bundle = bundle,
    .rootfs = rootfs,
    .cgroup_path = c.cgroup_path,
    .cgroup_unit = &c.cgroup_unit,
    .start_fd = startfd,
    .console_fd = console,
    .preserve_fds = preserve,
    .no_pivot = o->no_pivot,
    .no_new_keyring = o->no_new_keyring,
    .seccomp_filter = sc_filter.insns ? &sc_filter : NULL,
    .close_fds = { rootfd, dirfd, -1, c.ws.lockfd, secret_env_fd (), c.share.lockfd, c.share.owner_pidfd },
    .plan = plan,
    .unixsock_fd = -1,
    .rootless = rootless_caller (),
    .egress_ca = c.egress_ca.cert_pem ? &c.egress_ca : NULL,
    .egress_shared = c.share.shared,
  };
  int usp[2] = { -1, -1 };
  /* the init hands the notify fd of its unix-socket filter to the monitor over this pair */
  if (unixsock_supervised (plan) && socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, usp) < 0)
    {
      asbx_error (err, errno, "socketpair (unix socket confinement)");
      goto undo;
    }
  a.unixsock_fd = usp[1];
  a.close_fds[2] = usp[0];
  c.unixsock_fd = usp[0];
  r_spawn = create_spawned (g, o, spec, &c, &a, bundle, err);
  if (usp[1] >= 0)
    close (usp[1]); /* the init has its copy */
  if (r_spawn == 0)
    r_spawn = create_record (g, o, spec, &c, bundle, rootfs, raw, raw_len, plan, err);
  if (usp[0] >= 0)
    close (usp[0]); /* the monitor has its copy */
  if (r_spawn < 0)
    {
      explain_oom_kill (&c, spec, err);
      goto undo;
    }
  /* its audit directory is hidden from every later container (runtime/audit_dirs.h) */
  if (plan->active && plan->audit_dir && register_audit_dir (g, plan->audit_dir, err) < 0)
    goto undo;
  /* a non-root caller's review layers and secrets outside the home defaults (XDG_DATA_HOME,
   * XDG_CONFIG_HOME or its user config elsewhere) join the same registry, so root's sandboxes
   * hide them and refuse a workspace holding them (outside retest: a root sandbox read a user's
   * upper and API token under /srv); the defaults are hidden in every home already */
  if (plan->active && asbx_uses_user_dirs ())
    {
      /* the places every home's mask covers (policy/compile.c): the passwd home's, whatever
       * XDG_* say */
      struct passwd *pw = getpwuid (geteuid ());
      const char *home = pw && pw->pw_dir ? pw->pw_dir : "";
      cleanup_free char *dws = xasprintf ("%s/.local/share/agentsbx/workspaces", home);
      cleanup_free char *dsec = xasprintf ("%s/.config/agentsbx/secrets", home);
      if ((plan->workspaces_dir && audit_dirs_register (g->root, plan->workspaces_dir, dws, err) < 0)
          || (plan->secrets_dir && audit_dirs_register (g->root, plan->secrets_dir, dsec, err) < 0))
        goto undo;
    }
  *init_pid = c.init_pid;
  ret = 0;
  goto out;

undo:
  egress_share_release (&c.share); /* the lock first: the state dir's removal takes it */
  create_undo (&c);
  ws_review_done (&c.ws, o->id, true);
out:
  if (hooks_aside)
    parsed->hooks = hooks_aside;
  egress_share_release (&c.share);
  ws_review_done (&c.ws, o->id, false);
  linux_seccomp_release (&sc_filter);
  ns_plan_close (&ns);
  free (c.cgroup_path);
  cgroup_systemd_unit_clear (&c.cgroup_unit);
  free (c.missing_grants);
  egress_ca_clear (&c.egress_ca);
  linux_mount_srcs_free (c.mount_srcs, parsed ? parsed->mounts_len : 0);
  spec_model_free (model);
  audit_dirs_free (audit_used);
  if (plan)
    policy_plan_free (plan);
  return ret;
}
