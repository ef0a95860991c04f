/* cgroup_freezer.c - pause/resume (freeze/thaw every process of the container) and OOM events.
 *
 * Sources: cgroup-v1/freezer-subsystem.rst (freezer.state: write FROZEN/THAWED; reading shows
 * FREEZING until every task is frozen), cgroup-v2.rst (cgroup.freeze 1/0; cgroup.events
 * "frozen 1" once done). Freezing is asynchronous, so we poll the state with a bounded wait; on
 * timeout the cgroup is thawed again (runc does the same) rather than left half-frozen.
 * OOM: v1 eventfd + cgroup.event_control "<eventfd> <fd of memory.oom_control>"; v2 the
 * memory.events file, which raises POLLPRI when a counter changes. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

static int
state_of (const struct cgroup_dir *d, bool *frozen, bool *freezing, asbx_err_t *err)
{
  cleanup_free char *s = NULL;

  *freezing = false;
  if (d->version == 2)
    {
      if (cgroup_dir_read (d, "cgroup.events", &s, err) < 0)
        return -1;
      *frozen = strstr (s, "frozen 1") != NULL;
      return 0;
    }
  if (cgroup_dir_read (d, "freezer.state", &s, err) < 0)
    return -1;
  *frozen = strncmp (s, "FROZEN", 6) == 0;
  *freezing = strncmp (s, "FREEZING", 8) == 0;
  return 0;
}

int
cgroup_freeze (const char *path, bool freeze, int timeout_ms, asbx_err_t *err)
{
  struct cgroup_dir d = CGROUP_DIR_INIT;
  uint64_t deadline = now_ns () + (uint64_t) timeout_ms * 1000000ull;
  int r = cgroup_ctl_open (path, "freezer", &d, err);

  if (r == 1)
    return asbx_error (err, ENOTSUP, "pause/resume: no freezer on this host (no v1 freezer, no cgroup2)");
  if (r < 0)
    return -1;
  for (;;)
    {
      bool frozen, freezing;
      if (d.version == 2)
        r = cgroup_dir_write (&d, "freezer", "cgroup.freeze", freeze ? "1" : "0", err);
      else
        r = cgroup_dir_write (&d, "freezer", "freezer.state", freeze ? "FROZEN" : "THAWED", err);
      if (r < 0 || (r = state_of (&d, &frozen, &freezing, err)) < 0)
        break;
      if (frozen == freeze && !freezing)
        break;
      if (now_ns () >= deadline)
        {
          asbx_err_t ignored = NULL;
          if (freeze)
            cgroup_dir_write (&d, "freezer", d.version == 2 ? "cgroup.freeze" : "freezer.state",
                              d.version == 2 ? "0" : "THAWED", &ignored);
          asbx_error_free (&ignored);
          r = asbx_error (err, ETIMEDOUT, "%s %s: the state was not reached in %d ms", freeze ? "freeze" : "thaw",
                          d.where, timeout_ms);
          break;
        }
      nanosleep (&(struct timespec){ 0, 1000L * 1000 }, NULL);
    }
  cgroup_dir_clear (&d);
  return r < 0 ? -1 : 0;
}

int
cgroup_is_frozen (const char *path, asbx_err_t *err)
{
  struct cgroup_dir d = CGROUP_DIR_INIT;
  bool frozen = false, freezing = false;
  int r = cgroup_ctl_open (path, "freezer", &d, err);

  if (r == 1)
    return 0;
  if (r == 0)
    r = state_of (&d, &frozen, &freezing, err);
  cgroup_dir_clear (&d);
  if (r < 0)
    return -1;
  return frozen || freezing;
}

int
cgroup_oom_fd (const char *path, bool *v2, asbx_err_t *err)
{
  struct cgroup_dir d = CGROUP_DIR_INIT;
  cleanup_close int efd = -1, ofd = -1, ctl = -1;
  int r = cgroup_ctl_open (path, "memory", &d, err), ret = -1;

  if (r == 1)
    return asbx_error (err, ENOTSUP, "events: no memory controller on this host");
  if (r < 0)
    return -1;
  *v2 = d.version == 2;
  if (d.version == 2)
    {
      ret = openat (d.fd, "memory.events", O_RDONLY | O_CLOEXEC);
      if (ret < 0)
        asbx_error (err, errno, "open %s/memory.events", d.where);
      cgroup_dir_clear (&d);
      return ret;
    }
  efd = eventfd (0, EFD_CLOEXEC);
  ofd = openat (d.fd, "memory.oom_control", O_RDONLY | O_CLOEXEC);
  ctl = openat (d.fd, "cgroup.event_control", O_WRONLY | O_CLOEXEC);
  if (efd < 0 || ofd < 0 || ctl < 0)
    asbx_error (err, errno, "events: open %s/memory.oom_control / cgroup.event_control", d.where);
  else
    {
      char buf[64];
      int n = snprintf (buf, sizeof buf, "%d %d", efd, ofd);
      if (write_all (ctl, buf, (size_t) n) < 0)
        asbx_error (err, errno, "events: register the OOM eventfd in %s/cgroup.event_control", d.where);
      else
        ret = steal_fd (&efd);
    }
  cgroup_dir_clear (&d);
  return ret;
}

int
cgroup_oom_count (const char *path, uint64_t *count, asbx_err_t *err)
{
  struct cgroup_dir d = CGROUP_DIR_INIT;
  cleanup_free char *s = NULL;
  int r = cgroup_ctl_open (path, "memory", &d, err);
  const char *p;

  if (r == 1)
    return asbx_error (err, ENOTSUP, "no memory controller on this host");
  if (r == 0)
    r = cgroup_dir_read (&d, d.version == 2 ? "memory.events" : "memory.oom_control", &s, err);
  cgroup_dir_clear (&d);
  if (r < 0)
    return -1;
  p = s ? strstr (s, "oom_kill ") : NULL;
  *count = p ? strtoull (p + 9, NULL, 10) : 0;
  return 0;
}
