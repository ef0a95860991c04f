/* workspace_apply.h - `agentsbx workspace apply`: write a review workspace's changes to the host
 * workspace, atomically per file, refusing what is unsafe (docs/policy.md "Review workspace:
 * apply", docs/man/agentsbx-workspace.1). */
#ifndef ASBX_RUNTIME_WORKSPACE_APPLY_H
#define ASBX_RUNTIME_WORKSPACE_APPLY_H

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"
#include "runtime/workspace_meta.h"
#include "runtime/workspace_walk.h"

/* exit statuses of `workspace apply` */
#define WS_APPLY_OK 0      /* everything selected was applied */
#define WS_APPLY_REFUSED 1 /* something was refused: nothing was applied */
#define WS_APPLY_PARTIAL 3 /* --skip-refused: the rest was applied, the refused were skipped */

struct ws_apply_opts
{
  const char *id;
  bool skip_refused; /* apply what is not refused */
  /* --git-data: apply what the agent wrote below `.git` (the allow list of workspace_refuse.c:
   * objects, refs, logs...), i.e. its commits. Off by default: the trees of those commits are
   * not checked, and the reviewer's git checks them out later (outside attack 09: a commit
   * holding src/HEAD + src/config planted a repository whose core.fsmonitor ran as root after
   * `git reset; git checkout -- .`). Without it those changes are kept (a `kept` line), not
   * refused: the agent's file changes apply, its history stays in the review workspace. */
  bool git_data;
  bool dry_run; /* say what would be done, change nothing */
  bool running; /* allow a workspace whose container still runs (meta "state") */
  char **paths; /* only these workspace paths (cleaned, ws_clean_rel), and below */
  size_t paths_len;
  const char *audit_dir; /* the global --audit-dir (NULL: host config or default) */
  const char *config_path;
};

/* Apply. Takes flock(LOCK_EX|LOCK_NB) on <id>/lock (EWOULDBLOCK: another verb holds it).
 * Prints each refusal (and, for a conflict, both sides' sha256 and a unified diff host vs agent)
 * and each applied change to `out`. Without paths and with nothing refused, <id>/ is removed
 * at the end; with paths, the applied entries are removed from upper/. Appends a `workspace`
 * audit record (op "apply") to the container's audit log.
 * Returns WS_APPLY_OK / WS_APPLY_REFUSED / WS_APPLY_PARTIAL, or -1 with *err (meta.json,
 * lock, a changed host workspace, a write that failed: what was applied before stays applied,
 * and is listed). */
int ws_apply (const struct ws_apply_opts *o, FILE *out, asbx_err_t *err);

#endif
