/*
 * probe: errno names, the minimal JSON writer (one object on stdout, no library) and the small
 * file helpers every action uses.
 */
#include "probe.h"

const char *
errno_name (int e)
{
  switch (e)
    {
/* clang-format off */
#define E(x) case x: return #x;
      E (EPERM) E (ENOENT) E (ESRCH) E (EINTR) E (EIO) E (ENXIO) E (E2BIG) E (ENOEXEC) E (EBADF) E (ECHILD)
      E (EAGAIN) E (ENOMEM) E (EACCES) E (EFAULT) E (EBUSY) E (EEXIST) E (EXDEV) E (ENODEV) E (ENOTDIR)
      E (EISDIR) E (EINVAL) E (ENFILE) E (EMFILE) E (ENOTTY) E (ETXTBSY) E (EFBIG) E (ENOSPC) E (ESPIPE)
      E (EROFS) E (EMLINK) E (EPIPE) E (ERANGE) E (ENAMETOOLONG) E (ENOSYS) E (ENOTEMPTY) E (ELOOP)
      E (EOPNOTSUPP) E (EDQUOT) E (EOVERFLOW) E (ENOTCONN) E (ECONNREFUSED) E (EADDRINUSE) E (ENETUNREACH)
      E (EAFNOSUPPORT)
#undef E
    default: return "EUNKNOWN";
    }
}
/* clang-format on */

/* ---- minimal JSON writer ---- */

static int need_comma;

void
jstr (const char *s)
{
  putchar ('"');
  for (const unsigned char *p = (const unsigned char *) s; *p; p++)
    {
      switch (*p)
        {
        case '"': fputs ("\\\"", stdout); break;
        case '\\': fputs ("\\\\", stdout); break;
        case '\n': fputs ("\\n", stdout); break;
        case '\r': fputs ("\\r", stdout); break;
        case '\t': fputs ("\\t", stdout); break;
        default:
          /* Control bytes and non-ASCII are escaped so the output is always valid JSON, even
           * for names that are not UTF-8. */
          if (*p < 0x20 || *p >= 0x7f)
            printf ("\\u%04x", *p);
          else
            putchar (*p);
        }
    }
  putchar ('"');
}

void
sep (void)
{
  if (need_comma)
    putchar (',');
  need_comma = 1;
}

void
key (const char *k)
{
  sep ();
  jstr (k);
  putchar (':');
  need_comma = 0;
}

void
obj_open (void)
{
  sep ();
  putchar ('{');
  need_comma = 0;
}
void
obj_close (void)
{
  putchar ('}');
  need_comma = 1;
}
void
arr_open (void)
{
  sep ();
  putchar ('[');
  need_comma = 0;
}
void
arr_close (void)
{
  putchar (']');
  need_comma = 1;
}
void
vstr (const char *s)
{
  sep ();
  if (s)
    jstr (s);
  else
    fputs ("null", stdout);
}
void
vint (long long v)
{
  sep ();
  printf ("%lld", v);
}
void
vuint (unsigned long long v)
{
  sep ();
  printf ("%llu", v);
}
void
vbool (int b)
{
  sep ();
  fputs (b ? "true" : "false", stdout);
}
void
kstr (const char *k, const char *s)
{
  key (k);
  vstr (s);
}
void
kint (const char *k, long long v)
{
  key (k);
  vint (v);
}

/* ---- helpers ---- */

/* Reads a whole small file; returns a malloc'd NUL-terminated buffer or NULL with errno set. */
char *
read_file (const char *path, size_t *len)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc (cap);
  for (;;)
    {
      if (n + 1 >= cap)
        buf = realloc (buf, cap *= 2);
      ssize_t r = read (fd, buf + n, cap - n - 1);
      if (r < 0)
        {
          int e = errno;
          close (fd);
          free (buf);
          errno = e;
          return NULL;
        }
      if (r == 0)
        break;
      n += r;
    }
  close (fd);
  buf[n] = 0;
  if (len)
    *len = n;
  return buf;
}

void
chomp (char *s)
{
  size_t n = strlen (s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
    s[--n] = 0;
}
