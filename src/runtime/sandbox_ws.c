/* sandbox_ws.c - the workspace check of quick mode (see the header).
 *
 * Threat model: the workspace is the one host directory bound read-write, and the policy's
 * masks (denyRead/denyWrite of ~/.ssh, the audit directory, ...) are mounts at the paths the
 * policy names, not at the same files seen through /workspace. So a workspace that is a system
 * directory, contains a home, lies in a home's dot-directory or holds the audit directory hands
 * the sandboxed command what the masks hide (found by an outside tester: --workspace /var/log
 * read and forged other sandboxes' audit logs at /workspace/agentsbx; --workspace /var/lib or
 * ~/.ssh wrote authorized_keys). Everything is compared after realpath(3), before anything is
 * created; a home of /etc/passwd is resolved inside the rootfs (runtime/policy_homes.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "policy/policy.h"
#include "monitor/audit.h"
#include "runtime/audit_dirs.h"
#include "runtime/policy_homes.h"
#include "runtime/sandbox_ws.h"
#include "runtime/workspace_layout.h"
#include "runtime/sandbox_wsalias.h"

/* exact paths that are refused as a workspace (with why); homes are checked apart */
static const struct
{
  const char *path;
  const char *why;
} refused_exact[] = {
  { "/", "the host's root directory" }, { "/home", "the directory of every user's home" },
  { "/usr", "a system directory" },     { "/bin", "a system directory" },
  { "/sbin", "a system directory" },    { "/lib", "a system directory" },
  { "/lib32", "a system directory" },   { "/lib64", "a system directory" },
  { "/libx32", "a system directory" },  { "/var", "a system directory (host state, logs, other containers)" },
  { "/srv", "a system directory" },     { "/opt", "a system directory" },
};

/* directories refused together with everything below them */
static const struct
{
  const char *path;
  const char *why;
} refused_below[] = {
  { "/proc", "a kernel or device filesystem (writing it changes the host)" },
  { "/sys", "a kernel or device filesystem (writing it changes the host)" },
  { "/dev", "a kernel or device filesystem (writing it changes the host)" },
  { "/etc", "a system directory (host configuration: /etc/shadow, /etc/ssh, sudoers)" },
  { "/boot", "a system directory (the kernel and boot loader)" },
  { "/run", "a system directory (host sockets and runtime state)" },
  { "/var/log", "a system directory (host logs: the audit logs of every sandbox)" },
  { "/var/lib", "a system directory (host state: databases, service homes, other containers)" },
  { "/var/spool", "a system directory (host queues: cron, mail)" },
  { "/var/mail", "a system directory (users' mail)" },
};

bool
sandbox_path_under (const char *path, const char *dir)
{
  size_t n = strlen (dir);
  if (n == 1 && dir[0] == '/')
    return path[0] == '/';
  return strncmp (path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* realpath of prefix+path when it resolves, else prefix+path as written; heap. Most of the
 * policy's paths do not exist: an lstat that fails tells so in one syscall, where realpath(3)
 * readlinks every component first (~400 calls per sandbox); realpath fails whenever lstat does. */
static char *
resolved (const char *prefix, const char *path)
{
  cleanup_free char *p = xasprintf ("%s%s", prefix, path);
  char buf[PATH_MAX];
  struct stat st;
  return xstrdup (lstat (p, &st) == 0 && realpath (p, buf) ? buf : p);
}

/* the refusal; shown: the bind-mount alias judged in place of ws, or NULL */
static int
refuse_as (const char *arg, const char *ws, const char *shown, const char *what, asbx_err_t *err)
{
  if (shown)
    return asbx_error (err, 0,
                       "sandbox: refusing workspace `%s`%s: it, or a directory in it, is also `%s` (a bind "
                       "mount), and there %s, and would be writable at /workspace; give a project directory with "
                       "--workspace DIR",
                       ws, arg ? "" : " (the current directory)", shown, what);
  return asbx_error (err, 0,
                     "sandbox: refusing workspace `%s`%s: %s, and would be writable at /workspace; "
                     "give a project directory with --workspace DIR",
                     ws, arg ? "" : " (the current directory)", what);
}

/* ws is, contains or lies in one of the homes of the rootfs at `root` ("/" or --rootfs's realpath),
 * or lies in a home's dot-directory. Returns 0 (none), 1 (*what set, heap) or -1 with *err. */
static int
check_homes (const char *ws, const char *root, char **what, asbx_err_t *err)
{
  cleanup_close int rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  const char *prefix = strcmp (root, "/") == 0 ? "" : root;
  struct policy_home *v = NULL;
  int n, ret = 0;

  if (rootfd < 0)
    return asbx_error (err, errno, "sandbox: open `%s`", root);
  n = policy_homes_list (rootfd, "/home", 0, &v, err);
  if (n < 0)
    return -1;
  for (int i = -1; i < n && !ret; i++)
    {
      cleanup_free char *h = resolved (prefix, i < 0 ? "/root" : v[i].path);
      size_t hl = strcmp (h, "/") == 0 ? 0 : strlen (h);
      if (hl == 0)
        continue; /* a home of "/" (a service user): the root itself is refused already */
      if (sandbox_path_under (h, ws))
        *what = xasprintf ("it %s the home directory `%s` (credentials such as ~/.ssh, masked only at that path)",
                           strcmp (h, ws) == 0 ? "is" : "contains", h);
      else if (sandbox_path_under (ws, h) && ws[hl + 1] == '.')
        *what = xasprintf ("it lies in a dot-directory of the home `%s` (credentials and configuration such "
                           "as ~/.ssh, ~/.config)",
                           h);
      ret = *what ? 1 : 0;
    }
  policy_homes_free (v, (size_t) n);
  return ret;
}

/* ws is, contains or lies in the audit directory in use or the state root */
static int
check_runtime_dirs (const struct asbx_global *g, const char *ws, char **what, asbx_err_t *err)
{
  cleanup_free char *adir = audit_dir_resolve (g->audit_dir, g->config_path, err);
  if (!adir)
    return -1;
  const char *dirs[] = { adir, g->root };
  const char *names[] = { "the audit directory", "the state root" };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (dirs); i++)
    {
      cleanup_free char *d = resolved ("", dirs[i]);
      if (sandbox_path_under (ws, d) || sandbox_path_under (d, ws))
        {
          *what = xasprintf ("it is, contains or lies in %s `%s` (the records and state of every sandbox)", names[i],
                             d);
          return 1;
        }
    }
  /* and every audit directory an earlier sandbox used that is still there (runtime/audit_dirs.h) */
  char **used = audit_dirs_list (g->root);
  struct stat st;
  for (size_t i = 0; used[i] && !*what; i++)
    if ((sandbox_path_under (ws, used[i]) || sandbox_path_under (used[i], ws)) && stat (used[i], &st) == 0)
      *what = xasprintf ("it is, contains or lies in `%s`, the audit directory of an earlier sandbox", used[i]);
  audit_dirs_free (used);
  return *what ? 1 : 0;
}

/* ws is, contains or lies in a path the effective policy masks (denyRead) or makes read-only
 * (denyWrite) outside /workspace: the mask lies at that path, not at the same file seen through
 * /workspace. The policy is resolved from the same sources create uses (flags, host config, the
 * sandbox default `agent`); `~/x` rules are the homes' (check_homes). Paths under the fresh
 * mounts of quick mode (/tmp, /run, /proc, /sys, /dev) are no host files. 0 / 1 / -1. */
struct policy_inputs
sandbox_policy_inputs (const struct asbx_global *g)
{
  return (struct policy_inputs){ .profile_flag = g->profile,
                                 .policy_flag = g->policy_file,
                                 .config_path = g->config_path,
                                 .audit_dir_flag = g->audit_dir,
                                 .state_root = g->root,
                                 .sandbox_default_profile = "agent" };
}

static int
check_policy_paths (const struct asbx_global *g, const char *ws, const char *rootfs, char **what, asbx_err_t *err)
{
  static const char *const own[] = { "/workspace", "/tmp", "/run", "/proc", "/sys", "/dev" };
  struct policy_inputs pin = sandbox_policy_inputs (g);
  struct policy_plan *plan = policy_resolve (&pin, err);
  const char *prefix = rootfs && strcmp (rootfs, "/") != 0 ? rootfs : "";

  if (!plan)
    return -1;
  for (size_t i = 0; plan->active && i < plan->mounts_len && !*what; i++)
    {
      const struct policy_mount *m = &plan->mounts[i];
      bool skip = m->each_child != NULL || (m->kind != POLICY_MOUNT_MASK && m->kind != POLICY_MOUNT_BIND_RO);
      for (size_t j = 0; j < ASBX_ARRAY_SIZE (own) && !skip; j++)
        skip = sandbox_path_under (m->path, own[j]);
      if (skip)
        continue;
      cleanup_free char *h = resolved (prefix, m->path);
      if (sandbox_path_under (h, ws) || sandbox_path_under (ws, h))
        *what = xasprintf ("it %s `%s`, which the policy %s at that path only (%s)",
                           sandbox_path_under (h, ws) ? "is or contains" : "lies in", h,
                           m->kind == POLICY_MOUNT_MASK ? "hides" : "makes read-only", m->origin ? m->origin : "");
    }
  /* the review workspaces directory and the secrets directory are hidden at their own paths
   * only (plan->hidden_paths): inside the workspace the agent read and rewrote every review
   * workspace's meta.json and upper through /workspace, and the host's apply then wrote where the
   * forged meta.json pointed (outside tester, attack 20) */
  const char *dirs[] = { plan->workspaces_dir, plan->secrets_dir };
  const char *names[] = { "the review workspaces directory", "the secrets directory" };
  const char *why[] = { "the layers and metadata of every review workspace", "the secrets credentials are made from" };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (dirs) && !*what; i++)
    {
      if (!dirs[i])
        continue;
      cleanup_free char *d = resolved ("", dirs[i]);
      if (sandbox_path_under (ws, d) || sandbox_path_under (d, ws))
        *what = xasprintf ("it is, contains or lies in %s `%s` (%s)", names[i], d, why[i]);
    }
  policy_plan_free (plan);
  return *what ? 1 : 0;
}

/* the rules, judged on ws itself or on a host path that shows the same directory (shown) */
static int
judge (const struct asbx_global *g, const char *arg, const char *ws, const char *shown, const char *rootfs,
       asbx_err_t *err)
{
  static const char *const exec_dirs[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
  const char *home = getenv ("HOME");
  cleanup_free char *what = NULL;
  char home_real[PATH_MAX];
  const char *orig = ws;
  int r;

  if (shown)
    ws = shown;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (refused_exact); i++)
    if (strcmp (ws, refused_exact[i].path) == 0)
      {
        what = xasprintf ("it is %s", refused_exact[i].why);
        return refuse_as (arg, orig, shown, what, err);
      }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (refused_below); i++)
    if (sandbox_path_under (ws, refused_below[i].path))
      {
        what = xasprintf ("it lies in `%s`, %s", refused_below[i].path, refused_below[i].why);
        return refuse_as (arg, orig, shown, what, err);
      }
  /* The host's / is the rootfs: the workspace is also visible at its own path, and below the
   * built-in profiles' allowExec paths that alias is executable - a binary or .so the agent
   * wrote in /workspace ran as /usr/local/src/proj/x (found by an outside tester). With --rootfs
   * R, a workspace inside R is visible at its path below R (an image's /usr/src/app). The mount
   * rule (runtime/policy_alias.c) would catch these aliases too; this check stays for its clear
   * message, and because for a workspace above /usr the rule would make /usr itself noexec. */
  size_t rl = rootfs && strcmp (rootfs, "/") != 0 ? strlen (rootfs) : 0;
  const char *alias = !rl ? ws : sandbox_path_under (ws, rootfs) ? (ws[rl] ? ws + rl : "/") : NULL;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (exec_dirs) && alias; i++)
    if (sandbox_path_under (alias, exec_dirs[i]) || sandbox_path_under (exec_dirs[i], alias))
      return refuse_as (arg, orig, shown,
                        "it is below or above a system directory the built-in profiles allow to execute from (what "
                        "the agent writes would be executable through its path in the rootfs)",
                        err);
  if (home && *home && realpath (home, home_real) != NULL && strcmp (ws, home_real) == 0)
    return refuse_as (arg, orig, shown, "it is your home directory ($HOME: it holds credentials such as ~/.ssh)", err);
  if ((r = check_homes (ws, "/", &what, err)) == 0 && rootfs)
    r = check_homes (ws, rootfs, &what, err);
  if (r == 0)
    r = check_runtime_dirs (g, ws, &what, err);
  if (r == 0)
    r = check_policy_paths (g, ws, rootfs, &what, err);
  return r < 0 ? -1 : r > 0 ? refuse_as (arg, orig, shown, what, err) : 0;
}

int
sandbox_check_workspace (const struct asbx_global *g, const char *arg, const char *ws, const char *rootfs,
                         asbx_err_t *err)
{
  struct sandbox_ws_aliases a;
  struct stat st;
  int r;

  if (stat (ws, &st) < 0)
    return asbx_error (err, errno, "sandbox: workspace `%s`", ws);
  if (!S_ISDIR (st.st_mode))
    return asbx_error (err, 0, "sandbox: --workspace `%s`: expected a directory, not a file", arg ? arg : ws);
  if (judge (g, arg, ws, NULL, rootfs, err) < 0)
    return -1;
  /* every other host path of the same directory is judged as if it had been given: a bind
   * mount of a home is that home (sandbox_wsalias.h) */
  if (sandbox_ws_aliases (ws, &a, err) < 0)
    return -1;
  r = 0;
  for (size_t i = 0; i < a.n_whole && r == 0; i++)
    r = judge (g, arg, ws, a.whole[i], rootfs, err);
  /* a place that shows a directory of the workspace is part of what /workspace writes: a home
   * bound from inside it (/home/bob a bind of WS/bob) is a workspace holding that home */
  for (size_t i = 0; i < a.n_part && r == 0; i++)
    r = judge (g, arg, ws, a.part[i], rootfs, err);
  sandbox_ws_aliases_free (&a);
  return r;
}

/* The workspace as a directory, not a name: opened with no symlink in its path (so the judged
 * string is where the directory is), its identity in *st. The checks judge that string; it
 * must still name the same directory when they are done, and the container's /workspace must be
 * it before the command starts (workspace_mounted_is): a rename or symlink swap between check
 * and mount had bound the host's /root instead (outside tester, 2026-12-01). -1 with *err. */
int
sandbox_workspace_pin (const char *ws, struct stat *st, asbx_err_t *err)
{
  /* beneath "/" (the same names; the userspace fallback of openat2 needs a scoped lookup) */
  cleanup_close int root = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int fd = root < 0 ? -1
                                  : ps_openat2 (root, ws, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS);
  if (fd < 0 || fstat (fd, st) < 0)
    return asbx_error (err, errno, "sandbox: workspace `%s` (opened with no symlink in its path)", ws);
  if (!S_ISDIR (st->st_mode))
    return asbx_error (err, 0, "sandbox: --workspace `%s`: expected a directory, not a file", ws);
  return 0;
}

int
sandbox_workspace_still (const char *ws, const struct stat *want, asbx_err_t *err)
{
  struct stat now = { 0 };
  asbx_err_t e = NULL;
  if (sandbox_workspace_pin (ws, &now, &e) < 0 || now.st_dev != want->st_dev || now.st_ino != want->st_ino)
    {
      asbx_error_free (&e);
      return asbx_error (err, 0,
                         "sandbox: workspace `%s` was replaced while it was checked (a rename or symlink in its "
                         "path): refused",
                         ws);
    }
  return 0;
}

/* the container's /workspace (seen through /proc/PID/root of its init) is the checked directory */
/* review: the container's /workspace is an overlay whose pinned lower (meta.json, written by
 * create from the fd it gave overlayfs) is the checked directory */
static int
review_mounted_is (const struct asbx_global *g, const char *id, const char *path, const char *ws,
                   const struct stat *want, asbx_err_t *err)
{
  cleanup_free char *dir = policy_workspaces_dir (g->config_path, err);
  cleanup_close int rootfd = -1, dfd = -1, lk = -1;
  struct statfs sf;
  struct ws_meta m;
  bool same;

  if (!dir)
    return -1;
  if (statfs (path, &sf) < 0)
    return asbx_error (err, errno, "sandbox: check the container's /workspace");
  if (sf.f_type != OVERLAYFS_SUPER_MAGIC)
    return asbx_error (err, 0, "sandbox --review: the container's /workspace is not an overlay: refused");
  rootfd = ws_root_open (dir, false, err);
  if (rootfd < 0 || (dfd = ws_open (rootfd, id, false, &lk, err)) < 0)
    return -1;
  cleanup_free char *where = xasprintf ("%s/%s", dir, id);
  if (ws_meta_read (dfd, where, &m, err) < 0)
    return -1;
  same = m.lower_dev == (uint64_t) want->st_dev && m.lower_ino == (uint64_t) want->st_ino;
  ws_meta_clear (&m);
  if (!same)
    return asbx_error (err, 0,
                       "sandbox --review: the overlay's lower is not the checked `%s` (it was replaced between the "
                       "check and the mount): refused, the command did not run",
                       ws);
  return 0;
}

int
sandbox_workspace_mounted_is (const struct asbx_global *g, const char *id, bool review, pid_t pid, const char *ws,
                              const struct stat *want, asbx_err_t *err)
{
  char path[64];
  struct stat st;
  snprintf (path, sizeof path, "/proc/%d/root/workspace", (int) pid);
  if (review)
    return review_mounted_is (g, id, path, ws, want, err);
  if (stat (path, &st) < 0)
    return asbx_error (err, errno, "sandbox: check the container's /workspace");
  if (st.st_dev != want->st_dev || st.st_ino != want->st_ino)
    return asbx_error (err, 0,
                       "sandbox: the container's /workspace is not the checked `%s` (it was replaced between the "
                       "check and the mount): refused, the command did not run",
                       ws);
  return 0;
}
