/* secret_tpl.h - the values of network.credentials (issue 19): a template such as
 * "Bearer ${secret:gh}" whose ${secret:NAME} references are read, at each request, from the
 * secrets directory through its fd: openat(dirfd, NAME, O_NOFOLLOW | O_NONBLOCK), a regular
 * file, at most SECRET_MAX bytes, one line of text (one trailing LF or CRLF dropped; no other
 * control byte but HTAB), NAME of [A-Za-z0-9_.-]+ and not "." or "..". A file replaced on the
 * host (rename over it) is what the next request reads. Other text, "${" included, is literal.
 *
 * A NAME with no file of that name in the directory is looked up in the runtime's environment
 * secrets instead (runtime/secret_env.h): the variable AGENTSBX_SECRET_<NAME> the runtime was
 * started with, which it moved into a sealed memfd of "NAME=VALUE\0" records before re-executing
 * itself without it. The same one-line rules apply to its value; it cannot change (no rotation).
 * create refuses a NAME present in both places (runtime/egress_ca.h), so the order only matters
 * for a file added later by the host's root. */
#ifndef ASBX_MONITOR_SECRET_TPL_H
#define ASBX_MONITOR_SECRET_TPL_H

#include <stddef.h>

#define SECRET_MAX 4096 /* one secret file */
#define VALUE_MAX 8192  /* one expanded value, NUL included */

#define SECRET_ENV_PREFIX "AGENTSBX_SECRET_" /* the runtime's environment: AGENTSBX_SECRET_<NAME> */
#define SECRET_ENV_MAX (1 << 20)             /* the whole memfd of environment secrets (bytes) */

/* The value of template tpl, secrets read from dirfd (-1: none can be), else from envfd (the
 * memfd of environment secrets, -1: none). Returns a heap string
 * (VALUE_MAX bytes allocated) the caller wipes (OPENSSL_cleanse) and frees, or NULL with
 * why[0..wl) naming the secret and the reason ("credential: secret gh: No such file or
 * directory (nor AGENTSBX_SECRET_gh in the runtime's environment)", "... not a regular file",
 * "... empty, too long or not one line of text"); the value itself is never in why. */
char *secret_expand (int dirfd, int envfd, const char *tpl, char *why, size_t wl);

/* Whether the memfd of environment secrets envfd (-1: none) holds NAME (n bytes): 1 or 0 (also
 * when it cannot be read). The value passes through a buffer that is wiped before returning. */
int secret_env_has (int envfd, const char *name, size_t n);

#endif
