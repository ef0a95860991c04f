/* monitor_events.c - the monitor's view of the container's processes (see monitor.c for the
 * whole mechanism): the process-events connector's FORK/EXEC/EXIT stream, filtered in user
 * space into a sorted member set, exec audit records, the failed-exec budget and the init's
 * wait status.
 * Threat model: every event of the host arrives here; only members (forked by a member, or
 * exec'ing inside the container's cgroup) count. /proc/PID/cmdline and exe are the container's
 * own text: untrusted, sanitised by audit.c. A pid can be reused between an event and our read
 * of /proc: the worst case is a mislabelled exec record, never a missed kill (kills go to the
 * cgroup).
 * Ordering: the connector is subscribed before cgroup.procs is read (monitor_start), so the
 * resync after an overflow and the first listing leave no gap. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup.h"
#include "linux/pathsafe.h"
#include "linux/proc_events.h"
#include "monitor/denials.h"
#include "monitor/execfail.h"
#include "monitor/execrec.h"
#include "monitor/monitor_internal.h"

static size_t
pidset_pos (const struct pidset *s, pid_t p, bool *found)
{
  size_t lo = 0, hi = s->n;
  while (lo < hi)
    {
      size_t mid = (lo + hi) / 2;
      if (s->v[mid] < p)
        lo = mid + 1;
      else
        hi = mid;
    }
  *found = lo < s->n && s->v[lo] == p;
  return lo;
}

static bool
pidset_has (const struct pidset *s, pid_t p)
{
  bool found;
  pidset_pos (s, p, &found);
  return found;
}

static void
pidset_add (struct pidset *s, pid_t p)
{
  bool found;
  size_t i = pidset_pos (s, p, &found);
  if (found)
    return;
  if (s->n == s->cap)
    {
      s->cap = s->cap ? s->cap * 2 : 64;
      s->v = xrealloc (s->v, s->cap * sizeof *s->v);
    }
  memmove (s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
  s->v[i] = p;
  s->n++;
}

static void
pidset_del (struct pidset *s, pid_t p)
{
  bool found;
  size_t i = pidset_pos (s, p, &found);
  if (!found)
    return;
  memmove (s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
  s->n--;
}

void
mon_audit_put (struct mon *m, struct audit_rec *r)
{
  asbx_err_t e = NULL;
  /* nowhere to report a failing write from a detached process: the record is lost, the
   * enforcement goes on (disk full must not stop a kill) */
  if (audit_rec_write (r, m->audit_fd, &e) < 0)
    asbx_error_free (&e);
}

/* ---- process events ---- */

static bool
in_container_cgroup (struct mon *m, pid_t pid)
{
  char path[64], *line = NULL;
  size_t cap = 0;
  bool found = false;
  snprintf (path, sizeof path, "/proc/%d/cgroup", (int) pid);
  cleanup_fclose FILE *f = fopen (path, "re");
  if (!f || !m->cg_paths)
    return false;
  while (!found && getline (&line, &cap, f) > 0)
    {
      char *p = strchr (line, ':');
      p = p ? strchr (p + 1, ':') : NULL;
      if (!p)
        continue;
      p++;
      p[strcspn (p, "\n")] = '\0';
      for (char **c = m->cg_paths; *c && !found; c++)
        {
          size_t l = strlen (*c);
          found = strncmp (p, *c, l) == 0 && (p[l] == '\0' || p[l] == '/');
        }
    }
  free (line);
  return found;
}

/* denials.c's membership test: a process of the container (set, init, or its cgroup) */
bool
mon_den_member (pid_t pid, void *data)
{
  struct mon *m = data;
  return pid == m->o->init_pid || pidset_has (&m->procs, pid) || in_container_cgroup (m, pid);
}

/* arg_start and arg_end (fields 48, 49 of /proc/PID/stat): the argv's real size in bytes, or -1 */
static int64_t
argv_bytes (pid_t pid, char *comm, size_t commlen)
{
  char buf[2048];
  if (read_proc_small (pid, "stat", buf, sizeof buf) < 0)
    return -1;
  char *open_paren = strchr (buf, '('), *p = strrchr (buf, ')'); /* comm may hold spaces and ')' */
  if (!open_paren || !p)
    return -1;
  snprintf (comm, commlen, "%.*s", (int) (p - open_paren - 1), open_paren + 1);
  unsigned long long v[2];
  int field = 2;
  for (; *p; p++)
    if (*p == ' ' && ++field == 48)
      return sscanf (p + 1, "%llu %llu", &v[0], &v[1]) == 2 && v[1] >= v[0] ? (int64_t) (v[1] - v[0]) : -1;
  return -1;
}

/* /proc/PID/cmdline into buf (cap bytes, NUL-terminated); bytes read (at most cap - 1), 0 when
 * it could not be read */
static size_t
read_cmdline (pid_t pid, char *buf, size_t cap)
{
  char path[64];
  snprintf (path, sizeof path, "/proc/%d/cmdline", (int) pid);
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t len = fd < 0 ? -1 : read (fd, buf, cap - 1);
  if (len < 0)
    len = 0;
  buf[len] = '\0';
  return (size_t) len;
}

static bool
spacetab (char c)
{
  return c == ' ' || c == '\t';
}

/* Parse a #! line as fs/binfmt_script.c does (buf: the file's first n <= 256 bytes, zero-filled
 * to 257): *interp and *arg (NULL: none) point into buf, which is cut in place. false: not a
 * script the kernel would run (no "#!", no interpreter, the interpreter cut by the 256 bytes). */
static bool
shebang_parse (char *buf, size_t n, const char **interp, const char **arg)
{
  const size_t cap = 256; /* BINPRM_BUF_SIZE */
  char *end = NULL, *last = buf + cap - 1;
  if (n < 2 || buf[0] != '#' || buf[1] != '!')
    return false;
  for (char *c = buf; c < buf + cap && *c; c++)
    if (*c == '\n')
      {
        end = c;
        break;
      }
  if (!end)
    {
      /* no newline in the buffer: the interpreter's name must end before the buffer does */
      char *c = buf + 2;
      while (c < last && spacetab (*c))
        c++;
      while (c < last && *c && !spacetab (*c))
        c++;
      if (c >= last)
        return false;
      end = last;
    }
  while (end > buf + 2 && spacetab (end[-1]))
    end--;
  char *name = buf + 2;
  while (name < end && spacetab (*name))
    name++;
  if (name >= end || !*name)
    return false;
  char *sep = name;
  while (sep < end && *sep && !spacetab (*sep))
    sep++;
  *arg = NULL;
  if (sep < end && *sep)
    {
      char *a = sep;
      while (a < end && spacetab (*a))
        a++;
      if (a < end)
        *arg = a;
    }
  *end = '\0';
  *sep = '\0';
  *interp = name;
  return true;
}

/* The #! line of the file `path` names for process pid (through its root, or its cwd for a
 * relative name, never leaving that directory: a relative name reaching above the cwd is not
 * followed), parsed into buf (257 bytes). Only a regular file is opened for reading (looked up
 * O_PATH, checked, reopened through its fd). false: unreadable, not a regular file, no #! line. */
static bool
script_shebang (pid_t pid, const char *path, char *buf, const char **interp, const char **arg)
{
  char dir[64];
  bool abs = path[0] == '/';
  struct stat st;
  snprintf (dir, sizeof dir, "/proc/%d/%s", (int) pid, abs ? "root" : "cwd");
  cleanup_close int dfd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || !path[0])
    return false;
  uint64_t how = (abs ? RESOLVE_IN_ROOT : RESOLVE_BENEATH) | RESOLVE_NO_MAGICLINKS;
  /* O_PATH first: a device or FIFO the (hostile) name points to is never opened */
  cleanup_close int opath = ps_openat2 (dfd, path, O_PATH, 0, how);
  if (opath < 0 || fstat (opath, &st) < 0 || !S_ISREG (st.st_mode))
    return false;
  char self[64];
  snprintf (self, sizeof self, "/proc/self/fd/%d", opath);
  cleanup_close int fd = open (self, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return false;
  memset (buf, 0, 257);
  ssize_t n = pread (fd, buf, 256, 0);
  return n > 0 && shebang_parse (buf, (size_t) n, interp, arg);
}

/* The new image's argv (cmdline, `len` bytes read, `more` when there was more) agrees with the
 * execve copy x: the same bytes, or - a script - exactly what binfmt_script makes of the copy
 * with the file's real #! line: [interp, (arg), filename, argv[1..]] (the line read through
 * the process's root; a file without one, unreadable, or a nested interpreter: no agreement).
 * Where either side was cut, only the common part is compared. */
static bool
argv_agrees (pid_t pid, const struct execrec *x, const char *cmd, size_t len, bool more)
{
  size_t cut = len < x->len ? len : x->len;
  if (len == x->len || ((more || x->truncated) && cut))
    if (memcmp (cmd, x->text, cut) == 0)
      return true;
  char line[257];
  const char *interp, *arg;
  if (!x->path[0] || !script_shebang (pid, x->path, line, &interp, &arg))
    return false;
  const char *rest = memchr (x->text, '\0', x->len); /* argv[1..] */
  size_t rl = rest ? x->len - (size_t) (rest + 1 - x->text) : 0;
  size_t il = strlen (interp) + 1, al = arg ? strlen (arg) + 1 : 0, pl = strlen (x->path) + 1;
  size_t el = il + al + pl + rl;
  cleanup_free char *e = xmalloc (el);
  memcpy (e, interp, il);
  if (arg)
    memcpy (e + il, arg, al);
  memcpy (e + il + al, x->path, pl);
  if (rl)
    memcpy (e + il + al + pl, rest + 1, rl);
  if (!more && !x->truncated)
    return len == el && memcmp (cmd, e, el) == 0;
  cut = len < el ? len : el;
  return cut && memcmp (cmd, e, cut) == 0;
}

/* argv strings of text (len bytes) into v (at most AUDIT_ARGV_ITEMS); the count; *rest: bytes
 * not split (more than AUDIT_ARGV_ITEMS strings) */
static size_t
split_argv (char *text, size_t len, char **v, bool *rest)
{
  size_t argc = 0, i = 0;
  for (; i < len && argc < AUDIT_ARGV_ITEMS; i += strlen (text + i) + 1)
    v[argc++] = text + i;
  *rest = i < len;
  return argc;
}

/* The exec record: path and argv as /proc shows them right after the exec event, capped
 * (AUDIT_ARGV_BYTES of text, AUDIT_ARGV_ITEMS arguments; argvBytes and argvTruncated tell the
 * original size). A process already gone by then (it exited at once): its zombie's comm (the
 * executable's name, 15 bytes) stands for the path and argv is null with argvLost - never a
 * silent []. With the execve stash (monitor/execrec.h) argv is the one passed to execve
 * (argvSource "execve"; the process cannot rewrite it), else /proc's (argvSource "proc").
 * With the stash, the new image's cmdline is read once as well: a sibling thread (or CLONE_VM
 * process) that rewrote argv between our copy and the kernel's, or the new image rewriting its
 * own, shows as argvMismatch with argvAtExec (issue 14 §4: a forgery must win both races). */
static void
audit_exec (struct mon *m, pid_t pid)
{
  char path[64], exe[1024], cmd[AUDIT_ARGV_BYTES + 2], now[AUDIT_ARGV_BYTES + 2], comm[64] = "";
  char *argv[AUDIT_ARGV_ITEMS] = { NULL }, *argv2[AUDIT_ARGV_ITEMS] = { NULL };
  size_t argc = 0, argc2 = 0, nlen = 0;
  cleanup_free struct execrec *x = xmalloc0 (sizeof *x);
  bool stashed = execrec_take (pid, x);
  bool more, nmore = false, mismatch = false, rest = false, rest2 = false;
  ssize_t len;

  /* cmdline first, then exe: a process that exits at once is gone within microseconds */
  nlen = read_cmdline (pid, now, AUDIT_ARGV_BYTES + 2);
  nmore = nlen > AUDIT_ARGV_BYTES; /* there is more than we keep */
  if (nmore)
    nlen = AUDIT_ARGV_BYTES;
  now[nlen] = '\0';
  if (stashed)
    {
      len = (ssize_t) x->len;
      more = x->truncated;
      memcpy (cmd, x->text, x->len);
      /* nothing read: the image is gone already (a quick exit), nothing to compare */
      mismatch = nlen > 0 && !argv_agrees (pid, x, now, nlen, nmore);
    }
  else
    {
      len = (ssize_t) nlen;
      more = nmore;
      memcpy (cmd, now, nlen);
    }
  cmd[len] = '\0';
  int64_t total = argv_bytes (pid, comm, sizeof comm); /* 0 once the process lost its memory */
  argc = split_argv (cmd, (size_t) len, argv, &rest);
  if (mismatch)
    argc2 = split_argv (now, nlen, argv2, &rest2);
  snprintf (path, sizeof path, "/proc/%d/exe", (int) pid);
  ssize_t n = readlink (path, exe, sizeof exe - 1);
  if (n >= 0)
    exe[n] = '\0';
  struct audit_rec *r = audit_rec_new (m->o->id, "exec");
  audit_rec_int (r, "pid", pid);
  const char *fallback = stashed && x->path[0] ? x->path : argc ? argv[0] : comm[0] ? comm : NULL;
  audit_rec_str (r, "path", n >= 0 ? exe : fallback);
  if (argc)
    audit_rec_strv (r, "argv", argv, argc);
  else
    {
      audit_rec_str (r, "argv", NULL);
      audit_rec_bool (r, "argvLost", 1); /* gone before /proc could be read */
    }
  audit_rec_str (r, "argvSource", stashed ? "execve" : "proc");
  if (stashed && x->ambiguous)
    audit_rec_bool (r, "argvAmbiguous", 1); /* two threads called execve: the latest is shown */
  if (mismatch)
    {
      audit_rec_bool (r, "argvMismatch", 1);
      audit_rec_strv (r, "argvAtExec", argv2, argc2); /* what the new image's cmdline shows */
    }
  if (stashed && !more)
    total = len; /* the whole execve argv (the new image's, in stat, differs for a script) */
  if (total > 0 && total >= len)
    audit_rec_int (r, "argvBytes", total); /* absent: unknown (the process was already gone) */
  if (more || (total > 0 && total > len) || rest)
    audit_rec_bool (r, "argvTruncated", 1);
  mon_audit_put (m, r);
}

static void
on_event (const struct proc_ev *ev, void *data)
{
  struct mon *m = data;

  switch (ev->type)
    {
    case PROC_EV_FORK:
      if (ev->pid == ev->tgid && pidset_has (&m->procs, ev->parent_tgid))
        pidset_add (&m->procs, ev->tgid);
      break;
    case PROC_EV_EXEC:
      if (!pidset_has (&m->procs, ev->tgid))
        {
          if (!in_container_cgroup (m, ev->tgid))
            break;
          pidset_add (&m->procs, ev->tgid);
        }
      if (ev->tgid == m->o->init_pid && !m->started)
        {
          /* the init execs the user's process when `start` releases it */
          m->started = true;
          struct audit_rec *r = audit_rec_new (m->o->id, "lifecycle");
          audit_rec_str (r, "state", "started");
          audit_rec_int (r, "pid", ev->tgid);
          mon_audit_put (m, r);
        }
      execfail_note_exec (ev->tgid, ev->ts_ns);
      if (m->plan->audit_events & POLICY_AUDIT_EXEC)
        audit_exec (m, ev->tgid);
      break;
    case PROC_EV_EXIT:
      if (ev->pid != ev->tgid)
        {
          /* a thread; the process exit is the leader's event. Its open run of execve
           * attempts ends here (monitor/execfail.h) */
          if (pidset_has (&m->procs, ev->tgid))
            execfail_note_exit (ev->pid, ev->tgid, ev->ts_ns, 0, false);
          break;
        }
      if (ev->tgid == m->o->init_pid || pidset_has (&m->procs, ev->tgid))
        {
          denials_note_exit (m->den, ev->tgid); /* its audit records may come after this event */
          execrec_forget (ev->tgid);            /* the stash of a failed execve */
        }
      if (ev->tgid == m->o->init_pid)
        {
          m->have_status = true;
          m->status = ev->exit_code;
          execfail_note_exit (ev->tgid, ev->tgid, ev->ts_ns, ev->exit_code, false); /* its own runs */
          break;
        }
      if (!pidset_has (&m->procs, ev->tgid))
        break;
      pidset_del (&m->procs, ev->tgid);
      /* processes our own kill ended are not failures of the agent */
      execfail_note_exit (ev->tgid, ev->tgid, ev->ts_ns, ev->exit_code, !mon_reason_get (m));
      break;
    }
}

/* querier_members_fn for the DNS stub: the member set, sorted ascending (newest pids last) */
size_t
mon_members (void *data, const pid_t **v)
{
  struct mon *m = data;
  *v = m->procs.v;
  return m->procs.n;
}

/* Rebuild the member set from the cgroup (after lost events, and at start). */
void
mon_procs_resync (struct mon *m)
{
  cleanup_free pid_t *pids = NULL;
  size_t n = 0;
  asbx_err_t e = NULL;
  pidset_add (&m->procs, m->o->init_pid);
  if (!m->o->cgroup_path)
    return;
  if (cgroup_pids (m->o->cgroup_path, &pids, &n, &e) < 0)
    {
      asbx_error_free (&e);
      return;
    }
  for (size_t i = 0; i < n; i++)
    pidset_add (&m->procs, pids[i]);
}

static void
drain_connector (void *data)
{
  struct mon *m = data;
  asbx_err_t e = NULL;
  if (m->conn < 0)
    return;
  int r = proc_events_drain (m->conn, on_event, m, &e);
  if (r < 0)
    asbx_error_free (&e);
  if (r == 1)
    {
      struct audit_rec *a = audit_rec_new (m->o->id, "limit");
      audit_rec_str (a, "warning", "process events lost (connector queue overflow); counts resynchronised");
      mon_audit_put (m, a);
      mon_procs_resync (m);
    }
}

/* The connector's events, then the execve attempts they settle (monitor/execfail.h): failures
 * against limits.failedExecs. */
void
mon_drain_events (struct mon *m)
{
  uint64_t n = execfail_settle (drain_connector, m);
  if (!n)
    return;
  m->failed += n;
  if (m->plan->failed_execs && m->failed >= m->plan->failed_execs)
    mon_limit_kill (m, "failed-execs", "failedExecs", m->plan->failed_execs, m->failed);
}
