/* rootless_oci.c - an OCI container of a caller without real root (issue 17, "Rootless OCI").
 *
 * A non-root caller (or the runtime run by rootless Podman inside Podman's user namespace,
 * where euid 0 is not the host's root) gets no cgroup unless one is delegated to it. runc's
 * `--rootless auto` then ignores cgroup permission errors, which silently drops whatever
 * linux.resources asked; agentsbx fails closed instead: every field that only a cgroup could
 * enforce is refused before anything is made, naming it (memory/pids/CPU limits are
 * runtime/rootless.c's check, the rest here). Without a cgroup `ps` lists the container's pid
 * namespace (/proc/PID/ns/pid), which its processes cannot leave. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "linux/proc_ns.h"
#include "runtime/rootless_oci.h"

bool
rootless_in_userns (void)
{
  static int cached = -1;
  unsigned long inside, outside, count;
  cleanup_fclose FILE *f = NULL;

  if (cached >= 0)
    return cached;
  cached = 0;
  f = fopen ("/proc/self/uid_map", "re");
  /* the initial namespace's map is one line: 0 0 4294967295 (user_namespaces(7)) */
  if (f && fscanf (f, "%lu %lu %lu", &inside, &outside, &count) == 3)
    cached = !(inside == 0 && outside == 0 && count == 4294967295UL);
  // cppcheck-suppress resourceLeak ; f is closed by its cleanup attribute
  return cached;
}

unsigned
rootless_host_uid (void)
{
  unsigned long inside, outside, count, uid = getuid ();
  cleanup_fclose FILE *f = fopen ("/proc/self/uid_map", "re");

  while (f && fscanf (f, "%lu %lu %lu", &inside, &outside, &count) == 3)
    if (uid >= inside && uid - inside < count)
      return (unsigned) (outside + (uid - inside));
  return (unsigned) uid;
}

/* the first linux.resources field other than memory.limit, pids.limit and cpu.quota (those
 * are rootless_check's) that asks for a cgroup; NULL when none */
static const char *
resource_asked (const struct oci_resources *r)
{
  const struct oci_memory *m = r->memory;
  const struct oci_cpu *c = r->cpu;
  const struct oci_block_io *b = r->block_io;

  if (m
      && ((m->has_reservation && m->reservation > 0) || (m->has_swap && m->swap > 0) || (m->has_kernel && m->kernel > 0)
          || (m->has_kernel_tcp && m->kernel_tcp > 0)))
    return "linux.resources.memory (reservation, swap or kernel limits)";
  if (m && m->has_swappiness && m->swappiness <= 100)
    return "linux.resources.memory.swappiness";
  if (m && m->has_disable_oom_killer && m->disable_oom_killer)
    return "linux.resources.memory.disableOOMKiller";
  if (c
      && ((c->has_shares && c->shares) || (c->has_period && c->period) || c->has_realtime_runtime
          || c->has_realtime_period || (c->has_burst && c->burst) || c->has_idle))
    return "linux.resources.cpu (shares, period, burst, realtime or idle)";
  if (c && ((c->cpus && *c->cpus) || (c->mems && *c->mems)))
    return "linux.resources.cpu.cpus/mems (cpuset)";
  if (b
      && (b->has_weight || b->has_leaf_weight || b->weight_device_len || b->throttle_read_bps_device_len
          || b->throttle_write_bps_device_len || b->throttle_read_iops_device_len || b->throttle_write_iops_device_len))
    return "linux.resources.blockIO";
  if (r->hugepage_limits_len)
    return "linux.resources.hugepageLimits";
  if (r->network && (r->network->has_class_id || r->network->priorities_len))
    return "linux.resources.network";
  if (r->rdma_len)
    return "linux.resources.rdma";
  if (r->unified.len)
    return "linux.resources.unified";
  return NULL;
}

int
rootless_oci_check (const struct oci_spec *spec, const char *config_path, asbx_err_t *err)
{
  const struct oci_resources *r = spec->linux_ ? spec->linux_->resources : NULL;
  const char *what;

  if (!r)
    return 0;
  for (size_t i = 0; i < r->devices_len; i++)
    if (r->devices[i].allow)
      return asbx_error (err, 0,
                         "%s: linux.resources.devices[%zu]: an allow rule needs the devices cgroup, and a "
                         "container of a caller without root (uid %u) has no cgroup: not enforceable. Drop the "
                         "rule (a container in a user namespace holds only the device nodes in linux.devices, "
                         "bind-mounted from the host; deny rules are accepted) or run as root",
                         config_path, i, rootless_host_uid ());
  what = resource_asked (r);
  if (what)
    return asbx_error (err, 0,
                       "%s: %s needs a cgroup, and a container of a caller without root (uid %u) has none (no "
                       "cgroup is delegated): not enforceable. Remove it from linux.resources or run as root",
                       config_path, what, rootless_host_uid ());
  return 0;
}

static int
pidns_of (pid_t pid, struct stat *st)
{
  char path[64];
  snprintf (path, sizeof path, "/proc/%d/ns/pid", (int) pid);
  return stat (path, st);
}

struct pid_list
{
  pid_t init, *pids;
  size_t n, cap;
};

static int
add_pid (int procfd, pid_t pid, void *arg)
{
  struct pid_list *l = arg;
  (void) procfd;
  if (pid == l->init)
    return 0;
  if (l->n == l->cap)
    l->pids = xrealloc (l->pids, (l->cap *= 2) * sizeof *l->pids);
  l->pids[l->n++] = pid;
  return 0;
}

int
rootless_pidns_pids (pid_t init, pid_t **pids, size_t *n, asbx_err_t *err)
{
  struct stat want, self;

  if (pidns_of (init, &want) < 0)
    return asbx_error (err, errno, "the container's pid namespace (/proc/%d/ns/pid)", (int) init);
  if (pidns_of (getpid (), &self) == 0 && self.st_ino == want.st_ino && self.st_dev == want.st_dev)
    return asbx_error (err, 0,
                       "the container has no cgroup (a caller without root, none delegated) and shares the "
                       "caller's pid namespace: its processes cannot be listed. Give it a pid namespace "
                       "(linux.namespaces) or run as root");
  struct pid_list l = { .init = init, .cap = 16 };
  l.pids = xmalloc (l.cap * sizeof *l.pids);
  l.pids[l.n++] = init;
  if (linux_proc_each_in_ns ("pid", &want, add_pid, &l) < 0)
    {
      int e = errno;
      free (l.pids);
      return asbx_error (err, e, "opendir /proc");
    }
  *pids = l.pids;
  *n = l.n;
  return 0;
}
