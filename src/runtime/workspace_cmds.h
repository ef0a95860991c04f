/* workspace_cmds.h - `agentsbx workspace list|discard|snapshot|rollback` (issue 18; the man page
 * docs/man/agentsbx-workspace.1): the review workspaces of this caller's workspaces directory
 * (policy_workspaces_dir: host config workspacesDir for root, the XDG data dir otherwise).
 * A workspace's container is "running" while the container of that id exists in g->root and is
 * not stopped; a meta.json saying running without such a container (the runtime died) counts
 * as stopped. */
#ifndef ASBX_RUNTIME_WORKSPACE_CMDS_H
#define ASBX_RUNTIME_WORKSPACE_CMDS_H

#include <stdbool.h>

#include "core/error.h"
#include "runtime/container.h"

/* Print every workspace: a table (ID, STATE, SNAPSHOTS, CHANGED = entries in the upper layer,
 * WORKSPACE) or with json a JSON array of {"id","state","workspace","snapshots":[...],
 * "changed":N,"created"}. No workspaces directory yet: an empty list. 0 / -1 with *err. */
int asbx_workspace_list (const struct asbx_global *g, bool json, asbx_err_t *err);

/* Remove <dir>/<id> entirely (nothing is left); refused while its container runs. */
int asbx_workspace_discard (const struct asbx_global *g, const char *id, asbx_err_t *err);

/* Copy the upper layer to snapshots/<name>/upper (name NULL: "snap-N", N the next free number),
 * freezing the container's cgroup while copying when it runs (a paused container stays paused),
 * and append the name to meta.json's snapshots. *name_out (may be NULL): the name (heap). */
int asbx_workspace_snapshot (const struct asbx_global *g, const char *id, const char *name, char **name_out,
                             asbx_err_t *err);

/* Replace the upper layer by a copy of snapshot `name` (the container must be stopped or gone):
 * the next run with this id resumes from it. Later snapshots are kept. */
int asbx_workspace_rollback (const struct asbx_global *g, const char *id, const char *name, asbx_err_t *err);

#endif
