/* oci_json_get.c - typed getters over a yajl tree with strict types and ranges.
 *
 * The runtime-spec fixes the JSON type of every field (config.md, config-linux.md; Go types in
 * specs-go). We are strict: a number where a string belongs, a fraction or exponent where an
 * integer belongs, a negative value for an unsigned field, or a value beyond the field's C type
 * is an error naming the path; nothing is silently truncated or clamped. JSON null means absent.
 * Numbers are read from yajl's raw text so that the full uint64 range is accepted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"

yajl_val
oci_get (yajl_val obj, const char *key)
{
  if (!YAJL_IS_OBJECT (obj))
    return NULL;
  for (size_t i = 0; i < obj->u.object.len; i++)
    if (strcmp (obj->u.object.keys[i], key) == 0)
      return YAJL_IS_NULL (obj->u.object.values[i]) ? NULL : obj->u.object.values[i];
  return NULL;
}

int
oci_get_object (struct oci_ctx *c, yajl_val obj, const char *key, yajl_val *out)
{
  yajl_val v = oci_get (obj, key);
  if (v == NULL)
    return 0;
  if (!YAJL_IS_OBJECT (v))
    {
      oci_fail_key (c, key, "expected object"); /* always -1; spelled out for the analyzer */
      return -1;
    }
  *out = v;
  return 1;
}

int
oci_get_array (struct oci_ctx *c, yajl_val obj, const char *key, yajl_val *out)
{
  yajl_val v = oci_get (obj, key);
  if (v == NULL)
    return 0;
  if (!YAJL_IS_ARRAY (v))
    {
      oci_fail_key (c, key, "expected array"); /* always -1; spelled out for the analyzer */
      return -1;
    }
  *out = v;
  return 1;
}

int
oci_get_string (struct oci_ctx *c, yajl_val obj, const char *key, char **out)
{
  yajl_val v = oci_get (obj, key);
  if (v == NULL)
    return 0;
  if (!YAJL_IS_STRING (v))
    return oci_fail_key (c, key, "expected string");
  free (*out); /* never leak when a caller reuses storage */
  *out = xstrdup (v->u.string);
  return 1;
}

int
oci_get_bool (struct oci_ctx *c, yajl_val obj, const char *key, bool *out)
{
  yajl_val v = oci_get (obj, key);
  if (v == NULL)
    return 0;
  if (!YAJL_IS_TRUE (v) && !YAJL_IS_FALSE (v))
    return oci_fail_key (c, key, "expected boolean");
  *out = YAJL_IS_TRUE (v);
  return 1;
}

/* A JSON integer literal: -?[0-9]+ (yajl already checked the number grammar). */
static bool
is_integer_text (const char *r, bool allow_minus)
{
  if (*r == '-')
    {
      if (!allow_minus)
        return false;
      r++;
    }
  if (!*r)
    return false;
  for (; *r; r++)
    if (*r < '0' || *r > '9')
      return false;
  return true;
}

/* numbers are quoted in messages, but a 10,000-digit one is cut to keep the message one line */
static const char *
ellipsis (const char *r)
{
  return strlen (r) > 40 ? "..." : "";
}

int
oci_val_u64 (struct oci_ctx *c, yajl_val v, uint64_t max, uint64_t *out)
{
  uint64_t x;
  if (!YAJL_IS_NUMBER (v) || v->u.number.r == NULL || !is_integer_text (v->u.number.r, false))
    return oci_fail (c, "expected unsigned integer");
  if (parse_u64 (v->u.number.r, &x) < 0 || x > max)
    return oci_fail (c, "%.40s%s out of range (0 to %" PRIu64 ")", v->u.number.r, ellipsis (v->u.number.r), max);
  *out = x;
  return 0;
}

int
oci_val_i64 (struct oci_ctx *c, yajl_val v, int64_t min, int64_t max, int64_t *out)
{
  int64_t x;
  if (!YAJL_IS_NUMBER (v) || v->u.number.r == NULL || !is_integer_text (v->u.number.r, true))
    return oci_fail (c, "expected integer");
  if (parse_i64 (v->u.number.r, &x) < 0 || x < min || x > max)
    return oci_fail (c, "%.40s%s out of range (%" PRId64 " to %" PRId64 ")", v->u.number.r, ellipsis (v->u.number.r),
                     min, max);
  *out = x;
  return 0;
}

static int
get_unsigned (struct oci_ctx *c, yajl_val obj, const char *key, uint64_t max, uint64_t *out)
{
  yajl_val v = oci_get (obj, key);
  size_t mark;
  int r;
  if (v == NULL)
    return 0;
  mark = oci_ctx_push_key (c, key);
  r = oci_val_u64 (c, v, max, out);
  oci_ctx_pop (c, mark);
  return r < 0 ? -1 : 1;
}

static int
get_signed (struct oci_ctx *c, yajl_val obj, const char *key, int64_t min, int64_t max, int64_t *out)
{
  yajl_val v = oci_get (obj, key);
  size_t mark;
  int r;
  if (v == NULL)
    return 0;
  mark = oci_ctx_push_key (c, key);
  r = oci_val_i64 (c, v, min, max, out);
  oci_ctx_pop (c, mark);
  return r < 0 ? -1 : 1;
}

int
oci_get_u16 (struct oci_ctx *c, yajl_val obj, const char *key, uint16_t *out)
{
  uint64_t x = 0;
  int r = get_unsigned (c, obj, key, UINT16_MAX, &x);
  if (r > 0)
    *out = (uint16_t) x;
  return r;
}

int
oci_get_u32 (struct oci_ctx *c, yajl_val obj, const char *key, uint32_t *out)
{
  uint64_t x = 0;
  int r = get_unsigned (c, obj, key, UINT32_MAX, &x);
  if (r > 0)
    *out = (uint32_t) x;
  return r;
}

int
oci_get_u64 (struct oci_ctx *c, yajl_val obj, const char *key, uint64_t *out)
{
  return get_unsigned (c, obj, key, UINT64_MAX, out);
}

int
oci_get_i32 (struct oci_ctx *c, yajl_val obj, const char *key, int32_t *out)
{
  int64_t x = 0;
  int r = get_signed (c, obj, key, INT32_MIN, INT32_MAX, &x);
  if (r > 0)
    *out = (int32_t) x;
  return r;
}

int
oci_get_i64 (struct oci_ctx *c, yajl_val obj, const char *key, int64_t *out)
{
  return get_signed (c, obj, key, INT64_MIN, INT64_MAX, out);
}

int
oci_get_strv (struct oci_ctx *c, yajl_val obj, const char *key, char ***out, size_t *len)
{
  yajl_val a = NULL;
  int r = oci_get_array (c, obj, key, &a);
  size_t n;
  cleanup_strv char **v = NULL;

  if (r <= 0)
    return r;
  n = a->u.array.len;
  v = xmalloc0 ((n + 1) * sizeof (char *));
  for (size_t i = 0; i < n; i++)
    {
      yajl_val e = a->u.array.values[i];
      if (!YAJL_IS_STRING (e))
        {
          size_t mark = oci_ctx_push_key (c, key);
          oci_ctx_push_index (c, i);
          oci_fail (c, "expected string");
          oci_ctx_pop (c, mark);
          return -1;
        }
      v[i] = xstrdup (e->u.string);
    }
  asbx_strv_free (*out);
  *out = steal_ptr (&v);
  *len = n;
  return 1;
}

int
oci_get_u32v (struct oci_ctx *c, yajl_val obj, const char *key, uint32_t **out, size_t *len)
{
  yajl_val a = NULL;
  int r = oci_get_array (c, obj, key, &a);
  size_t n, mark;
  cleanup_free uint32_t *v = NULL;

  if (r <= 0)
    return r;
  n = a->u.array.len;
  v = xmalloc0 ((n ? n : 1) * sizeof (uint32_t));
  mark = oci_ctx_push_key (c, key);
  for (size_t i = 0; i < n; i++)
    {
      uint64_t x = 0;
      size_t m2 = oci_ctx_push_index (c, i);
      if (oci_val_u64 (c, a->u.array.values[i], UINT32_MAX, &x) < 0)
        {
          oci_ctx_pop (c, mark);
          return -1;
        }
      oci_ctx_pop (c, m2);
      v[i] = (uint32_t) x;
    }
  oci_ctx_pop (c, mark);
  free (*out);
  *out = steal_ptr (&v);
  *len = n;
  return 1;
}

void
oci_map_clear (struct oci_map *m)
{
  for (size_t i = 0; i < m->len; i++)
    {
      free (m->keys[i]);
      free (m->values[i]);
    }
  free (m->keys);
  free (m->values);
  m->keys = m->values = NULL;
  m->len = 0;
}

int
oci_get_map (struct oci_ctx *c, yajl_val obj, const char *key, struct oci_map *out)
{
  yajl_val o = NULL;
  int r = oci_get_object (c, obj, key, &o);
  struct oci_map m = { 0 };
  size_t n;

  if (r <= 0)
    return r;
  n = o->u.object.len;
  m.keys = xmalloc0 ((n + 1) * sizeof (char *));
  m.values = xmalloc0 ((n + 1) * sizeof (char *));
  for (size_t i = 0; i < n; i++)
    {
      yajl_val e = o->u.object.values[i];
      if (!YAJL_IS_STRING (e))
        {
          size_t mark = oci_ctx_push_key (c, key);
          oci_fail_key (c, o->u.object.keys[i], "expected string");
          oci_ctx_pop (c, mark);
          oci_map_clear (&m);
          return -1;
        }
      m.keys[i] = xstrdup (o->u.object.keys[i]);
      m.values[i] = xstrdup (e->u.string);
      m.len = i + 1;
    }
  oci_map_clear (out);
  *out = m;
  return 1;
}

int
oci_get_array_of (struct oci_ctx *c, yajl_val obj, const char *key, size_t elem_size, oci_fill_fn fill,
                  oci_clear_fn clear, void **out, size_t *len)
{
  yajl_val a = NULL;
  int r = oci_get_array (c, obj, key, &a);
  size_t n, mark;
  char *arr;

  if (r <= 0)
    return r;
  n = a->u.array.len;
  arr = xmalloc0 ((n ? n : 1) * elem_size);
  mark = oci_ctx_push_key (c, key);
  for (size_t i = 0; i < n; i++)
    {
      yajl_val e = a->u.array.values[i];
      size_t m2 = oci_ctx_push_index (c, i);
      if (!YAJL_IS_OBJECT (e) ? oci_fail (c, "expected object") : fill (c, e, arr + i * elem_size))
        {
          for (size_t j = 0; j <= i; j++)
            clear (arr + j * elem_size);
          free (arr);
          oci_ctx_pop (c, mark);
          return -1;
        }
      oci_ctx_pop (c, m2);
    }
  oci_ctx_pop (c, mark);
  *out = arr;
  *len = n;
  return 1;
}

int
oci_get_map_of (struct oci_ctx *c, yajl_val obj, const char *key, size_t elem_size, oci_fill_keyed_fn fill,
                oci_clear_fn clear, void **out, size_t *len)
{
  yajl_val o = NULL;
  int r = oci_get_object (c, obj, key, &o);
  size_t n, mark;
  char *arr;

  if (r <= 0)
    return r;
  n = o->u.object.len;
  arr = xmalloc0 ((n ? n : 1) * elem_size);
  mark = oci_ctx_push_key (c, key);
  for (size_t i = 0; i < n; i++)
    {
      yajl_val e = o->u.object.values[i];
      size_t m2 = oci_ctx_push_key (c, o->u.object.keys[i]);
      if (!YAJL_IS_OBJECT (e) ? oci_fail (c, "expected object") : fill (c, o->u.object.keys[i], e, arr + i * elem_size))
        {
          for (size_t j = 0; j <= i; j++)
            clear (arr + j * elem_size);
          free (arr);
          oci_ctx_pop (c, mark);
          return -1;
        }
      oci_ctx_pop (c, m2);
    }
  oci_ctx_pop (c, mark);
  *out = arr;
  *len = n;
  return 1;
}

int
oci_get_sub (struct oci_ctx *c, yajl_val obj, const char *key, size_t size, oci_fill_fn fill, oci_clear_fn clear,
             void **out)
{
  yajl_val o = NULL;
  int r = oci_get_object (c, obj, key, &o);
  size_t mark;
  void *p;

  if (r <= 0)
    return r;
  p = xmalloc0 (size);
  mark = oci_ctx_push_key (c, key);
  r = fill (c, o, p);
  oci_ctx_pop (c, mark);
  if (r < 0)
    {
      clear (p);
      free (p);
      return -1;
    }
  *out = p;
  return 1;
}
