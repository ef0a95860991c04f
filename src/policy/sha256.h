/* sha256.h - SHA-256 as lowercase hex (64 chars + NUL), for the effective policy digest. */
#ifndef ASBX_POLICY_SHA256_H
#define ASBX_POLICY_SHA256_H
#include <stddef.h>
void policy_sha256_hex (const void *data, size_t len, char out[65]);
#endif
