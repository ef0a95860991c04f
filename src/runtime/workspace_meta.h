/* workspace_meta.h - a review workspace's meta.json (issue 18; the layout:
 * runtime/workspace_layout.h, docs/man/agentsbx-workspace.8): its one struct, reader (yajl)
 * and writer, used by create's review layout, the workspace verbs, `sandbox --seed-git`, and the
 * change engine (diff, apply), which opens a workspace as a handle (its directory, upper/ and
 * parsed meta.json). */
#ifndef ASBX_RUNTIME_WORKSPACE_META_H
#define ASBX_RUNTIME_WORKSPACE_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "core/error.h"

#define WS_META "meta.json"

/* meta.json, every key of the shared design plus `protect` */
struct ws_meta
{
  char *id;
  char *workspace;    /* the lower: the host workspace's realpath */
  uint64_t lower_dev; /* st_dev / st_ino of the lower as pinned (the fd given to overlayfs) */
  uint64_t lower_ino;
  char *created;       /* RFC 3339 UTC */
  uint64_t started_ns; /* CLOCK_REALTIME ns taken just before the first overlay mount */
  char *xattr;         /* "trusted" or "user" (userxattr: mounted in a user namespace) */
  char *state;         /* "running" or "stopped" */
  char **snapshots;    /* oldest first, NULL-terminated */
  size_t snapshots_len;
  char *image;     /* NULL or "sha256:..." (rv-image) */
  char *seed_repo; /* seed: NULL, or {repo, rev} (rv-image) */
  char *seed_rev;
  /* workspace-relative paths the policy's denyWrite rules name inside the workspace (".git/hooks"):
   * `workspace apply` refuses writes at or below them */
  char **protect;
  size_t protect_len;
};

/* Free the strings of *m and zero it. */
void ws_meta_clear (struct ws_meta *m);

/* meta.json's "state" is "running" (a container holds the workspace, or held it when killed) */
static inline bool
ws_meta_running (const struct ws_meta *m)
{
  return m->state && strcmp (m->state, "running") == 0;
}

/* Read <id dir>/meta.json (dirfd: the id directory). Unknown keys are kept out (ignored) so
 * that the other verbs' additions do not break an older reader; a missing or mistyped known
 * key, a relative `workspace`, an `xattr` or `state` outside its values, or a `protect` entry
 * outside the workspace is an error naming `<dir>/meta.json` and the JSON path. `protect`
 * entries come back relative to the workspace root and cleaned (ws_clean_rel; a host path
 * inside `workspace` is taken as well). `where` names the directory in messages. 0, or -1 with
 * *err (errno of a failed read, EINVAL for bad JSON). Free with ws_meta_clear. */
int ws_meta_read (int dirfd, const char *where, struct ws_meta *m, asbx_err_t *err);

/* Write meta.json atomically: meta.json.tmp (O_EXCL after unlinking a stale one), fsync,
 * renameat over meta.json. 0, or -1 with *err. */
int ws_meta_write (int dirfd, const char *where, const struct ws_meta *m, asbx_err_t *err);

struct ws_handle
{
  int dirfd;   /* <workspacesDir>/<id>, O_DIRECTORY */
  int upperfd; /* <id>/upper */
  char *dir;   /* its path, for messages */
  struct ws_meta meta;
};

/* The workspaces directory (policy_workspaces_dir: the host config's workspacesDir, else
 * /var/lib/agentsbx/workspaces for root; $XDG_DATA_HOME/agentsbx/workspaces, default
 * ~/.local/share/agentsbx/workspaces, for others). config_path: the global --config (NULL: the
 * default file). Heap path, or NULL with *err. */
char *ws_workspaces_dir (const char *config_path, asbx_err_t *err);

/* Open `<workspacesDir>/<id>/` (id validated as a container id; the directory and upper/ are
 * opened O_NOFOLLOW) and read its meta.json (ws_meta_read: one error naming the file, the JSON
 * path and what was expected); a `trusted` workspace needs root (EPERM otherwise). 0 / -1 with *err.
 * Free with ws_handle_free. */
int ws_handle_open (const char *config_path, const char *id, struct ws_handle *h, asbx_err_t *err);

/* ws_meta_read's parser over NUL-terminated text (exposed for unit tests); `file` names it in
 * errors. 0 / -1 with *err. */
int ws_meta_parse (const char *text, const char *file, struct ws_meta *m, asbx_err_t *err);

/* Open a snapshot's upper, `<id>/snapshots/NAME/upper` (NAME: [A-Za-z0-9._-]{1,64}, not
 * starting with '.'). Returns the fd (caller owns) or -1 with *err (ENOENT: no such snapshot). */
int ws_open_snapshot (const struct ws_handle *h, const char *name, asbx_err_t *err);

/* Open the host workspace (meta.workspace, O_DIRECTORY|O_NOFOLLOW) and check it is still the
 * directory the run started on (lowerDev/lowerIno). Returns the fd (caller owns) or -1 with
 * *err (ESTALE when another directory is there now). */
int ws_open_lower (const struct ws_handle *h, asbx_err_t *err);

void ws_handle_free (struct ws_handle *h);

#endif
