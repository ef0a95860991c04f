/* openssl_err.c - OpenSSL's error queue as one error of ours (see the header). */
#include "core/openssl_dl.h"
#include "core/openssl_err.h"

int
openssl_error (asbx_err_t *err, const char *prefix, const char *what)
{
  char buf[256] = "unknown error";
  unsigned long e = ERR_get_error ();
  if (e)
    ERR_error_string_n (e, buf, sizeof buf);
  ERR_clear_error ();
  return asbx_error (err, 0, "%s: %s: %s", prefix, what, buf);
}
