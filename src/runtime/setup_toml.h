/* setup_toml.h - the key structure of a TOML document (TOML 1.0), for `agentsbx setup`'s edits
 * of containerd's config.toml and Podman's containers.conf.
 *
 * Why a scanner and not a TOML library: Debian 12 ships no C TOML library (only the C++
 * header-only cpptoml and Python/Go/Perl ones), and the edit never rewrites a value: it adds or
 * removes whole lines we own (a marked block, setup.c). What it must know exactly is which key
 * paths the document already defines and where each table header line is, so that an added
 * table never duplicates or extends an existing definition (TOML forbids both). So the scanner
 * tokenises all of TOML's syntax that can hide a key or a line break (bare, basic and literal
 * keys, dotted keys, the four string kinds with escapes, arrays over several lines, inline tables,
 * comments) and skips scalar values; it does not convert values. */
#ifndef ASBX_RUNTIME_SETUP_TOML_H
#define ASBX_RUNTIME_SETUP_TOML_H

#include <stdbool.h>
#include <stddef.h>

/* one defined key path: segments joined by '.', each segment as written decoded (a quoted
 * segment that itself contains '.' is kept in quotes, so "a.b" never equals a.b) */
struct toml_def
{
  char *path;
  bool header;     /* a [table] or [[array]] header (else a key = value) */
  bool array;      /* [[array]] */
  size_t line_end; /* offset just past the line's '\n' (or the end of the text) */
  size_t line_start;
};

struct toml_doc
{
  struct toml_def *defs;
  size_t n;
};

/* Scan `len` bytes of `text`. 0 and *doc (free with toml_doc_free), or -1 with *err (heap
 * message "line N: expected ..."): the text is not TOML this scanner can vouch for. */
int toml_scan (const char *text, size_t len, struct toml_doc *doc, char **err);

void toml_doc_free (struct toml_doc *doc);

/* The definition whose path equals `path`, or NULL. */
const struct toml_def *toml_find (const struct toml_doc *doc, const char *path);

/* A definition that makes adding the table `path` invalid: one at or below `path`, or a key =
 * value (an inline table, a scalar) at a proper prefix of it. NULL when the table can be added. */
const struct toml_def *toml_conflict (const struct toml_doc *doc, const char *path);

/* Whether segment `s` must be quoted in a key ("io.containerd.grpc.v1.cri"), and the quoted
 * form. Heap. */
char *toml_key_segment (const char *s);

#endif
