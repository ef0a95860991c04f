/* ns.c - namespaces: plan (new vs join), setns ordering, id maps and time offsets.
 *
 * Ordering constraints (namespaces(7), user_namespaces(7)):
 *  - joining a user namespace must come first: every other setns() is then checked against
 *    the capabilities we hold in the target's owning user namespace;
 *  - setns(CLONE_NEWPID) and CLONE_NEWTIME only affect children: the caller forks afterwards;
 *  - id maps are written by a process in the parent user namespace (the runtime), once; a
 *    caller without root maps ranges through Debian's setuid newuidmap/newgidmap.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/nsfs.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/ns.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFD_GET_USER_NAMESPACE _IO (0xFF, 9) /* <linux/pidfd.h>, Linux 6.11 */
#endif

int
ns_userns_below_ours (int pidfd)
{
  struct stat ours, st;
  if (stat ("/proc/self/ns/user", &ours) < 0)
    return -1;
  int cur = ioctl (pidfd, PIDFD_GET_USER_NAMESPACE, 0);
  if (cur < 0)
    return -1;
  if (fstat (cur, &st) < 0)
    {
      close (cur);
      return -1;
    }
  /* walk up from the process's namespace: ours must be met above it, not at it. NS_GET_PARENT
   * fails with EPERM past the caller's own namespace, so an ancestor or a sibling ends there */
  bool below = false;
  for (int depth = 0; depth < 40 && !(st.st_ino == ours.st_ino && st.st_dev == ours.st_dev); depth++)
    {
      int parent = ioctl (cur, NS_GET_PARENT);
      close (cur);
      cur = parent;
      if (cur < 0 || fstat (cur, &st) < 0)
        break;
      below = st.st_ino == ours.st_ino && st.st_dev == ours.st_dev;
    }
  if (cur >= 0)
    close (cur);
  return below ? 1 : 0;
}

static const struct
{
  const char *type;
  int flag;
} ns_types[] = {
  { "user", CLONE_NEWUSER },   { "cgroup", CLONE_NEWCGROUP }, { "ipc", CLONE_NEWIPC },   { "uts", CLONE_NEWUTS },
  { "network", CLONE_NEWNET }, { "pid", CLONE_NEWPID },       { "time", CLONE_NEWTIME }, { "mount", CLONE_NEWNS },
};

int
ns_flag_from_type (const char *type)
{
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (ns_types); i++)
    if (type && strcmp (ns_types[i].type, type) == 0)
      return ns_types[i].flag;
  return 0;
}

int
ns_plan_build (const struct oci_linux *linux_, struct ns_plan *plan, asbx_err_t *err)
{
  memset (plan, 0, sizeof *plan);
  if (linux_ == NULL)
    return 0;
  for (size_t i = 0; i < linux_->namespaces_len; i++)
    {
      const struct oci_namespace *n = &linux_->namespaces[i];
      int flag = ns_flag_from_type (n->type);
      struct ns_entry *e;

      if (flag == 0)
        return asbx_error (err, 0, "linux.namespaces[%zu].type: unknown namespace type `%s`", i, n->type);
      if ((plan->new_flags | plan->join_flags) & (unsigned long) flag)
        return asbx_error (err, 0, "linux.namespaces[%zu]: duplicate namespace type `%s`", i, n->type);
      if (plan->len >= ASBX_NS_MAX)
        return asbx_error (err, 0, "linux.namespaces: too many entries");
      e = &plan->entries[plan->len++];
      e->clone_flag = flag;
      e->type = n->type;
      e->fd = -1;
      if (n->path == NULL || *n->path == '\0')
        {
          plan->new_flags |= (unsigned long) flag;
          continue;
        }
      e->fd = open (n->path, O_RDONLY | O_CLOEXEC);
      if (e->fd < 0)
        return asbx_error (err, errno, "linux.namespaces[%zu] (%s): open `%s`", i, n->type, n->path);
      int t = ioctl (e->fd, NS_GET_NSTYPE);
      if (t < 0)
        return asbx_error (err, errno, "linux.namespaces[%zu] (%s): `%s` is not a namespace file", i, n->type, n->path);
      if (t != flag)
        return asbx_error (err, 0, "linux.namespaces[%zu] (%s): `%s` is a namespace of another type", i, n->type,
                           n->path);
      plan->join_flags |= (unsigned long) flag;
    }
  return 0;
}

void
ns_plan_close (struct ns_plan *plan)
{
  for (size_t i = 0; i < plan->len; i++)
    if (plan->entries[i].fd >= 0)
      {
        close (plan->entries[i].fd);
        plan->entries[i].fd = -1;
      }
}

static int
join_one (const struct ns_entry *e, asbx_err_t *err)
{
  if (setns (e->fd, e->clone_flag) < 0)
    return asbx_error (err, errno, "setns into %s namespace", e->type);
  return 0;
}

int
ns_join_all (const struct ns_plan *plan, asbx_err_t *err)
{
  /* user first, mount late (it changes our view of paths), everything else in between */
  static const int order[] = { CLONE_NEWUSER, CLONE_NEWIPC,  CLONE_NEWUTS,    CLONE_NEWNET,
                               CLONE_NEWPID,  CLONE_NEWTIME, CLONE_NEWCGROUP, CLONE_NEWNS };
  for (size_t o = 0; o < ASBX_ARRAY_SIZE (order); o++)
    for (size_t i = 0; i < plan->len; i++)
      if (plan->entries[i].fd >= 0 && plan->entries[i].clone_flag == order[o])
        if (join_one (&plan->entries[i], err) < 0)
          return -1;
  return 0;
}

static char *
format_map (const struct oci_id_mapping *m, size_t n)
{
  size_t cap = n * 40 + 1, off = 0;
  char *buf = xmalloc (cap);
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++)
    off += (size_t) snprintf (buf + off, cap - off, "%u %u %u\n", m[i].container_id, m[i].host_id, m[i].size);
  return buf;
}

static int
write_map (pid_t pid, const char *file, const struct oci_id_mapping *m, size_t n, asbx_err_t *err)
{
  cleanup_free char *path = xasprintf ("/proc/%d/%s", pid, file);
  cleanup_free char *data = format_map (m, n);
  if (n == 0)
    return 0;
  if (write_file_at (AT_FDCWD, path, data, strlen (data), err) < 0)
    return asbx_error_wrap (err, "write user namespace mapping (linux.%s)",
                            strcmp (file, "uid_map") == 0 ? "uidMappings" : "gidMappings");
  return 0;
}

/* true when the caller may write this map itself: it has CAP_SETUID/CAP_SETGID over the parent
 * namespace (euid 0 there), or the map is the single id of its own (user_namespaces(7)) */
static bool
map_writable (const struct oci_id_mapping *m, size_t n, unsigned own)
{
  return geteuid () == 0 || n == 0 || (n == 1 && m[0].size == 1 && m[0].host_id == own);
}

/* newuidmap/newgidmap (Debian's uidmap package, setuid root): they write the map after checking
 * each host range against the caller's /etc/subuid or /etc/subgid entries (shadow's
 * newuidmap(1)), as runc and crun do for rootless containers; their message is the error's. */
static int
helper_map (pid_t pid, const char *helper, const char *field, const struct oci_id_mapping *m, size_t n, asbx_err_t *err)
{
  cleanup_free char **argv = xmalloc0 ((3 * n + 3) * sizeof *argv);
  cleanup_free char *msg = NULL;
  posix_spawn_file_actions_t fa;
  int p[2], status = 0, spawn_err;
  size_t k = 0, len = 0;
  pid_t child;

  argv[k++] = (char *) helper;
  argv[k++] = xasprintf ("%d", (int) pid);
  for (size_t i = 0; i < n; i++)
    {
      argv[k++] = xasprintf ("%u", m[i].container_id);
      argv[k++] = xasprintf ("%u", m[i].host_id);
      argv[k++] = xasprintf ("%u", m[i].size);
    }
  if (pipe2 (p, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "linux.%s: pipe", field);
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_adddup2 (&fa, p[1], STDERR_FILENO);
  posix_spawn_file_actions_adddup2 (&fa, p[1], STDOUT_FILENO);
  spawn_err = posix_spawnp (&child, helper, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy (&fa);
  close (p[1]);
  for (size_t i = 1; i < k; i++)
    free (argv[i]);
  if (spawn_err == 0)
    {
      msg = xmalloc0 (513);
      for (ssize_t r; len < 512 && (r = read (p[0], msg + len, 512 - len)) > 0;)
        len += (size_t) r;
      while (waitpid (child, &status, 0) < 0 && errno == EINTR)
        ;
    }
  close (p[0]);
  if (spawn_err)
    return asbx_error (err, spawn_err,
                       "linux.%s maps ids other than the caller's own (uid %u, gid %u): that needs %s (Debian "
                       "package uidmap) and ranges in /etc/sub%cid; exec %s",
                       field, (unsigned) getuid (), (unsigned) getgid (), helper, helper[3], helper);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        msg[--len] = '\0';
      return asbx_error (err, 0, "linux.%s: %s refused the map (are the host ids in /etc/sub%cid for uid %u?): %s",
                         field, helper, helper[3], (unsigned) getuid (), len ? msg : "no message");
    }
  return 0;
}

int
ns_write_id_maps (pid_t pid, const struct oci_linux *linux_, asbx_err_t *err)
{
  bool uid_self = map_writable (linux_->uid_mappings, linux_->uid_mappings_len, (unsigned) geteuid ());
  bool gid_self = map_writable (linux_->gid_mappings, linux_->gid_mappings_len, (unsigned) getegid ());

  if (!uid_self
      && helper_map (pid, "newuidmap", "uidMappings", linux_->uid_mappings, linux_->uid_mappings_len, err) < 0)
    return -1;
  if (uid_self && write_map (pid, "uid_map", linux_->uid_mappings, linux_->uid_mappings_len, err) < 0)
    return -1;
  /* A caller without root keeps its supplementary groups in the container: setgroups(2) is
   * denied before newgidmap writes the map (newgidmap would leave it allowed for subgid ranges),
   * or the container could drop a group the host uses to deny access, e.g. a root:blocked 0604
   * file (CVE-2018-7169's class; outside tester, also under rootless Podman). */
  if (!gid_self && geteuid () != 0)
    {
      cleanup_free char *sg = xasprintf ("/proc/%d/setgroups", pid);
      if (write_file_at (AT_FDCWD, sg, "deny", 4, err) < 0)
        return asbx_error_wrap (err, "write user namespace mapping (linux.gidMappings): deny setgroups first");
    }
  if (!gid_self)
    return helper_map (pid, "newgidmap", "gidMappings", linux_->gid_mappings, linux_->gid_mappings_len, err);
  /* without CAP_SETGID over the parent namespace (a non-root caller, issue 17) the kernel takes
   * a gid_map only after setgroups(2) was denied in the child namespace (user_namespaces(7));
   * the init then keeps the caller's supplementary groups (linux/user.c skips setgroups) */
  if (geteuid () != 0 && linux_->gid_mappings_len)
    {
      cleanup_free char *sg = xasprintf ("/proc/%d/setgroups", pid);
      if (write_file_at (AT_FDCWD, sg, "deny", 4, err) < 0)
        return asbx_error_wrap (err, "write user namespace mapping (linux.gidMappings): deny setgroups first");
    }
  return write_map (pid, "gid_map", linux_->gid_mappings, linux_->gid_mappings_len, err);
}

int
ns_write_time_offsets (const struct oci_linux *linux_, asbx_err_t *err)
{
  char buf[128];
  int n = 0;

  if (linux_->has_time_offsets_monotonic)
    n += snprintf (buf + n, sizeof buf - (size_t) n, "monotonic %lld %u\n",
                   (long long) linux_->time_offsets_monotonic.secs, linux_->time_offsets_monotonic.nanosecs);
  if (linux_->has_time_offsets_boottime)
    n += snprintf (buf + n, sizeof buf - (size_t) n, "boottime %lld %u\n",
                   (long long) linux_->time_offsets_boottime.secs, linux_->time_offsets_boottime.nanosecs);
  if (n == 0)
    return 0;
  /* one write per line: the kernel parses one offset per write */
  char *line = buf;
  while (*line)
    {
      char *nl = strchr (line, '\n');
      if (write_file_at (AT_FDCWD, "/proc/self/timens_offsets", line, (size_t) (nl - line + 1), err) < 0)
        return asbx_error_wrap (err, "linux.timeOffsets");
      line = nl + 1;
    }
  return 0;
}
