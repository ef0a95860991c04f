/* seccomp_cache.c - a cache of compiled seccomp BPF programs in the state root.
 *
 * Mechanism: libseccomp turns Docker's ~350-rule profile into ~1,000 BPF instructions in 14-16 ms,
 * and it did so on every create and exec. The program depends only on the profile and on the host
 * (native arch, libseccomp, kernel flags, our own compiler), so it is computed once and kept in
 * <root>/@seccomp-cache/<key>.bpf, key = SHA-256 of all of those inputs (linux_seccomp_cache_key).
 *
 * Where the lookup happens (the design with the fewest moving parts): in the runtime parent P,
 * which holds the state root's fd anyway. `exec` compiled in P already; `create` now compiles in P
 * before forking the stage child, and the init inherits the program through fork (runtime/spawn.h
 * init_args.seccomp_filter) instead of compiling it itself. So the container's processes never
 * see the cache, no fd is passed, and the sync protocol is unchanged. A bad profile still fails
 * `create` (earlier).
 *
 * Threat model: whoever can write an entry chooses the filter of every later container, so an
 * entry is trusted only when (1) the directory is a real directory (O_NOFOLLOW) owned by our euid
 * with no group/other access, (2) the entry is a regular file (O_NOFOLLOW|O_NONBLOCK, no FIFO or
 * symlink) owned by our euid and not group/other-writable, (3) its size is exactly header +
 * instructions and the count is in 1..BPF_MAXINSNS, (4) the header's magic and key are ours and
 * (5) the SHA-256 over header and program matches. Anything else is ignored (log_debug), compiled
 * again and replaced. The container cannot reach the state root at all: it is never mounted in,
 * and the init leaves the host's mount tree at pivot_root. The key covers the inputs; the digest
 * catches torn or corrupted files (no fsync: a state root on tmpfs does not survive a reboot, and a
 * torn entry only costs a compile).
 *
 * Ordering: entries are written whole into an unnamed O_TMPFILE, linked under a temporary name and
 * renamed over the final name, so a concurrent reader sees the old entry, the new one or none,
 * never a partial one; two racing writers produce the same bytes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/seccomp_cache.h"
#include "core/sha256.h"

/* Bump when the entry layout or the key's serialisation changes. */
#define CACHE_FORMAT 1u
#define ENTRY_MAGIC "ASBXBPF1"

/* The on-disk entry: this header, then len struct sock_filter. Native byte order and layout: the
 * native arch is part of the key, so an entry is only ever read by a build of the same ABI. */
struct entry_header
{
  char magic[8];
  char key[64];     /* hex, no NUL */
  uint32_t len;     /* instructions */
  uint32_t flags;   /* SECCOMP_FILTER_FLAG_* */
  uint32_t notify;  /* 0/1 */
  uint32_t rules;   /* statistics of the compile, kept so a hit reports the same */
  uint32_t skipped; /* syscall names libseccomp did not know */
  uint32_t reserved;
  char digest[64]; /* hex SHA-256 of the whole entry with this field zeroed */
};
_Static_assert(sizeof (struct entry_header) == 160, "entry header layout");

/* ---- the key ---- */

struct kbuf
{
  char *p;
  size_t len, cap;
};

static void
kb_put (struct kbuf *b, const void *data, size_t n)
{
  if (b->len + n > b->cap)
    {
      b->cap = (b->len + n) * 2 + 256;
      b->p = xrealloc (b->p, b->cap);
    }
  memcpy (b->p + b->len, data, n);
  b->len += n;
}

static void
kb_u64 (struct kbuf *b, uint64_t v)
{
  kb_put (b, &v, sizeof v);
}

/* length-prefixed, so ("ab","c") and ("a","bc") differ; NULL differs from "" */
static void
kb_str (struct kbuf *b, const char *s)
{
  if (s == NULL)
    {
      kb_u64 (b, UINT64_MAX);
      return;
    }
  size_t n = strlen (s);
  kb_u64 (b, n);
  kb_put (b, s, n);
}

static void
kb_strv (struct kbuf *b, char *const *v, size_t n)
{
  kb_u64 (b, n);
  for (size_t i = 0; i < n; i++)
    kb_str (b, v[i]);
}

/* What is not in the profile but changes the program, or whether compiling succeeds. */
static void
kb_host (struct kbuf *b)
{
  const struct scmp_version *v = seccomp_version ();
  const char *const *flags = linux_seccomp_supported_flags ();
  size_t n = 0;

  kb_u64 (b, CACHE_FORMAT);
  kb_str (b, PACKAGE_VERSION);
  kb_str (b, linux_seccomp_build_stamp);
  kb_u64 (b, seccomp_arch_native ());
  kb_u64 (b, v ? v->major : 0);
  kb_u64 (b, v ? v->minor : 0);
  kb_u64 (b, v ? v->micro : 0);
  /* the API level reflects the actions the kernel supports (KILL_PROCESS, LOG, NOTIFY...) */
  kb_u64 (b, seccomp_api_get ());
  while (flags[n])
    n++;
  kb_strv (b, (char *const *) flags, n);
}

void
linux_seccomp_cache_key (const struct oci_seccomp *s, char out[65])
{
  struct kbuf b = { 0 };
  cleanup_free char *owned = NULL;

  kb_host (&b);
  kb_str (&b, s->default_action);
  kb_u64 (&b, s->has_default_errno_ret);
  kb_u64 (&b, s->default_errno_ret);
  kb_strv (&b, s->architectures, s->architectures_len);
  kb_strv (&b, s->flags, s->flags_len);
  /* the compiler only checks that a listener is configured (NOTIFY needs one); the path and the
   * metadata are used at connect time, so they stay out of the key */
  kb_u64 (&b, s->listener_path && s->listener_path[0]);
  kb_u64 (&b, s->syscalls_len);
  for (size_t i = 0; i < s->syscalls_len; i++)
    {
      const struct oci_seccomp_syscall *c = &s->syscalls[i];
      kb_strv (&b, c->names, c->names_len);
      kb_str (&b, c->action);
      kb_u64 (&b, c->has_errno_ret);
      kb_u64 (&b, c->errno_ret);
      kb_u64 (&b, c->args_len);
      for (size_t j = 0; j < c->args_len; j++)
        {
          kb_u64 (&b, c->args[j].index);
          kb_u64 (&b, c->args[j].value);
          kb_u64 (&b, c->args[j].has_value_two);
          kb_u64 (&b, c->args[j].value_two);
          kb_str (&b, c->args[j].op);
        }
    }
  owned = b.p;
  sha256_hex (b.p, b.len, out);
}

/* ---- the directory ---- */

/* Open (creating it if missing) the cache directory and check that only we can write it.
 * -1 (errno set, EPERM for a foreign or too open one) when the cache is not to be used. */
static int
cache_dir_open (int rootfd)
{
  struct stat st;
  int fd = openat (rootfd, LINUX_SECCOMP_CACHE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0 && errno == ENOENT)
    {
      if (mkdirat (rootfd, LINUX_SECCOMP_CACHE_DIR, 0700) < 0 && errno != EEXIST)
        return -1;
      fd = openat (rootfd, LINUX_SECCOMP_CACHE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
  if (fd < 0)
    return -1;
  if (fstat (fd, &st) < 0 || st.st_uid != geteuid () || (st.st_mode & 077))
    {
      close (fd);
      errno = EPERM;
      return -1;
    }
  return fd;
}

/* ---- reading ---- */

static void
entry_digest (char *buf, size_t len, char out[65])
{
  struct entry_header *h = (struct entry_header *) buf;
  char saved[64];

  memcpy (saved, h->digest, sizeof saved);
  memset (h->digest, 0, sizeof h->digest);
  sha256_hex (buf, len, out);
  memcpy (h->digest, saved, sizeof saved);
}

/* Load and verify <key>.bpf. 0 with *out filled, or -1 with a static reason for the debug log
 * (ENOENT: no entry yet). */
static int
cache_read (int dirfd, const char *name, const char *key, struct linux_seccomp *out, const char **why)
{
  cleanup_close int fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  cleanup_free char *buf = NULL;
  const size_t max = sizeof (struct entry_header) + BPF_MAXINSNS * sizeof (struct sock_filter);
  struct entry_header h;
  char digest[65];
  struct stat st;
  size_t len = 0;

  if (fd < 0)
    return *why = errno == ENOENT ? "no entry" : errno == ELOOP ? "a symlink" : "cannot be opened", -1;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    return *why = "not a regular file", -1;
  if (st.st_uid != geteuid ())
    return *why = "not owned by us", -1;
  if (st.st_mode & 022)
    return *why = "group/other-writable", -1;
  if ((size_t) st.st_size < sizeof h + sizeof (struct sock_filter) || (size_t) st.st_size > max)
    return *why = "size out of bounds", -1;
  if (read_all_fd (fd, max, &buf, &len) < 0 || len != (size_t) st.st_size)
    return *why = "short read", -1;
  memcpy (&h, buf, sizeof h);
  if (memcmp (h.magic, ENTRY_MAGIC, sizeof h.magic) != 0 || memcmp (h.key, key, sizeof h.key) != 0)
    return *why = "magic or key mismatch", -1;
  if (h.len == 0 || h.len > BPF_MAXINSNS || len != sizeof h + h.len * sizeof (struct sock_filter) || h.notify > 1)
    return *why = "bad instruction count", -1;
  entry_digest (buf, len, digest);
  if (memcmp (digest, h.digest, sizeof h.digest) != 0)
    return *why = "digest mismatch", -1;
  out->len = (unsigned short) h.len;
  out->flags = h.flags;
  out->notify = h.notify;
  out->rules = h.rules;
  out->skipped_names = h.skipped;
  out->insns = xmalloc (h.len * sizeof (struct sock_filter));
  memcpy (out->insns, buf + sizeof h, h.len * sizeof (struct sock_filter));
  return 0;
}

/* ---- writing ---- */

/* An open, unlinked file in dirfd to write the entry into; *tmpname is set when the O_TMPFILE
 * fallback had to create a named one (file systems without O_TMPFILE). */
static int
tmp_open (int dirfd, char *tmpname, size_t n)
{
  int fd = openat (dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
    return fd;
  snprintf (tmpname, n, ".new.%d.%lu", (int) getpid (), (unsigned long) now_ns ());
  return openat (dirfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Write the entry for `f` under `name`, atomically. -1 with errno on failure (nothing left). */
static int
cache_store (int dirfd, const char *name, const char *key, const struct linux_seccomp *f)
{
  const size_t plen = f->len * sizeof (struct sock_filter), len = sizeof (struct entry_header) + plen;
  cleanup_free char *buf = xmalloc0 (len);
  struct entry_header *h = (struct entry_header *) buf;
  char digest[65], tmpname[64] = "", linkname[64], procpath[64];
  cleanup_close int fd = -1;

  memcpy (h->magic, ENTRY_MAGIC, sizeof h->magic);
  memcpy (h->key, key, sizeof h->key);
  h->len = f->len;
  h->flags = f->flags;
  h->notify = f->notify;
  h->rules = f->rules;
  h->skipped = f->skipped_names;
  memcpy (buf + sizeof *h, f->insns, plen);
  entry_digest (buf, len, digest);
  memcpy (h->digest, digest, sizeof h->digest);

  fd = tmp_open (dirfd, tmpname, sizeof tmpname);
  /* fchmod: the creation mode went through the umask; the entry is exactly 0600 */
  if (fd < 0 || write_all (fd, buf, len) < 0 || fchmod (fd, 0600) < 0)
    goto fail;
  if (tmpname[0] == '\0')
    {
      /* give the unnamed file a temporary name (linkat cannot replace), then rename over */
      snprintf (linkname, sizeof linkname, ".link.%d.%lu", (int) getpid (), (unsigned long) now_ns ());
      snprintf (procpath, sizeof procpath, "/proc/self/fd/%d", fd);
      if (linkat (fd, "", dirfd, linkname, AT_EMPTY_PATH) < 0
          && linkat (AT_FDCWD, procpath, dirfd, linkname, AT_SYMLINK_FOLLOW) < 0)
        goto fail;
      memcpy (tmpname, linkname, sizeof tmpname);
    }
  if (renameat (dirfd, tmpname, dirfd, name) < 0)
    goto fail;
  return 0;
fail:
  {
    int e = errno;
    if (tmpname[0])
      unlinkat (dirfd, tmpname, 0);
    errno = e;
  }
  return -1;
}

/* Keep at most LINUX_SECCOMP_CACHE_MAX entries: remove the oldest by mtime, and temporaries a
 * crashed writer left (older than a minute). Best effort. */
static void
cache_evict (int dirfd)
{
  struct
  {
    char name[80];
    struct timespec mtime;
  } oldest[8];
  size_t n_old = 0, count = 0;
  int dfd = dup (dirfd);
  cleanup_closedir DIR *d = dfd >= 0 ? fdopendir (dfd) : NULL;
  struct dirent *de;
  struct timespec now;

  if (!d)
    {
      if (dfd >= 0)
        close (dfd);
      return;
    }
  clock_gettime (CLOCK_REALTIME, &now);
  while ((de = readdir (d)))
    {
      struct stat st;
      size_t nl = strlen (de->d_name);
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
          || fstatat (dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      if (de->d_name[0] == '.')
        {
          if (st.st_mtim.tv_sec + 60 < now.tv_sec)
            unlinkat (dirfd, de->d_name, 0);
          continue;
        }
      if (nl < 4 || strcmp (de->d_name + nl - 4, ".bpf") != 0 || nl >= sizeof oldest[0].name)
        continue;
      count++;
      /* the few oldest so far, sorted by insertion (at most 8 removed per store) */
      size_t k = n_old;
      while (
          k > 0
          && (st.st_mtim.tv_sec < oldest[k - 1].mtime.tv_sec
              || (st.st_mtim.tv_sec == oldest[k - 1].mtime.tv_sec && st.st_mtim.tv_nsec < oldest[k - 1].mtime.tv_nsec)))
        k--;
      if (k >= ASBX_ARRAY_SIZE (oldest))
        continue;
      if (n_old < ASBX_ARRAY_SIZE (oldest))
        n_old++;
      memmove (&oldest[k + 1], &oldest[k], (n_old - 1 - k) * sizeof oldest[0]);
      memcpy (oldest[k].name, de->d_name, nl + 1);
      oldest[k].mtime = st.st_mtim;
    }
  for (size_t i = 0; i < n_old && count > LINUX_SECCOMP_CACHE_MAX; i++, count--)
    {
      log_debug ("seccomp cache: evict %s", oldest[i].name);
      unlinkat (dirfd, oldest[i].name, 0);
    }
}

/* ---- the entry point ---- */

int
linux_seccomp_cache_compile (int rootfd, const struct oci_seccomp *s, struct linux_seccomp *out, bool *hit,
                             asbx_err_t *err)
{
  char key[65], name[80];
  const char *why = NULL;
  cleanup_close int dirfd = -1;
  struct linux_seccomp f = { 0 };

  if (hit)
    *hit = false;
  if (rootfd < 0)
    return linux_seccomp_compile (s, out, err);
  linux_seccomp_cache_key (s, key);
  snprintf (name, sizeof name, "%s.bpf", key);
  dirfd = cache_dir_open (rootfd);
  if (dirfd < 0)
    log_debug ("seccomp cache: %s unusable (%s): compiling", LINUX_SECCOMP_CACHE_DIR, strerror (errno));
  else if (cache_read (dirfd, name, key, &f, &why) == 0)
    {
      log_debug ("seccomp cache: hit %s (%u instructions)", name, (unsigned) f.len);
      if (hit)
        *hit = true;
      *out = f;
      return 0;
    }
  else if (strcmp (why, "no entry") == 0)
    log_debug ("seccomp cache: miss %s: compiling", name);
  else
    log_debug ("seccomp cache: %s ignored (%s): compiling", name, why);
  if (linux_seccomp_compile (s, &f, err) < 0)
    return -1;
  if (dirfd >= 0)
    {
      if (cache_store (dirfd, name, key, &f) < 0)
        log_debug ("seccomp cache: store %s: %s", name, strerror (errno));
      else
        {
          log_debug ("seccomp cache: stored %s (%u instructions)", name, (unsigned) f.len);
          cache_evict (dirfd);
        }
    }
  *out = f;
  return 0;
}
