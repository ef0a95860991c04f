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

/* the secret NAME (n bytes) of secrets_dir, one line, appended to v (at *o of VALUE_MAX): 0, or
 * -1 with why */
static int
secret_append (int dirfd, const char *name, size_t n, char *v, size_t *o, char *why, size_t wl)
{
  char file[256];
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
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      snprintf (why, wl, "credential: secret %.100s: %s", file, fd < 0 ? strerror (errno) : "not a regular file");
      if (fd >= 0)
        close (fd);
      return -1;
    }
  char buf[SECRET_MAX + 1];
  size_t got = 0;
  ssize_t k;
  while (got < sizeof buf && (k = read (fd, buf + got, sizeof buf - got)) > 0)
    got += (size_t) k;
  close (fd);
  if (got > 0 && buf[got - 1] == '\n')
    got--;
  if (got > 0 && buf[got - 1] == '\r')
    got--;
  bool bad = got > SECRET_MAX || got == 0 || *o + got >= VALUE_MAX;
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
secret_expand (int dirfd, const char *tpl, char *why, size_t wl)
{
  char *v = xmalloc0 (VALUE_MAX);
  size_t o = 0;
  for (const char *p = tpl; *p;)
    {
      const char *e;
      if (strncmp (p, "${secret:", 9) == 0 && (e = strchr (p + 9, '}')) != NULL)
        {
          if (secret_append (dirfd, p + 9, (size_t) (e - p - 9), v, &o, why, wl) < 0)
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
