/* secret_tpl.c - credential templates of the TLS interception (see secret_tpl.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "monitor/secret_tpl.h"

/* The value of NAME (n bytes) in the memfd of environment secrets envfd ("NAME=VALUE\0"
 * records, secret_tpl.h): up to cap bytes copied to out, *len its whole length. 1 found, 0 not
 * there (or envfd < 0, or unreadable). The memfd's copy in our memory is wiped. */
static int
env_lookup (int envfd, const char *name, size_t n, char *out, size_t cap, size_t *len)
{
  struct stat st;
  if (envfd < 0 || fstat (envfd, &st) < 0 || st.st_size <= 0 || st.st_size > SECRET_ENV_MAX)
    return 0;
  size_t size = (size_t) st.st_size;
  char *all = xmalloc0 (size + 1);
  size_t got = 0;
  ssize_t k;
  while (got < size && (k = pread (envfd, all + got, size - got, (off_t) got)) > 0)
    got += (size_t) k;
  int found = 0;
  for (size_t at = 0; at < got && !found;)
    {
      size_t rl = strnlen (all + at, got - at);
      if (rl > n && all[at + n] == '=' && memcmp (all + at, name, n) == 0)
        {
          *len = rl - n - 1;
          memcpy (out, all + at + n + 1, *len < cap ? *len : cap);
          found = 1;
        }
      at += rl + 1;
    }
  explicit_bzero (all, size + 1);
  free (all);
  return found;
}

int
secret_env_has (int envfd, const char *name, size_t n)
{
  char buf[SECRET_MAX + 1];
  size_t len = 0;
  int r = env_lookup (envfd, name, n, buf, sizeof buf, &len);
  explicit_bzero (buf, sizeof buf);
  return r;
}

/* the secret NAME (n bytes), from the file of secrets_dir or else the environment secrets, one
 * line, appended to v (at *o of VALUE_MAX): 0, or -1 with why */
static int
secret_append (int dirfd, int envfd, const char *name, size_t n, char *v, size_t *o, char *why, size_t wl)
{
  char file[256];
  char buf[SECRET_MAX + 1];
  size_t got = 0;
  bool over = false; /* an environment value longer than buf */
  if (n == 0 || n >= sizeof file
      || strspn (name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") < n
      || (n <= 2 && strncmp (name, "..", n) == 0))
    {
      snprintf (why, wl, "credential: a bad secret name");
      return -1;
    }
  memcpy (file, name, n);
  file[n] = '\0';
  int fd = dirfd < 0 ? -1 : openat (dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  int e = dirfd < 0 ? ENOENT : errno;
  struct stat st;
  if (fd < 0 && e == ENOENT)
    {
      /* no file of that name: the runtime's environment (whole length, so too long is seen) */
      if (!env_lookup (envfd, name, n, buf, sizeof buf, &got))
        {
          snprintf (why, wl,
                    "credential: secret %.100s: %s (nor " SECRET_ENV_PREFIX "%.100s in the runtime's environment)",
                    file, strerror (ENOENT), file);
          return -1;
        }
      over = got > sizeof buf; /* refused below */
      if (over)
        got = sizeof buf;
    }
  else if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      snprintf (why, wl, "credential: secret %.100s: %s", file, fd < 0 ? strerror (e) : "not a regular file");
      if (fd >= 0)
        close (fd);
      return -1;
    }
  else
    {
      ssize_t k;
      while (got < sizeof buf && (k = read (fd, buf + got, sizeof buf - got)) > 0)
        got += (size_t) k;
      close (fd);
    }
  if (got > 0 && buf[got - 1] == '\n')
    got--;
  if (got > 0 && buf[got - 1] == '\r')
    got--;
  bool bad = over || got > SECRET_MAX || got == 0 || *o + got >= VALUE_MAX;
  for (size_t i = 0; i < got && !bad; i++)
    bad = (buf[i] < 0x20 && buf[i] != '\t') || buf[i] == 0x7f;
  if (!bad)
    {
      memcpy (v + *o, buf, got);
      *o += got;
    }
  explicit_bzero (buf, sizeof buf);
  if (bad)
    {
      snprintf (why, wl, "credential: secret %.100s: empty, too long or not one line of text", file);
      return -1;
    }
  return 0;
}

char *
secret_expand (int dirfd, int envfd, const char *tpl, char *why, size_t wl)
{
  char *v = xmalloc0 (VALUE_MAX);
  size_t o = 0;
  for (const char *p = tpl; *p;)
    {
      const char *e;
      if (strncmp (p, "${secret:", 9) == 0 && (e = strchr (p + 9, '}')) != NULL)
        {
          if (secret_append (dirfd, envfd, p + 9, (size_t) (e - p - 9), v, &o, why, wl) < 0)
            goto fail;
          p = e + 1;
          continue;
        }
      if (o + 1 >= VALUE_MAX)
        {
          snprintf (why, wl, "credential: value too long");
          goto fail;
        }
      v[o++] = *p++;
    }
  v[o] = '\0';
  return v;
fail:
  explicit_bzero (v, VALUE_MAX);
  free (v);
  return NULL;
}
