/* util.c - allocation, fd I/O and number parsing helpers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

void *
xmalloc (size_t n)
{
  void *p = malloc (n ? n : 1);
  if (!p)
    abort ();
  return p;
}

void *
xmalloc0 (size_t n)
{
  void *p = calloc (1, n ? n : 1);
  if (!p)
    abort ();
  return p;
}

void *
xrealloc (void *p, size_t n)
{
  p = realloc (p, n ? n : 1);
  if (!p)
    abort ();
  return p;
}

char *
xstrdup (const char *s)
{
  char *r;
  if (!s)
    return NULL;
  r = strdup (s);
  if (!r)
    abort ();
  return r;
}

char *
xasprintf (const char *fmt, ...)
{
  va_list ap;
  char *s;
  va_start (ap, fmt);
  if (vasprintf (&s, fmt, ap) < 0)
    abort ();
  va_end (ap);
  return s;
}

int
write_all (int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len > 0)
    {
      ssize_t w = write (fd, p, len);
      if (w < 0)
        {
          if (errno == EINTR)
            continue;
          return -1;
        }
      p += w;
      len -= (size_t) w;
    }
  return 0;
}

ssize_t
read_proc_small (pid_t pid, const char *name, char *buf, size_t size)
{
  char path[64];
  ssize_t n;
  snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, name);
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  while ((n = read (fd, buf, size - 1)) < 0 && errno == EINTR)
    ;
  if (n < 0)
    return -1;
  if (n == 0)
    {
      errno = ENODATA;
      return -1;
    }
  buf[n] = '\0';
  return n;
}

int
write_pid_file (const char *path, pid_t pid, asbx_err_t *err)
{
  cleanup_free char *tmp = xasprintf ("%s.%d.tmp", path, getpid ());
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%d", pid);
  cleanup_close int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write_all (fd, buf, (size_t) n) < 0 || rename (tmp, path) < 0)
    {
      int e = errno;
      unlink (tmp);
      return asbx_error (err, e, "write --pid-file `%s`", path);
    }
  return 0;
}

int
read_all_fd (int fd, size_t max, char **out, size_t *len)
{
  size_t cap = 4096, n = 0;
  cleanup_free char *buf = xmalloc (cap + 1);

  for (;;)
    {
      ssize_t r;
      if (n == cap)
        {
          if (cap >= max)
            {
              errno = E2BIG;
              return -1;
            }
          cap = cap * 2 > max ? max : cap * 2;
          buf = xrealloc (buf, cap + 1);
        }
      r = read (fd, buf + n, cap - n);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return -1;
        }
      if (r == 0)
        break;
      n += (size_t) r;
    }
  buf[n] = '\0';
  if (len)
    *len = n;
  *out = steal_ptr (&buf);
  return 0;
}

int
read_file_at (int dirfd, const char *path, size_t max, char **out, size_t *len, asbx_err_t *err)
{
  cleanup_close int fd = openat (dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return asbx_error (err, errno, "open `%s`", path);
  if (read_all_fd (fd, max, out, len) < 0)
    return asbx_error (err, errno, "read `%s`", path);
  return 0;
}

int
write_file_at (int dirfd, const char *path, const char *data, size_t len, asbx_err_t *err)
{
  cleanup_close int fd = openat (dirfd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return asbx_error (err, errno, "open `%s`", path);
  if (write_all (fd, data, len) < 0)
    return asbx_error (err, errno, "write `%s`", path);
  return 0;
}

int
parse_u64 (const char *s, uint64_t *out)
{
  char *end;
  unsigned long long v;
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
    {
      errno = EINVAL;
      return -1;
    }
  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno)
    return -1;
  if (*end)
    {
      errno = EINVAL;
      return -1;
    }
  *out = v;
  return 0;
}

int
parse_i64 (const char *s, int64_t *out)
{
  char *end;
  long long v;
  if (!s || !*s || *s == ' ' || *s == '+')
    {
      errno = EINVAL;
      return -1;
    }
  errno = 0;
  v = strtoll (s, &end, 10);
  if (errno)
    return -1;
  if (*end)
    {
      errno = EINVAL;
      return -1;
    }
  *out = v;
  return 0;
}

uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

char *
asbx_rfc3339_now (void)
{
  struct timespec ts;
  struct tm tm;
  clock_gettime (CLOCK_REALTIME, &ts);
  gmtime_r (&ts.tv_sec, &tm);
  return xasprintf ("%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                    tm.tm_min, tm.tm_sec, ts.tv_nsec);
}
