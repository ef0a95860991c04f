/* json.h - writing JSON with yajl's generator: the one set-up and the one way out for every
 * producer (state.json, the OCI state, list, policy plans and documents, audit records, JSON
 * log lines, cgroup stats, the seccomp listener's state, approval messages, sandbox configs). */
#ifndef ASBX_CORE_JSON_H
#define ASBX_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

enum json_gen_flags
{
  JSON_GEN_PRETTY = 1,        /* yajl_gen_beautify, indented by JSON_GEN_INDENT */
  JSON_GEN_VALIDATE_UTF8 = 2, /* strings that are not UTF-8 put the generator in error */
};

#define JSON_GEN_INDENT "  "

/* A new generator with `flags` (enum json_gen_flags); never NULL (aborts on OOM, as xmalloc).
 * Free with json_gen_finish or yajl_gen_free. */
yajl_gen json_gen_new (unsigned flags);

/* The NUL-terminated string s as a key or a value; NULL writes null. */
void json_gen_str (yajl_gen g, const char *s);

/* Key k and the string v (NULL writes null) in an open map. */
void json_gen_kv (yajl_gen g, const char *k, const char *v);

/* A parsed JSON value (yajl_tree) re-emitted as it is; recursion as deep as the tree (the
 * callers' trees come from our own text or from a parse that bounds the depth). */
void json_gen_value (yajl_gen g, yajl_val v);

/* The text generated into g as a heap NUL-terminated string (caller frees), with a '\n'
 * appended when `newline` (one JSON line); *len (may be NULL) receives its length without the
 * NUL. Frees g. */
char *json_gen_finish (yajl_gen g, bool newline, size_t *len);

#endif
