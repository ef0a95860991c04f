/* secret_tpl.h - the values of network.credentials (issue 19): a template such as
 * "Bearer ${secret:gh}" whose ${secret:NAME} references are read, at each request, from the
 * secrets directory through its fd: openat(dirfd, NAME, O_NOFOLLOW | O_NONBLOCK), a regular
 * file, at most SECRET_MAX bytes, one line of text (one trailing LF or CRLF dropped; no other
 * control byte but HTAB), NAME of [A-Za-z0-9_.-]+ and not "." or "..". A file replaced on the
 * host (rename over it) is what the next request reads. Other text, "${" included, is literal. */
#ifndef ASBX_MONITOR_SECRET_TPL_H
#define ASBX_MONITOR_SECRET_TPL_H

#include <stddef.h>

#define SECRET_MAX 4096 /* one secret file */
#define VALUE_MAX 8192  /* one expanded value, NUL included */

/* The value of template tpl, secrets read from dirfd (-1: none can be). Returns a heap string
 * (VALUE_MAX bytes allocated) the caller wipes (OPENSSL_cleanse) and frees, or NULL with
 * why[0..wl) naming the secret and the reason ("credential: secret gh: No such file or
 * directory", "... not a regular file", "... empty, too long or not one line of text"); the
 * value itself is never in why. */
char *secret_expand (int dirfd, const char *tpl, char *why, size_t wl);

#endif
