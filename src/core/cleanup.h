/* cleanup.h - scope-bound ownership with __attribute__((cleanup)).
 *
 * Every heap pointer and fd has one owner. Ownership leaves a scope only through steal_ptr() /
 * steal_fd(), which return the value and reset the variable so the cleanup handler does nothing.
 */
#ifndef ASBX_CORE_CLEANUP_H
#define ASBX_CORE_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void
asbx_cleanup_freep (void *p)
{
  void **pp = (void **) p;
  free (*pp);
}

static inline void
asbx_cleanup_closep (int *fd)
{
  if (*fd >= 0)
    {
      int saved = errno; /* never clobber the errno a failing path captured */
      close (*fd);
      errno = saved;
    }
}

static inline void
asbx_cleanup_fclosep (FILE **f)
{
  if (*f)
    fclose (*f);
}

static inline void
asbx_cleanup_closedirp (DIR **d)
{
  if (*d)
    closedir (*d);
}

/* free a NULL-terminated vector of strings */
static inline void
asbx_strv_free (char **v)
{
  if (!v)
    return;
  for (char **i = v; *i; i++)
    free (*i);
  free (v);
}

static inline void
asbx_cleanup_strvp (char ***v)
{
  asbx_strv_free (*v);
}

#define cleanup_free __attribute__ ((cleanup (asbx_cleanup_freep)))
#define cleanup_close __attribute__ ((cleanup (asbx_cleanup_closep)))
#define cleanup_fclose __attribute__ ((cleanup (asbx_cleanup_fclosep)))
#define cleanup_closedir __attribute__ ((cleanup (asbx_cleanup_closedirp)))
#define cleanup_strv __attribute__ ((cleanup (asbx_cleanup_strvp)))

static inline int
steal_fd (int *fd)
{
  int r = *fd;
  *fd = -1;
  return r;
}

#define steal_ptr(p)                                                                                                   \
  ({                                                                                                                   \
    __typeof__ (*(p)) _v = *(p);                                                                                       \
    *(p) = NULL;                                                                                                       \
    _v;                                                                                                                \
  })

#define ASBX_ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

#endif
