/* parse_internal.h - internal to src/policy: the element helpers parse.c shares with
 * parse_egress.c. Every one reports through the oci_ctx (source and JSON path in the message). */
#ifndef ASBX_POLICY_PARSE_INTERNAL_H
#define ASBX_POLICY_PARSE_INTERNAL_H

#include <stdbool.h>

#include "libocispec/oci_json.h"
#include "policy/doc.h"

typedef int (*elem_fn) (struct oci_ctx *c, yajl_val v, void *ud);

enum vkind
{
  V_COUNT,
  V_SIZE,
  V_DURATION,
};

/* Refuse keys of `obj` outside `allowed` (NULL-terminated), naming the first unknown one. 0 / -1. */
int pparse_keys (struct oci_ctx *c, yajl_val obj, const char *const *allowed);

/* Walk array member `key` of `obj`, calling fn on each element with the path at the element.
 * 0 absent, 1 walked (*set = true when set is not NULL), -1 failed. */
int pparse_each (struct oci_ctx *c, yajl_val obj, const char *key, elem_fn fn, void *ud, bool *set);

/* v must be a string: *out borrows it. 0 / -1. */
int pparse_string (struct oci_ctx *c, yajl_val v, const char **out);

/* `"value": why` at the current path; takes `why` (heap). Returns -1. */
int pparse_fail_value (struct oci_ctx *c, const char *value, char *why);

/* A size, duration or count at obj.key (integer, or a string with a unit for sizes and
 * durations); `positive` refuses 0. 0 absent, 1 read (out->set), -1 failed. */
int pparse_quantity (struct oci_ctx *c, yajl_val obj, const char *key, enum vkind kind, bool positive,
                     struct pdoc_u64 *out);

/* network.credentials and network.http of the network object `net` into d (parse_egress.c).
 * 0 / -1. */
int pparse_egress (struct oci_ctx *c, yajl_val net, struct pdoc *d);

#endif
