/* setup_toml.c - see setup_toml.h. A recursive-descent scanner over TOML 1.0's grammar
 * (toml.io/en/v1.0.0): expressions are a key/value, a table header or nothing, each followed by
 * an optional comment and a newline; values are skipped by their syntax, strings honouring their
 * escapes so a quoted '#', ']' or newline cannot be mistaken for structure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "runtime/setup_toml.h"

struct scan
{
  const char *s;
  size_t i, len, line;
  char *err;
};

static int
fail (struct scan *c, const char *what)
{
  if (!c->err)
    c->err = xasprintf ("line %zu: expected %s", c->line, what);
  return -1;
}

static int
peek (const struct scan *c, size_t k)
{
  return c->i + k < c->len ? (unsigned char) c->s[c->i + k] : -1;
}

static void
ws (struct scan *c)
{
  while (peek (c, 0) == ' ' || peek (c, 0) == '\t')
    c->i++;
}

static void
comment (struct scan *c)
{
  if (peek (c, 0) == '#')
    while (c->i < c->len && c->s[c->i] != '\n')
      c->i++;
}

static bool
newline (struct scan *c)
{
  if (peek (c, 0) == '\r' && peek (c, 1) == '\n')
    c->i++;
  if (peek (c, 0) == '\n')
    {
      c->i++;
      c->line++;
      return true;
    }
  return false;
}

/* whitespace, comments and newlines (inside arrays) */
static void
ws_nl (struct scan *c)
{
  for (;;)
    {
      ws (c);
      comment (c);
      if (!newline (c))
        return;
    }
}

static bool
bare_char (int ch)
{
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
}

/* a basic ("...") or literal ('...') string, single- or multi-line; appends its raw content
 * (escapes kept as written: only key segments use it, compared as written) to out if non-NULL */
static int
string (struct scan *c, char *out, size_t outsz)
{
  int q = peek (c, 0);
  bool multi = peek (c, 1) == q && peek (c, 2) == q;
  size_t o = 0;
  c->i += multi ? 3 : 1;
  for (;;)
    {
      int ch = peek (c, 0);
      if (ch < 0)
        return fail (c, "the end of a string");
      if (ch == '\n')
        {
          if (!multi)
            return fail (c, "the end of a string before the line ends");
          c->line++;
        }
      if (q == '"' && ch == '\\')
        {
          if (out && o + 2 < outsz)
            out[o++] = (char) ch;
          c->i++;
          ch = peek (c, 0);
          if (ch < 0)
            return fail (c, "an escape");
          if (ch == '\n')
            c->line++;
        }
      else if (ch == q && (!multi || (peek (c, 1) == q && peek (c, 2) == q)))
        {
          c->i += multi ? 3 : 1;
          /* a multi-line string may end with up to two more quotes: """a"""" is `a"` */
          while (multi && peek (c, 0) == q)
            c->i++;
          break;
        }
      if (out && o + 1 < outsz)
        out[o++] = (char) ch;
      c->i++;
    }
  if (out)
    out[o] = '\0';
  return 0;
}

/* key = simple-key *( ws "." ws simple-key ); appends "seg.seg" to path */
static int
key (struct scan *c, char *path, size_t pathsz)
{
  for (;;)
    {
      char seg[512];
      ws (c);
      int ch = peek (c, 0);
      if (ch == '"' || ch == '\'')
        {
          char raw[500] = "";
          if (string (c, raw, sizeof raw) < 0)
            return -1;
          if (strchr (raw, '.') || !*raw)
            snprintf (seg, sizeof seg, "\"%s\"", raw);
          else
            snprintf (seg, sizeof seg, "%s", raw);
        }
      else if (bare_char (ch))
        {
          size_t st = c->i;
          while (bare_char (peek (c, 0)))
            c->i++;
          snprintf (seg, sizeof seg, "%.*s", (int) (c->i - st), c->s + st);
        }
      else
        return fail (c, "a key");
      size_t used = strlen (path);
      snprintf (path + used, pathsz - used, "%s%s", used ? "." : "", seg);
      ws (c);
      if (peek (c, 0) != '.')
        return 0;
      c->i++;
    }
}

static int value (struct scan *c, int depth);

static int
array (struct scan *c, int depth)
{
  c->i++;
  for (;;)
    {
      ws_nl (c);
      if (peek (c, 0) == ']')
        {
          c->i++;
          return 0;
        }
      if (value (c, depth + 1) < 0)
        return -1;
      ws_nl (c);
      if (peek (c, 0) == ',')
        c->i++;
      else if (peek (c, 0) != ']')
        return fail (c, "',' or ']' in an array");
    }
}

static int
inline_table (struct scan *c, int depth)
{
  c->i++;
  ws (c);
  if (peek (c, 0) == '}')
    {
      c->i++;
      return 0;
    }
  for (;;)
    {
      char p[1024] = "";
      if (key (c, p, sizeof p) < 0)
        return -1;
      if (peek (c, 0) != '=')
        return fail (c, "'=' in an inline table");
      c->i++;
      ws (c);
      if (value (c, depth + 1) < 0)
        return -1;
      ws (c);
      if (peek (c, 0) == '}')
        {
          c->i++;
          return 0;
        }
      if (peek (c, 0) != ',')
        return fail (c, "',' or '}' in an inline table");
      c->i++;
    }
}

static int
value (struct scan *c, int depth)
{
  int ch = peek (c, 0);
  if (depth > 64)
    return fail (c, "less nesting");
  if (ch == '"' || ch == '\'')
    return string (c, NULL, 0);
  if (ch == '[')
    return array (c, depth);
  if (ch == '{')
    return inline_table (c, depth);
  /* numbers, booleans, dates and times: up to what may follow a value; a date-time may hold one
   * space ("1979-05-27 07:32:00Z") */
  size_t st = c->i;
  while (c->i < c->len && !strchr (" \t\r\n#,]}", c->s[c->i]))
    c->i++;
  if (peek (c, 0) == ' ' && c->i - st == 10 && c->s[st + 4] == '-' && peek (c, 1) >= '0' && peek (c, 1) <= '9')
    {
      c->i++;
      while (c->i < c->len && !strchr (" \t\r\n#,]}", c->s[c->i]))
        c->i++;
    }
  return c->i > st ? 0 : fail (c, "a value");
}

static void
add_def (struct toml_doc *d, const char *path, bool header, bool array, size_t start, size_t end)
{
  d->defs = xrealloc (d->defs, (d->n + 1) * sizeof *d->defs);
  d->defs[d->n++] = (struct toml_def){
    .path = xstrdup (path), .header = header, .array = array, .line_start = start, .line_end = end
  };
}

int
toml_scan (const char *text, size_t len, struct toml_doc *doc, char **err)
{
  struct scan c = { .s = text, .len = len, .line = 1 };
  char table[1024] = "";

  *doc = (struct toml_doc){ 0 };
  while (c.i < c.len)
    {
      size_t start = c.i;
      char p[1024] = "";
      bool hdr = false, arr = false;
      ws (&c);
      int ch = peek (&c, 0);
      if (ch == '[')
        {
          hdr = true;
          arr = peek (&c, 1) == '[';
          c.i += arr ? 2 : 1;
          if (key (&c, p, sizeof p) < 0)
            break;
          if (peek (&c, 0) != ']' || (arr && peek (&c, 1) != ']'))
            {
              fail (&c, "']' closing a table header");
              break;
            }
          c.i += arr ? 2 : 1;
          snprintf (table, sizeof table, "%s", p);
        }
      else if (ch != '#' && ch != '\n' && ch != '\r' && ch >= 0)
        {
          snprintf (p, sizeof p, "%s", table);
          if (key (&c, p, sizeof p) < 0)
            break;
          if (peek (&c, 0) != '=')
            {
              fail (&c, "'=' after a key");
              break;
            }
          c.i++;
          ws (&c);
          if (value (&c, 0) < 0)
            break;
        }
      ws (&c);
      comment (&c);
      if (c.i < c.len && !newline (&c))
        {
          fail (&c, "the end of the line");
          break;
        }
      if (*p)
        add_def (doc, p, hdr, arr, start, c.i);
    }
  if (c.err)
    {
      *err = c.err;
      toml_doc_free (doc);
      return -1;
    }
  return 0;
}

void
toml_doc_free (struct toml_doc *doc)
{
  for (size_t i = 0; i < doc->n; i++)
    free (doc->defs[i].path);
  free (doc->defs);
  *doc = (struct toml_doc){ 0 };
}

const struct toml_def *
toml_find (const struct toml_doc *doc, const char *path)
{
  for (size_t i = 0; i < doc->n; i++)
    if (strcmp (doc->defs[i].path, path) == 0)
      return &doc->defs[i];
  return NULL;
}

static bool
is_prefix (const char *pre, const char *path)
{
  size_t n = strlen (pre);
  return strncmp (pre, path, n) == 0 && (path[n] == '\0' || path[n] == '.');
}

const struct toml_def *
toml_conflict (const struct toml_doc *doc, const char *path)
{
  for (size_t i = 0; i < doc->n; i++)
    {
      const struct toml_def *d = &doc->defs[i];
      if (is_prefix (path, d->path))
        return d;
      if (!d->header && is_prefix (d->path, path))
        return d;
      if (d->array && is_prefix (d->path, path))
        return d; /* a table below [[x]] would extend its last element */
    }
  return NULL;
}

char *
toml_key_segment (const char *s)
{
  for (const char *p = s; *p; p++)
    if (!bare_char ((unsigned char) *p))
      return xasprintf ("\"%s\"", s);
  return *s ? xstrdup (s) : xstrdup ("\"\"");
}
