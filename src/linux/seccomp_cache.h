/* seccomp_cache.h - compiled linux.seccomp programs cached in the state root, so that a long
 * profile (Docker's: ~350 names, 14-16 ms in libseccomp) is compiled once per host, not on every
 * create/exec. Entries live in <root>/@seccomp-cache/<key>.bpf (see seccomp_cache.c for the key,
 * the entry format and the trust rules). A cache problem never fails a create: it compiles. */
#ifndef ASBX_LINUX_SECCOMP_CACHE_H
#define ASBX_LINUX_SECCOMP_CACHE_H

#include <stdbool.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "linux/seccomp_bpf.h"

/* The cache directory under the state root. '@' is outside the container id alphabet
 * ([A-Za-z0-9_+.-], asbx_id_validate), so no container's state dir can ever have this name. */
#define LINUX_SECCOMP_CACHE_DIR "@seccomp-cache"
/* At most this many entries; the oldest by mtime are removed when a store goes over. */
#define LINUX_SECCOMP_CACHE_MAX 64

/* Defined in seccomp_bpf.c: __DATE__ " " __TIME__ of the compiler's own object, part of the key so
 * that a rebuilt compiler (a changed rule translation) never reuses a program of the old one. */
extern const char linux_seccomp_build_stamp[];

/* The cache key of `s` on this host: lowercase hex SHA-256 (64 chars + NUL) over the entry
 * format version, agentsbx's version and the compiler's build stamp, the native arch, libseccomp's
 * runtime version and API level, the seccomp(2) filter flags this kernel accepts, and the fields of
 * `s` that compilation reads, serialised in a fixed order with length prefixes (the parsed struct,
 * not the JSON text, so key order and whitespace in config.json do not matter). Cannot fail. */
void linux_seccomp_cache_key (const struct oci_seccomp *s, char out[65]);

/* linux_seccomp_compile (seccomp_bpf.h) with the cache of the state root `rootfd` (an O_DIRECTORY
 * fd of --root; -1: no cache). A verified entry is used as is; otherwise `s` is compiled and the
 * result stored (atomically: O_TMPFILE + linkat + renameat). Cache errors (read-only or full state
 * root, a foreign or corrupt entry) are logged with log_debug and never returned. *hit (may be
 * NULL) tells whether the program came from the cache. Returns 0, or -1 with *err exactly as
 * linux_seccomp_compile (a bad profile is never cached, so it fails the same way every time).
 * On success the caller owns out->insns (linux_seccomp_release). */
int linux_seccomp_cache_compile (int rootfd, const struct oci_seccomp *s, struct linux_seccomp *out, bool *hit,
                                 asbx_err_t *err);

#endif
