/* container.c - create/start/kill/delete/state: the runtime-spec operations over the state dir.
 *
 * Failure policy: create either reaches `created` or leaves nothing (state dir, cgroup, process):
 * every resource acquired is released in create_undo(). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "linux/cgroup.h"
#include "linux/idmap.h"
#include "linux/rootfs.h"
#include "linux/ns.h"
#include "linux/process.h"
#include "linux/seccomp_cache.h"
#include "linux/rootfs.h"
#include "runtime/container.h"
#include "runtime/hooks.h"
#include "policy/policy.h"
#include "runtime/monitor.h"
#include "runtime/policy_apply.h"
#include "runtime/process.h"
#include "runtime/spawn.h"
#include "runtime/state.h"
#include "runtime/sync.h"
#include "runtime/tty.h"
#include "runtime/unixsock.h"
#include "spec/validate.h"

#define OCI_VERSION "1.3.0"

/* Crash-safety test hook (tests/escape/test_crash_safety.py): AGENTSBX_TEST_STOP_AT=<step>
 * makes the runtime die by SIGKILL at the named step (`<step>:stop` raises SIGSTOP instead), so
 * the tests can prove that `delete --force` recovers from a runtime killed anywhere. Only the
 * runtime's caller sets our environment, and it can kill us anyway: the hook adds no power. */
static void
test_stop_at (const char *step)
{
  const char *want = getenv ("AGENTSBX_TEST_STOP_AT");
  size_t n = strlen (step);
  if (want == NULL || strncmp (want, step, n) != 0 || (want[n] != '\0' && strcmp (want + n, ":stop") != 0))
    return;
  raise (want[n] ? SIGSTOP : SIGKILL);
}

static void
spec_freep (struct oci_spec **s)
{
  if (*s)
    oci_spec_free (*s);
}
#define cleanup_spec __attribute__ ((cleanup (spec_freep)))

static char *
state_json (const char *id, const char *status, pid_t pid, const char *bundle, const struct oci_map *ann,
            asbx_err_t *err)
{
  struct oci_state st = {
    .oci_version = OCI_VERSION,
    .id = id,
    .status = status,
    .pid = pid,
    .bundle = bundle,
    .annotations = ann,
  };
  return oci_state_to_json (&st, false, err);
}

static char *
rfc3339_now (void)
{
  struct timespec ts;
  struct tm tm;
  clock_gettime (CLOCK_REALTIME, &ts);
  gmtime_r (&ts.tv_sec, &tm);
  return xasprintf ("%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                    tm.tm_min, tm.tm_sec, ts.tv_nsec);
}

static int
write_pid_file (const char *path, pid_t pid, asbx_err_t *err)
{
  cleanup_free char *tmp = xasprintf ("%s.%d.tmp", path, getpid ());
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%d", pid);
  cleanup_close int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write_all (fd, buf, (size_t) n) < 0)
    return asbx_error (err, errno, "write --pid-file `%s`", path);
  if (rename (tmp, path) < 0)
    {
      int e = errno;
      unlink (tmp);
      return asbx_error (err, e, "write --pid-file `%s`", path);
    }
  return 0;
}

/* The init's "start" channel: a listening unix socket in the state dir, bound and connected
 * through /proc/self/fd/DIRFD so the path length does not depend on --root and the id. */
static int
start_socket_addr (int dirfd, struct sockaddr_un *addr)
{
  memset (addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  snprintf (addr->sun_path, sizeof addr->sun_path, "/proc/self/fd/%d/start.sock", dirfd);
  return 0;
}

static int
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

/* Checks that need no resources: parse, validate, rlimits/caps/sysctl/resources. */
static int
create_check (const struct asbx_global *g, struct oci_spec *spec, const char *config_path, struct ns_plan *ns,
              asbx_err_t *err)
{
  struct spec_host host;
  spec_host_probe (&host);
  if (spec_validate (spec, &host, config_path, err) < 0)
    return -1;
  if (linux_rlimits_check (spec->process, err) < 0 || linux_caps_check (spec->process->capabilities, err) < 0)
    return asbx_error_wrap (err, "%s", config_path);
  if (ns_plan_build (spec->linux_, ns, err) < 0)
    return asbx_error_wrap (err, "%s", config_path);
  if (linux_sysctl_check (&spec->linux_->sysctl, ns->new_flags, err) < 0)
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
  unsigned long cgroup_mask;
  pid_t init_pid;
  bool new_netns;                /* this create makes the network namespace (nobody wires it): for the monitor */
  char *missing_grants;          /* "ORIGIN\tPATH\n" lines from the init (policy_apply_mounts), or NULL */
  const char *host_mntns_rootfs; /* no mount namespace of its own: its mounts below this rootfs are
                                    in ours, detached on undo (state file `host-mounts`) */
  int unixsock_fd;               /* the monitor's end of the unix-socket confinement channel, or -1 */
};

#define HOST_MOUNTS_MARK "host-mounts"

/* A container without a mount namespace of its own mounted below its rootfs in ours: detach. */
static void
host_mounts_cleanup (const char *rootfs)
{
  asbx_err_t e = NULL;
  if (linux_rootfs_host_cleanup (rootfs, &e) < 0)
    {
      log_warning ("cleanup of the container's mounts: %s", e->msg);
      asbx_error_free (&e);
    }
}

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
                   const char *rootfs, const char *config_path, int **idmap_fds, asbx_err_t *err)
{
  if (!((ns->new_flags | ns->join_flags) & CLONE_NEWNS))
    {
      cleanup_close int mfd = openat (c->dirfd, HOST_MOUNTS_MARK, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (mfd < 0)
        return asbx_error (err, errno, "state directory: create %s", HOST_MOUNTS_MARK);
      c->host_mntns_rootfs = rootfs;
    }
  return linux_idmap_prepare (spec, bundle, config_path, idmap_fds, err);
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

static void
add_listen_fds (struct oci_spec *spec, int *preserve)
{
  const char *lf = getenv ("LISTEN_FDS");
  uint64_t n;
  if (!lf || parse_u64 (lf, &n) < 0 || n == 0 || n > 1024)
    return;
  /* systemd socket activation (sd_listen_fds(3)): fds 3.. are passed on and the container's
   * init is pid 1 in its namespace, as runc does */
  struct oci_process *p = spec->process;
  p->env = xrealloc (p->env, sizeof (char *) * (p->env_len + 3));
  p->env[p->env_len++] = xasprintf ("LISTEN_FDS=%d", (int) n);
  p->env[p->env_len++] = xstrdup ("LISTEN_PID=1");
  p->env[p->env_len] = NULL;
  if ((int) n > *preserve)
    *preserve = (int) n;
}

/* Until state.json exists, a `creating` file in the state dir names the cgroup this create
 * made (path and created-mask), so that `delete --force` can clean up after a create that was
 * killed (SIGKILL at any step: tests/escape/test_robustness.py): the init is in that cgroup. */
static void
creating_record (const struct create_ctx *c)
{
  cleanup_close int fd = -1;
  cleanup_free char *line = NULL;
  if (!c->cgroup_path || !c->cgroup_mask)
    return;
  fd = openat (c->dirfd, "creating", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  line = xasprintf ("%lx %s", c->cgroup_mask, c->cgroup_path);
  if (fd >= 0)
    (void) write_all (fd, line, strlen (line));
}

/* delete --force of an entry without state.json: kill what the dead create left in its cgroup
 * and remove the cgroup; best effort (the state dir goes anyway). */
static void
creating_cleanup (int dirfd)
{
  cleanup_free char *raw = NULL;
  asbx_err_t e = NULL;
  unsigned long mask;
  int off = 0;
  size_t len;
  if (read_file_at (dirfd, "creating", 8192, &raw, &len, &e) < 0)
    {
      asbx_error_free (&e);
      return;
    }
  if (sscanf (raw, "%lx %n", &mask, &off) != 1 || off == 0 || raw[off] != '/')
    return;
  if (cgroup_kill_all (raw + off, SIGKILL, &e) < 0)
    asbx_error_free (&e);
  if (cgroup_remove (raw + off, mask, 10000, &e) < 0)
    {
      log_warning ("delete: %s", e->msg);
      asbx_error_free (&e);
    }
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
  const struct oci_resources *res = spec->linux_ ? spec->linux_->resources : NULL;
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
create_spawned (const struct asbx_global *g, const struct asbx_create_opts *o, struct oci_spec *spec,
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
  int *bind_fds = (a->ns->new_flags & CLONE_NEWUSER) ? linux_rootfs_open_bind_sources (spec, bundle) : NULL;
  a->bind_fds = bind_fds;
  int r = spawn_init (a, psync, &c->init_pid, &c->cgroup_mask, err);
  linux_rootfs_close_bind_sources (bind_fds, spec->mounts_len);
  a->bind_fds = NULL;
  if (a->sync_fd >= 0) /* spawn_init closes it once S is forked */
    close (a->sync_fd);
  if (r < 0)
    return -1;
  creating_record (c);
  test_stop_at ("create:spawned");
  if (sync_recv (psync, SYNC_CREATE_RUNTIME, m, err) < 0)
    return -1;
  if (m->text[0])
    {
      c->missing_grants = xstrdup (m->text);
      report_missing_grants (c->missing_grants);
    }
  /* an init in a user namespace cannot write /proc/sys: the memfd sysctl is ours to set */
  if (((a->ns->new_flags | a->ns->join_flags) & CLONE_NEWUSER)
      && policy_apply_memfd_noexec_from_parent (a->plan, c->init_pid, (a->ns->new_flags & CLONE_NEWPID) != 0, err) < 0)
    return -1;
  /* runtime.md / runtime-tools hooks_stdin: the state on a prestart/createRuntime (and
   * createContainer/startContainer) hook's stdin says "created", as runc's does */
  json = state_json (o->id, "created", c->init_pid, bundle, &spec->annotations, err);
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
create_record (const struct asbx_global *g, const struct asbx_create_opts *o, struct oci_spec *spec,
               struct create_ctx *c, const char *bundle, const char *rootfs, const char *raw, size_t raw_len,
               const struct policy_plan *plan, asbx_err_t *err)
{
  cleanup_free char *created = rfc3339_now ();
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
      struct monitor_opts mo = { .id = o->id,
                                 .init_pid = c->init_pid,
                                 .cgroup_path = c->cgroup_path,
                                 .state_dirfd = c->dirfd,
                                 .audit_dir = g->audit_dir,
                                 .plan = plan,
                                 .new_netns = c->new_netns,
                                 .missing_grants = c->missing_grants,
                                 .unixsock_fd = c->unixsock_fd };
      pid_t mpid;
      if (monitor_start (&mo, &mpid, err) < 0)
        return asbx_error_wrap (err, "policy monitor");
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

int
asbx_container_create (const struct asbx_global *g, const struct asbx_create_opts *o, pid_t *init_pid, asbx_err_t *err)
{
  char bundle[PATH_MAX], rootfs[PATH_MAX];
  cleanup_free char *config_path = NULL, *raw = NULL, *rootfs_in = NULL;
  cleanup_spec struct oci_spec *spec = NULL;
  cleanup_close int rootfd = -1, dirfd = -1, startfd = -1, console = -1;
  struct ns_plan ns = { 0 };
  struct policy_plan *plan = NULL;
  struct create_ctx c = { .rootfd = -1, .dirfd = -1, .id = o->id, .unixsock_fd = -1 };
  int *idmap_fds = NULL;
  int r_spawn;
  size_t raw_len;
  int preserve = o->preserve_fds;
  int ret = -1;

  if (asbx_id_validate (o->id, err) < 0)
    return -1;
  if (realpath (o->bundle ? o->bundle : ".", bundle) == NULL)
    return asbx_error (err, errno, "bundle `%s`", o->bundle ? o->bundle : ".");
  config_path = xasprintf ("%s/config.json", bundle);
  if (read_file_at (AT_FDCWD, config_path, 16 << 20, &raw, &raw_len, err) < 0)
    return -1;
  spec = oci_spec_parse (raw, raw_len, config_path, err);
  if (!spec)
    return -1;
  /* the agent policy: ceiling (runtime flags, host config) ∩ request (annotations); the spec is
   * narrowed before any check, so every later step sees only the effective configuration */
  struct policy_inputs pin = {
    .profile_flag = g->profile,
    .policy_flag = g->policy_file,
    .config_path = g->config_path,
    .audit_dir_flag = g->audit_dir,
    .state_root = g->root,
    .annotations = &spec->annotations,
    .sandbox_default_profile = o->default_profile,
  };
  plan = policy_resolve (&pin, err);
  if (!plan || policy_apply_spec (spec, plan, err) < 0)
    goto out;
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
  c.cgroup_path = cgroup_resolve_path (spec->linux_->cgroups_path, o->id, g->systemd_cgroup, err);
  if (!c.cgroup_path)
    goto out;
  add_listen_fds (spec, &preserve);

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
  if (spec->linux_ && spec->linux_->seccomp)
    {
      struct linux_seccomp f = { 0 };
      if (linux_seccomp_cache_compile (rootfd, spec->linux_->seccomp, &f, NULL, err) < 0)
        goto undo;
      linux_seccomp_handover_set (spec->linux_->seccomp, &f);
    }
  if (create_mount_prep (&c, &ns, spec, bundle, rootfs, config_path, &idmap_fds, err) < 0)
    goto undo;
  struct init_args a = {
    .idmap_fds = idmap_fds,
    .spec = spec,
    .ns = &ns,
    .bundle = bundle,
    .rootfs = rootfs,
    .cgroup_path = c.cgroup_path,
    .start_fd = startfd,
    .console_fd = console,
    .preserve_fds = preserve,
    .no_pivot = o->no_pivot,
    .no_new_keyring = o->no_new_keyring,
    .close_fds = { rootfd, dirfd, -1, -1 },
    .plan = plan,
    .unixsock_fd = -1,
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
  *init_pid = c.init_pid;
  ret = 0;
  goto out;

undo:
  create_undo (&c);
out:
  linux_seccomp_handover_clear ();
  ns_plan_close (&ns);
  free (c.cgroup_path);
  free (c.missing_grants);
  linux_idmap_close (idmap_fds, spec ? spec->mounts_len : 0);
  if (plan)
    policy_plan_free (plan);
  return ret;
}

/* ---- operations on an existing container ---- */

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
  const char *status = asbx_state_status (o.dirfd, &o.st);
  if (strcmp (status, "created") != 0)
    {
      asbx_error (err, 0, "cannot start container `%s`: container is %s, not created", id, status);
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
  if (spec->hooks && spec->hooks->poststart_len)
    {
      json = state_json (id, "running", o.st.pid, o.st.bundle, &o.st.annotations, err);
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
  json = state_json (st->id, "stopped", 0, st->bundle, &st->annotations, &e);
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
      const char *status = asbx_state_status (o.dirfd, &o.st);
      if ((strcmp (status, "running") == 0 || strcmp (status, "paused") == 0) && !force)
        {
          asbx_error (err, 0, "cannot delete container `%s` that is not stopped: %s", id, status);
          goto out;
        }
      test_stop_at ("delete:opened");
      if (strcmp (status, "stopped") != 0)
        kill_and_wait (&o.st);
      test_stop_at ("delete:killed");
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
  /* the monitor writes exit_reason and its last audit record after the init is gone: let it
   * finish before the directory goes */
  monitor_wait_exit (o.dirfd, 5000);
  ret = asbx_state_dir_remove (o.rootfd, id, err);
out:
  asbx_container_close (&o);
  return ret;
}

char *
asbx_container_state_json (const struct asbx_global *g, const char *id, asbx_err_t *err)
{
  struct asbx_opened o;
  char *ret = NULL;

  if (asbx_container_open (g->root, id, &o, err) < 0)
    goto out;
  if (!o.has_state)
    {
      asbx_error (err, 0, "container `%s` is being created", id);
      goto out;
    }
  const char *status = asbx_state_status (o.dirfd, &o.st);
  char *reason = monitor_exit_reason (o.dirfd);
  if (reason)
    {
      /* a policy monitor recorded why the container ended (wallclock, cpu, failed-execs, ...) */
      struct oci_map *a = &o.st.annotations;
      for (size_t i = 0; i < a->len; i++)
        if (strcmp (a->keys[i], "io.agentsbx.exitReason") == 0)
          {
            /* never let config.json's annotations forge the monitor's verdict */
            free (a->keys[i]);
            free (a->values[i]);
            a->keys[i] = a->keys[--a->len];
            a->values[i] = a->values[a->len];
            break;
          }
      a->keys = xrealloc (a->keys, sizeof (char *) * (a->len + 2));
      a->values = xrealloc (a->values, sizeof (char *) * (a->len + 2));
      a->keys[a->len] = xstrdup ("io.agentsbx.exitReason");
      a->values[a->len++] = reason;
      a->keys[a->len] = a->values[a->len] = NULL;
    }
  struct oci_state st = {
    .oci_version = OCI_VERSION,
    .id = id,
    .status = status,
    .pid = strcmp (status, "stopped") == 0 ? 0 : o.st.pid,
    .bundle = o.st.bundle,
    /* runc's extra fields, which tools read from `state` (not part of the hooks' state) */
    .rootfs = o.st.rootfs,
    .created = o.st.created,
    .owner = "",
    .annotations = &o.st.annotations,
  };
  ret = oci_state_to_json (&st, true, err);
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

static void
list_print_json_entry (yajl_gen gen, const struct asbx_state *st, const char *status)
{
#define S(x) yajl_gen_string (gen, (const unsigned char *) (x), strlen (x))
  yajl_gen_map_open (gen);
  S ("ociVersion");
  S (OCI_VERSION);
  S ("id");
  S (st->id);
  S ("pid");
  yajl_gen_integer (gen, strcmp (status, "stopped") == 0 ? 0 : st->pid);
  S ("status");
  S (status);
  S ("bundle");
  S (st->bundle);
  S ("rootfs");
  S (st->rootfs ? st->rootfs : "");
  S ("created");
  S (st->created ? st->created : "");
  S ("owner");
  S (st->owner == 0 ? "root" : "");
  S ("annotations");
  yajl_gen_map_open (gen);
  for (size_t i = 0; i < st->annotations.len; i++)
    {
      S (st->annotations.keys[i]);
      S (st->annotations.values[i]);
    }
  yajl_gen_map_close (gen);
  yajl_gen_map_close (gen);
#undef S
}

int
asbx_container_list (const struct asbx_global *g, const char *format, bool quiet, asbx_err_t *err)
{
  cleanup_close int rootfd = open (g->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_closedir DIR *d = NULL;
  struct dirent *de;
  bool json = format && strcmp (format, "json") == 0;
  yajl_gen gen = NULL;

  if (format && !json && strcmp (format, "table") != 0)
    return asbx_error (err, 0, "invalid --format `%s`: expected table or json", format);
  if (rootfd >= 0)
    {
      int dfd = dup (rootfd);
      d = dfd >= 0 ? fdopendir (dfd) : NULL;
      if (!d)
        return asbx_error (err, errno, "read state root `%s`", g->root);
    }
  else if (errno != ENOENT)
    return asbx_error (err, errno, "open state root `%s`", g->root);
  if (json)
    {
      gen = yajl_gen_alloc (NULL);
      yajl_gen_array_open (gen);
    }
  else if (!quiet)
    printf ("%-12s %-8s %-10s %-40s %-30s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER");
  while (d && (de = readdir (d)))
    {
      struct asbx_state st;
      asbx_err_t e = NULL;
      if (de->d_name[0] == '.')
        continue;
      cleanup_close int dfd = openat (rootfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (dfd < 0 || asbx_state_read (dfd, &st, &e) < 0)
        {
          asbx_error_free (&e);
          continue; /* being created, or not ours */
        }
      const char *status = asbx_state_status (dfd, &st);
      if (quiet)
        printf ("%s\n", st.id);
      else if (json)
        list_print_json_entry (gen, &st, status);
      else
        printf ("%-12s %-8d %-10s %-40s %-30s %s\n", st.id, strcmp (status, "stopped") == 0 ? 0 : st.pid, status,
                st.bundle, st.created ? st.created : "", st.owner == 0 ? "root" : "");
      asbx_state_free (&st);
    }
  if (json)
    {
      const unsigned char *buf;
      size_t len;
      yajl_gen_array_close (gen);
      yajl_gen_get_buf (gen, &buf, &len);
      if (!quiet)
        printf ("%.*s\n", (int) len, buf);
      yajl_gen_free (gen);
    }
  return 0;
}
