/* libarchive_dl.c - libarchive loaded on first use (see the header). */
#define LIBARCHIVE_DL_IMPL
#include <dlfcn.h>
#include <errno.h>

#include "core/libarchive_dl.h"

struct libarchive_api libarchive_api;

int
libarchive_load (asbx_err_t *err)
{
  static void *lib;
  void *h;

  if (lib)
    return 0;
  h = dlopen (LIBARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return asbx_error (err, ENOENT, "load %s (OCI image layers; apt-get install -y libarchive13): %s",
                       LIBARCHIVE_SONAME, dlerror ());
#define LIBARCHIVE_LOOKUP(n)                                                                                           \
  if ((libarchive_api.n = (__typeof__ (n) *) dlsym (h, #n)) == NULL)                                                   \
    {                                                                                                                  \
      asbx_error (err, ENOENT, "load %s: no %s: %s", LIBARCHIVE_SONAME, #n, dlerror ());                               \
      dlclose (h);                                                                                                     \
      return -1;                                                                                                       \
    }
  LIBARCHIVE_FUNCS (LIBARCHIVE_LOOKUP)
#undef LIBARCHIVE_LOOKUP
  lib = h;
  return 0;
}
