/* oci_json.c - safe loading of untrusted JSON into a yajl tree, and typed getters that name the
 * JSON path in every error.
 *
 * Threat model: config.json and process.json come from whoever drives the runtime (an engine, a
 * user, a fuzzer). Input must never crash us or be read ambiguously:
 *  - yajl_tree_free() recurses once per nesting level, so depth is bounded by a pre-scan BEFORE
 *    yajl builds anything (the pre-scan tracks strings exactly as the JSON lexer does, and rejects
 *    comments, which yajl_tree would otherwise accept and which could hide brackets from it);
 *  - yajl_tree keeps every duplicate key; we reject duplicates in any object so that two readers
 *    can never disagree about which value counts;
 *  - "\u0000" inside a string would silently truncate the C string we hand out: rejected;
 *  - numbers are converted from yajl's raw text (u.number.r), never from its double or its
 *    int64 (which is unset above INT64_MAX), with explicit ranges.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"

void
oci_ctx_init (struct oci_ctx *c, const char *name, asbx_err_t *err)
{
  c->name = name ? name : "config.json";
  c->cap = 128;
  c->path = xmalloc (c->cap);
  c->path[0] = '\0';
  c->len = 0;
  c->err = err;
}

void
oci_ctx_release (struct oci_ctx *c)
{
  free (c->path);
  c->path = NULL;
}

static void
ctx_append (struct oci_ctx *c, const char *s, size_t n)
{
  if (c->len + n + 1 > c->cap)
    {
      while (c->len + n + 1 > c->cap)
        c->cap *= 2;
      c->path = xrealloc (c->path, c->cap);
    }
  memcpy (c->path + c->len, s, n);
  c->len += n;
  c->path[c->len] = '\0';
}

char *
oci_quote (const char *s)
{
  size_t n = strlen (s), o = 0;
  bool cut = n > 200;
  char *out = xmalloc ((cut ? 200 : n) * 6 + 8);

  out[o++] = '"';
  for (size_t i = 0; i < n && i < 200; i++)
    {
      unsigned char ch = (unsigned char) s[i];
      if (ch == '"' || ch == '\\')
        {
          out[o++] = '\\';
          out[o++] = (char) ch;
        }
      else if (ch < 0x20 || ch == 0x7f)
        o += (size_t) sprintf (out + o, "\\u%04x", ch);
      else
        out[o++] = (char) ch;
    }
  if (cut)
    {
      memcpy (out + o, "...", 3);
      o += 3;
    }
  out[o++] = '"';
  out[o] = '\0';
  return out;
}

static bool
is_identifier (const char *k)
{
  if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || *k == '_'))
    return false;
  for (; *k; k++)
    if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '_'))
      return false;
  return true;
}

size_t
oci_ctx_push_key (struct oci_ctx *c, const char *key)
{
  size_t mark = c->len;
  if (is_identifier (key))
    {
      if (c->len)
        ctx_append (c, ".", 1);
      ctx_append (c, key, strlen (key));
    }
  else
    {
      /* map keys such as "net.ipv4.ip_forward" or "io.agentsbx/x" keep the path readable */
      cleanup_free char *q = oci_quote (key);
      ctx_append (c, "[", 1);
      ctx_append (c, q, strlen (q));
      ctx_append (c, "]", 1);
    }
  return mark;
}

size_t
oci_ctx_push_index (struct oci_ctx *c, size_t i)
{
  size_t mark = c->len;
  char buf[32];
  int n = snprintf (buf, sizeof buf, "[%zu]", i);
  ctx_append (c, buf, (size_t) n);
  return mark;
}

void
oci_ctx_pop (struct oci_ctx *c, size_t mark)
{
  c->len = mark;
  c->path[mark] = '\0';
}

static int
vfail (struct oci_ctx *c, const char *fmt, va_list ap)
{
  cleanup_free char *msg = NULL;
  if (vasprintf (&msg, fmt, ap) < 0)
    abort ();
  if (c->len)
    asbx_error (c->err, 0, "%s: %s: %s", c->name, c->path, msg);
  else
    asbx_error (c->err, 0, "%s: %s", c->name, msg);
  /* invalid input, but no strerror suffix: the message already says what is wrong */
  if (c->err && *c->err)
    (*c->err)->errnum = EINVAL;
  return -1;
}

int
oci_fail (struct oci_ctx *c, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vfail (c, fmt, ap);
  va_end (ap);
  return -1;
}

int
oci_fail_key (struct oci_ctx *c, const char *key, const char *fmt, ...)
{
  va_list ap;
  size_t mark = oci_ctx_push_key (c, key);
  va_start (ap, fmt);
  vfail (c, fmt, ap);
  va_end (ap);
  oci_ctx_pop (c, mark);
  return -1;
}

int
oci_required (struct oci_ctx *c, const char *key, int r)
{
  if (r == 0)
    return oci_fail_key (c, key, "required field missing");
  return r;
}

/* ---- loading ---------------------------------------------------------------------------- */

static void
offset_to_line_col (const char *s, size_t off, size_t *line, size_t *col)
{
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off; i++)
    {
      if (s[i] == '\n')
        {
          (*line)++;
          *col = 1;
        }
      else
        (*col)++;
    }
}

/* Bound the nesting depth and reject what yajl_tree would accept but we must not, before any
 * tree exists. Strings are tracked like the JSON lexer does ('"' opens, '\\' escapes one byte,
 * '"' closes), so for valid JSON the counted depth is exact and for invalid JSON it is never
 * lower than yajl's depth up to the point where yajl stops. */
static int
prescan (struct oci_ctx *c, const char *s, size_t len)
{
  size_t depth = 0, line, col;
  bool in_str = false, any = false;

  for (size_t i = 0; i < len; i++)
    {
      char ch = s[i];
      if (ch == '\0')
        {
          offset_to_line_col (s, i, &line, &col);
          return oci_fail (c, "invalid JSON at line %zu, column %zu: NUL byte", line, col);
        }
      if (in_str)
        {
          if (ch == '\\' && i + 1 < len)
            {
              if (s[i + 1] == 'u' && i + 5 < len && strncmp (s + i + 2, "0000", 4) == 0)
                {
                  offset_to_line_col (s, i, &line, &col);
                  return oci_fail (c, "invalid JSON at line %zu, column %zu: \\u0000 in a string", line, col);
                }
              i++;
            }
          else if (ch == '"')
            in_str = false;
          continue;
        }
      if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
        any = true;
      switch (ch)
        {
        case '"': in_str = true; break;
        case '[':
        case '{':
          if (++depth > OCI_MAX_DEPTH)
            {
              offset_to_line_col (s, i, &line, &col);
              return oci_fail (c, "invalid JSON at line %zu, column %zu: nesting deeper than %d levels", line, col,
                               OCI_MAX_DEPTH);
            }
          break;
        case ']':
        case '}':
          if (depth)
            depth--;
          break;
        case '/':
          offset_to_line_col (s, i, &line, &col);
          return oci_fail (c, "invalid JSON at line %zu, column %zu: comments are not allowed", line, col);
        default: break;
        }
    }
  if (!any)
    return oci_fail (c, "empty document");
  return 0;
}

/* yajl_tree_parse only gives a multi-line message; re-run a callback-less parse to get the
 * offset and a one-line reason. Only reached on failure. */
static int
fail_syntax (struct oci_ctx *c, const char *s, size_t len)
{
  yajl_handle h = yajl_alloc (NULL, NULL, NULL);
  yajl_status st;
  size_t off, line, col;
  unsigned char *e;
  cleanup_free char *reason = NULL;

  if (h == NULL)
    abort ();
  st = yajl_parse (h, (const unsigned char *) s, len);
  /* yajl counts the offending byte or token as consumed: step back onto it */
  off = yajl_get_bytes_consumed (h);
  if (off > 0)
    off--;
  if (st == yajl_status_ok)
    {
      (void) yajl_complete_parse (h); /* only the error text below is wanted */
      off = len;
    }
  e = yajl_get_error (h, 0, (const unsigned char *) s, len);
  reason = xstrdup (e ? (const char *) e : "malformed JSON");
  if (e)
    yajl_free_error (h, e);
  yajl_free (h);
  reason[strcspn (reason, "\r\n")] = '\0'; /* one line */
  if (off > len)
    off = len;
  offset_to_line_col (s, off, &line, &col);
  return oci_fail (c, "invalid JSON at line %zu, column %zu: %s", line, col, reason);
}

static int
cmp_keyp (const void *a, const void *b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The first duplicate key of an object: the later occurrence in document order for small
 * objects, the smallest duplicated key (sorted) for large ones, which keeps this O(n log n). */
static const char *
find_duplicate (yajl_val obj)
{
  size_t n = obj->u.object.len;
  const char **keys = obj->u.object.keys;
  const char *dup = NULL;

  if (n <= 32)
    {
      for (size_t i = 1; i < n; i++)
        for (size_t j = 0; j < i; j++)
          if (strcmp (keys[i], keys[j]) == 0)
            return keys[i];
      return NULL;
    }
  cleanup_free const char **sorted = xmalloc (n * sizeof (*sorted));
  memcpy (sorted, keys, n * sizeof (*sorted));
  qsort (sorted, n, sizeof (*sorted), cmp_keyp);
  for (size_t i = 1; i < n && !dup; i++)
    if (strcmp (sorted[i], sorted[i - 1]) == 0)
      dup = sorted[i];
  return dup;
}

/* Recursion is bounded by the pre-scan (<= OCI_MAX_DEPTH). */
static int
check_duplicates (struct oci_ctx *c, yajl_val v)
{
  if (YAJL_IS_OBJECT (v))
    {
      const char *dup = find_duplicate (v);
      if (dup)
        {
          cleanup_free char *q = oci_quote (dup);
          return oci_fail (c, "duplicate key %s", q);
        }
      for (size_t i = 0; i < v->u.object.len; i++)
        {
          size_t mark = oci_ctx_push_key (c, v->u.object.keys[i]);
          int r = check_duplicates (c, v->u.object.values[i]);
          oci_ctx_pop (c, mark);
          if (r < 0)
            return r;
        }
    }
  else if (YAJL_IS_ARRAY (v))
    {
      for (size_t i = 0; i < v->u.array.len; i++)
        {
          size_t mark = oci_ctx_push_index (c, i);
          int r = check_duplicates (c, v->u.array.values[i]);
          oci_ctx_pop (c, mark);
          if (r < 0)
            return r;
        }
    }
  return 0;
}

yajl_val
oci_json_load (struct oci_ctx *c, const char *json, size_t len)
{
  cleanup_free char *copy = NULL;
  char ebuf[256];
  yajl_val tree;

  if (json == NULL || len == 0)
    {
      oci_fail (c, "empty document");
      return NULL;
    }
  if (prescan (c, json, len) < 0)
    return NULL;
  /* yajl_tree_parse wants a NUL-terminated string; the pre-scan proved there is no NUL inside */
  copy = xmalloc (len + 1);
  memcpy (copy, json, len);
  copy[len] = '\0';
  ebuf[0] = '\0';
  tree = yajl_tree_parse (copy, ebuf, sizeof ebuf);
  if (tree == NULL)
    {
      fail_syntax (c, copy, len);
      return NULL;
    }
  if (!YAJL_IS_OBJECT (tree))
    {
      yajl_tree_free (tree);
      oci_fail (c, "expected a JSON object at top level");
      return NULL;
    }
  if (check_duplicates (c, tree) < 0)
    {
      yajl_tree_free (tree);
      return NULL;
    }
  return tree;
}
