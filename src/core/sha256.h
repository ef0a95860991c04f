/* sha256.h - SHA-256 as lowercase hex (64 chars + NUL), for the effective policy digest and the seccomp cache keys. */
#ifndef ASBX_CORE_SHA256_H
#define ASBX_CORE_SHA256_H
#include <stddef.h>
void sha256_hex (const void *data, size_t len, char out[65]);
#endif
