/* workspace_meta.h - a review workspace's directory `<workspacesDir>/<id>/` and its meta.json,
 * as the change engine (diff, apply) reads them (the layout: docs/man/agentsbx-workspace.1,
 * written by `sandbox --review`). */
#ifndef ASBX_RUNTIME_WORKSPACE_META_H
#define ASBX_RUNTIME_WORKSPACE_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

struct ws_meta
{
  char *id;
  char *workspace; /* the host workspace (the lower), absolute */
  dev_t lower_dev; /* its st_dev and st_ino when the run started */
  ino_t lower_ino;
  int64_t started_ns; /* CLOCK_REALTIME ns taken before the overlay was mounted */
  char xattr[8];      /* "trusted" or "user" */
  bool running;       /* "state": "running" */
  char **protect;     /* "protect": paths apply never writes, relative to the workspace root (a
                         host path inside meta.workspace is accepted too), cleaned (ws_clean_rel) */
  size_t protect_len;
};

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
 * opened O_NOFOLLOW) and parse its meta.json: every field the engine needs must be present with
 * its type, else one error naming the file, the key and what was expected. 0 / -1 with *err.
 * Free with ws_handle_free. */
int ws_handle_open (const char *config_path, const char *id, struct ws_handle *h, asbx_err_t *err);

/* Parse meta.json text (exposed for unit tests). `file` names it in errors. 0 / -1 with *err. */
int ws_meta_parse (const char *text, const char *file, struct ws_meta *m, asbx_err_t *err);

/* Open a snapshot's upper, `<id>/snapshots/NAME/upper` (NAME: [A-Za-z0-9._-]{1,64}, not
 * starting with '.'). Returns the fd (caller owns) or -1 with *err (ENOENT: no such snapshot). */
int ws_open_snapshot (const struct ws_handle *h, const char *name, asbx_err_t *err);

/* Open the host workspace (meta.workspace, O_DIRECTORY|O_NOFOLLOW) and check it is still the
 * directory the run started on (lowerDev/lowerIno). Returns the fd (caller owns) or -1 with
 * *err (ESTALE when another directory is there now). */
int ws_open_lower (const struct ws_handle *h, asbx_err_t *err);

void ws_handle_free (struct ws_handle *h);
void ws_meta_free (struct ws_meta *m);

#endif
