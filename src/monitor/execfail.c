/* execfail.c - failed execve(2) calls inside one process (see execfail.h for the mechanism and
 * the rule).
 * Threat model: the container is hostile and chooses its argv and filenames: they only ever
 * become hashes here. Its thread count is bounded by the pids limit; the tables are capped
 * anyway (TABLE_MAX threads with an open run, QUEUE_MAX queued attempts) and what does not fit
 * counts as a failure - a flood cannot buy uncounted attempts.
 * Threads: execfail_attempt runs on the seccomp supervisor thread; everything else on the
 * monitor's loop. They share only the queue, under its lock. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "monitor/execfail.h"

#define QUEUE_MAX 65536
#define TABLE_MAX 4096

enum kind
{
  K_ATTEMPT,
  K_EXEC,
  K_EXIT,
};

struct item
{
  uint64_t ts, seq; /* seq: the order received, for equal stamps */
  enum kind kind;
  pid_t tid, tgid;
  uint64_t cmd, file;
  int exit_code;
  bool counted;
};

struct items
{
  struct item *v;
  size_t n, cap;
};

/* supervisor -> monitor */
static struct
{
  pthread_mutex_t lock;
  struct items q;
  uint64_t dropped; /* attempts past QUEUE_MAX: failures */
  int efd;
  bool efd_tried;
} queue = { .lock = PTHREAD_MUTEX_INITIALIZER, .efd = -1 };

/* monitor only: items waiting for their horizon, the open runs, the processes already counted */
static struct items held;
static uint64_t next_seq;

struct run
{
  pid_t tid, tgid;
  uint64_t cmd;
  uint64_t first; /* the stamp of its first attempt */
  bool counted;   /* aged (EXECFAIL_RUN_AGE_NS) and counted already */
  size_t n;
  uint64_t files[EXECFAIL_RUN_MAX];
};

static struct run *runs[TABLE_MAX];
static size_t nruns;
static pid_t marked[TABLE_MAX]; /* processes with a counted execve failure */
static size_t nmarked;

uint64_t
execfail_hash (uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

static uint64_t
mono_ns (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t); /* the connector's ktime_get_ns() */
  return (uint64_t) t.tv_sec * 1000000000ull + (uint64_t) t.tv_nsec;
}

static void
items_push (struct items *s, const struct item *it)
{
  if (s->n == s->cap)
    {
      s->cap = s->cap ? s->cap * 2 : 256;
      s->v = xrealloc (s->v, s->cap * sizeof *s->v);
    }
  s->v[s->n++] = *it;
}

/* the eventfd, made once (called under queue.lock) */
static int
efd_locked (void)
{
  if (!queue.efd_tried)
    {
      queue.efd_tried = true;
      queue.efd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    }
  return queue.efd;
}

int
execfail_fd (void)
{
  pthread_mutex_lock (&queue.lock);
  int fd = efd_locked ();
  pthread_mutex_unlock (&queue.lock);
  return fd;
}

void
execfail_attempt (pid_t tid, pid_t tgid, uint64_t cmd, uint64_t file)
{
  struct item it = { .kind = K_ATTEMPT, .tid = tid, .tgid = tgid, .cmd = cmd, .file = file };
  uint64_t one = 1;
  pthread_mutex_lock (&queue.lock);
  /* stamped under the lock: every attempt stamped before a settle's horizon is queued by then */
  it.ts = mono_ns ();
  if (queue.q.n < QUEUE_MAX)
    items_push (&queue.q, &it);
  else
    queue.dropped++;
  int fd = efd_locked ();
  pthread_mutex_unlock (&queue.lock);
  if (fd >= 0 && write (fd, &one, sizeof one) < 0 && errno != EAGAIN)
    return; /* the loop still settles at the connector's next event */
}

void
execfail_note_exec (pid_t tgid, uint64_t ts_ns)
{
  struct item it = { .ts = ts_ns, .kind = K_EXEC, .tid = tgid, .tgid = tgid };
  it.seq = ++next_seq;
  items_push (&held, &it);
}

void
execfail_note_exit (pid_t tid, pid_t tgid, uint64_t ts_ns, int exit_code, bool counted)
{
  struct item it = {
    .ts = ts_ns, .kind = K_EXIT, .tid = tid, .tgid = tgid, .exit_code = exit_code, .counted = counted
  };
  it.seq = ++next_seq;
  items_push (&held, &it);
}

/* ---- deciding, in time order ---- */

static void
mark (pid_t tgid)
{
  for (size_t i = 0; i < nmarked; i++)
    if (marked[i] == tgid)
      return;
  if (nmarked < TABLE_MAX)
    marked[nmarked++] = tgid;
}

/* true when tgid was marked; unmarks it */
static bool
unmark (pid_t tgid)
{
  for (size_t i = 0; i < nmarked; i++)
    if (marked[i] == tgid)
      {
        marked[i] = marked[--nmarked];
        return true;
      }
  return false;
}

static void
run_drop (size_t i)
{
  free (runs[i]);
  runs[i] = runs[--nruns];
}

static uint64_t
on_attempt (const struct item *it)
{
  struct run *r = NULL;
  for (size_t i = 0; i < nruns && !r; i++)
    if (runs[i]->tid == it->tid)
      r = runs[i];
  if (!r)
    {
      if (nruns == TABLE_MAX)
        return 1; /* cannot follow it: fail closed */
      r = runs[nruns++] = xmalloc0 (sizeof *r);
      r->tid = it->tid;
    }
  else
    {
      bool seen = false;
      for (size_t i = 0; i < r->n && !seen; i++)
        seen = r->files[i] == it->file;
      if (r->tgid == it->tgid && r->cmd == it->cmd && !seen && r->n < EXECFAIL_RUN_MAX)
        {
          r->files[r->n++] = it->file; /* the next directory of a PATH search */
          return 0;
        }
    }
  /* a new run; the previous one (if any) of this thread ended without an exec */
  uint64_t failed = r->n && !r->counted ? 1 : 0;
  if (r->n)
    mark (r->tgid);
  r->tgid = it->tgid;
  r->cmd = it->cmd;
  r->first = it->ts;
  r->counted = false;
  r->files[0] = it->file;
  r->n = 1;
  return failed;
}

static uint64_t
on_exec_or_exit (const struct item *it)
{
  uint64_t failed = 0;
  bool process = it->tid == it->tgid;
  for (size_t i = 0; i < nruns;)
    {
      struct run *r = runs[i];
      if (process ? r->tgid != it->tgid : r->tid != it->tid)
        {
          i++;
          continue;
        }
      if (it->kind == K_EXIT)
        {
          failed += r->counted ? 0 : 1; /* the run ended with its thread: no exec */
          mark (r->tgid);
        }
      run_drop (i);
    }
  if (it->kind == K_EXIT && process)
    {
      bool had = unmark (it->tgid);
      if (it->counted && it->exit_code != 0 && !had && !failed)
        failed++; /* exited non-zero; its failed execve calls, if any, were counted instead */
    }
  return failed;
}

static int
item_cmp (const void *a, const void *b)
{
  const struct item *x = a, *y = b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

uint64_t
execfail_settle (void (*drain) (void *), void *data)
{
  uint64_t failed, horizon, drained;
  struct items q;

  pthread_mutex_lock (&queue.lock);
  horizon = mono_ns ();
  q = queue.q;
  memset (&queue.q, 0, sizeof queue.q);
  failed = queue.dropped;
  queue.dropped = 0;
  if (queue.efd >= 0 && read (queue.efd, &drained, sizeof drained) < 0)
    drained = 0; /* EAGAIN: nothing was signalled */
  pthread_mutex_unlock (&queue.lock);
  for (size_t i = 0; i < q.n; i++)
    {
      q.v[i].seq = ++next_seq;
      items_push (&held, &q.v[i]);
    }
  free (q.v);
  drain (data); /* every connector event stamped before the horizon is queued by now */
  if (held.n)   /* qsort/memmove of a NULL array, even of 0 items, is undefined (UBSan) */
    qsort (held.v, held.n, sizeof *held.v, item_cmp);
  size_t i = 0;
  for (; i < held.n && held.v[i].ts < horizon; i++)
    failed += held.v[i].kind == K_ATTEMPT ? on_attempt (&held.v[i]) : on_exec_or_exit (&held.v[i]);
  if (i && held.n > i)
    memmove (held.v, held.v + i, (held.n - i) * sizeof *held.v);
  held.n -= i;
  /* a run still open this long was no PATH search (those end within milliseconds): it counts
   * now, whether or not its thread ever goes on (every exec event before the horizon is in) */
  for (size_t k = 0; k < nruns; k++)
    if (!runs[k]->counted && horizon - runs[k]->first >= EXECFAIL_RUN_AGE_NS)
      {
        runs[k]->counted = true;
        mark (runs[k]->tgid);
        failed++;
      }
  return failed;
}

int
execfail_timeout_ms (void)
{
  if (!nruns && !held.n)
    return -1;
  uint64_t now = mono_ns (), due = UINT64_MAX;
  for (size_t k = 0; k < nruns; k++)
    if (!runs[k]->counted && runs[k]->first + EXECFAIL_RUN_AGE_NS < due)
      due = runs[k]->first + EXECFAIL_RUN_AGE_NS;
  int ms = -1;
  if (due != UINT64_MAX)
    ms = due <= now ? 0 : (int) ((due - now) / 1000000u) + 1;
  if (held.n && (ms < 0 || ms > 10))
    ms = 10; /* items stamped after the last horizon: decide them soon */
  return ms;
}
