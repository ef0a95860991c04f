/* cgroup_systemd_dbus.c - the systemd cgroup driver, its D-Bus half: a transient scope (or slice) created through
 * systemd's D-Bus API with libsystemd's sd-bus; the cgroup files are still written by the
 * file-based code, as runc's systemd managers do.
 *
 * Mechanism: org.freedesktop.systemd1(5): Manager.StartTransientUnit(name, "replace",
 * properties, aux) returns a job; the job's end is the JobRemoved(id, job, unit, result)
 * signal, which systemd sends to the client that queued the job (it tracks it) even when
 * nobody called Subscribe(). The match is installed before the call, so a signal that arrives
 * before the method reply is recorded, not lost. StopUnit/ResetFailedUnit on delete,
 * SetUnitProperties(runtime=true) for the resource properties.
 * Threat model: the unit names come checked from cgroup_systemd.c (cgroup_systemd_parse);
 * systemd checks them again. The path we hand to the file code is the one we computed,
 * and only after /proc/PID/cgroup confirmed systemd placed the process there - otherwise the
 * unit is stopped and create fails (e.g. a systemd whose cgroup root differs from ours).
 * Ordering: resolve (parse, no side effect) -> enter (StartTransientUnit with the stage pid,
 * before any container code runs) -> apply resources (properties first, then the files, so the
 * files win if systemd rounds a value) -> ... -> delete (StopUnit, then the directories we made
 * ourselves in v1 hierarchies). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_LIBSYSTEMD
#include <dlfcn.h>
#include <systemd/sd-bus.h>
#endif

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"
#include "linux/cgroup_systemd.h"

#ifndef HAVE_LIBSYSTEMD

int
cgroup_systemd_start (const struct cgroup_systemd_unit *unit, const char *path, pid_t pid, int timeout_ms,
                      asbx_err_t *err)
{
  (void) unit;
  (void) pid;
  (void) timeout_ms;
  return asbx_error (err, ENOTSUP, "cgroup `%s`: agentsbx was built without libsystemd", path);
}

int
cgroup_systemd_set_resources (const char *path, const struct cgroup_systemd_unit *unit, const struct oci_resources *res,
                              asbx_err_t *err)
{
  (void) path;
  (void) unit;
  (void) res;
  (void) err;
  return 0;
}

int
cgroup_systemd_stop (const char *path, int timeout_ms, asbx_err_t *err)
{
  (void) timeout_ms;
  return asbx_error (err, ENOTSUP, "cgroup `%s` is a systemd unit but agentsbx was built without libsystemd", path);
}

char *
cgroup_systemd_user_prepare (const char *id, struct cgroup_systemd_unit *unit, asbx_err_t *err)
{
  (void) id;
  (void) unit;
  (void) err;
  return NULL;
}

#else /* HAVE_LIBSYSTEMD */

/* libsystemd is opened with dlopen on first use (headers only at build time), as selinux.c
 * does: no other command pays for loading it, and the static probe's link is untouched. */
#define SD_FUNCS                                                                                                       \
  X (call)                                                                                                             \
  X (call_method)                                                                                                      \
  X (error_free)                                                                                                       \
  X (error_has_name)                                                                                                   \
  X (flush_close_unref)                                                                                                \
  X (get_property_string)                                                                                              \
  X (match_signal)                                                                                                     \
  X (message_append)                                                                                                   \
  X (message_append_array)                                                                                             \
  X (message_close_container)                                                                                          \
  X (message_new_method_call)                                                                                          \
  X (message_open_container)                                                                                           \
  X (message_read)                                                                                                     \
  X (message_unref)                                                                                                    \
  X (new)                                                                                                              \
  X (open_system)                                                                                                      \
  X (open_user)                                                                                                        \
  X (process)                                                                                                          \
  X (set_address)                                                                                                      \
  X (slot_unref)                                                                                                       \
  X (start)                                                                                                            \
  X (unref)                                                                                                            \
  X (wait)

static struct
{
#define X(f) __typeof__ (sd_bus_##f) *f; // NOLINT(bugprone-macro-parentheses): a member name
  SD_FUNCS
#undef X
} sdlib;
#define SDF(f) (sdlib.f)

static int
sd_load (asbx_err_t *err)
{
  static bool loaded;
  void *h;

  if (loaded)
    return 0;
  h = dlopen ("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h == NULL)
    return asbx_error (err, ENOTSUP, "systemd cgroup driver: cannot load libsystemd.so.0: %s", dlerror ());
#define X(f)                                                                                                           \
  if ((sdlib.f = (__typeof__ (sd_bus_##f) *) dlsym (h, "sd_bus_" #f)) == NULL)                                         \
    return asbx_error (err, ENOTSUP, "systemd cgroup driver: libsystemd.so.0 lacks sd_bus_" #f);
  SD_FUNCS
#undef X
  loaded = true;
  return 0;
}

static void
error_freep (sd_bus_error *e)
{
  if (sdlib.error_free)
    sdlib.error_free (e);
}

#define SD_DEST "org.freedesktop.systemd1"
#define SD_PATH "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"

static inline void
bus_closep (sd_bus **b)
{
  if (*b)
    SDF (flush_close_unref) (*b);
}
static inline void
msg_unrefp (sd_bus_message **m)
{
  if (*m)
    SDF (message_unref) (*m);
}
static inline void
slot_unrefp (sd_bus_slot **s)
{
  if (*s)
    SDF (slot_unref) (*s);
}
#define cleanup_bus __attribute__ ((cleanup (bus_closep)))
#define cleanup_msg __attribute__ ((cleanup (msg_unrefp)))
#define cleanup_slot __attribute__ ((cleanup (slot_unrefp)))
#define cleanup_sderr __attribute__ ((cleanup (error_freep)))

/* "NAME: MESSAGE" of a D-Bus error, or strerror when the call failed locally */
static int
bus_fail (asbx_err_t *err, int r, const sd_bus_error *e, const char *what, const char *unit)
{
  if (e && e->name)
    return asbx_error (err, -r, "systemd %s of unit `%s`: %s (%s)", what, unit, e->message ? e->message : "", e->name);
  return asbx_error (err, -r, "systemd %s of unit `%s`", what, unit);
}

/* A non-root caller's systemd: its user manager. First the manager's private socket
 * $XDG_RUNTIME_DIR/systemd/private (direct, as `systemctl --user` without a session bus), then
 * the session bus (DBUS_SESSION_BUS_ADDRESS or $XDG_RUNTIME_DIR/bus, as crun and Podman). 0 /
 * -1 with *err (errnum ENOENT when there is no user manager to reach). */
static int
user_bus_open (sd_bus **out, bool *direct, asbx_err_t *err)
{
  const char *xdg = getenv ("XDG_RUNTIME_DIR");
  cleanup_free char *priv = xdg && xdg[0] == '/' ? xasprintf ("%s/systemd/private", xdg) : NULL;
  cleanup_free char *sess = xdg && xdg[0] == '/' ? xasprintf ("%s/bus", xdg) : NULL;
  sd_bus *bus = NULL;
  int r = -ENOENT;

  if (priv && access (priv, F_OK) == 0)
    {
      cleanup_free char *addr = xasprintf ("unix:path=%s", priv);
      r = SDF (new) (&bus);
      if (r >= 0)
        r = SDF (set_address) (bus, addr);
      if (r >= 0)
        r = SDF (start) (bus);
      if (r >= 0)
        {
          *out = bus;
          *direct = true;
          return 0;
        }
      log_debug ("systemd user manager at %s: %s; trying the session bus", priv, strerror (-r));
      if (bus)
        SDF (unref) (bus);
      bus = NULL;
    }
  if (getenv ("DBUS_SESSION_BUS_ADDRESS") || (sess && access (sess, F_OK) == 0))
    r = SDF (open_user) (&bus);
  if (r < 0)
    return asbx_error (err, r == -ENOENT ? ENOENT : -r,
                       "connect to the systemd user manager ($XDG_RUNTIME_DIR/systemd/private, the session bus)");
  *out = bus;
  *direct = false;
  return 0;
}

/* As root, systemd's private socket (what systemctl uses: no dbus-daemon needed); else, or if
 * that fails, the system bus. Not root: the caller's user manager (user_bus_open). *direct
 * tells which (a direct connection has no sender field, so signal matches must not filter on
 * it). */
static int
bus_open (sd_bus **out, bool *direct, asbx_err_t *err)
{
  sd_bus *bus = NULL;
  int r;

  if (sd_load (err) < 0)
    return -1;
  if (geteuid () != 0)
    return user_bus_open (out, direct, err);
  if (geteuid () == 0 && access ("/run/systemd/private", F_OK) == 0)
    {
      r = SDF (new) (&bus);
      if (r >= 0)
        r = SDF (set_address) (bus, "unix:path=/run/systemd/private");
      if (r >= 0)
        r = SDF (start) (bus);
      if (r >= 0)
        {
          *out = bus;
          *direct = true;
          return 0;
        }
      log_debug ("systemd private socket: %s; trying the system bus", strerror (-r));
      if (bus)
        SDF (unref) (bus);
      bus = NULL;
    }
  r = SDF (open_system) (&bus);
  if (r < 0)
    return asbx_error (err, -r, "connect to systemd (/run/systemd/private and the system bus)");
  *out = bus;
  *direct = false;
  return 0;
}

/* Jobs whose JobRemoved signal arrived: path and result, filled by on_job_removed. */
struct job_watch
{
  char *done_path[8];
  char *done_result[8];
  size_t n;
};

static int
on_job_removed (sd_bus_message *m, void *userdata, sd_bus_error *ret)
{
  struct job_watch *w = userdata;
  const char *path = NULL, *unit = NULL, *result = NULL;
  uint32_t id;

  (void) ret;
  if (SDF (message_read) (m, "uoss", &id, &path, &unit, &result) < 0)
    return 0;
  /* keep the last few: only our own job matters, others may be removed meanwhile */
  if (w->n == 8)
    {
      free (w->done_path[0]);
      free (w->done_result[0]);
      memmove (w->done_path, w->done_path + 1, sizeof (char *) * 7);
      memmove (w->done_result, w->done_result + 1, sizeof (char *) * 7);
      w->n--;
    }
  w->done_path[w->n] = xstrdup (path);
  w->done_result[w->n++] = xstrdup (result);
  return 0;
}

static void
job_watch_clear (struct job_watch *w)
{
  for (size_t i = 0; i < w->n; i++)
    {
      free (w->done_path[i]);
      free (w->done_result[i]);
    }
  w->n = 0;
}

/* Wait until `job` is removed; its result must be "done". 0 / -1 with *err. */
static int
job_wait (sd_bus *bus, struct job_watch *w, const char *job, const char *unit, const char *what, int timeout_ms,
          asbx_err_t *err)
{
  uint64_t deadline = now_ns () + (uint64_t) timeout_ms * 1000000ull;

  for (;;)
    {
      int r;
      for (size_t i = 0; i < w->n; i++)
        if (strcmp (w->done_path[i], job) == 0)
          {
            if (strcmp (w->done_result[i], "done") != 0)
              return asbx_error (err, EIO, "systemd %s of unit `%s`: job %s finished with result `%s`", what, unit, job,
                                 w->done_result[i]);
            return 0;
          }
      r = SDF (process) (bus, NULL);
      if (r < 0)
        return asbx_error (err, -r, "systemd %s of unit `%s`: waiting for job %s", what, unit, job);
      if (r > 0)
        continue;
      if (now_ns () >= deadline)
        return asbx_error (err, ETIMEDOUT, "systemd %s of unit `%s`: job %s not finished after %d ms", what, unit, job,
                           timeout_ms);
      r = SDF (wait) (bus, (deadline - now_ns ()) / 1000u + 1);
      if (r < 0 && r != -EINTR)
        return asbx_error (err, -r, "systemd %s of unit `%s`: waiting for job %s", what, unit, job);
    }
}

static int
append_props (sd_bus_message *m, const struct cgroup_sd_prop *p, size_t n)
{
  int r = 0;
  for (size_t i = 0; i < n && r >= 0; i++)
    switch (p[i].type)
      {
      case 't': r = SDF (message_append) (m, "(sv)", p[i].name, "t", p[i].u); break;
      case 'b': r = SDF (message_append) (m, "(sv)", p[i].name, "b", (int) p[i].u); break;
      case 's': r = SDF (message_append) (m, "(sv)", p[i].name, "s", p[i].s); break;
      default:
        r = SDF (message_open_container) (m, 'r', "sv");
        if (r >= 0)
          r = SDF (message_append) (m, "s", p[i].name);
        if (r >= 0)
          r = SDF (message_open_container) (m, 'v', "ay");
        if (r >= 0)
          r = SDF (message_append_array) (m, 'y', p[i].bytes, p[i].nbytes);
        if (r >= 0)
          r = SDF (message_close_container) (m);
        if (r >= 0)
          r = SDF (message_close_container) (m);
      }
  return r;
}

/* A call to a Manager method that queues a job ("o" reply), then the wait for that job.
 * `m` is the filled method call. 1 when systemd answered NoSuchUnit and `nosuch_ok`. */
static int
call_job (sd_bus *bus, bool direct, sd_bus_message *m, const char *unit, const char *what, bool nosuch_ok,
          int timeout_ms, asbx_err_t *err)
{
  cleanup_sderr sd_bus_error e = SD_BUS_ERROR_NULL;
  cleanup_msg sd_bus_message *reply = NULL;
  cleanup_slot sd_bus_slot *slot = NULL;
  struct job_watch w = { .n = 0 };
  const char *job = NULL;
  int r, ret;

  /* the match first: the signal may overtake the method reply */
  r = SDF (match_signal) (bus, &slot, direct ? NULL : SD_DEST, SD_PATH, SD_MANAGER, "JobRemoved", on_job_removed, &w);
  if (r < 0)
    return asbx_error (err, -r, "systemd %s of unit `%s`: subscribe to JobRemoved", what, unit);
  r = SDF (call) (bus, m, (uint64_t) timeout_ms * 1000u, &e, &reply);
  if (r < 0 && nosuch_ok && SDF (error_has_name) (&e, "org.freedesktop.systemd1.NoSuchUnit"))
    return 1;
  if (r < 0)
    return bus_fail (err, r, &e, what, unit);
  r = SDF (message_read) (reply, "o", &job);
  if (r < 0)
    return asbx_error (err, -r, "systemd %s of unit `%s`: reading the job path", what, unit);
  ret = job_wait (bus, &w, job, unit, what, timeout_ms, err);
  job_watch_clear (&w);
  return ret;
}

static int
new_manager_call (sd_bus *bus, sd_bus_message **m, const char *method, const char *unit, asbx_err_t *err)
{
  int r = SDF (message_new_method_call) (bus, m, SD_DEST, SD_PATH, SD_MANAGER, method);
  if (r < 0)
    return asbx_error (err, -r, "systemd %s of unit `%s`: new message", method, unit);
  return 0;
}

/* The path systemd put pid in: the name=systemd line on v1/hybrid hosts, else the v2 line. */
static char *
proc_cgroup_of (pid_t pid, asbx_err_t *err)
{
  cleanup_free char *file = xasprintf ("/proc/%d/cgroup", (int) pid), *buf = NULL;
  char *save = NULL, *v2 = NULL;

  if (read_file_at (AT_FDCWD, file, 1 << 20, &buf, NULL, err) < 0)
    return NULL;
  for (char *l = strtok_r (buf, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      char *c1 = strchr (l, ':'), *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      if (c2 == NULL)
        continue;
      if (strncmp (c1 + 1, "name=systemd:", 13) == 0)
        {
          free (v2);
          return xstrdup (c2 + 1);
        }
      if (c2 == c1 + 1 && v2 == NULL)
        v2 = xstrdup (c2 + 1);
    }
  if (v2 == NULL)
    asbx_error (err, ENOENT, "%s lists no systemd or cgroup2 hierarchy", file);
  return v2;
}

static int
start_message (sd_bus *bus, sd_bus_message **m, const struct cgroup_systemd_unit *u, pid_t pid, asbx_err_t *err)
{
  cleanup_free char *desc = xasprintf ("agentsbx container %s", u->unit);
  bool scope = cgroup_has_suffix (u->unit, ".scope");
  int r;

  if (new_manager_call (bus, m, "StartTransientUnit", u->unit, err) < 0)
    return -1;
  r = SDF (message_append) (*m, "ss", u->unit, "replace");
  if (r >= 0)
    r = SDF (message_open_container) (*m, 'a', "(sv)");
  if (r >= 0)
    r = SDF (message_append) (*m, "(sv)(sv)(sv)(sv)(sv)(sv)", "Description", "s", desc, "DefaultDependencies", "b", 0,
                              "MemoryAccounting", "b", 1, "CPUAccounting", "b", 1, "TasksAccounting", "b", 1,
                              "IOAccounting", "b", 1);
  /* a scope sits in its slice, holds the pid and is delegated (the container may manage its
   * own sub-cgroups); a slice holds no process and only wants its parent */
  if (r >= 0 && scope)
    r = SDF (message_append) (*m, "(sv)(sv)(sv)", "Slice", "s", u->slice, "Delegate", "b", 1, "PIDs", "au", 1,
                              (uint32_t) pid);
  else if (r >= 0)
    r = SDF (message_append) (*m, "(sv)", "Wants", "as", 1, u->slice);
  if (r >= 0)
    r = SDF (message_close_container) (*m);
  if (r >= 0)
    r = SDF (message_append) (*m, "a(sa(sv))", 0);
  if (r < 0)
    return asbx_error (err, -r, "systemd StartTransientUnit of unit `%s`: building the message", u->unit);
  return 0;
}

int
cgroup_systemd_start (const struct cgroup_systemd_unit *pending, const char *path, pid_t pid, int timeout_ms,
                      asbx_err_t *err)
{
  cleanup_bus sd_bus *bus = NULL;
  cleanup_msg sd_bus_message *m = NULL;
  cleanup_free char *actual = NULL;
  bool direct = false;

  if (!cgroup_systemd_is_pending (pending, path))
    return asbx_error (err, EINVAL, "cgroup `%s` is not the systemd unit resolved for this container", path);
  if (bus_open (&bus, &direct, err) < 0 || start_message (bus, &m, pending, pid, err) < 0)
    return asbx_error_wrap (err, "unit `%s`", pending->unit);
  if (call_job (bus, direct, m, pending->unit, "StartTransientUnit", false, timeout_ms, err) < 0)
    return geteuid () == 0 ? -1
                           : asbx_error_wrap (err,
                                              "your systemd user manager could not place pid %d in its scope "
                                              "(a process outside your user session, e.g. one a system service "
                                              "started, cannot be moved there: run agentsbx from your login "
                                              "session or under `systemd-run --user`)",
                                              (int) pid);
  log_debug ("systemd unit %s started for pid %d", pending->unit, (int) pid);
  if (!cgroup_has_suffix (pending->unit, ".scope"))
    return 0; /* a slice: the caller moves the pid into it */
  actual = proc_cgroup_of (pid, err);
  if (actual && strcmp (actual, path) == 0)
    return 0;
  if (actual)
    asbx_error (err, EXDEV, "systemd placed pid %d of unit `%s` in cgroup `%s`, expected `%s`", (int) pid,
                pending->unit, actual, path);
  {
    asbx_err_t ignored = NULL;
    if (cgroup_systemd_stop (path, timeout_ms, &ignored) < 0)
      asbx_error_free (&ignored);
  }
  return -1;
}

/* The unit of a cgroup path: its last component when that is a scope or slice name. */
static const char *
unit_of_path (const char *path)
{
  const char *leaf = strrchr (path, '/') ? strrchr (path, '/') + 1 : path;
  return cgroup_has_suffix (leaf, ".scope") || cgroup_has_suffix (leaf, ".slice") ? leaf : NULL;
}

/* Is `unit` known to systemd with ControlGroup == path? 1 yes, 0 no, -1 on a bus error. */
static int
unit_owns_path (sd_bus *bus, const char *unit, const char *path, asbx_err_t *err)
{
  cleanup_sderr sd_bus_error e = SD_BUS_ERROR_NULL;
  cleanup_msg sd_bus_message *reply = NULL;
  cleanup_free char *cg = NULL;
  const char *obj = NULL;
  int r;

  r = SDF (call_method) (bus, SD_DEST, SD_PATH, SD_MANAGER, "GetUnit", &e, &reply, "s", unit);
  if (r < 0 && SDF (error_has_name) (&e, "org.freedesktop.systemd1.NoSuchUnit"))
    return 0;
  if (r < 0 || (r = SDF (message_read) (reply, "o", &obj)) < 0)
    return bus_fail (err, r, &e, "GetUnit", unit);
  r = SDF (get_property_string) (bus, SD_DEST, obj,
                                 cgroup_has_suffix (unit, ".scope") ? "org.freedesktop.systemd1.Scope"
                                                                    : "org.freedesktop.systemd1.Slice",
                                 "ControlGroup", &e, &cg);
  if (r < 0)
    return bus_fail (err, r, &e, "ControlGroup property", unit);
  return strcmp (cg, path) == 0;
}

int
cgroup_systemd_set_resources (const char *path, const struct cgroup_systemd_unit *pending,
                              const struct oci_resources *res, asbx_err_t *err)
{
  const struct cgroup_layout_info *info;
  cleanup_bus sd_bus *bus = NULL;
  cleanup_msg sd_bus_message *m = NULL;
  cleanup_sderr sd_bus_error e = SD_BUS_ERROR_NULL;
  struct cgroup_sd_prop *props = NULL;
  const char *unit = unit_of_path (path);
  bool direct = false, ours = cgroup_systemd_is_pending (pending, path);
  size_t n = 0;
  int r;

  if (unit == NULL || res == NULL || access ("/run/systemd/system", F_OK) != 0)
    return 0;
  if ((info = cgroup_layout_get (err)) == NULL)
    return -1;
  if (cgroup_systemd_resource_props (res, info->layout == CGROUP_LAYOUT_UNIFIED, &props, &n, err) < 0)
    return -1;
  if (n == 0)
    {
      cgroup_sd_props_free (props, n);
      return 0;
    }
  r = bus_open (&bus, &direct, err);
  if (r == 0 && !ours)
    r = unit_owns_path (bus, unit, path, err);
  if (r <= 0 && !(r == 0 && ours))
    {
      cgroup_sd_props_free (props, n);
      /* 0: not a unit systemd knows for this path (a cgroupfs path that merely looks like one):
       * the files are enough */
      return r < 0 ? asbx_error_wrap (err, "unit `%s`", unit) : 0;
    }
  r = SDF (message_new_method_call) (bus, &m, SD_DEST, SD_PATH, SD_MANAGER, "SetUnitProperties");
  if (r >= 0)
    r = SDF (message_append) (m, "sb", unit, 1);
  if (r >= 0)
    r = SDF (message_open_container) (m, 'a', "(sv)");
  if (r >= 0)
    r = append_props (m, props, n);
  if (r >= 0)
    r = SDF (message_close_container) (m);
  cgroup_sd_props_free (props, n);
  if (r < 0)
    return asbx_error (err, -r, "systemd SetUnitProperties of unit `%s`: building the message", unit);
  r = SDF (call) (bus, m, 0, &e, NULL);
  if (r < 0)
    return bus_fail (err, r, &e, "SetUnitProperties", unit);
  return 0;
}

int
cgroup_systemd_stop (const char *path, int timeout_ms, asbx_err_t *err)
{
  cleanup_bus sd_bus *bus = NULL;
  cleanup_msg sd_bus_message *m = NULL;
  cleanup_sderr sd_bus_error e = SD_BUS_ERROR_NULL;
  const char *unit = unit_of_path (path);
  bool direct = false;
  int r;

  if (unit == NULL)
    return asbx_error (err, EINVAL, "cgroup `%s` does not name a systemd unit", path);
  if (access ("/run/systemd/system", F_OK) != 0)
    {
      /* no systemd (any more, e.g. state from another boot): no unit can be alive */
      log_debug ("systemd is not running: unit %s is gone", unit);
      return 0;
    }
  if (bus_open (&bus, &direct, err) < 0)
    return asbx_error_wrap (err, "stop unit `%s`", unit);
  /* SIGKILL first: a container's init (PID 1 of its namespace) ignores the SIGTERM StopUnit
   * sends, and systemd would wait TimeoutStopSec (90 s) before killing. Normally nothing is
   * left (delete killed the container already); a unit already gone answers NoSuchUnit. */
  if (SDF (call_method) (bus, SD_DEST, SD_PATH, SD_MANAGER, "KillUnit", &e, NULL, "ssi", unit, "all", SIGKILL) < 0)
    log_debug ("KillUnit %s: %s", unit, e.message ? e.message : "?");
  SDF (error_free) (&e);
  if (new_manager_call (bus, &m, "StopUnit", unit, err) < 0)
    return -1;
  r = SDF (message_append) (m, "ss", unit, "replace");
  if (r < 0)
    return asbx_error (err, -r, "systemd StopUnit of unit `%s`: building the message", unit);
  r = call_job (bus, direct, m, unit, "StopUnit", true, timeout_ms, err);
  if (r < 0)
    return -1;
  /* a scope whose processes were killed (OOM, SIGKILL) stays "failed" until reset */
  if (SDF (call_method) (bus, SD_DEST, SD_PATH, SD_MANAGER, "ResetFailedUnit", &e, NULL, "s", unit) < 0)
    log_debug ("ResetFailedUnit %s: %s", unit, e.message ? e.message : "?");
  return 0;
}

char *
cgroup_systemd_user_prepare (const char *id, struct cgroup_systemd_unit *unit, asbx_err_t *err)
{
  cleanup_bus sd_bus *bus = NULL;
  cleanup_sderr sd_bus_error e = SD_BUS_ERROR_NULL;
  cleanup_free char *root = NULL,
                    *form = xasprintf ("%s:%s:%s", CGROUP_SYSTEMD_USER_SLICE, CGROUP_SYSTEMD_DEFAULT_PREFIX, id);
  struct cgroup_systemd_unit u = { NULL, NULL, NULL };
  asbx_err_t none = NULL;
  bool direct = false;
  int r;

  if (sd_load (&none) < 0 || user_bus_open (&bus, &direct, &none) < 0)
    {
      log_debug ("no systemd user manager: %s", none ? none->msg : "?");
      asbx_error_free (&none);
      return NULL;
    }
  /* the manager's own cgroup (user@UID.service): its units' paths are below it */
  r = SDF (get_property_string) (bus, SD_DEST, SD_PATH, SD_MANAGER, "ControlGroup", &e, &root);
  if (r < 0)
    {
      bus_fail (err, r, &e, "user manager ControlGroup property", "-");
      return NULL;
    }
  if (root[0] != '/' || cgroup_systemd_parse (form, id, &u, err) < 0)
    {
      if (!*err)
        asbx_error (err, EINVAL, "systemd user manager: ControlGroup `%s` is not an absolute path", root);
      cgroup_systemd_unit_clear (&u);
      return NULL;
    }
  char *full = xasprintf ("%s%s", strcmp (root, "/") == 0 ? "" : root, u.path);
  free (u.path);
  u.path = full;
  cgroup_systemd_unit_clear (unit);
  *unit = u;
  return xstrdup (u.path);
}

#endif /* HAVE_LIBSYSTEMD */
