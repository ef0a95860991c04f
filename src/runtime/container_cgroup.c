/* container_cgroup.c - update, pause/resume, ps and events on an existing container.
 *
 * Each operation holds the container's lock (flock on its state dir, state.h) while it reads
 * the state and touches the cgroup, so it cannot race a delete that removes the cgroup. events
 * releases the lock after reading the state (it runs for a long time; runc does not lock it
 * either) and stops when the init is gone.
 * Status rules (runc): update needs a container that is not stopped; pause needs running;
 * resume needs paused (cgroup frozen). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"
#include "linux/cgroup.h"
#include "runtime/container_cgroup.h"
#include "runtime/rootless.h"
#include "runtime/rootless_oci.h"
#include "runtime/state.h"
#include "runtime/vm_supervisor.h"

/* Open, lock and read the state of a container that has finished `create`, cgroup or not. */
static int
open_state_any (const struct asbx_global *g, const char *id, struct asbx_opened *o, asbx_err_t *err)
{
  if (asbx_container_open (g->root, id, o, err) < 0)
    return -1;
  if (!o->has_state)
    return asbx_error (err, 0, "container `%s` is still being created", id);
  if (vm_supervisor_is_vm (o->dirfd))
    return asbx_error (err, EINVAL,
                       "container `%s` runs in the vm tier (isolation vm): pause, resume, ps, update and events are "
                       "not built there yet",
                       id);
  return 0;
}

/* The error for a container without a cgroup (a caller without root, runtime/rootless_oci.h):
 * what needs it, and why there is none. */
static int
no_cgroup (const char *id, const char *need, asbx_err_t *err)
{
  if (rootless_caller ())
    return asbx_error (err, 0,
                       "container `%s` has no cgroup, which %s: agentsbx run without root (uid %u) makes "
                       "none unless one is delegated to it",
                       id, need, rootless_host_uid ());
  return asbx_error (err, 0, "container `%s` has no cgroup", id);
}

/* open_state_any, and the container must have a cgroup */
static int
open_state (const struct asbx_global *g, const char *id, struct asbx_opened *o, asbx_err_t *err)
{
  if (open_state_any (g, id, o, err) < 0)
    return -1;
  if (o->st.cgroup_path == NULL)
    return no_cgroup (id, "update and events need", err);
  return 0;
}

/* events' watch loop, after the lock and the dir fd are released: is the init still there */
static bool
running (const struct asbx_opened *o)
{
  return asbx_state_alive (&o->st);
}

/* update, pause, resume, ps, events: the transition table's rule (state.h) */
static bool
live (const struct asbx_opened *o)
{
  return asbx_status_allows (asbx_state_status (o->dirfd, &o->st), ASBX_OP_CGROUP);
}

struct oci_resources *
asbx_resources_parse (const char *json, size_t len, const char *name, asbx_err_t *err)
{
  struct oci_ctx c;
  struct oci_resources *r = xmalloc0 (sizeof *r);
  yajl_val v;

  oci_ctx_init (&c, name, err);
  v = oci_json_load (&c, json, len);
  if (v == NULL || oci_parse_resources (&c, v, r) < 0)
    {
      oci_resources_free (r);
      r = NULL;
    }
  if (v)
    yajl_tree_free (v);
  oci_ctx_release (&c);
  return r;
}

int
asbx_container_update (const struct asbx_global *g, const char *id, const struct oci_resources *res, asbx_err_t *err)
{
  struct asbx_opened o;
  int ret = -1;

  if (open_state (g, id, &o, err) < 0)
    goto out;
  if (!live (&o))
    {
      asbx_error (err, 0, "cannot update container `%s`: it is stopped", id);
      goto out;
    }
  if (cgroup_check_resources (res, err) < 0
      || cgroup_apply_resources (o.st.cgroup_path, NULL, res, NULL, 0, true, err) < 0)
    {
      asbx_error_wrap (err, "update container `%s`", id);
      goto out;
    }
  ret = 0;
out:
  asbx_container_close (&o);
  return ret;
}

int
asbx_container_pause (const struct asbx_global *g, const char *id, bool freeze, asbx_err_t *err)
{
  struct asbx_opened o;
  int ret = -1, frozen;

  if (open_state_any (g, id, &o, err) < 0)
    goto out;
  if (!o.st.cgroup_path)
    {
      no_cgroup (id, freeze ? "pause needs (its freezer)" : "resume needs (its freezer)", err);
      goto out;
    }
  if (!live (&o))
    {
      asbx_error (err, 0, "container `%s` is not running", id);
      goto out;
    }
  frozen = cgroup_is_frozen (o.st.cgroup_path, err);
  if (frozen < 0)
    goto out;
  if (!freeze && !frozen)
    {
      asbx_error (err, 0, "container `%s` is not paused", id);
      goto out;
    }
  if (freeze && frozen)
    {
      asbx_error (err, 0, "container `%s` is already paused", id);
      goto out;
    }
  ret = cgroup_freeze (o.st.cgroup_path, freeze, 10000, err);
  if (ret < 0)
    asbx_error_wrap (err, "%s container `%s`", freeze ? "pause" : "resume", id);
out:
  asbx_container_close (&o);
  return ret;
}

int
asbx_container_pids (const struct asbx_global *g, const char *id, pid_t **pids, size_t *n, asbx_err_t *err)
{
  struct asbx_opened o;
  int ret = -1;

  if (open_state_any (g, id, &o, err) < 0)
    goto out;
  if (!live (&o))
    {
      asbx_error (err, 0, "container `%s` is not running", id);
      goto out;
    }
  /* no cgroup (a caller without root): the processes of the container's pid namespace */
  if (!o.st.cgroup_path && rootless_caller ())
    ret = rootless_pidns_pids (o.st.pid, pids, n, err);
  else if (!o.st.cgroup_path)
    ret = no_cgroup (id, "ps needs", err);
  else
    ret = cgroup_pids (o.st.cgroup_path, pids, n, err);
out:
  asbx_container_close (&o);
  return ret;
}

static int
print_stats (const char *path, const char *id, FILE *out, asbx_err_t *err)
{
  cleanup_free char *j = cgroup_stats_json (path, id, err);
  if (j == NULL)
    return -1;
  fprintf (out, "%s\n", j);
  fflush (out);
  return 0;
}

/* Wait up to ms for an OOM notification; print one event per kill. */
static void
wait_oom (int fd, bool v2, const char *path, const char *id, int ms, uint64_t *seen, FILE *out)
{
  struct pollfd p = { .fd = fd, .events = v2 ? POLLPRI : POLLIN };
  uint64_t cnt = 0, events = 0;
  asbx_err_t e = NULL;

  if (fd < 0)
    {
      poll (NULL, 0, ms);
      return;
    }
  if (poll (&p, 1, ms) <= 0)
    return;
  if (v2)
    {
      if (cgroup_oom_count (path, &cnt, &e) < 0)
        asbx_error_free (&e);
      events = cnt > *seen ? cnt - *seen : 0;
      *seen = cnt;
      if (pread (fd, &cnt, 0, 0) < 0) /* re-read re-arms the POLLPRI notification */
        events = 0;
    }
  else if (read (fd, &cnt, sizeof cnt) == sizeof cnt)
    events = cnt;
  for (uint64_t i = 0; i < events; i++)
    fprintf (out, "{\"type\":\"oom\",\"id\":\"%s\"}\n", id);
  fflush (out);
}

int
asbx_container_events (const struct asbx_global *g, const char *id, bool stats_once, int interval_ms, FILE *out,
                       asbx_err_t *err)
{
  struct asbx_opened o;
  cleanup_close int ofd = -1;
  uint64_t seen = 0;
  bool v2 = false;
  int ret = -1;

  if (open_state (g, id, &o, err) < 0)
    goto out;
  if (!live (&o))
    {
      asbx_error (err, 0, "container `%s` is not running", id);
      goto out;
    }
  if (stats_once)
    {
      ret = print_stats (o.st.cgroup_path, id, out, err);
      goto out;
    }
  /* release the lock: delete must be able to proceed while we watch */
  close (o.dirfd);
  o.dirfd = -1;
  {
    asbx_err_t e = NULL;
    ofd = cgroup_oom_fd (o.st.cgroup_path, &v2, &e);
    asbx_error_free (&e); /* no OOM events without a memory controller; stats still work */
    if (v2 && cgroup_oom_count (o.st.cgroup_path, &seen, &e) < 0)
      asbx_error_free (&e);
  }
  while (running (&o))
    {
      if (print_stats (o.st.cgroup_path, id, out, err) < 0)
        {
          if (!running (&o))
            break; /* the cgroup went away with the container */
          goto out;
        }
      wait_oom (ofd, v2, o.st.cgroup_path, id, interval_ms, &seen, out);
    }
  asbx_error_free (err);
  ret = 0;
out:
  asbx_container_close (&o);
  return ret;
}
