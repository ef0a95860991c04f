/* error.c - chained error objects; see error.h for the convention. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "util.h"

static char *
vformat (const char *fmt, va_list ap)
{
  char *s = NULL;
  if (vasprintf (&s, fmt, ap) < 0)
    abort ();
  return s;
}

int
asbx_error (asbx_err_t *err, int errnum, const char *fmt, ...)
{
  va_list ap;
  char *msg;

  if (err == NULL)
    return -1;
  va_start (ap, fmt);
  msg = vformat (fmt, ap);
  va_end (ap);
  if (errnum)
    {
      char *full = xasprintf ("%s: %s", msg, strerror (errnum));
      free (msg);
      msg = full;
    }
  asbx_error_free (err);
  *err = xmalloc0 (sizeof (**err));
  (*err)->errnum = errnum;
  (*err)->status = 1;
  (*err)->msg = msg;
  return -1;
}

int
asbx_error_wrap (asbx_err_t *err, const char *fmt, ...)
{
  va_list ap;
  char *ctx, *full;

  if (err == NULL)
    return -1;
  va_start (ap, fmt);
  ctx = vformat (fmt, ap);
  va_end (ap);
  if (*err == NULL)
    {
      asbx_error (err, 0, "%s", ctx);
      free (ctx);
      return -1;
    }
  full = xasprintf ("%s: %s", ctx, (*err)->msg);
  free (ctx);
  free ((*err)->msg);
  (*err)->msg = full;
  return -1;
}

void
asbx_error_free (asbx_err_t *err)
{
  if (err == NULL || *err == NULL)
    return;
  free ((*err)->msg);
  free (*err);
  *err = NULL;
}

void
asbx_error_move (asbx_err_t *dst, asbx_err_t *src)
{
  asbx_error_free (dst);
  *dst = *src;
  *src = NULL;
}
