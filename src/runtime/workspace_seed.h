/* workspace_seed.h - `sandbox --seed-git REPO[@REV]` (issue 18, reproducible starts): the lower
 * layer of a review workspace (REVIEW.md: <workspacesDir>/<id>/lower) is a fresh clone of a
 * local repository at a fixed revision, made before the agent starts.
 *
 * The clone is made by the git binary, as the calling user (no privilege is gained or dropped),
 * in a hermetic environment: no system or global git config (GIT_CONFIG_NOSYSTEM,
 * GIT_CONFIG_GLOBAL=/dev/null), none of the caller's GIT_* variables, no templates, and
 * `-c core.hooksPath=/dev/null -c core.fsmonitor=false -c protocol.allow=never
 * -c protocol.file.allow=always -c submodule.recurse=false`: no hook, fsmonitor daemon, filter
 * or transport other than local files runs, whatever the source repository says. Submodules
 * are not cloned. A network URL is refused for now: fetching it would need the policy's egress
 * rules at seed time (the "a URL reachable under the policy"). */
#ifndef ASBX_RUNTIME_WORKSPACE_SEED_H
#define ASBX_RUNTIME_WORKSPACE_SEED_H

#include "core/error.h"

/* Split "REPO[@REV]". A REPO that exists as a whole (a path containing '@') or that is a network
 * URL (refused later by workspace_seed_check_repo, naming it whole) is taken whole; otherwise the text after the last
 * '@' is REV. *repo and *rev (NULL when none: HEAD) are heap strings. Returns 0, or -1 with *err when REPO or REV is
 * empty. */
int workspace_seed_parse (const char *arg, char **repo, char **rev, asbx_err_t *err);

/* Is `repo` one we seed from: a local path or a file:// URL? A URL of another scheme (https://,
 * ssh://, git://, ext::...) or scp-like "host:path" is refused naming it ("network URLs are not
 * supported yet"). Returns 0, or -1 with *err. */
int workspace_seed_check_repo (const char *repo, asbx_err_t *err);

/* Clone `repo` (workspace_seed_check_repo) into <layout_dirfd>/lower (which must not exist) and
 * check out `rev` (NULL = HEAD; a branch or tag of the source, or a commit id) detached.
 * layout_dirfd: an fd of the workspace's directory <workspacesDir>/<id> (the clone is made
 * relative to it: git runs with that directory as its cwd). *sha_out: the full commit id
 * (heap, 40 or 64 lowercase hex) for meta.json's "seed" and the audit record. On failure the
 * partial clone is removed and *err carries git's own message (its last stderr line). Returns
 * 0 / -1 with *err. */
int workspace_seed_git (int layout_dirfd, const char *repo, const char *rev, char **sha_out, asbx_err_t *err);

/* Append the audit record of a seed to <audit_dir>/<id>.jsonl: event "workspace", "op": "seed",
 * "repo" (as given), "rev" (the full commit id), "requested" (REV as given, or "HEAD").
 * Returns 0 / -1 with *err. */
int workspace_seed_audit (const char *audit_dir, const char *id, const char *repo, const char *requested,
                          const char *sha, asbx_err_t *err);

#endif
