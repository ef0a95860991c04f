/* sandbox.c - `agentsbx sandbox`: a bundle made on the fly, then the ordinary create/start path.
 *
 * The rootfs is a skeleton directory on the state root's tmpfs holding one empty mount point
 * per exposed host directory; config.json bind-mounts the host's system directories into it
 * read-only (recursively), so nothing is ever created on the host's own root filesystem and
 * directories outside the list (other users' work trees, /run, /mnt) are not visible at all.
 * /tmp and /run are fresh tmpfs, /workspace the only host directory that can be written.
 *
 * Threat model of the workspace: it is the one host directory bound read-write, so a workspace
 * that is the host's root, a kernel filesystem (/proc, /sys, /dev), a system directory or a home
 * directory (~/.ssh, shell rc files) would hand the sandboxed command the host: such a
 * workspace is refused after realpath(3), before anything is created (runtime/sandbox_ws.c, also
 * for homes it contains, the audit dir and the policy's denied paths). The read-only view also
 * shows the workspace at its host path, without the masks of /workspace/...: an empty read-only
 * tmpfs covers it there (workspace_alias).
 *
 * Stopping: we are the foreground process timeout(1), systemd or a CI runner signals. A
 * pid-namespace init ignores signals it has no handler for, so forwarding SIGTERM alone may never
 * end it: after the stop timeout (10 s, as `docker stop`) the whole cgroup is SIGKILLed and we
 * exit 128+the signal we received, as timeout(1) expects.
 *
 * --isolation vm (root only: QEMU's jail is made by host root, runtime/vm_jail.h): QEMU runs as
 * the workspace's owner, never root, so the bundle is handed to that owner (vm_jail_init takes
 * the bundle's owner) and nothing is idmapped: QEMU reads the shared system directories with the
 * owner's own rights (not /etc/shadow, not /root), and what the guest writes in the workspace is
 * the owner's on the host. The config has no user namespace (the guest's root is the owner
 * through QEMU's mapping, and owns the workspace there), and /home and /root are not shared: a
 * guest kernel taken over would read whatever QEMU's uid may read in a share, the owner's own
 * ~/.ssh included, which only the guest's masks would hide (docs/security.md "Isolation tiers"). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/container.h"
#include "runtime/oci_cache.h"
#include "runtime/workspace_seed.h"
#include "monitor/audit.h"
#include "monitor/monitor.h"
#include "runtime/sandbox.h"
#include "runtime/sandbox_seed.h"
#include "runtime/sandbox_summary.h"
#include "runtime/sandbox_wait.h"
#include "runtime/sandbox_ws.h"
#include "runtime/sandbox_wsalias.h"
#include "runtime/state.h"

/* host directories exposed read-only (FHS system directories and homes) */
static const char *const exposed_dirs[] = { "usr", "etc",  "opt", "var",   "home",  "root",  "srv",
                                            "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

/* not shared into a VM (the header comment says why): empty directories in its view */
static bool
vm_hidden_dir (const char *name, bool vm)
{
  return vm && (strcmp (name, "home") == 0 || strcmp (name, "root") == 0);
}

/* quick mode with a user namespace: the skeleton rootfs of sandbox <id> is USERNS_SKELETONS/<id> */
#define USERNS_SKELETONS "/run/agentsbx-sandbox"

struct sandbox_ids
{
  uid_t uid;
  gid_t gid;
};

#define G_STR(g, s) yajl_gen_string (g, (const unsigned char *) (s), strlen (s))

static void
gen_strv (yajl_gen g, const char *key, const char *const *v, size_t n)
{
  G_STR (g, key);
  yajl_gen_array_open (g);
  for (size_t i = 0; i < n; i++)
    G_STR (g, v[i]);
  yajl_gen_array_close (g);
}

static void
gen_mount (yajl_gen g, const char *dest, const char *type, const char *src, const char *const *opts, size_t n)
{
  yajl_gen_map_open (g);
  G_STR (g, "destination");
  G_STR (g, dest);
  G_STR (g, "type");
  G_STR (g, type);
  G_STR (g, "source");
  G_STR (g, src);
  gen_strv (g, "options", opts, n);
  yajl_gen_map_close (g);
}

static void
gen_process (yajl_gen g, const struct asbx_sandbox_opts *o)
{
  const char *term = getenv ("TERM");
  cleanup_free char *term_env = xasprintf ("TERM=%s", term ? term : "xterm");
  const char *env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                        "LANG=C.UTF-8", term_env };
  static const char *const caps[] = { "CAP_CHOWN",      "CAP_DAC_OVERRIDE", "CAP_FOWNER",
                                      "CAP_FSETID",     "CAP_KILL",         "CAP_SETGID",
                                      "CAP_SETUID",     "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE",
                                      "CAP_AUDIT_WRITE" };
  G_STR (g, "process");
  yajl_gen_map_open (g);
  G_STR (g, "terminal");
  yajl_gen_bool (g, 0);
  G_STR (g, "user");
  yajl_gen_map_open (g);
  G_STR (g, "uid");
  yajl_gen_integer (g, 0);
  G_STR (g, "gid");
  yajl_gen_integer (g, 0);
  yajl_gen_map_close (g);
  gen_strv (g, "args", (const char *const *) o->argv, o->argc);
  gen_strv (g, "env", env, ASBX_ARRAY_SIZE (env));
  G_STR (g, "cwd");
  G_STR (g, "/workspace");
  G_STR (g, "capabilities");
  yajl_gen_map_open (g);
  gen_strv (g, "bounding", caps, ASBX_ARRAY_SIZE (caps));
  gen_strv (g, "effective", caps, ASBX_ARRAY_SIZE (caps));
  gen_strv (g, "permitted", caps, ASBX_ARRAY_SIZE (caps));
  yajl_gen_map_close (g);
  G_STR (g, "noNewPrivileges");
  yajl_gen_bool (g, 1);
  yajl_gen_map_close (g);
}

/* Where the container's view shows the workspace (a realpath) other than at /workspace, or NULL:
 * its host path when it lies below one of the exposed_dirs the skeleton binds; with --rootfs R
 * (rootfs: R's realpath, skeleton false), its path below R. Places our own mounts cover (/tmp,
 * /run, /proc, /sys, /dev) and /workspace itself (a workspace at R/workspace) are left out. */
static const char *
workspace_alias (const char *ws, const char *rootfs, bool skeleton, bool vm)
{
  static const char *const covered[] = { "/workspace", "/tmp", "/run", "/proc", "/sys", "/dev" };
  const char *alias = NULL;
  size_t rl = strlen (rootfs);

  for (size_t i = 0; skeleton && i < ASBX_ARRAY_SIZE (exposed_dirs) && !alias; i++)
    {
      char host[PATH_MAX];
      struct stat st;
      snprintf (host, sizeof host, "/%s", exposed_dirs[i]);
      if (!vm_hidden_dir (exposed_dirs[i], vm) && lstat (host, &st) == 0 && S_ISDIR (st.st_mode)
          && sandbox_path_under (ws, host))
        alias = ws;
    }
  if (!skeleton && strcmp (rootfs, "/") != 0 && sandbox_path_under (ws, rootfs) && ws[rl] == '/')
    alias = ws + rl;
  for (size_t i = 0; alias && i < ASBX_ARRAY_SIZE (covered); i++)
    if (sandbox_path_under (alias, covered[i]) || sandbox_path_under (covered[i], alias))
      alias = NULL;
  return alias;
}

/* The places of the container's view to cover with an empty tmpfs: the alias of the workspace
 * itself and of every host path that shows it, or a directory below it, through a bind mount
 * (runtime/sandbox_wsalias.h), without one that lies below another. Heap vector of *n borrowed
 * strings (they point into ws and a). */
static const char **
hidden_places (const char *ws, const struct sandbox_ws_aliases *a, const char *rootfs, bool skeleton, bool vm,
               size_t *n)
{
  size_t total = 1 + (a ? a->n_whole + a->n_part : 0), k = 0;
  const char **cand = xmalloc0 (total * sizeof (*cand));
  const char **out = xmalloc0 (total * sizeof (*out));

  cand[k++] = workspace_alias (ws, rootfs, skeleton, vm);
  for (size_t i = 0; a && i < a->n_whole; i++)
    cand[k++] = workspace_alias (a->whole[i], rootfs, skeleton, vm);
  for (size_t i = 0; a && i < a->n_part; i++)
    cand[k++] = workspace_alias (a->part[i], rootfs, skeleton, vm);
  *n = 0;
  for (size_t i = 0; i < k; i++)
    {
      bool below = !cand[i];
      for (size_t j = 0; j < k && !below; j++)
        below = j != i && cand[j] && sandbox_path_under (cand[i], cand[j]) && (strcmp (cand[i], cand[j]) != 0 || j < i);
      if (!below)
        out[(*n)++] = cand[i];
    }
  free (cand);
  return out;
}

static void
gen_mounts (yajl_gen g, const struct asbx_sandbox_opts *o, const char *rootfs, const char *workspace, bool skeleton,
            const struct sandbox_ws_aliases *aliases)
{
  size_t n_hide = 0;
  cleanup_free const char **hide = hidden_places (workspace, aliases, rootfs, skeleton, o->isolation_vm, &n_hide);
  static const char *const dev_o[] = { "nosuid", "strictatime", "mode=755", "size=65536k" };
  static const char *const pts_o[] = { "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620" };
  static const char *const shm_o[] = { "nosuid", "noexec", "nodev", "mode=1777", "size=65536k" };
  static const char *const tmp_o[] = { "nosuid", "nodev", "mode=1777", "size=50%" };
  static const char *const sys_o[] = { "nosuid", "noexec", "nodev", "ro" };
  static const char *const ro_o[] = { "rbind", "ro", "rro", "nosuid", "nodev" };
  static const char *const ws_o[] = { "rbind", "rw", "nosuid", "nodev" };
  static const char *const none[] = { NULL };

  G_STR (g, "mounts");
  yajl_gen_array_open (g);
  gen_mount (g, "/proc", "proc", "proc", none, 0);
  gen_mount (g, "/dev", "tmpfs", "tmpfs", dev_o, ASBX_ARRAY_SIZE (dev_o));
  gen_mount (g, "/dev/pts", "devpts", "devpts", pts_o, ASBX_ARRAY_SIZE (pts_o));
  gen_mount (g, "/dev/shm", "tmpfs", "shm", shm_o, ASBX_ARRAY_SIZE (shm_o));
  gen_mount (g, "/sys", "sysfs", "sysfs", sys_o, ASBX_ARRAY_SIZE (sys_o));
  gen_mount (g, "/tmp", "tmpfs", "tmpfs", tmp_o, ASBX_ARRAY_SIZE (tmp_o));
  gen_mount (g, "/run", "tmpfs", "tmpfs", tmp_o, ASBX_ARRAY_SIZE (tmp_o));
  for (size_t i = 0; skeleton && i < ASBX_ARRAY_SIZE (exposed_dirs); i++)
    {
      char host[PATH_MAX], dest[PATH_MAX];
      struct stat st;
      snprintf (host, sizeof host, "/%s", exposed_dirs[i]);
      if (vm_hidden_dir (exposed_dirs[i], o->isolation_vm) || lstat (host, &st) < 0 || !S_ISDIR (st.st_mode))
        continue; /* not shared into a VM; missing, or a symlink recreated in the skeleton */
      snprintf (dest, sizeof dest, "/%s", exposed_dirs[i]);
      gen_mount (g, dest, "bind", host, ro_o, ASBX_ARRAY_SIZE (ro_o));
    }
  gen_mount (g, "/workspace", "bind", workspace, ws_o, ASBX_ARRAY_SIZE (ws_o));
  for (size_t i = 0; i < n_hide; i++)
    {
      /* the read-only host view (or the --rootfs) shows the workspace at another path too,
       * where the policy's masks of /workspace/... (denyRead /workspace/.env) do not lie: an
       * empty read-only tmpfs hides it there (outside tester; docs/policy.md §7) */
      static const char *const hide_o[] = { "ro", "nosuid", "nodev", "noexec", "mode=0555", "size=4k" };
      gen_mount (g, hide[i], "tmpfs", "tmpfs", hide_o, ASBX_ARRAY_SIZE (hide_o));
    }
  yajl_gen_array_close (g);
}

/* linux.uidMappings/gidMappings: container root (0) is ids->uid/gid on the host, nobody else is
 * mapped (one id each) */
static void
gen_id_map (yajl_gen g, const char *key, unsigned id)
{
  G_STR (g, key);
  yajl_gen_array_open (g);
  yajl_gen_map_open (g);
  G_STR (g, "containerID");
  yajl_gen_integer (g, 0);
  G_STR (g, "hostID");
  yajl_gen_integer (g, id);
  G_STR (g, "size");
  yajl_gen_integer (g, 1);
  yajl_gen_map_close (g);
  yajl_gen_array_close (g);
}

static void
gen_user_ns (yajl_gen g, const struct sandbox_ids *ids)
{
  gen_id_map (g, "uidMappings", ids->uid);
  gen_id_map (g, "gidMappings", ids->gid);
}

static char *
sandbox_config (const struct asbx_sandbox_opts *o, const char *rootfs, const char *workspace, bool skeleton,
                const struct sandbox_ids *ids, const struct sandbox_ws_aliases *aliases)
{
  static const char *const masked[] = { "/proc/acpi",       "/proc/kcore",       "/proc/keys",    "/proc/latency_stats",
                                        "/proc/timer_list", "/proc/sched_debug", "/sys/firmware", "/proc/scsi" };
  static const char *const ro_paths[] = { "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger" };
  static const char *const ns[] = { "pid", "network", "ipc", "uts", "mount", "cgroup" };
  yajl_gen g = json_gen_new (0);

  yajl_gen_map_open (g);
  G_STR (g, "ociVersion");
  G_STR (g, "1.3.0");
  gen_process (g, o);
  G_STR (g, "root");
  yajl_gen_map_open (g);
  G_STR (g, "path");
  G_STR (g, rootfs);
  G_STR (g, "readonly");
  yajl_gen_bool (g, 1);
  yajl_gen_map_close (g);
  G_STR (g, "hostname");
  G_STR (g, "sandbox");
  gen_mounts (g, o, rootfs, workspace, skeleton, aliases);
  G_STR (g, "linux");
  yajl_gen_map_open (g);
  G_STR (g, "namespaces");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (ns); i++)
    {
      yajl_gen_map_open (g);
      G_STR (g, "type");
      G_STR (g, ns[i]);
      yajl_gen_map_close (g);
    }
  if (ids)
    {
      yajl_gen_map_open (g);
      G_STR (g, "type");
      G_STR (g, "user");
      yajl_gen_map_close (g);
    }
  yajl_gen_array_close (g);
  if (ids)
    {
      gen_user_ns (g, ids);
    }
  gen_strv (g, "maskedPaths", masked, ASBX_ARRAY_SIZE (masked));
  gen_strv (g, "readonlyPaths", ro_paths, ASBX_ARRAY_SIZE (ro_paths));
  yajl_gen_map_close (g);
  yajl_gen_map_close (g);
  return json_gen_finish (g, false, NULL);
}

/* the skeleton: mount points for the exposed dirs, the usrmerge symlinks, and the rest */
static int
make_skeleton (const char *rootfs, asbx_err_t *err)
{
  static const char *const dirs[] = { "proc", "sys", "dev", "tmp", "run", "workspace" };
  cleanup_close int fd = -1;

  if (mkdir (rootfs, 0755) < 0)
    return asbx_error (err, errno, "sandbox: create `%s`", rootfs);
  fd = open (rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "sandbox: open `%s`", rootfs);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (dirs); i++)
    if (mkdirat (fd, dirs[i], 0755) < 0)
      return asbx_error (err, errno, "sandbox: create `%s/%s`", rootfs, dirs[i]);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (exposed_dirs); i++)
    {
      char host[PATH_MAX], target[PATH_MAX];
      struct stat st;
      ssize_t n;
      snprintf (host, sizeof host, "/%s", exposed_dirs[i]);
      if (lstat (host, &st) < 0)
        continue;
      if (S_ISDIR (st.st_mode) && mkdirat (fd, exposed_dirs[i], 0755) < 0)
        return asbx_error (err, errno, "sandbox: create `%s/%s`", rootfs, exposed_dirs[i]);
      if (S_ISLNK (st.st_mode) && (n = readlink (host, target, sizeof target - 1)) > 0)
        {
          target[n] = '\0';
          if (symlinkat (target, fd, exposed_dirs[i]) < 0)
            return asbx_error (err, errno, "sandbox: symlink `%s/%s`", rootfs, exposed_dirs[i]);
        }
    }
  return 0;
}

/* only what make_skeleton created: empty dirs and symlinks, then the directory itself */
static void
remove_skeleton (const char *rootfs)
{
  char buf[PATH_MAX];
  static const char *const extra[] = { "proc", "sys", "dev", "tmp", "run", "workspace" };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (exposed_dirs); i++)
    {
      snprintf (buf, sizeof buf, "%s/%s", rootfs, exposed_dirs[i]);
      if (unlink (buf) < 0)
        rmdir (buf);
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (extra); i++)
    {
      snprintf (buf, sizeof buf, "%s/%s", rootfs, extra[i]);
      rmdir (buf);
    }
  rmdir (rootfs);
}

static void
remove_tree (const char *path, const char *id)
{
  /* only what sandbox_bundle created: the skeleton (in the bundle, or under USERNS_SKELETONS),
   * config.json, the bundle directory */
  char buf[PATH_MAX];
  snprintf (buf, sizeof buf, "%s/rootfs", path);
  remove_skeleton (buf);
  snprintf (buf, sizeof buf, "%s/%s", USERNS_SKELETONS, id);
  remove_skeleton (buf);
  snprintf (buf, sizeof buf, "%s/config.json", path);
  unlink (buf);
  rmdir (path);
}

/* limit kills: codes in the style of timeout(1) (documented in docs/policy.md) */
static int
exit_code_for_reason (const char *reason, int status)
{
  static const struct
  {
    const char *reason;
    int code;
  } t[] = { { "wallclock", 124 }, { "failed-execs", 125 }, { "cpu", 152 },
            { "memory", 137 },    { "pids", 137 },         { "audit-full", 137 } };
  for (size_t i = 0; reason && i < ASBX_ARRAY_SIZE (t); i++)
    if (strncmp (reason, t[i].reason, strlen (t[i].reason)) == 0)
      return t[i].code;
  return status;
}

/* The monitor records the exit reason after the init is gone, so wait (bounded) for the
 * monitor to finish before reading it. */
static char *
read_exit_reason (const struct asbx_global *g, const char *id)
{
  cleanup_free char *dir = xasprintf ("%s/%s", g->root, id);
  cleanup_close int dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (dirfd < 0)
    return NULL;
  monitor_wait_exit (dirfd, 5000);
  return monitor_exit_reason (dirfd);
}

/* Append to the audit log that the sandbox was stopped by a signal (the monitor's `exited`
 * record says `killed` when we had to SIGKILL: this record says why). Best effort. */
static void
audit_stopped (const char *adir, const char *id, int sig, bool forced)
{
  asbx_err_t e = NULL;
  cleanup_close int fd = audit_open (adir, id, &e);
  struct audit_rec *r;

  if (fd < 0)
    {
      asbx_error_free (&e);
      return;
    }
  r = audit_rec_new (id, "lifecycle");
  audit_rec_str (r, "state", "stopped");
  audit_rec_str (r, "exitReason", "signal");
  audit_rec_int (r, "signal", sig);
  audit_rec_bool (r, "forcedKill", forced);
  audit_rec_int (r, "stopTimeoutSec", stop_timeout_s ());
  if (audit_rec_write (r, fd, &e) < 0)
    asbx_error_free (&e);
}

/* The closing summary on stderr as o->summary asks (sandbox_summary.h): text only when the run
 * was notable, and then without the "stopped by the policy" line when a signal we forwarded
 * stopped it (the policy did not: our own warning says what did); JSON always, one object.
 * Returns whether the log could be read (false: the caller warns about the exit reason). */
static bool
print_summary (const struct asbx_sandbox_opts *o, const char *id, const char *apath, int exit_status, int stop_sig,
               bool forced)
{
  struct sandbox_sum s;
  bool read_ok = apath && sandbox_summary_read (apath, &s) == 0;

  if (!read_ok)
    s = (struct sandbox_sum){ 0 };
  if (o->summary == ASBX_SANDBOX_SUMMARY_JSON)
    {
      struct sandbox_sum_run run = { .id = id,
                                     .audit_log = apath,
                                     .exit_status = exit_status,
                                     .stop_signal = stop_sig,
                                     .forced_kill = forced,
                                     .log_read = read_ok };
      if (sandbox_summary_json (&s, &run, stderr) < 0)
        log_warning ("sandbox %s: write the summary: %s", id, strerror (errno));
    }
  else if (o->summary == ASBX_SANDBOX_SUMMARY_TEXT && read_ok)
    sandbox_summary_text (&s, stop_sig != 0, stderr);
  if (read_ok)
    sandbox_summary_free (&s);
  return read_ok;
}

/* Every directory from "/" down to `path` is searchable by uid/gid (mode bits only: the check
 * the kernel makes for the mapped uid, which has no capability over host-owned inodes). */
static bool
searchable_by (const char *path, uid_t uid, gid_t gid)
{
  char buf[PATH_MAX];
  size_t n = strlen (path);

  if (n >= sizeof buf)
    return false;
  memcpy (buf, path, n + 1);
  for (char *p = buf + n;; p = strrchr (buf, '/'))
    {
      struct stat st;
      if (p)
        *p = '\0';
      if (stat (*buf ? buf : "/", &st) < 0)
        return false;
      mode_t bit = st.st_uid == uid ? S_IXUSR : st.st_gid == gid ? S_IXGRP : S_IXOTH;
      if (!(st.st_mode & bit))
        return false;
      if (!*buf)
        return true;
    }
}

/* Quick mode's user namespace (issue 13 §1; docs/security.md): container root is the
 * workspace's owner, when that is not host root; an owner who cannot reach the workspace (and
 * the --rootfs, if given) by itself is refused. A root-owned workspace gets no user namespace,
 * and the policy's host-file layer (runtime/policy_hostfiles.h) is what holds. Returns 1 (user
 * namespace, *ids set), 0 (none) or -1 with *err. */
static int
sandbox_userns_ids (const char *ws, const struct stat *ws_st, const char *rootfs, struct sandbox_ids *ids,
                    asbx_err_t *err)
{
  struct stat st;

  if (geteuid () != 0)
    {
      /* a non-root caller (issue 17): always a user namespace, container root = the caller */
      ids->uid = geteuid (), ids->gid = getegid ();
      return 1;
    }
  /* the checked directory's owner (its fstat at the check), never a later stat of the name: an
   * agent's swap of the name for a link to /usr made root's next sandbox run as host root
   * (outside retest) */
  if (ws_st->st_uid == 0 || ws_st->st_gid == 0)
    return 0;
  ids->uid = ws_st->st_uid, ids->gid = ws_st->st_gid;
  /* A workspace its owner cannot reach (a parent made 0000): fail closed rather than run the
   * agent as host root in it (the owner could otherwise choose root mode for root's sandboxes) */
  if (!searchable_by (ws, ids->uid, ids->gid) || (rootfs && !searchable_by (rootfs, ids->uid, ids->gid)))
    return asbx_error (err, 0,
                       "sandbox: workspace `%s` belongs to uid %u, who cannot reach it (or the --rootfs): the "
                       "sandbox runs as its owner and will not run as host root instead; make every parent "
                       "directory searchable by that user",
                       ws, (unsigned) ids->uid);
  /* our own directory, unless someone else made it first: then no user namespace */
  if (!rootfs && lstat (USERNS_SKELETONS, &st) == 0
      && (!S_ISDIR (st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))))
    return 0;
  return searchable_by ("/run", ids->uid, ids->gid) ? 1 : 0;
}

/* --isolation vm: QEMU's uid/gid, the workspace's owner (the checked directory's fstat, as for
 * the user namespace above). A root-owned workspace is refused: QEMU never runs as root, and as
 * another uid it could not write it (idmapping it would idmap the host's system directories too,
 * giving QEMU root's read access to them: runtime/vm_jail.h). --vm-user, meant for a root-owned
 * bundle of run/create, may only confirm the owner. 0 / -1 with *err. */
static int
sandbox_vm_ids (const struct asbx_global *g, const char *ws, const struct stat *ws_st, struct sandbox_ids *ids,
                asbx_err_t *err)
{
  if (ws_st->st_uid == 0)
    return asbx_error (err, 0,
                       "sandbox --isolation vm: workspace `%s` belongs to root: QEMU runs as the workspace's owner "
                       "and never as root; chown it to the unprivileged user the guest's files should belong to",
                       ws);
  if (g->vm_uid && g->vm_uid != ws_st->st_uid)
    return asbx_error (err, 0,
                       "sandbox --isolation vm: --vm-user %u is not the owner of workspace `%s` (uid %u): QEMU runs "
                       "as the workspace's owner, whose files the guest writes",
                       (unsigned) g->vm_uid, ws, (unsigned) ws_st->st_uid);
  ids->uid = ws_st->st_uid;
  ids->gid = g->vm_uid ? g->vm_gid : ws_st->st_gid;
  return 0;
}

/* seed: the seeded clone that is the workspace (o->workspace names it), or NULL */
static int
sandbox_bundle (const struct asbx_global *g, const struct asbx_sandbox_opts *o, const char *id,
                const struct sandbox_seed *seed, char **bundle_out, struct stat *ws_st, char *ws_out, asbx_err_t *err)
{
  char ws[PATH_MAX], rootfs_real[PATH_MAX];
  cleanup_free char *base = xasprintf ("%s/sandbox", g->root);
  cleanup_free char *bundle = xasprintf ("%s/%s", base, id);
  cleanup_free char *rootfs = xasprintf ("%s/rootfs", bundle);
  cleanup_free char *config = NULL, *config_path = NULL;
  cleanup_close int fd = -1;
  struct sandbox_ids ids = { 0, 0 };
  struct sandbox_ws_aliases aliases;

  if (realpath (o->workspace ? o->workspace : ".", ws) == NULL)
    return asbx_error (err, errno, "sandbox: --workspace `%s`", o->workspace ? o->workspace : ".");
  if (o->rootfs && realpath (o->rootfs, rootfs_real) == NULL)
    return asbx_error (err, errno, "sandbox: --rootfs `%s`", o->rootfs);
  /* a seeded clone lies in the workspaces directory (below /var/lib for root, which the host
   * directory checks refuse): it is ours, made a moment ago; it must still be that clone */
  if (sandbox_workspace_pin (ws, ws_st, err) < 0
      || (seed ? sandbox_seed_is_ours (seed, ws_st, err)
               : sandbox_check_workspace (g, o->workspace, ws, o->rootfs ? rootfs_real : NULL, err))
             < 0)
    return -1;
  snprintf (ws_out, PATH_MAX, "%s", ws);
  if (asbx_root_open (g->root, true, err) < 0)
    return -1;
  if (mkdir (base, 0700) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "sandbox: create `%s`", base);
  if (mkdir (bundle, 0700) < 0)
    return asbx_error (err, errno == EEXIST ? 0 : errno, "sandbox: bundle `%s` already exists", bundle);
  *bundle_out = xstrdup (bundle);
  /* under vm the guest's root is the owner already (QEMU's mapping): no user namespace */
  int un = o->isolation_vm ? sandbox_vm_ids (g, ws, ws_st, &ids, err)
                           : sandbox_userns_ids (ws, ws_st, o->rootfs ? rootfs_real : NULL, &ids, err);
  if (un < 0)
    return -1;
  bool userns = un > 0 && !o->isolation_vm;
  if (userns && !o->rootfs && geteuid () == 0)
    {
      /* the init resolves the rootfs as the mapped uid: the skeleton must lie on a path that
       * uid can search, which the state root (0700) is not; a non-root caller's state root is
       * its own (runtime/userdirs.h): the skeleton stays in the bundle */
      free (rootfs);
      rootfs = xasprintf ("%s/%s", USERNS_SKELETONS, id);
      if (mkdir (USERNS_SKELETONS, 0711) < 0 && errno != EEXIST)
        return asbx_error (err, errno, "sandbox: create `%s`", USERNS_SKELETONS);
    }
  if (!o->rootfs && make_skeleton (rootfs, err) < 0)
    return -1;
  /* read again here, after the checks: a bind made since is covered too */
  if (sandbox_ws_aliases (ws, &aliases, err) < 0)
    return -1;
  config = sandbox_config (o, o->rootfs ? rootfs_real : rootfs, ws, !o->rootfs, userns ? &ids : NULL, &aliases);
  sandbox_ws_aliases_free (&aliases);
  if (sandbox_workspace_still (ws, ws_st, err) < 0)
    return -1;
  config_path = xasprintf ("%s/config.json", bundle);
  fd = open (config_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || write_all (fd, config, strlen (config)) < 0)
    return asbx_error (err, errno, "sandbox: write `%s`", config_path);
  if (o->isolation_vm)
    {
      /* QEMU runs as the bundle's owner (runtime/vm_jail.h): the workspace's. As owner it could
       * swap config.json before create reads it (a hook runs as root): only if it can reach the
       * bundle, which lies in root's own 0700 directory (checked, not assumed: --root is the
       * caller's); QEMU sees it only as a read-only mount. The skeleton in it stays root's. */
      cleanup_close int pfd = open (base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      cleanup_close int bfd = pfd < 0 ? -1 : openat (pfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      struct stat pst;
      if (bfd < 0 || fstat (pfd, &pst) < 0)
        return asbx_error (err, errno, "sandbox: open `%s`", bundle);
      if (pst.st_uid != 0 || (pst.st_mode & 077))
        return asbx_error (err, 0,
                           "sandbox --isolation vm: `%s` is not root's alone (mode %03o, uid %u): the bundle given "
                           "to QEMU's uid must be out of that uid's reach",
                           base, (unsigned) (pst.st_mode & 0777), (unsigned) pst.st_uid);
      if (fchown (fd, ids.uid, ids.gid) < 0 || fchown (bfd, ids.uid, ids.gid) < 0)
        return asbx_error (err, errno, "sandbox: give `%s` to uid %u (QEMU's)", bundle, (unsigned) ids.uid);
    }
  return 0;
}

int
asbx_sandbox_run (const struct asbx_global *g, const struct asbx_sandbox_opts *o_in, int *exit_status, asbx_err_t *err)
{
  cleanup_free char *id = o_in->id ? xstrdup (o_in->id) : xasprintf ("sandbox-%d", getpid ());
  cleanup_free char *bundle = NULL, *reason = NULL, *apath = NULL, *adir = NULL;
  cleanup_free char *image_rootfs = NULL, *image_digest = NULL;
  struct sandbox_seed seed = { 0 };
  struct asbx_sandbox_opts oo = *o_in;
  const struct asbx_sandbox_opts *o = &oo;
  oo.isolation_vm = o_in->isolation_vm || g->isolation_vm; /* the global --isolation vm too */
  asbx_err_t e2 = NULL;
  struct stat ws_st = { 0 };
  char ws[PATH_MAX] = "";
  pid_t pid;
  int ret = -1, stop_sig = 0;
  bool forced = false;

  if (o->argc == 0)
    return asbx_error (err, 0, "sandbox: no command given (agentsbx sandbox [options] -- CMD ARG...)");
  if (o->isolation_vm && geteuid () != 0)
    return asbx_error (err, 0,
                       "sandbox --isolation vm: needs root: QEMU's jail (its namespaces and mounts, then the drop "
                       "to the workspace owner's uid) is set up by host root; run it as root (QEMU then runs as "
                       "the workspace's owner) or use the container tier");
  if (asbx_id_validate (id, err) < 0)
    return -1;
  if (o->image && o->rootfs)
    return asbx_error (err, 0, "sandbox: --image and --rootfs are exclusive (both name the root filesystem)");
  if (o->seed_git && (o->workspace || o->seed_fetch))
    return asbx_error (err, 0, "sandbox: --seed-git and --workspace are exclusive (the clone is the workspace)");
  if (o->seed_git)
    {
      /* the clone is the review workspace's lower (runtime/sandbox_seed.h): made before the
       * bundle, which binds it at /workspace; create resumes the layout made with it */
      if (sandbox_seed_prepare (g, o->seed_git, id, &seed, err) < 0)
        {
          sandbox_seed_free (&seed); /* what prepare parsed before it refused (repo, rev) */
          return -1;
        }
      oo.workspace = seed.lower;
      oo.review = true;
    }
  if (o->image)
    {
      /* the unpacked, verified image is an ordinary read-only --rootfs from here on */
      if (oci_cache_rootfs (o->image, &image_rootfs, &image_digest, err) < 0)
        goto out;
      oo.rootfs = image_rootfs;
      log_info ("sandbox %s: image %s (%s)", id, o->image, image_digest);
    }
  if (sandbox_bundle (g, o, id, o->seed_git ? &seed : o->seed_fetch, &bundle, &ws_st, ws, err) < 0)
    goto out;
  int vm_status = 0;
  struct asbx_create_opts co = { .id = id,
                                 .bundle = bundle,
                                 .default_profile = "agent",
                                 .workspace_review = o->review,
                                 .isolation_vm = o->isolation_vm,
                                 .vm_status = &vm_status };
  int rc = asbx_container_create (g, &co, &pid, err);
  if (rc < 0)
    goto out;
  if (rc == 1)
    {
      /* isolation vm: the command ran to its end in the VM (runtime/vm.h) */
      *exit_status = vm_status;
      ret = 0;
      goto out;
    }
  if (sandbox_workspace_mounted_is (g, id, o->review, pid, ws, &ws_st, err) < 0
      || (o->review && image_digest && sandbox_meta_image (g, id, image_digest, err) < 0))
    {
      asbx_container_delete (g, id, true, &e2);
      asbx_error_free (&e2);
      goto out;
    }
  if (o->seed_git)
    {
      /* the revision the agent starts from, in the run's audit log before the command runs */
      cleanup_free char *sdir = audit_dir_resolve (g->audit_dir, g->config_path, err);
      if (!sdir || workspace_seed_audit (sdir, id, seed.repo, seed.rev, seed.sha, err) < 0)
        {
          asbx_container_delete (g, id, true, &e2);
          asbx_error_free (&e2);
          goto out;
        }
    }
  seed.made = false; /* the container ran (or is about to): the workspace is the user's to review */
  /* From here a stop signal must reach sandbox_wait: the command can run (and the caller see it
   * run) before this process is scheduled again after `start`, and a SIGTERM in that gap took the
   * default action, leaving the container, its cgroup and state behind. The init and monitor
   * were forked by create, with the caller's mask; hooks reset theirs. */
  sigset_t fwd, old_mask;
  forwarded_signals (&fwd);
  sigprocmask (SIG_BLOCK, &fwd, &old_mask);
  if (asbx_container_start (g, id, err) < 0)
    {
      sigprocmask (SIG_SETMASK, &old_mask, NULL);
      asbx_container_delete (g, id, true, &e2);
      asbx_error_free (&e2);
      goto out;
    }
  *exit_status = sandbox_wait (g, id, pid, &stop_sig, &forced);
  sigprocmask (SIG_SETMASK, &old_mask, NULL);
  reason = read_exit_reason (g, id);
  *exit_status = exit_code_for_reason (reason, *exit_status);
  if (forced)
    *exit_status = 128 + stop_sig; /* as timeout(1): the signal that asked us to stop */
  /* what was denied and why, from this run's audit log (the dir the monitor wrote to and
   * `agentsbx audit` reads: --audit-dir > host config auditDir > default) */
  adir = audit_dir_resolve (g->audit_dir, g->config_path, &e2);
  if (!adir)
    asbx_error_free (&e2); /* create read the same host config a moment ago: not expected */
  apath = adir ? audit_path (adir, id) : NULL;
  if (stop_sig && adir)
    audit_stopped (adir, id, stop_sig, forced);
  if (!print_summary (o, id, apath, *exit_status, stop_sig, forced) && !forced && !o->quiet && reason
      && strcmp (reason, "exited") != 0)
    log_warning ("sandbox %s: stopped by the policy: %s", id, reason);
  if (forced && !o->quiet)
    log_warning ("sandbox %s: stopped by signal %d: still running %ld s after it was forwarded, killed", id, stop_sig,
                 stop_timeout_s ());
  if (asbx_container_delete (g, id, true, &e2) < 0)
    {
      log_warning ("sandbox: %s", e2->msg);
      asbx_error_free (&e2);
    }
  ret = 0;
out:
  if (bundle)
    remove_tree (bundle, id);
  if (ret < 0)
    sandbox_seed_undo (&seed, id);
  sandbox_seed_free (&seed);
  return ret;
}
