/* openssl_err.h - OpenSSL's error queue as one error of ours. */
#ifndef ASBX_CORE_OPENSSL_ERR_H
#define ASBX_CORE_OPENSSL_ERR_H

#include "core/error.h"

/* Sets *err to "PREFIX: WHAT: TEXT" with TEXT the first error of this thread's OpenSSL queue
 * (ERR_get_error(3), ERR_error_string_n(3); "unknown error" when the queue is empty), and
 * empties the queue so a later failure does not report this one. errnum 0. Returns -1. */
int openssl_error (asbx_err_t *err, const char *prefix, const char *what);

#endif
