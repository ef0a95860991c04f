/* oci_json.h - internal to libocispec: loading a JSON document safely into a yajl tree and
 * typed, path-tracking getters used by the config.json walkers.
 *
 * Getter convention: `int oci_get_T (ctx, obj, key, out)` returns -1 with the error set (the
 * message names the JSON path), 0 when the key is absent or JSON null (out untouched), 1 when
 * present and valid (out written). `obj` must be a yajl object.
 */
#ifndef ASBX_OCI_JSON_H
#define ASBX_OCI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_tree.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

#define OCI_MAX_DEPTH 64

/* Where the walker is: the document name and the JSON path built as we descend. */
struct oci_ctx
{
  const char *name; /* document name: "config.json" or a file path */
  char *path;       /* "process.rlimits[2]" ("" at top level) */
  size_t len, cap;
  asbx_err_t *err;
};

void oci_ctx_init (struct oci_ctx *c, const char *name, asbx_err_t *err);
void oci_ctx_release (struct oci_ctx *c);
/* Append ".key" (or `["k.y"]` for keys that are not identifiers) / "[i]"; return a mark for pop. */
size_t oci_ctx_push_key (struct oci_ctx *c, const char *key);
size_t oci_ctx_push_index (struct oci_ctx *c, size_t i);
void oci_ctx_pop (struct oci_ctx *c, size_t mark);

/* Set the error "NAME: PATH: message" (errnum EINVAL, no strerror suffix). Returns -1. */
int oci_fail (struct oci_ctx *c, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* Same, with `key` appended to the path for this one message. */
int oci_fail_key (struct oci_ctx *c, const char *key, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
/* "required field missing" at path.key when r == 0; passes r through otherwise. */
int oci_required (struct oci_ctx *c, const char *key, int r);

/* A string made safe to quote inside a one-line message (escapes ", \ and control bytes,
 * truncated to about 200 bytes). Heap-owned. */
char *oci_quote (const char *s);

/* Parse `len` bytes of JSON into a tree. Rejects empty input, NUL bytes (raw or \u0000),
 * comments, nesting deeper than OCI_MAX_DEPTH (checked before yajl builds the tree, because
 * yajl_tree_free recurses), malformed JSON / invalid UTF-8 (one-line message with line and
 * column), a top level that is not an object, and duplicate keys in any object.
 * Returns the tree (yajl_tree_free) or NULL with the error set. */
yajl_val oci_json_load (struct oci_ctx *c, const char *json, size_t len);

/* The member value, or NULL when absent or JSON null. */
yajl_val oci_get (yajl_val obj, const char *key);

int oci_get_object (struct oci_ctx *c, yajl_val obj, const char *key, yajl_val *out);
int oci_get_array (struct oci_ctx *c, yajl_val obj, const char *key, yajl_val *out);
int oci_get_string (struct oci_ctx *c, yajl_val obj, const char *key, char **out);
int oci_get_bool (struct oci_ctx *c, yajl_val obj, const char *key, bool *out);
int oci_get_u16 (struct oci_ctx *c, yajl_val obj, const char *key, uint16_t *out);
int oci_get_u32 (struct oci_ctx *c, yajl_val obj, const char *key, uint32_t *out);
int oci_get_u64 (struct oci_ctx *c, yajl_val obj, const char *key, uint64_t *out);
int oci_get_i32 (struct oci_ctx *c, yajl_val obj, const char *key, int32_t *out);
int oci_get_i64 (struct oci_ctx *c, yajl_val obj, const char *key, int64_t *out);
/* array of strings -> NULL-terminated vector */
int oci_get_strv (struct oci_ctx *c, yajl_val obj, const char *key, char ***out, size_t *len);
int oci_get_u32v (struct oci_ctx *c, yajl_val obj, const char *key, uint32_t **out, size_t *len);
/* object of string values -> struct oci_map (document order) */
int oci_get_map (struct oci_ctx *c, yajl_val obj, const char *key, struct oci_map *out);

/* Value conversions on a node (the path must already point at it). */
int oci_val_u64 (struct oci_ctx *c, yajl_val v, uint64_t max, uint64_t *out);
int oci_val_i64 (struct oci_ctx *c, yajl_val v, int64_t min, int64_t max, int64_t *out);

/* Arrays / maps of objects. `fill` parses one element into zeroed storage; on failure
 * `clear` releases a partly filled element. Outputs are written only on success. */
typedef int (*oci_fill_fn) (struct oci_ctx *c, yajl_val v, void *elem);
typedef int (*oci_fill_keyed_fn) (struct oci_ctx *c, const char *key, yajl_val v, void *elem);
typedef void (*oci_clear_fn) (void *elem);
int oci_get_array_of (struct oci_ctx *c, yajl_val obj, const char *key, size_t elem_size, oci_fill_fn fill,
                      oci_clear_fn clear, void **out, size_t *len);
int oci_get_map_of (struct oci_ctx *c, yajl_val obj, const char *key, size_t elem_size, oci_fill_keyed_fn fill,
                    oci_clear_fn clear, void **out, size_t *len);

/* An optional sub-object: allocate zeroed `size` bytes, fill it with the path at `key`. */
int oci_get_sub (struct oci_ctx *c, yajl_val obj, const char *key, size_t size, oci_fill_fn fill, oci_clear_fn clear,
                 void **out);

#define OCI_TRY(x)                                                                                                     \
  do                                                                                                                   \
    {                                                                                                                  \
      if ((x) < 0)                                                                                                     \
        return -1;                                                                                                     \
    }                                                                                                                  \
  while (0)

void oci_map_clear (struct oci_map *m);

/* Free functions of the sub-objects (contents, not the struct itself unless named _free). */
void oci_process_clear (struct oci_process *p);
void oci_linux_clear (void *l); /* struct oci_linux contents */
void oci_linux_free (struct oci_linux *l);
void oci_resources_clear (void *r); /* struct oci_resources contents */
void oci_resources_free (struct oci_resources *r);
void oci_id_mapping_clear (void *elem);
int oci_fill_id_mapping (struct oci_ctx *c, yajl_val v, void *elem);

/* Walkers (one per spec object); each reads the object `v` into zeroed storage. */
int oci_parse_process (struct oci_ctx *c, yajl_val v, struct oci_process *p);
int oci_parse_linux (struct oci_ctx *c, yajl_val v, struct oci_linux *l);
int oci_parse_resources (struct oci_ctx *c, yajl_val v, struct oci_resources *r);

#endif
