/* policy_apply.c - the agent policy's enforcement layers; see the header for where each runs.
 *
 * Threat model: the container's code controls the rootfs contents (symlinks, missing paths).
 * Every policy path is resolved with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS) beneath the
 * rootfs fd, and mounts go onto the fd that was resolved, never onto a re-resolved string. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/sysmacros.h>
#include <linux/magic.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/landlock_ruleset.h"
#include "linux/mount.h"
#include "linux/nft.h"
#include "linux/pathsafe.h"
#include "linux/process.h"
#include "linux/seccomp_bpf.h"
#include "linux/unixsock.h"
#include "policy/nft_ruleset.h"
#include "policy/syscall_groups.h"
#include "runtime/policy_apply.h"
#include "runtime/policy_carve.h"
#include "runtime/policy_homes.h"
#include "runtime/policy_hostfiles.h"
#include "runtime/policy_noexec.h"
#include "runtime/policy_pin.h"
#include "runtime/process.h"
#include "runtime/unixsock.h"

/* ---- P: the spec ---- */

static void
strv_filter (char ***v, size_t *len, const struct policy_plan *plan, bool drop_net)
{
  size_t w = 0;
  for (size_t i = 0; i < *len; i++)
    {
      bool keep = !plan->restrict_caps;
      for (size_t j = 0; plan->restrict_caps && j < plan->caps_allow_len; j++)
        if (strcmp ((*v)[i], plan->caps_allow[j]) == 0)
          keep = true;
      if (drop_net && (strcmp ((*v)[i], "CAP_NET_ADMIN") == 0 || strcmp ((*v)[i], "CAP_NET_RAW") == 0))
        keep = false;
      if (keep)
        (*v)[w++] = (*v)[i];
      else
        free ((*v)[i]);
    }
  *len = w;
  if (*v)
    (*v)[w] = NULL;
}

static void
caps_narrow (struct oci_process *p, const struct policy_plan *plan)
{
  struct oci_capabilities *c = p->capabilities;
  bool drop_net = plan->net_mode != POLICY_NET_OPEN;
  if (!c)
    return;
  strv_filter (&c->bounding, &c->bounding_len, plan, drop_net);
  strv_filter (&c->effective, &c->effective_len, plan, drop_net);
  strv_filter (&c->permitted, &c->permitted_len, plan, drop_net);
  strv_filter (&c->inheritable, &c->inheritable_len, plan, drop_net);
  strv_filter (&c->ambient, &c->ambient_len, plan, drop_net);
}

/* the smaller of the spec's and the policy's rlimit */
static void
rlimit_narrow (struct oci_process *p, const char *type, uint64_t limit)
{
  if (limit == 0)
    return;
  for (size_t i = 0; i < p->rlimits_len; i++)
    if (strcmp (p->rlimits[i].type, type) == 0)
      {
        if (p->rlimits[i].hard > limit)
          p->rlimits[i].hard = limit;
        if (p->rlimits[i].soft > p->rlimits[i].hard)
          p->rlimits[i].soft = p->rlimits[i].hard;
        return;
      }
  p->rlimits = xrealloc (p->rlimits, sizeof (*p->rlimits) * (p->rlimits_len + 1));
  p->rlimits[p->rlimits_len++] = (struct oci_rlimit){ .type = xstrdup (type), .soft = limit, .hard = limit };
}

static void
resources_narrow (struct oci_linux *l, const struct policy_plan *plan)
{
  if (!plan->memory_bytes && !plan->pids && plan->cpus <= 0)
    return;
  if (!l->resources)
    l->resources = xmalloc0 (sizeof *l->resources);
  struct oci_resources *r = l->resources;
  if (plan->memory_bytes)
    {
      if (!r->memory)
        r->memory = xmalloc0 (sizeof *r->memory);
      if (!r->memory->has_limit || r->memory->limit <= 0 || (uint64_t) r->memory->limit > plan->memory_bytes)
        r->memory->limit = (int64_t) plan->memory_bytes, r->memory->has_limit = true;
    }
  if (plan->pids && (!r->has_pids || r->pids_limit <= 0 || (uint64_t) r->pids_limit > plan->pids))
    r->pids_limit = (int64_t) plan->pids, r->has_pids = true;
  if (plan->cpus > 0)
    {
      if (!r->cpu)
        r->cpu = xmalloc0 (sizeof *r->cpu);
      uint64_t period = r->cpu->has_period && r->cpu->period ? r->cpu->period : 100000;
      int64_t quota = (int64_t) (plan->cpus * (double) period);
      if (quota < 1000)
        quota = 1000; /* the kernel's minimum cfs quota is 1 ms */
      if (!r->cpu->has_quota || r->cpu->quota <= 0 || r->cpu->quota > quota)
        r->cpu->quota = quota, r->cpu->has_quota = true, r->cpu->period = period, r->cpu->has_period = true;
    }
}

static bool
has_ns (const struct oci_linux *l, const char *type, const char **path)
{
  for (size_t i = 0; i < l->namespaces_len; i++)
    if (strcmp (l->namespaces[i].type, type) == 0)
      {
        *path = l->namespaces[i].path && *l->namespaces[i].path ? l->namespaces[i].path : NULL;
        return true;
      }
  return false;
}

/* The network namespace the runtime was started in (the host's, or its caller's): captured in P
 * by policy_apply_spec, inherited by the init through fork. A `none`/`filtered` table (output
 * policy drop, port 53 redirected) must never land there: it would cut the host off. */
static struct stat runtime_netns;
static bool runtime_netns_known;

static int
same_netns_as_runtime (const struct stat *st)
{
  return runtime_netns_known && st->st_dev == runtime_netns.st_dev && st->st_ino == runtime_netns.st_ino;
}

/* A joined network namespace (`linux.namespaces[].path`) that is the runtime's own is refused
 * for network modes none and filtered: fail closed instead of firewalling the host. */
static int
check_joined_netns (const char *path, asbx_err_t *err)
{
  struct stat st;

  if (stat ("/proc/self/ns/net", &runtime_netns) < 0)
    return asbx_error (err, errno, "policy network: stat /proc/self/ns/net");
  runtime_netns_known = true;
  if (!path)
    return 0;
  if (stat (path, &st) < 0)
    return asbx_error (err, errno, "linux.namespaces: network path %s", path);
  if (same_netns_as_runtime (&st))
    return asbx_error (err, EINVAL,
                       "linux.namespaces: network path %s is the runtime's own (host) network namespace; the "
                       "policy's network mode (none/filtered) would load its firewall there - refused (use "
                       "network.mode open for host networking, or give the container its own namespace)",
                       path);
  return 0;
}

void
policy_apply_process (struct oci_process *p, const struct policy_plan *plan)
{
  if (!plan || !plan->active)
    return;
  /* Landlock needs no_new_privs, and a policy never lets a setuid binary widen it */
  p->no_new_privileges = true;
  caps_narrow (p, plan);
  rlimit_narrow (p, "RLIMIT_NOFILE", plan->open_files);
  rlimit_narrow (p, "RLIMIT_FSIZE", plan->file_size_bytes);
}

int
policy_apply_spec (struct oci_spec *spec, const struct policy_plan *plan, asbx_err_t *err)
{
  const char *joined = NULL;

  if (!plan || !plan->active)
    return 0;
  /* the mount layer (read-only root, grants, masks) and Landlock's paths are the container's
   * own mount namespace; without a policy agentsbx runs both forms as runc does (issue 15) */
  const char *mnt_path = NULL;
  if (!spec->linux_ || !has_ns (spec->linux_, "mount", &mnt_path))
    return asbx_error (err, EINVAL,
                       "agent policy: linux.namespaces has no `mount` entry: the policy needs a new mount "
                       "namespace (its read-only root, grants and masks are mounts of the container's own "
                       "namespace, never the runtime's)");
  if (mnt_path)
    return asbx_error (err, EINVAL,
                       "agent policy: linux.namespaces joins the mount namespace `%s`: the policy needs a new "
                       "one (its mounts would change a namespace other processes use, and what they mount "
                       "there would bypass the policy)",
                       mnt_path);
  if (plan->rootfs_readonly)
    spec->root->readonly = true;
  policy_apply_process (spec->process, plan);
  policy_hostfiles_narrow (spec->process, plan, spec->linux_);
  resources_narrow (spec->linux_, plan);
  if (plan->net_mode != POLICY_NET_OPEN)
    {
      if (!has_ns (spec->linux_, "network", &joined))
        {
          /* `none`: a fresh network namespace holds only a loopback device */
          struct oci_linux *l = spec->linux_;
          l->namespaces = xrealloc (l->namespaces, sizeof (*l->namespaces) * (l->namespaces_len + 1));
          l->namespaces[l->namespaces_len++] = (struct oci_namespace){ .type = xstrdup ("network") };
        }
      /* a joined (engine-given) namespace is isolated by the nftables table the init loads
       * (policy_apply_network), as a fresh one is - never the runtime's own namespace */
      if (check_joined_netns (joined, err) < 0)
        return -1;
    }
  return 0;
}

int
policy_apply_network (const struct policy_plan *plan, asbx_err_t *err)
{
  cleanup_free char *ruleset = NULL;

  if (policy_nft_ruleset (plan, &ruleset, err) < 0)
    return asbx_error_wrap (err, "policy network");
  if (!ruleset)
    return 0;
  /* defence in depth: whatever went wrong with the namespaces, never into the runtime's own */
  struct stat st;
  if (stat ("/proc/self/ns/net", &st) < 0)
    return asbx_error (err, errno, "policy network: stat /proc/self/ns/net");
  if (same_netns_as_runtime (&st))
    return asbx_error (err, EINVAL,
                       "policy network: the init is still in the runtime's own network namespace; "
                       "refusing to load the nftables table there");
  if (linux_nft_load (ruleset, err) < 0)
    return asbx_error_wrap (err,
                            "policy network.mode %s: load the nftables table into the container's network "
                            "namespace",
                            plan->net_mode == POLICY_NET_NONE ? "none" : "filtered");
  return 0;
}

/* The resolver file of a filtered container in a fresh namespace: the stub's address. The file
 * is made in a private detached tmpfs (never on the host or in the rootfs), cloned as a
 * read-only single-file bind and attached onto the fd of the rootfs's /etc/resolv.conf. */
int
policy_apply_resolv (int rootfd, const struct policy_plan *plan, bool new_netns, asbx_err_t *err)
{
  static const char text[] = "# agentsbx: network.mode filtered, the monitor's DNS stub\nnameserver 127.0.0.1\n";
  struct stat st;

  if (!plan || !plan->active || plan->net_mode != POLICY_NET_FILTERED || !new_netns)
    return 0;
  cleanup_close int target = ps_openat2 (rootfd, "/etc/resolv.conf", O_PATH | O_CLOEXEC, 0,
                                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (target < 0 || fstat (target, &st) < 0 || !S_ISREG (st.st_mode))
    {
      /* no file (or a dangling link): libc then asks 127.0.0.1 by itself, the stub */
      log_debug ("policy network: no regular /etc/resolv.conf in the rootfs, left as it is");
      return 0;
    }
  cleanup_close int fs = mnt_new_fs ("tmpfs", "tmpfs", "size=4k,mode=755", 0,
                                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
  if (fs < 0)
    return asbx_error_wrap (err, "policy network: /etc/resolv.conf");
  cleanup_close int f = openat (fs, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (f < 0 || write_all (f, text, sizeof text - 1) < 0)
    return asbx_error (err, errno, "policy network: write the stub's resolv.conf");
  cleanup_close int file = mnt_clone (fs, "resolv.conf", false, err);
  if (file < 0 || mnt_setattr (file, false, MOUNT_ATTR_RDONLY, 0, 0, err) < 0 || mnt_attach (file, target, err) < 0)
    return asbx_error_wrap (err, "policy network: bind the stub's resolv.conf over /etc/resolv.conf");
  return 0;
}

/* ---- I: mounts beneath the rootfs ---- */

static int
bind_self (int fd, bool rw, bool noexec, asbx_err_t *err)
{
  cleanup_close int mfd = mnt_clone (fd, "", true, err);
  uint64_t set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY) | (noexec ? MOUNT_ATTR_NOEXEC : 0);
  uint64_t clr = rw ? MOUNT_ATTR_RDONLY : 0;
  if (mfd < 0 || mnt_attach (mfd, fd, err) < 0)
    return -1;
  /* a read-only deny receives no propagation: under rslave, a host mount on the file (the
   * runtime's own pin, runtime/policy_pin.h) would otherwise land on top of it, read-write */
  return mnt_setattr (mfd, true, set, clr, rw ? 0 : MS_PRIVATE, err);
}

static int
mask (int rootfd, int fd, asbx_err_t *err)
{
  struct stat st;
  cleanup_close int mfd = -1;
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "stat");
  if (S_ISDIR (st.st_mode))
    mfd = mnt_new_fs ("tmpfs", "tmpfs", "size=0,mode=500", 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC, err);
  else
    {
      cleanup_close int null = ps_open_in_root (rootfd, "/dev/null", O_PATH, err);
      struct stat ns;
      if (null < 0)
        return -1;
      if (fstat (null, &ns) < 0 || !S_ISCHR (ns.st_mode) || ns.st_rdev != (dev_t) makedev (1, 3))
        return asbx_error (err, EINVAL, "/dev/null in the container is not the null device");
      mfd = mnt_clone (null, "", false, err);
    }
  if (mfd < 0 || mnt_attach (mfd, fd, err) < 0)
    return -1;
  return mnt_setattr (mfd, false, 0, 0, MS_PRIVATE, err); /* as bind_self's read-only denies */
}

/* The writable grant (allowWrite bind or tmpfs) whose hierarchy strictly contains `path`, the
 * deepest one; NULL when none does. */
static const struct policy_mount *
covering_grant (const struct policy_plan *plan, const char *path)
{
  const struct policy_mount *best = NULL;
  for (size_t i = 0; i < plan->mounts_len; i++)
    {
      const struct policy_mount *g = &plan->mounts[i];
      size_t n = strlen (g->path);
      if (g->kind != POLICY_MOUNT_BIND_RW && g->kind != POLICY_MOUNT_TMPFS)
        continue;
      if (n == 1 && g->path[0] == '/')
        n = 0;
      if (strncmp (path, g->path, n) == 0 && path[n] == '/' && (!best || strlen (best->path) < strlen (g->path)))
        best = g;
    }
  return best;
}

/* A deny under a writable grant (denyWrite /workspace/.git/hooks) holds on the path only while
 * the path keeps its name: renaming an ancestor away (`mv .git g2`) and recreating the path would
 * leave a fresh, writable .git/hooks. Each ancestor between the grant and the denied path becomes
 * a mount point (an rw bind onto itself with the grant's flags), which rename(2) and rmdir(2)
 * refuse with EBUSY. Found by tests/integration/test_policy_fs.py. */
static int
pin_ancestors (int rootfd, const struct policy_plan *plan, const char *path, asbx_err_t *err)
{
  const struct policy_mount *g = covering_grant (plan, path);
  cleanup_free char *p = xstrdup (path);
  size_t start = g ? strlen (g->path) : 0;

  if (!g)
    return 0;
  for (char *slash = p + start + 1; (slash = strchr (slash, '/')) != NULL; *slash++ = '/')
    {
      struct statx stx;
      *slash = '\0';
      cleanup_close int fd = ps_openat2 (rootfd, p, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
      if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
        return 0; /* the rest does not exist: nothing to pin (the deny itself decides) */
      if (fd < 0)
        return asbx_error (err, errno, "open `%s`", p);
      if (statx (fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) < 0)
        return asbx_error (err, errno, "statx `%s`", p);
      if (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT && stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
        continue; /* already a mount point (pinned for another rule) */
      if (bind_self (fd, true, g->noexec, err) < 0)
        return asbx_error_wrap (err, "pin `%s`", p);
    }
  return 0;
}

/* "origin\tpath\n" lines of the allowWrite grants whose path did not exist (policy_apply_mounts) */
static char *missing_grants;

static void
note_missing_grant (const struct policy_mount *m)
{
  char *line = xasprintf ("%s%s\t%s\n", missing_grants ? missing_grants : "", m->origin, m->path);
  free (missing_grants);
  missing_grants = line;
}

/* The caller is in a user namespace that maps exactly one uid and one gid (quick mode's): every
 * process of the container then has the init's ids (nothing else can be switched to). */
static bool
single_id_userns (void)
{
  static const char *const maps[] = { "/proc/self/uid_map", "/proc/self/gid_map" };
  for (size_t i = 0; i < 2; i++)
    {
      cleanup_fclose FILE *f = fopen (maps[i], "re");
      unsigned long long in, out, count;
      int lines = 0;
      while (f && fscanf (f, "%llu %llu %llu", &in, &out, &count) == 3)
        if (++lines > 1 || count != 1)
          return false;
      if (lines != 1)
        return false;
    }
  return true;
}

/* A deny rule's path the init cannot even reach (EACCES: a user namespace's root has no
 * capability over host-owned inodes, e.g. /root/.aws under a 0700 /root). In a single-id user
 * namespace no process of the container, with the init's uid and gid and fewer capabilities, can
 * reach it either: nothing to mask. Elsewhere (another uid could pass where root cannot, e.g.
 * NFS root_squash) EACCES stays an error. */
static bool
unreachable (int rootfd, const char *path)
{
  cleanup_close int fd = ps_openat2 (rootfd, path, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  return fd < 0 && errno == EACCES && single_id_userns ();
}

static int
apply_one_mount (int rootfd, const struct policy_plan *plan, const struct policy_mount *m, asbx_err_t *err)
{
  if ((m->kind == POLICY_MOUNT_BIND_RO || m->kind == POLICY_MOUNT_MASK) && unreachable (rootfd, m->path))
    {
      log_debug ("policy %s (%s): not reachable by the container's root (EACCES): nothing to mask", m->origin, m->path);
      return 0;
    }
  /* pinned before the path is opened: the deny must land on the pinned mount, not under it */
  if ((m->kind == POLICY_MOUNT_BIND_RO || m->kind == POLICY_MOUNT_MASK)
      && pin_ancestors (rootfd, plan, m->path, err) < 0)
    return asbx_error_wrap (err, "policy %s (%s)", m->origin, m->path);
  cleanup_close int fd = ps_openat2 (rootfd, m->path, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  /* ENOTDIR: a component is a file (~/.config a file, rule ~/.config/gh): the path is missing */
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
    {
      if (m->optional || m->kind == POLICY_MOUNT_BIND_RW)
        {
          /* `?` rule, or a grant on a path that does not exist: nothing to enforce or create; a
           * grant that silently leaves its path read-only is reported at create (issue 15) */
          log_debug ("policy %s (%s): path does not exist, not enforced", m->origin, m->path);
          if (m->kind == POLICY_MOUNT_BIND_RW && !m->optional)
            note_missing_grant (m);
          return 0;
        }
      if (m->writable_parent)
        return asbx_error (err, 0,
                           "policy %s: `%s` does not exist and its parent is writable: the rule cannot be "
                           "enforced (write it as \"?%s\" to make it optional)",
                           m->origin, m->path, m->path);
      return 0; /* nothing there, and nothing can create it: the deny holds by itself */
    }
  if (fd < 0)
    return asbx_error (err, errno, "policy %s: open `%s`", m->origin, m->path);
  int r = 0;
  switch (m->kind)
    {
    case POLICY_MOUNT_BIND_RW: r = bind_self (fd, true, m->noexec, err); break;
    case POLICY_MOUNT_BIND_RO: r = bind_self (fd, false, false, err); break;
    case POLICY_MOUNT_MASK: r = mask (rootfd, fd, err); break;
    case POLICY_MOUNT_TMPFS:
      {
        cleanup_close int mfd = mnt_new_fs ("tmpfs", "tmpfs", "mode=1777", 0,
                                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (m->noexec ? MOUNT_ATTR_NOEXEC : 0),
                                            err);
        r = mfd < 0 ? -1 : mnt_attach (mfd, fd, err);
        break;
      }
    }
  /* a deny inside a writable bind grant: P pins the file in the host's namespace (policy_pin.h) */
  if (r == 0 && (m->kind == POLICY_MOUNT_BIND_RO || m->kind == POLICY_MOUNT_MASK))
    r = policy_pin_note (covering_grant (plan, m->path), m->path, fd, err);
  return r < 0 ? asbx_error_wrap (err, "policy %s (%s)", m->origin, m->path) : 0;
}

/* The `~/x` form: the rule applies to <home>/<each_child> for every home of the container's
 * rootfs at create (runtime/policy_homes.h): each directory entry of <path> ("/home"), symlinked
 * ones as the directory they name inside the rootfs, and every home of the rootfs's /etc/passwd
 * (issue 13 §3: a service user's /var/lib/postgresql/.pgpass). A home without the credential
 * holds the deny unless the home is writable; a missing file in a writable passwd home is not
 * an error for a mask (what the agent writes there is its own), for a read-only bind it is. */
struct homes_cache
{
  char *dir; /* the each_child rules' path ("/home"); NULL = not listed yet */
  struct policy_home *v;
  int n;
};

static void
homes_cache_clear (struct homes_cache *c)
{
  policy_homes_free (c->v, c->n > 0 ? (size_t) c->n : 0);
  free (c->dir);
  *c = (struct homes_cache){ 0 };
}

/* the homes for `dir`, listed once per create: before any deny mount (a denyRead of /etc/passwd
 * must not hide the homes it names) and not again for each of the ~60 `~/` rules */
static int
homes_cache_fill (struct homes_cache *c, int rootfd, const char *dir, asbx_err_t *err)
{
  if (c->dir && strcmp (c->dir, dir) == 0)
    return 0;
  homes_cache_clear (c);
  c->n = policy_homes_list (rootfd, dir, &c->v, err);
  if (c->n < 0)
    return -1;
  c->dir = xstrdup (dir);
  return 0;
}

static int
apply_each_child (int rootfd, const struct policy_plan *plan, const struct policy_mount *m, struct homes_cache *hc,
                  asbx_err_t *err)
{
  int r = 0;

  if (homes_cache_fill (hc, rootfd, m->path, err) < 0)
    return asbx_error_wrap (err, "policy %s", m->origin);
  const struct policy_home *homes = hc->v;
  for (int i = 0; i < hc->n && r == 0; i++)
    {
      cleanup_free char *path = xasprintf ("%s/%s", strcmp (homes[i].path, "/") ? homes[i].path : "", m->each_child);
      struct policy_mount one = *m;
      one.path = path;
      one.each_child = NULL;
      if (homes[i].from_passwd)
        one.writable_parent = covering_grant (plan, path) != NULL;
      one.optional = m->optional || !one.writable_parent || (homes[i].from_passwd && m->kind == POLICY_MOUNT_MASK);
      r = apply_one_mount (rootfd, plan, &one, err);
    }
  return r;
}

/* One host directory of plan->hidden_paths: masked where the container's view shows that same
 * directory (device and inode) at its path (or at its real path), e.g. the audit directory
 * through the sandbox's /var bind. A directory the container sees elsewhere under another name
 * (an explicit bind of /var/log to /logs) is the bind's author's choice, see docs/security.md. */
static int
apply_hidden (int rootfd, const char *path, asbx_err_t *err)
{
  char real[PATH_MAX];
  struct stat hst;

  if (realpath (path, real) == NULL || stat (real, &hst) < 0)
    return errno == ENOENT || errno == ENOTDIR ? 0 : asbx_error (err, errno, "policy: hide `%s`", path);
  const char *cand[] = { real, path[0] == '/' && strcmp (path, real) != 0 ? path : NULL };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (cand) && cand[i]; i++)
    {
      struct stat cst;
      cleanup_close int fd = ps_openat2 (rootfd, cand[i], O_PATH | O_CLOEXEC, 0,
                                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
      if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
        continue;
      if (fd < 0 || fstat (fd, &cst) < 0)
        return asbx_error (err, errno, "policy: hide `%s`", cand[i]);
      if (cst.st_dev != hst.st_dev || cst.st_ino != hst.st_ino)
        continue; /* the image's own directory of that name, not the host's */
      if (mask (rootfd, fd, err) < 0)
        return asbx_error_wrap (err, "policy: hide the host's `%s`", cand[i]);
      log_debug ("policy: host directory `%s` hidden", cand[i]);
    }
  return 0;
}

int
policy_apply_mounts (int rootfd, const struct policy_plan *plan, bool root_readonly, char **missing, asbx_err_t *err)
{
  struct homes_cache hc = { 0 };
  int r = 0;

  *missing = NULL;
  if (!plan || !plan->active)
    return 0;
  /* grants first, then denies on top: deny wins over allow (POLICY.md §2) */
  for (int pass = 0; pass < 2 && r == 0; pass++)
    for (size_t i = 0; i < plan->mounts_len && r == 0; i++)
      {
        const struct policy_mount *m = &plan->mounts[i];
        bool grant = m->kind == POLICY_MOUNT_BIND_RW || m->kind == POLICY_MOUNT_TMPFS;
        if (pass == 1 && i == 0)
          for (size_t j = 0; j < plan->mounts_len && r == 0; j++)
            if (plan->mounts[j].each_child)
              r = homes_cache_fill (&hc, rootfd, plan->mounts[j].path, err);
        if ((pass == 0) != grant || r < 0)
          continue;
        r = m->each_child ? apply_each_child (rootfd, plan, m, &hc, err) : apply_one_mount (rootfd, plan, m, err);
      }
  if (hc.dir) /* listed before any deny mount: the Landlock carve (policy_carve.h) uses the same homes */
    policy_carve_keep_homes (hc.dir, hc.v, hc.n);
  homes_cache_clear (&hc);
  /* the runtime's own state and audit, last: over whatever grant shows them */
  for (size_t i = 0; r == 0 && i < plan->hidden_paths_len; i++)
    r = apply_hidden (rootfd, plan->hidden_paths[i], err);
  /* allowExec: no mount outside it executes, for mmap(PROT_EXEC) as for execve */
  if (r == 0)
    r = policy_apply_noexec (rootfd, plan, root_readonly, err);
  if (r < 0)
    {
      free (steal_ptr (&missing_grants));
      return -1;
    }
  *missing = steal_ptr (&missing_grants);
  return 0;
}

/* ---- I/E: the process layers ---- */

#define LL_READ (ASBX_LL_FS_READ_FILE | ASBX_LL_FS_READ_DIR)
#define LL_WRITE                                                                                                       \
  (ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_REMOVE_DIR | ASBX_LL_FS_REMOVE_FILE | ASBX_LL_FS_MAKE_DIR | ASBX_LL_FS_MAKE_REG  \
   | ASBX_LL_FS_MAKE_SOCK | ASBX_LL_FS_MAKE_FIFO | ASBX_LL_FS_MAKE_SYM | ASBX_LL_FS_REFER | ASBX_LL_FS_TRUNCATE)
#define LL_FILE_ONLY                                                                                                   \
  (ASBX_LL_FS_EXECUTE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_READ_FILE | ASBX_LL_FS_TRUNCATE | ASBX_LL_FS_IOCTL_DEV)

/* What every process needs beyond the policy's grants: the standard character devices and the
 * terminal, readable and writable (never creatable: MAKE_CHAR/MAKE_BLOCK stay denied). */
static const struct
{
  const char *path;
  uint64_t rights;
} implicit_rules[] = {
  { "/dev/null", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/zero", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/full", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/random", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/urandom", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/tty", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/ptmx", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_IOCTL_DEV },
  { "/dev/pts", ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_READ_DIR | ASBX_LL_FS_IOCTL_DEV },
};

static bool
degraded (const struct policy_plan *plan, const char *layer)
{
  for (size_t i = 0; i < plan->degrade_len; i++)
    if (strcmp (plan->degrade[i], layer) == 0)
      return true;
  return false;
}

static int
ll_allow (struct linux_landlock *ll, int rootfd, const char *path, uint64_t rights, bool quiet_missing, asbx_err_t *err)
{
  struct stat st;
  cleanup_close int fd = ps_openat2 (rootfd, path, O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd < 0)
    {
      if (errno == ENOENT && quiet_missing)
        return 0;
      return asbx_error (err, errno, "open `%s`", path);
    }
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "stat `%s`", path);
  if (!S_ISDIR (st.st_mode))
    rights &= LL_FILE_ONLY;
  return linux_landlock_allow_fd (ll, fd, path, rights, err);
}

/* the fs rights the policy's ruleset handles on a kernel of Landlock ABI `abi` */
static uint64_t
ll_handled (int abi)
{
  uint64_t handled = LL_READ | LL_WRITE | ASBX_LL_FS_EXECUTE | ASBX_LL_FS_MAKE_CHAR | ASBX_LL_FS_MAKE_BLOCK;
  if (abi >= 5)
    handled |= ASBX_LL_FS_IOCTL_DEV; /* hardening beyond the policy, where the kernel has it */
  return handled;
}

char *
policy_apply_landlock_degraded (const struct policy_plan *plan)
{
  int abi = linux_landlock_abi ();
  uint64_t fs, net, scope;
  uint32_t log;
  char *dropped = NULL;
  asbx_err_t e = NULL;
  if (!plan->fs_rules_len || !degraded (plan, "landlock"))
    return NULL;
  if (linux_landlock_check (ll_handled (abi), 0, 0, abi >= 7 ? ASBX_LL_LOG_NEW_EXEC_ON : 0, abi, true, &fs, &net,
                            &scope, &log, &dropped, &e)
      < 0)
    asbx_error_free (&e);
  if (!dropped && abi > 0)
    return NULL;
  char *s = xasprintf ("landlock: ABI %d, not enforced: %s", abi, dropped ? dropped : "everything");
  free (dropped);
  return s;
}

static struct linux_landlock *
build_landlock (const struct policy_plan *plan, asbx_err_t *err)
{
  int abi = linux_landlock_abi ();
  bool best_effort = degraded (plan, "landlock");
  uint64_t handled = ll_handled (abi);
  cleanup_close int rootfd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct linux_landlock *ll;

  /* log the denials of the program the init execs too (ABI 7; the default logs only the init's
   * own), so the monitor can write `denial` records (runtime/denials.c) */
  /* abstract unix sockets created outside the sandbox's Landlock domain are unreachable (ABI 6):
   * with a shared network namespace (mode open) those are the host's (containerd shims, X11...).
   * Pathname sockets have no Landlock right on this kernel: runtime/unixsock.h. */
  uint64_t scope = abi >= 6 ? ASBX_LL_SCOPE_ABSTRACT_UNIX_SOCKET : 0;
  ll = linux_landlock_new (handled, 0, scope, abi >= 7 ? ASBX_LL_LOG_NEW_EXEC_ON : 0, abi, best_effort, err);
  if (!ll)
    return NULL;
  if (best_effort && linux_landlock_dropped (ll))
    log_warning ("policy degrade landlock: rights not enforced on this kernel: %s", linux_landlock_dropped (ll));
  /* read-only rules are carved around the denyRead paths beneath them (policy_carve.h): a file
   * the host puts at a denied name during the session has no right, whatever the mounts show */
  struct timespec c0, c1;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &c0);
  struct policy_carve *carve = policy_carve_collect (rootfd, plan, err);
  if (!carve)
    {
      linux_landlock_free (ll);
      return NULL;
    }
  for (size_t i = 0; i < plan->fs_rules_len; i++)
    {
      const struct policy_fs_rule *r = &plan->fs_rules[i];
      uint64_t rights = (r->rights & POLICY_FS_READ ? LL_READ : 0) | (r->rights & POLICY_FS_WRITE ? LL_WRITE : 0)
                        | (r->rights & POLICY_FS_EXEC ? ASBX_LL_FS_EXECUTE : 0);
      bool carved = false;
      if (abi >= 5 && (r->rights & POLICY_FS_WRITE))
        rights |= ASBX_LL_FS_IOCTL_DEV;
      if ((r->rights & POLICY_FS_READ) && !(r->rights & POLICY_FS_WRITE)
          && policy_carve_rule (carve, ll, rootfd, r->path, rights, &carved, err) < 0)
        {
          policy_carve_free (carve);
          linux_landlock_free (ll);
          return asbx_error_wrap (err, "policy %s", r->origin), NULL;
        }
      /* an allow on a missing path creates nothing (POLICY.md §2): skipped */
      if (!carved && ll_allow (ll, rootfd, r->path, rights, true, err) < 0)
        {
          policy_carve_free (carve);
          linux_landlock_free (ll);
          return asbx_error_wrap (err, "policy %s", r->origin), NULL;
        }
    }
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &c1);
  log_debug ("policy: %zu Landlock rules carved around denyRead paths (%ld us of CPU with the other rules)",
             policy_carve_rules (carve), (long) ((c1.tv_sec - c0.tv_sec) * 1000000 + (c1.tv_nsec - c0.tv_nsec) / 1000));
  policy_carve_free (carve);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (implicit_rules); i++)
    if (ll_allow (ll, rootfd, implicit_rules[i].path,
                  implicit_rules[i].rights & (abi >= 5 ? ~0ull : ~ASBX_LL_FS_IOCTL_DEV), true, err)
        < 0)
      {
        linux_landlock_free (ll);
        return NULL;
      }
  return ll;
}

/* one rule of a group (or of policy_exec_rules) as an OCI syscall entry; names/args: 2 slots */
static void
oci_rule (const struct policy_syscall_rule *rule, struct oci_seccomp_syscall *c, char **names,
          struct oci_seccomp_arg *a)
{
  names[0] = (char *) rule->syscall;
  c->names = names;
  c->names_len = 1;
  c->action = (char *) "SCMP_ACT_ERRNO";
  c->has_errno_ret = true;
  c->errno_ret = (uint32_t) rule->errno_ret;
  if (rule->arg >= 0)
    {
      a->index = (uint32_t) rule->arg;
      a->op = (char *) rule->op;
      a->value = rule->value;
      a->value_two = rule->value_two;
      a->has_value_two = true;
      c->args = a;
      c->args_len = 1;
    }
}

/* The denied groups, plus policy_exec_rules when allowExec is set (exec), as an OCI seccomp
 * object compiled by the same code as linux.seccomp (see policy_apply.h) */
int
policy_build_groups_filter (unsigned deny, bool exec, struct linux_seccomp *out, asbx_err_t *err)
{
#ifdef __x86_64__
  static char *arches[] = { "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", NULL };
  size_t arches_len = 3;
#else
  static char *arches[] = { NULL };
  size_t arches_len = 0;
#endif
  /* SECCOMP_FILTER_FLAG_LOG: the errno answers of THIS filter are also logged to the kernel audit
   * stream (the answer stays the errno), for the monitor's `denial` records (runtime/denials.c) */
  static char *log_flag[] = { (char *) "SECCOMP_FILTER_FLAG_LOG", NULL };
  struct oci_seccomp sc = { .default_action = (char *) "SCMP_ACT_ALLOW",
                            .architectures = arches,
                            .architectures_len = arches_len,
                            .flags = log_flag,
                            .flags_len = 1 };
  size_t n = exec ? policy_exec_rules_len : 0;
  int r;

  for (size_t g = 0; g < policy_syscall_groups_len; g++)
    if (deny & policy_syscall_groups[g].bit)
      n += policy_syscall_groups[g].rules_len;
  n += policy_hostfile_rules_len;
  cleanup_free struct oci_seccomp_syscall *calls = xmalloc0 (sizeof (*calls) * (n + 1));
  cleanup_free struct oci_seccomp_arg *args = xmalloc0 (sizeof (*args) * 2 * (n + 1));
  cleanup_free char **names = xmalloc0 (sizeof (char *) * 2 * (n + 1));
  /* the groups' rules, then the host-file rules (runtime/policy_hostfiles.h) of every policy
   * container; their io_uring and user-namespace rules are (within) the groups', added once */
  for (size_t g = 0; g <= policy_syscall_groups_len; g++)
    {
      const struct policy_sysgroup *grp = g < policy_syscall_groups_len ? &policy_syscall_groups[g] : NULL;
      const struct policy_syscall_rule *rules = grp ? grp->rules : policy_hostfile_rules;
      size_t rules_len = grp ? grp->rules_len : policy_hostfile_rules_len;
      if (grp && !(deny & grp->bit))
        continue;
      for (size_t i = 0; i < rules_len; i++)
        {
          const struct policy_syscall_rule *rule = &rules[i];
          if (!grp && (deny & POLICY_SYS_IO_URING) && strncmp (rule->syscall, "io_uring_", 9) == 0)
            continue;
          if (!grp && (deny & POLICY_SYS_USERNS)
              && (strcmp (rule->syscall, "unshare") == 0 || strncmp (rule->syscall, "clone", 5) == 0))
            continue;
          oci_rule (rule, &calls[sc.syscalls_len], &names[2 * sc.syscalls_len], &args[2 * sc.syscalls_len]);
          sc.syscalls_len++;
        }
    }
  for (size_t i = 0; exec && i < policy_exec_rules_len; i++, sc.syscalls_len++)
    oci_rule (&policy_exec_rules[i], &calls[sc.syscalls_len], &names[2 * sc.syscalls_len], &args[2 * sc.syscalls_len]);
  sc.syscalls = calls;
  r = linux_seccomp_compile (&sc, out, err);
  if (r < 0)
    return asbx_error_wrap (err, "policy syscalls.deny");
  /* fail closed: a rule name this libseccomp does not know would be a silently missing rule */
  if (out->skipped_names)
    {
      linux_seccomp_release (out);
      return asbx_error (err, ENOSYS,
                         "policy: %u syscall name(s) of the policy filter are unknown to the linked libseccomp "
                         "(run with --debug to see which)",
                         out->skipped_names);
    }
  return 0;
}

int
policy_prepare_process (const struct policy_plan *plan, asbx_err_t *err)
{
  static struct linux_seccomp groups;
  struct linux_landlock *ll = NULL;

  if (!plan || !plan->active)
    return 0;
  if (plan->landlock)
    {
      ll = build_landlock (plan, err);
      if (!ll)
        return -1;
    }
  /* always a filter: the host-file rules hold under every policy, groups denied or not */
  bool exec = policy_exec_restricted (plan);
  linux_seccomp_release (&groups);
  if (policy_build_groups_filter (plan->deny_groups, exec, &groups, err) < 0)
    {
      linux_landlock_free (ll);
      return -1;
    }
  process_set_policy (&groups, ll, plan->deny_write_exec_memory);
  return 0;
}

int
policy_prepare_unixsock (const struct policy_plan *plan, int chan, bool oci_listener, asbx_err_t *err)
{
  static struct linux_seccomp filter;
  bool confine = unixsock_confined (plan);

  if (!unixsock_supervised (plan))
    return 0;
  if (!confine)
    {
      /* network.mode open: only the execve notification (failed execs, exec records). Without
       * the monitor's channel (an `exec` with no monitor socket) there is nothing to notify. */
      if (chan < 0)
        return 0;
      if (oci_listener && plan->failed_execs)
        return asbx_error (err, EBUSY,
                           "limits.failedExecs counts failed execve calls with a seccomp listener, and "
                           "linux.seccomp.listenerPath asks for another: the kernel allows one listener per process");
      if (oci_listener)
        return 0; /* the exec records then read /proc (argvSource proc) */
    }
  else if (chan >= 0 && oci_listener)
    return asbx_error (err, EBUSY,
                       "network.mode %s confines unix sockets with a seccomp listener, and linux.seccomp.listenerPath "
                       "asks for another: the kernel allows one listener per process",
                       plan->net_mode == POLICY_NET_NONE ? "none" : "filtered");
  linux_seccomp_release (&filter);
  if (linux_unixsock_filter_compile (confine, chan >= 0, unixsock_exec_notified (plan), &filter, err) < 0)
    return asbx_error_wrap (err, "policy network (unix socket confinement)");
  process_set_unixsock (&filter, chan);
  return 0;
}

/* ---- I: memfd exec (vm.memfd_noexec) ---- */

int
policy_apply_memfd_noexec (const struct policy_plan *plan, bool new_pidns, asbx_err_t *err)
{
  static const char *const why = "filesystem.allowExec: a memfd could be executed";
  char buf[16] = "";
  ssize_t n;

  if (!plan || !plan->active || !policy_exec_restricted (plan))
    return 0;
  /* a shared (host or engine-given) pid namespace: raising it there would change every other
   * process in it, and lowering is impossible - refuse rather than leak the setting */
  if (!new_pidns)
    return asbx_error (err, EINVAL,
                       "%s: vm.memfd_noexec needs a new pid namespace / kernel >= 6.3 (the container joins an "
                       "existing pid namespace)",
                       why);
  cleanup_close int procfd = open ("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct statfs sfs;
  if (procfd < 0 || fstatfs (procfd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
    return asbx_error (err, procfd < 0 ? errno : EXDEV, "%s: /proc is not a procfs", why);
  if (faccessat (procfd, "sys/vm/memfd_noexec", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
    return asbx_error (err, errno,
                       "%s: vm.memfd_noexec needs a new pid namespace / kernel >= 6.3 (no /proc/sys/vm/memfd_noexec)",
                       why);
  /* the sysctl handler acts on the WRITER's pid namespace (task_active_pid_ns(current)), not on
   * the procfs instance's: the init is in the container's, so any procfs will do */
  char *keys[] = { (char *) "vm.memfd_noexec" }, *vals[] = { (char *) "2" };
  struct oci_map m = { .keys = keys, .values = vals, .len = 1 };
  if (linux_sysctl_apply_at (procfd, &m, err) < 0)
    return asbx_error_wrap (err,
                            "%s: set vm.memfd_noexec=2 in the container's pid namespace (needs "
                            "CAP_SYS_ADMIN and a real-root writer: not possible in a user namespace)",
                            why);
  /* read back: a kernel that silently ignored the write must not pass */
  cleanup_close int rfd = openat (procfd, "sys/vm/memfd_noexec", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (rfd < 0 || (n = read (rfd, buf, sizeof buf - 1)) <= 0 || buf[0] != '2')
    return asbx_error (err, rfd < 0 ? errno : EIO, "%s: vm.memfd_noexec reads back `%.*s`, not 2", why,
                       (int) strcspn (buf, "\n"), buf);
  log_debug ("policy: vm.memfd_noexec=2 in the container's pid namespace");
  return 0;
}

/* Read /proc/sys/vm/memfd_noexec as the caller's pid namespace sees it: 0 when it is 2. */
static int
memfd_noexec_is_2 (const char *why, asbx_err_t *err)
{
  char buf[16] = "";
  ssize_t n = -1;
  cleanup_close int fd = open ("/proc/sys/vm/memfd_noexec", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

  if (fd < 0 || (n = read (fd, buf, sizeof buf - 1)) <= 0 || buf[0] != '2')
    return asbx_error (err, fd < 0 ? errno : EIO,
                       "%s: vm.memfd_noexec reads `%.*s` in the container's pid namespace, not 2", why,
                       n > 0 ? (int) strcspn (buf, "\n") : 0, buf);
  return 0;
}

int
policy_apply_memfd_noexec_from_parent (const struct policy_plan *plan, pid_t init_pid, bool new_pidns, asbx_err_t *err)
{
  static const char *const why = "filesystem.allowExec: a memfd could be executed";
  int status = 0;
  pid_t c;

  if (!plan || !plan->active || !policy_exec_restricted (plan))
    return 0;
  if (!new_pidns)
    return policy_apply_memfd_noexec (plan, false, err); /* the same refusal as without a user namespace */
  cleanup_free char *path = xasprintf ("/proc/%d/ns/pid", (int) init_pid);
  cleanup_close int nsfd = open (path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0)
    return asbx_error (err, errno, "%s: open %s", why, path);
  c = fork ();
  if (c < 0)
    return asbx_error (err, errno, "%s: fork", why);
  if (c == 0)
    {
      /* setns(CLONE_NEWPID) places our children, not us, in the container's pid namespace */
      asbx_err_t e = NULL;
      pid_t w;
      int st = 0;
      if (setns (nsfd, CLONE_NEWPID) < 0)
        _exit (10);
      w = fork ();
      if (w == 0)
        _exit (policy_apply_memfd_noexec (plan, true, &e) < 0 ? 11 : 0);
      if (w < 0 || waitpid (w, &st, 0) < 0)
        _exit (12);
      _exit (WIFEXITED (st) ? WEXITSTATUS (st) : 13);
    }
  while (waitpid (c, &status, 0) < 0)
    if (errno != EINTR)
      return asbx_error (err, errno, "%s: wait for the sysctl writer", why);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return asbx_error (err, EPERM,
                       "%s: setting vm.memfd_noexec=2 in the container's pid namespace from the runtime failed "
                       "(status %d: %s)",
                       why, WIFEXITED (status) ? WEXITSTATUS (status) : -1,
                       WIFEXITED (status) && WEXITSTATUS (status) == 10 ? "setns" : "write or read back");
  return 0;
}

int
policy_verify_memfd_noexec (const struct policy_plan *plan, asbx_err_t *err)
{
  if (!plan || !plan->active || !policy_exec_restricted (plan))
    return 0;
  return memfd_noexec_is_2 ("filesystem.allowExec: a memfd could be executed", err);
}
