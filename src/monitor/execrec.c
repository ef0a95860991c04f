/* execrec.c - the execve(2)/execveat(2) stash of the exec audit records (see execrec.h).
 * Threat model: the caller is hostile and may be multi-threaded; its pointers and strings are
 * read once, bounded (AUDIT_ARGV_BYTES of text, AUDIT_ARGV_ITEMS arguments, page by page so an
 * unmapped page ends the read instead of failing it), and only ever become audit text (audit.c
 * sanitises it). A pid reused between the notification and our read: the notification id is
 * re-validated after the read, a stale one is dropped.
 * Why CONTINUE is acceptable here: this is a logging decision, not a security decision - what
 * the process may execute is Landlock's and allowExec's business, enforced by the kernel
 * whatever we answer. The remaining TOCTOU: the kernel copies filename and argv after our
 * answer, so a sibling thread (or a CLONE_VM process) sharing the caller's memory can rewrite
 * them between our read and the kernel's copy; the record then shows the argv passed at the
 * syscall's entry, not necessarily the one the new image got. A single-threaded caller (the
 * perl `$0` rewrite of issue 14 §4, any argv change made by the new image itself) cannot forge
 * the record any more. Fail closed: with the monitor gone the kernel answers ENOSYS to every
 * execve (no listener), as it does to connect. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "monitor/execfail.h"
#include "monitor/execrec.h"

/* processes between their execve and the exec event (a failed execve stays until the next one
 * or the exit); when full the oldest goes and that record falls back to /proc */
#define SLOTS 128

static struct
{
  pthread_mutex_t lock;
  struct slot
  {
    pid_t tgid, tid; /* tgid 0: free */
    uint64_t seq;
    struct execrec r;
  } v[SLOTS];
  uint64_t seq;
} stash = { .lock = PTHREAD_MUTEX_INITIALIZER };

bool
execrec_is_exec (const struct seccomp_notif *req)
{
  return req->data.arch == seccomp_arch_native () && (req->data.nr == SYS_execve || req->data.nr == SYS_execveat);
}

/* read up to n bytes at addr of pid, page by page; the bytes read (0 on the first fault) */
static size_t
rd (pid_t pid, uintptr_t addr, void *buf, size_t n)
{
  size_t done = 0;
  while (done < n)
    {
      size_t chunk = 4096 - ((addr + done) & 4095);
      if (chunk > n - done)
        chunk = n - done;
      struct iovec l = { .iov_base = (char *) buf + done, .iov_len = chunk };
      struct iovec r = { .iov_base = (void *) (addr + done), .iov_len = chunk };
      ssize_t k = process_vm_readv (pid, &l, 1, &r, 1, 0);
      if (k <= 0)
        break;
      done += (size_t) k;
      if ((size_t) k < chunk)
        break;
    }
  return done;
}

/* a NUL-terminated string at addr into buf (cap bytes with the NUL); its length, or -1 when it
 * did not fit or could not be read whole (buf then holds what was read, terminated) */
static ssize_t
rd_str (pid_t pid, uintptr_t addr, char *buf, size_t cap)
{
  size_t have = 0;
  while (have + 1 < cap)
    {
      size_t want = 4096 - ((addr + have) & 4095);
      if (want > cap - 1 - have)
        want = cap - 1 - have;
      size_t k = rd (pid, addr + have, buf + have, want);
      char *nul = memchr (buf + have, '\0', k);
      if (nul)
        return nul - buf;
      have += k;
      if (k < want)
        break;
    }
  buf[have] = '\0';
  return -1;
}

static pid_t
tgid_of (pid_t tid)
{
  char buf[512];
  if (read_proc_small (tid, "status", buf, sizeof buf) < 0)
    return -1;
  char *p = strstr (buf, "\nTgid:");
  return p ? (pid_t) strtol (p + 6, NULL, 10) : -1;
}

/* filename and argv of the call in req into *x */
static void
capture (const struct seccomp_notif *req, struct execrec *x)
{
  const bool at = req->data.nr == SYS_execveat;
  pid_t pid = (pid_t) req->pid;
  uint64_t ptrs[AUDIT_ARGV_ITEMS + 1];

  memset (x, 0, sizeof *x);
  if (rd_str (pid, (uintptr_t) req->data.args[at ? 1 : 0], x->path, sizeof x->path) < 0)
    x->truncated = x->path[0] != '\0';
  size_t got = rd (pid, (uintptr_t) req->data.args[at ? 2 : 1], ptrs, sizeof ptrs) / sizeof ptrs[0];
  size_t i = 0;
  for (; i < got && ptrs[i] && x->argc < AUDIT_ARGV_ITEMS; i++)
    {
      if (x->len + 1 >= sizeof x->text)
        {
          x->truncated = true; /* the text cap is reached */
          return;
        }
      ssize_t l = rd_str (pid, (uintptr_t) ptrs[i], x->text + x->len, sizeof x->text - x->len);
      if (l < 0)
        {
          /* cut: keep the part read as the last argument */
          size_t part = strlen (x->text + x->len); /* rd_str kept room for its NUL */
          if (part)
            {
              x->len += part + 1;
              x->argc++;
            }
          x->truncated = true;
          return;
        }
      x->len += (size_t) l + 1;
      x->argc++;
    }
  if (i == got || ptrs[i])
    x->truncated = true; /* more than AUDIT_ARGV_ITEMS, or the array ran into unmapped memory */
}

static void
put (pid_t tgid, pid_t tid, const struct execrec *x)
{
  pthread_mutex_lock (&stash.lock);
  struct slot *free_slot = NULL, *old = &stash.v[0];
  bool ambiguous = false;
  for (size_t i = 0; i < SLOTS; i++)
    {
      struct slot *s = &stash.v[i];
      if (s->tgid == tgid)
        {
          /* a second execve of the process before its exec event: another thread's (or a
           * failed one before): the latest wins, but say that there were two */
          ambiguous = s->tid != tid;
          s->tgid = 0;
        }
      if (!s->tgid && !free_slot)
        free_slot = s;
      if (s->seq < old->seq)
        old = s;
    }
  struct slot *s = free_slot ? free_slot : old;
  s->tgid = tgid;
  s->tid = tid;
  s->seq = ++stash.seq;
  s->r = *x;
  s->r.ambiguous = ambiguous;
  pthread_mutex_unlock (&stash.lock);
}

void
execrec_handle (int nfd, const struct seccomp_notif *req)
{
  struct execrec *x = xmalloc0 (sizeof *x);
  __u64 id = req->id;
  pid_t tid = (pid_t) req->pid;

  capture (req, x);
  pid_t tgid = tgid_of (tid);
  /* still the same waiting caller (not a reused pid): then the copy is its own */
  if (tgid > 0 && ioctl (nfd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0)
    {
      put (tgid, tid, x);
      /* for limits.failedExecs (monitor/execfail.h): the command is the filename's basename and
       * the argv, so a PATH search is one command tried in several directories; the filename
       * is lexically cleaned first ("//usr/./bin/x" is "/usr/bin/x" tried again) */
      cleanup_free char *clean = ps_clean (x->path);
      const char *base = strrchr (clean, '/');
      base = base ? base + 1 : clean;
      uint64_t cmd = execfail_hash (EXECFAIL_HASH0, base, strlen (base) + 1);
      cmd = execfail_hash (cmd, x->text, x->len);
      /* relative names (ps_clean makes them absolute) hash apart from absolute ones */
      uint64_t file = execfail_hash (EXECFAIL_HASH0, x->path[0] == '/' ? "/" : ".", 1);
      execfail_attempt (tid, tgid, cmd, execfail_hash (file, clean, strlen (clean)));
    }
  free (x);
  struct seccomp_notif_resp resp = { .id = req->id, .error = 0, .val = 0, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
  if (ioctl (nfd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
    log_debug ("exec records: answer notification: %s", strerror (errno));
}

bool
execrec_take (pid_t tgid, struct execrec *out)
{
  bool found = false;
  pthread_mutex_lock (&stash.lock);
  for (size_t i = 0; i < SLOTS && !found; i++)
    if (stash.v[i].tgid == tgid)
      {
        *out = stash.v[i].r;
        stash.v[i].tgid = 0;
        found = true;
      }
  pthread_mutex_unlock (&stash.lock);
  return found;
}

void
execrec_forget (pid_t tgid)
{
  pthread_mutex_lock (&stash.lock);
  for (size_t i = 0; i < SLOTS; i++)
    if (stash.v[i].tgid == tgid)
      stash.v[i].tgid = 0;
  pthread_mutex_unlock (&stash.lock);
}
