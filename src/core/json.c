/* json.c - the yajl generator set-up and take-out; see json.h. */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

yajl_gen
json_gen_new (unsigned flags)
{
  yajl_gen g = yajl_gen_alloc (NULL);
  if (g == NULL)
    abort ();
  if (flags & JSON_GEN_VALIDATE_UTF8)
    yajl_gen_config (g, yajl_gen_validate_utf8, 1);
  if (flags & JSON_GEN_PRETTY)
    {
      yajl_gen_config (g, yajl_gen_beautify, 1);
      yajl_gen_config (g, yajl_gen_indent_string, JSON_GEN_INDENT);
    }
  return g;
}

void
json_gen_str (yajl_gen g, const char *s)
{
  if (s)
    yajl_gen_string (g, (const unsigned char *) s, strlen (s));
  else
    yajl_gen_null (g);
}

void
json_gen_kv (yajl_gen g, const char *k, const char *v)
{
  json_gen_str (g, k);
  json_gen_str (g, v);
}

void
json_gen_value (yajl_gen g, yajl_val v)
{
  if (YAJL_IS_OBJECT (v))
    {
      yajl_gen_map_open (g);
      for (size_t i = 0; i < v->u.object.len; i++)
        {
          json_gen_str (g, v->u.object.keys[i]);
          json_gen_value (g, v->u.object.values[i]);
        }
      yajl_gen_map_close (g);
    }
  else if (YAJL_IS_ARRAY (v))
    {
      yajl_gen_array_open (g);
      for (size_t i = 0; i < v->u.array.len; i++)
        json_gen_value (g, v->u.array.values[i]);
      yajl_gen_array_close (g);
    }
  else if (YAJL_IS_STRING (v))
    json_gen_str (g, v->u.string);
  else if (YAJL_IS_NUMBER (v))
    yajl_gen_number (g, v->u.number.r, strlen (v->u.number.r));
  else if (YAJL_IS_TRUE (v))
    yajl_gen_bool (g, 1);
  else if (YAJL_IS_FALSE (v))
    yajl_gen_bool (g, 0);
  else
    yajl_gen_null (g);
}

char *
json_gen_finish (yajl_gen g, bool newline, size_t *len)
{
  const unsigned char *buf = NULL;
  size_t n = 0;
  yajl_gen_get_buf (g, &buf, &n);
  char *out = xmalloc (n + 2);
  if (n)
    memcpy (out, buf, n);
  if (newline)
    out[n++] = '\n';
  out[n] = '\0';
  if (len)
    *len = n;
  yajl_gen_free (g);
  return out;
}
