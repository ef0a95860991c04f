/* workspace_diff.h - `agentsbx workspace diff`: the changes of a review workspace, for people
 * (a summary line per change, a unified diff for text) or for tools (JSON lines). */
#ifndef ASBX_RUNTIME_WORKSPACE_DIFF_H
#define ASBX_RUNTIME_WORKSPACE_DIFF_H

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"
#include "runtime/workspace_walk.h"

struct ws_diff_opts
{
  const char *id;
  bool json;
  const char *from, *to; /* snapshot names, NULL = the lower (from) / the current upper (to) */
  char **paths;          /* restrict to these workspace paths (and what is below them) */
  size_t paths_len;
  const char *config_path; /* the global --config (NULL: the default): where workspacesDir is */
};

/* Walk and print to `out` (a FILE on fd fileno(out): the unified diffs are written there by
 * diff(1) directly). Returns 0, or -1 with *err. */
int ws_diff (const struct ws_diff_opts *o, FILE *out, asbx_err_t *err);

/* Open `rel` (a walker path) in the layer dir `layerfd` for reading: beneath it, no symlink on
 * the way nor at the end (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, with the
 * fallback when openat2 is off), a regular file (else -1 with errno EINVAL). Returns the fd. */
int ws_open_rel (int layerfd, const char *rel);

/* Does the content of fd look like text: no NUL byte in its first 8 KiB (pread, offset kept)?
 * fd < 0 counts as text (an empty side). */
bool ws_is_text (int fd);

/* Write a unified diff of the contents of old_fd and new_fd (either may be -1: /dev/null) to
 * `out`, by GNU diff -u run on the fds (/dev/fd/N: no path is resolved again), labelled
 * old_label and new_label. diff's output goes through a pipe and a filter: C0 controls but TAB
 * and LF, DEL and C1 (UTF-8 or raw) are written as \xNN, so file content cannot drive the
 * reviewer's terminal (an OSC title, a clear screen, concealed text); other bytes pass. 0 / -1 with *err (fork/exec
 * failure, diff's trouble status 2). */
int ws_unified_diff (FILE *out, int old_fd, int new_fd, const char *old_label, const char *new_label, asbx_err_t *err);

/* `s` with C0/C1 control characters, DEL, the backslash and bytes that are not UTF-8 written as \xNN
 * escapes, so an agent's file name cannot drive the terminal. Heap string. */
char *ws_escape (const char *s);

/* asbx_error (err, errnum, fmt, ESCAPED, ...) where ESCAPED is ws_escape (path): a path from a
 * workspace (agent-chosen bytes) is never written raw into an error the reviewer's terminal
 * shows (outside attack 06: ESC sequences in a file name). fmt's first conversion takes it.
 * Evaluates errnum before the escaping; returns what asbx_error returns (-1). */
#define ws_error_path(err, errnum, fmt, path, ...)                                                                     \
  __extension__({                                                                                                      \
    int ws_en_ = (errnum);                                                                                             \
    char *ws_ep_ = ws_escape (path);                                                                                   \
    int ws_r_ = asbx_error (err, ws_en_, fmt, ws_ep_, ##__VA_ARGS__);                                                  \
    free (ws_ep_);                                                                                                     \
    ws_r_;                                                                                                             \
  })

/* A JSON text with DEL and the C1 controls (UTF-8 C2 80..C2 9F) written as \u007f and \u0080..
 * \u009f: the same JSON value (those bytes only occur inside strings), and nothing a terminal
 * acts on (yajl already escapes C0 as \u00XX). Heap string. */
char *ws_json_escape_controls (const char *json);

/* Print one change as the human summary line ("added    file 0644 12 sha256:... path"). */
void ws_print_change (FILE *out, const struct ws_change *c);

/* One change as a JSON line (with '\n'); heap string. */
char *ws_change_json (const struct ws_change *c);

#endif
