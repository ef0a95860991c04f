/* audit.c - the audit log writer: JSON lines built with yajl_gen, one write(2) per record.
 *
 * Mechanism: O_APPEND makes the kernel place each write at the end of the file atomically with
 * respect to other appenders (write(2) "If the file was open(2)ed with O_APPEND, the file offset
 * is first set to the end of the file before writing ... as an atomic step"), so the monitor, its
 * guard and the CLI may share one log without a lock. Records are built whole in memory first.
 * Threat model: values come from the container (argv from /proc/PID/cmdline, paths): they are
 * untrusted bytes, so they are sanitised to valid UTF-8 and yajl escapes quotes, backslashes and
 * control characters - a container cannot forge a second record by embedding "\n{...}". The log
 * file is opened O_NOFOLLOW in a root-owned 0700 directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "policy/policy.h"
#include "monitor/audit.h"

struct audit_rec
{
  yajl_gen gen;
  bool closed;
  char event[16]; /* the record's kind, for the sink's quota */
  char *line;     /* finished line with '\n' (after audit_rec_line) */
  size_t len;
};

void
audit_timestamp (char *buf, size_t len)
{
  struct timespec ts;
  struct tm tm;
  clock_gettime (CLOCK_REALTIME, &ts);
  gmtime_r (&ts.tv_sec, &tm);
  snprintf (buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
            tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF), or 0 when the byte at s does not start one. */
static size_t
utf8_seq_len (const unsigned char *s, size_t n)
{
  unsigned char c = s[0];
  size_t len;
  unsigned lo = 0x80, hi = 0xBF;

  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    {
      len = 3;
      if (c == 0xE0)
        lo = 0xA0; /* overlong */
      if (c == 0xED)
        hi = 0x9F; /* surrogates */
    }
  else if (c >= 0xF0 && c <= 0xF4)
    {
      len = 4;
      if (c == 0xF0)
        lo = 0x90;
      if (c == 0xF4)
        hi = 0x8F;
    }
  else
    return 0;
  if (n < len || s[1] < lo || s[1] > hi)
    return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF)
      return 0;
  return len;
}

/* Copy of s[0..n) with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD. */
static char *
utf8_sanitize (const char *s, size_t n, size_t *out_len)
{
  char *out = xmalloc (n * 3 + 1);
  size_t o = 0;
  for (size_t i = 0; i < n;)
    {
      size_t l = utf8_seq_len ((const unsigned char *) s + i, n - i);
      if (l == 0)
        {
          memcpy (out + o, "\xEF\xBF\xBD", 3);
          o += 3;
          i++;
          continue;
        }
      memcpy (out + o, s + i, l);
      o += l;
      i += l;
    }
  out[o] = '\0';
  *out_len = o;
  return out;
}

static void
gen_key (yajl_gen g, const char *key)
{
  yajl_gen_string (g, (const unsigned char *) key, strlen (key));
}

static void
gen_str (yajl_gen g, const char *val)
{
  size_t len;
  cleanup_free char *clean = NULL;
  if (!val)
    {
      yajl_gen_null (g);
      return;
    }
  /* capped: a value from the container cannot make one record huge (issue 14 §4) */
  clean = utf8_sanitize (val, strnlen (val, AUDIT_STR_BYTES), &len);
  yajl_gen_string (g, (const unsigned char *) clean, len);
}

struct audit_rec *
audit_rec_new (const char *container, const char *event)
{
  struct audit_rec *r = xmalloc0 (sizeof *r);
  char ts[40];

  /* input is sanitised first; validation stays on as a second line of defence */
  r->gen = json_gen_new (JSON_GEN_VALIDATE_UTF8);
  audit_timestamp (ts, sizeof ts);
  snprintf (r->event, sizeof r->event, "%s", event);
  yajl_gen_map_open (r->gen);
  gen_key (r->gen, "ts");
  gen_str (r->gen, ts);
  gen_key (r->gen, "container");
  gen_str (r->gen, container);
  gen_key (r->gen, "event");
  gen_str (r->gen, event);
  return r;
}

void
audit_rec_str (struct audit_rec *r, const char *key, const char *val)
{
  if (r->closed)
    return;
  gen_key (r->gen, key);
  gen_str (r->gen, val);
}

void
audit_rec_int (struct audit_rec *r, const char *key, int64_t val)
{
  if (r->closed)
    return;
  gen_key (r->gen, key);
  yajl_gen_integer (r->gen, (long long) val);
}

void
audit_rec_bool (struct audit_rec *r, const char *key, int val)
{
  if (r->closed)
    return;
  gen_key (r->gen, key);
  yajl_gen_bool (r->gen, val != 0);
}

void
audit_rec_counts (struct audit_rec *r, const char *key, const char *const *names, const uint64_t *v, size_t n)
{
  if (r->closed)
    return;
  gen_key (r->gen, key);
  yajl_gen_map_open (r->gen);
  for (size_t i = 0; i < n; i++)
    {
      gen_key (r->gen, names[i]);
      yajl_gen_integer (r->gen, (long long) v[i]);
    }
  yajl_gen_map_close (r->gen);
}

void
audit_rec_strv (struct audit_rec *r, const char *key, char *const *v, size_t n)
{
  if (r->closed)
    return;
  gen_key (r->gen, key);
  yajl_gen_array_open (r->gen);
  for (size_t i = 0; i < n; i++)
    gen_str (r->gen, v[i]);
  yajl_gen_array_close (r->gen);
}

void
audit_rec_list_open (struct audit_rec *r, const char *key)
{
  if (r->closed)
    return;
  gen_key (r->gen, key);
  yajl_gen_array_open (r->gen);
}

void
audit_rec_item_open (struct audit_rec *r)
{
  if (!r->closed)
    yajl_gen_map_open (r->gen);
}

void
audit_rec_item_close (struct audit_rec *r)
{
  if (!r->closed)
    yajl_gen_map_close (r->gen);
}

void
audit_rec_list_close (struct audit_rec *r)
{
  if (!r->closed)
    yajl_gen_array_close (r->gen);
}

const char *
audit_rec_line (struct audit_rec *r, size_t *len)
{
  if (!r->closed)
    {
      yajl_gen_map_close (r->gen);
      r->line = json_gen_finish (r->gen, true, &r->len);
      r->gen = NULL;
      r->closed = true;
    }
  if (len)
    *len = r->len;
  return r->line;
}

void
audit_rec_free (struct audit_rec *r)
{
  if (!r)
    return;
  if (r->gen)
    yajl_gen_free (r->gen);
  free (r->line);
  free (r);
}

/* ---- the sink: quota, reserved space, a full disk (issue 14 §4) ---- */

/* kinds counted apart in `suppressed`; the last slot takes any other non-reserved kind */
static const char *const sink_kinds[] = { "exec", "dns", "network", "denial", "approval", "other" };
#define SINK_KINDS (sizeof sink_kinds / sizeof sink_kinds[0])

/* The quota's buckets: each has the whole rate and burst of its own, and a guaranteed share of
 * the byte quota, so a flood of one kind (execs) cannot suppress a record of another (a network
 * denial that follows) - issue 14 §4. */
enum
{
  B_EXEC,
  B_NET, /* network, dns */
  B_DENIAL,
  B_OTHER, /* approval and anything else not reserved */
  B_N
};
#define BUCKET_SHARE_DIV 8 /* each bucket's bytes kept for it: bytes_max / 8 */

static struct
{
  pthread_mutex_t mu;
  int fd; /* -1: no sink, every fd is written plainly */
  struct audit_sink_opts o;
  uint64_t bytes; /* bytes of non-reserved records written */
  struct
  {
    double tokens;    /* the rate's bucket */
    uint64_t last_ns; /* its last refill */
    uint64_t bytes;   /* bytes written of its kinds */
  } b[B_N];
  uint64_t last_report_ns;             /* the last suppression report */
  bool full;                           /* the file system could not take the reserve any more */
  bool full_reported;                  /* the on_full callback ran */
  uint64_t suppressed[SINK_KINDS + 1]; /* + "lost": reserved records the disk refused */
  uint64_t reported_total;             /* the sum at the last report */
} sink = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static bool
kind_reserved (const char *event)
{
  return strcmp (event, "lifecycle") == 0 || strcmp (event, "policy") == 0 || strcmp (event, "limit") == 0;
}

static size_t
kind_index (const char *event)
{
  for (size_t i = 0; i + 1 < SINK_KINDS; i++)
    if (strcmp (sink_kinds[i], event) == 0)
      return i;
  return SINK_KINDS - 1;
}

static size_t
kind_bucket (const char *event)
{
  if (strcmp (event, "exec") == 0)
    return B_EXEC;
  if (strcmp (event, "network") == 0 || strcmp (event, "dns") == 0)
    return B_NET;
  return strcmp (event, "denial") == 0 ? B_DENIAL : B_OTHER;
}

/* the bytes the other buckets have not used of their guaranteed shares */
static uint64_t
kept_for_others (size_t bk)
{
  uint64_t share = sink.o.bytes_max / BUCKET_SHARE_DIV, kept = 0;
  for (size_t i = 0; i < B_N; i++)
    if (i != bk && sink.b[i].bytes < share)
      kept += share - sink.b[i].bytes;
  return kept;
}

static uint64_t
mono_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* One write of the whole line. A short write (disk full mid-record) is undone: the file is cut
 * back to where this record began, so the log's last line is always whole. 0 / -1 + errno. */
static int
write_line (int fd, const char *line, size_t len)
{
  ssize_t n;
  do
    n = write (fd, line, len);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t) len)
    return 0;
  int e = n < 0 ? errno : ENOSPC;
  struct stat st;
  if (n > 0 && fstat (fd, &st) == 0 && st.st_size >= n && ftruncate (fd, st.st_size - n) < 0)
    e = errno; /* the cut line stays: nothing else can be done about it */
  errno = e;
  return -1;
}

/* Keep room for the reserved records after a record of len bytes: preallocated blocks past the
 * end (FALLOC_FL_KEEP_SIZE, so the file does not grow), or, where fallocate is not supported,
 * enough free blocks. false when the file system cannot give it. */
static bool
reserve_ok (int fd, size_t len)
{
  struct stat st;
  if (fstat (fd, &st) < 0)
    return false;
  /* blocks already allocated past the end (an earlier reserve) cover it: no syscall more */
  if ((uint64_t) st.st_blocks * 512u >= (uint64_t) st.st_size + len + AUDIT_RESERVE_BYTES)
    return true;
  if (fallocate (fd, FALLOC_FL_KEEP_SIZE, st.st_size, (off_t) (len + AUDIT_RESERVE_BYTES)) == 0)
    return true;
  if (errno != EOPNOTSUPP && errno != ENOSYS)
    return false;
  struct statvfs vf;
  return fstatvfs (fd, &vf) == 0 && (uint64_t) vf.f_bavail * vf.f_frsize >= len + AUDIT_RESERVE_BYTES;
}

static void
sink_counts_add (struct audit_rec *r)
{
  static const char *names[SINK_KINDS + 1];
  for (size_t i = 0; i < SINK_KINDS; i++)
    names[i] = sink_kinds[i];
  names[SINK_KINDS] = "lost";
  audit_rec_counts (r, "suppressed", names, sink.suppressed, SINK_KINDS + 1);
}

static uint64_t
sink_total (void)
{
  uint64_t t = 0;
  for (size_t i = 0; i <= SINK_KINDS; i++)
    t += sink.suppressed[i];
  return t;
}

/* under sink.mu: a `limit` record with the counters, at most once a second and only when they
 * moved. Written in the reserved way (no quota). */
static void
sink_report (const char *container, uint64_t now, bool force)
{
  uint64_t total = sink_total ();
  if (total == sink.reported_total || (!force && now - sink.last_report_ns < 1000000000ull))
    return;
  sink.last_report_ns = now;
  sink.reported_total = total;
  struct audit_rec *r = audit_rec_new (container, "limit");
  audit_rec_str (r, "limit", "audit");
  audit_rec_str (r, "action", sink.full ? "full" : "suppress");
  sink_counts_add (r);
  size_t len;
  const char *line = audit_rec_line (r, &len);
  if (write_line (sink.fd, line, len) < 0)
    sink.suppressed[SINK_KINDS]++;
  audit_rec_free (r);
}

void
audit_sink_setup (int fd, const struct audit_sink_opts *o)
{
  pthread_mutex_lock (&sink.mu);
  sink.fd = fd;
  sink.o = *o;
  for (size_t i = 0; i < B_N; i++)
    {
      sink.b[i].tokens = o->burst;
      sink.b[i].last_ns = mono_ns ();
    }
  pthread_mutex_unlock (&sink.mu);
  (void) reserve_ok (fd, 0);
}

void
audit_sink_counts (struct audit_rec *r)
{
  pthread_mutex_lock (&sink.mu);
  if (sink.fd >= 0)
    sink_counts_add (r);
  pthread_mutex_unlock (&sink.mu);
}

void
audit_sink_suppressed_add (const char *event, uint64_t n)
{
  pthread_mutex_lock (&sink.mu);
  if (sink.fd >= 0 && n)
    {
      sink.suppressed[kind_index (event)] += n;
      sink_report (sink.o.container, mono_ns (), false);
    }
  pthread_mutex_unlock (&sink.mu);
}

/* the sink's decision for a non-reserved record: true = write it */
static bool
sink_admit (const struct audit_rec *r, size_t len, uint64_t now, bool *call_full)
{
  size_t k = kind_index (r->event), bk = kind_bucket (r->event);
  double *tokens = &sink.b[bk].tokens;
  *tokens += (double) (now - sink.b[bk].last_ns) / 1e9 * sink.o.rate;
  if (*tokens > sink.o.burst)
    *tokens = sink.o.burst;
  sink.b[bk].last_ns = now;
  if (sink.full || *tokens < 1 || sink.bytes + len + kept_for_others (bk) > sink.o.bytes_max)
    {
      sink.suppressed[k]++;
      return false;
    }
  if (!reserve_ok (sink.fd, len))
    {
      sink.full = true;
      sink.suppressed[k]++;
      *call_full = !sink.full_reported;
      sink.full_reported = true;
      return false;
    }
  *tokens -= 1;
  return true;
}

int
audit_rec_write (struct audit_rec *r, int fd, asbx_err_t *err)
{
  size_t len;
  const char *line = audit_rec_line (r, &len);
  bool call_full = false;
  void (*on_full) (void *) = NULL;
  void *data = NULL;
  int ret = 0;

  if (fd != sink.fd)
    {
      /* one write: never retried in pieces, which could interleave with another writer's record */
      ret = write_line (fd, line, len) < 0 ? asbx_error (err, errno, "write audit record") : 0;
      audit_rec_free (r);
      return ret;
    }
  pthread_mutex_lock (&sink.mu);
  uint64_t now = mono_ns ();
  bool reserved = kind_reserved (r->event);
  if (reserved)
    sink_report (sink.o.container, now, true); /* the counters before the lifecycle/limit record they explain */
  if (reserved || sink_admit (r, len, now, &call_full))
    {
      if (write_line (fd, line, len) < 0)
        {
          int e = errno;
          sink.suppressed[reserved ? SINK_KINDS : kind_index (r->event)]++;
          if (!sink.full && (e == ENOSPC || e == EDQUOT))
            {
              sink.full = true;
              call_full = !sink.full_reported;
              sink.full_reported = true;
            }
          ret = asbx_error (err, e, "write audit record");
        }
      else if (!reserved)
        {
          sink.bytes += len;
          sink.b[kind_bucket (r->event)].bytes += len;
        }
    }
  if (!reserved)
    sink_report (sink.o.container, now, false);
  on_full = call_full ? sink.o.on_full : NULL;
  data = sink.o.data;
  pthread_mutex_unlock (&sink.mu);
  audit_rec_free (r);
  if (on_full)
    on_full (data);
  return ret;
}

char *
audit_dir_resolve (const char *flag, const char *config_path, asbx_err_t *err)
{
  /* no ceiling, no request: the loader only reads the host config (and its defaultProfile)
   * and fills audit_dir with the precedence flag > auditDir > default */
  struct policy_inputs in = { .config_path = config_path, .audit_dir_flag = flag };
  struct policy_plan *p;
  char *dir;

  if (flag)
    return xstrdup (flag);
  p = policy_resolve (&in, err);
  if (!p)
    return NULL;
  dir = steal_ptr (&p->audit_dir);
  policy_plan_free (p);
  return dir ? dir : xstrdup (AUDIT_DEFAULT_DIR);
}

char *
audit_path (const char *dir, const char *id)
{
  return xasprintf ("%s/%s.jsonl", dir ? dir : AUDIT_DEFAULT_DIR, id);
}

/* mkdir -p with mode 0700 for the components we create (existing ones are left as they are). */
static int
mkdir_parents (const char *dir, asbx_err_t *err)
{
  cleanup_free char *p = xstrdup (dir);
  for (char *s = p + 1;; s++)
    {
      if (*s != '/' && *s != '\0')
        continue;
      char saved = *s;
      *s = '\0';
      if (mkdir (p, 0700) < 0 && errno != EEXIST)
        return asbx_error (err, errno, "create audit directory `%s`", p);
      *s = saved;
      if (saved == '\0')
        break;
    }
  return 0;
}

int
audit_open (const char *dir, const char *id, asbx_err_t *err)
{
  const char *d = dir ? dir : AUDIT_DEFAULT_DIR;
  cleanup_close int dfd = -1;

  if (d[0] != '/')
    return asbx_error (err, EINVAL, "audit directory `%s` must be an absolute path", d);
  if (!id || !*id || strchr (id, '/') || strcmp (id, ".") == 0 || strcmp (id, "..") == 0)
    return asbx_error (err, EINVAL, "audit log: invalid container id");
  if (mkdir_parents (d, err) < 0)
    return -1;
  dfd = open (d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return asbx_error (err, errno, "open audit directory `%s`", d);
  cleanup_free char *name = xasprintf ("%s.jsonl", id);
  int fd = openat (dfd, name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0600);
  if (fd < 0)
    return asbx_error (err, errno, "open audit log `%s/%s`", d, name);
  struct stat st;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      return asbx_error (err, EINVAL, "audit log `%s/%s` is not a regular file", d, name);
    }
  return fd;
}
