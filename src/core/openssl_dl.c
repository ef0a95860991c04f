/* openssl_dl.c - OpenSSL loaded on first use (see the header). */
#define OPENSSL_DL_IMPL
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "core/openssl_dl.h"

struct openssl_api openssl_api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
/* why the load failed, "" once it succeeded; written only by load_once, under `once` */
static char failure[512] = "not loaded";

static void
load_once (void)
{
  void *h = dlopen (OPENSSL_DL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    {
      snprintf (failure, sizeof failure, "load %s (apt-get install -y libssl3): %s", OPENSSL_DL_SONAME, dlerror ());
      return;
    }
#define OPENSSL_DL_LOOKUP(n)                                                                                           \
  if ((openssl_api.n = (__typeof__ (n) *) dlsym (h, #n)) == NULL)                                                      \
    {                                                                                                                  \
      snprintf (failure, sizeof failure, "load %s: no %s: %s", OPENSSL_DL_SONAME, #n, dlerror ());                     \
      return; /* h stays open: a dlclose would not make the half-filled table safer */                                 \
    }
  OPENSSL_DL_FUNCS (OPENSSL_DL_LOOKUP)
#undef OPENSSL_DL_LOOKUP
  failure[0] = '\0';
}

int
openssl_load (const char *why, asbx_err_t *err)
{
  pthread_once (&once, load_once);
  if (failure[0] == '\0')
    return 0;
  return asbx_error (err, ENOENT, "%s needs OpenSSL: %s", why, failure);
}
