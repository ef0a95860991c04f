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
 * are not cloned. A network URL (https://, http://, git://) is not cloned here: it is fetched
 * inside a throwaway sandbox under the policy's network (runtime/sandbox_seed_fetch.h); this
 * module only checks it (workspace_seed_url). */
#ifndef ASBX_RUNTIME_WORKSPACE_SEED_H
#define ASBX_RUNTIME_WORKSPACE_SEED_H

#include <stdbool.h>

#include "core/error.h"

/* A seed URL as workspace_seed_url accepted it */
struct seed_url
{
  char *scheme;  /* "https", "http" or "git" (git's protocol.<name>.allow) */
  char *host;    /* lower case host name (never an address literal) */
  unsigned port; /* as given, else the scheme's default (443, 80, 9418) */
};

/* Split "REPO[@REV]". A REPO that exists as a whole (a path containing '@'), a URL whose last
 * '@' lies before its path (a user: refused later, naming it whole) or a repository refused by
 * workspace_seed_check_repo (git@host:r) is taken whole; otherwise the text after the last '@'
 * is REV. *repo and *rev (NULL when none: HEAD) are heap strings. Returns 0, or -1 with *err when REPO or REV is
 * empty. */
int workspace_seed_parse (const char *arg, char **repo, char **rev, asbx_err_t *err);

/* Classify `repo`: a local path or file:// URL (0), a network URL we fetch (1: https://, http://
 * or git://HOST[:PORT]/PATH with a host name; *u filled when u is not NULL, free with
 * workspace_seed_url_free), or refused (-1 with *err, EINVAL, naming `repo` and why): ssh:// and
 * scp-like "host:path" (no keys reach the seed sandbox), other schemes, remote helpers
 * ("ext::..."), a user or password in the URL, an address literal as host, a bad port. */
int workspace_seed_url (const char *repo, struct seed_url *u, asbx_err_t *err);
void workspace_seed_url_free (struct seed_url *u);
#define cleanup_seed_url __attribute__ ((cleanup (workspace_seed_url_free)))

/* workspace_seed_url without the URL's parts: 0 (local or an accepted URL) or -1 with *err. */
int workspace_seed_check_repo (const char *repo, asbx_err_t *err);

/* Is `s` a full commit id (40 or 64 lowercase hex digits, nothing else)? */
bool workspace_seed_is_commit_id (const char *s);

/* Clone the local `repo` (a path or file:// URL; a network URL is refused, EINVAL) into <layout_dirfd>/lower (which
 * must not exist) and check out `rev` (NULL = HEAD; a branch or tag of the source, or a commit id) detached.
 * layout_dirfd: an fd of the workspace's directory <workspacesDir>/<id> (the clone is made
 * relative to it: git runs with that directory as its cwd). *sha_out: the full commit id
 * (heap, 40 or 64 lowercase hex) for meta.json's "seed" and the audit record. On failure the
 * partial clone is removed and *err carries git's own message (its last stderr line). Returns
 * 0 / -1 with *err. */
/* Check a seed's clone before the agent sees it, whatever fetched it (local or URL seed; the
 * remote is hostile): (1) a REV of hexadecimal digits only (4 to 64) is a commit id and `sha`
 * must start with it - git takes a ref of that name first (`@1111...` named a branch called so,
 * outside attack 08), and a short id is no pin against a hostile remote (a prefix is cheap to
 * forge; docs say to pin full ids); (2) no entry of the tree below `layout_dirfd`'s "lower",
 * outside its top-level `.git`, has a git repository marker's name (ws_git_marker): git run in
 * such a directory takes it for a repository with the remote's config (core.fsmonitor ran as
 * root, outside attack 08), the same rule as apply's. Walked through directory fds, O_NOFOLLOW.
 * 0, or -1 with *err naming the revision or the (escaped) path. */
int workspace_seed_check (int layout_dirfd, const char *rev, const char *sha, asbx_err_t *err);

int workspace_seed_git (int layout_dirfd, const char *repo, const char *rev, char **sha_out, asbx_err_t *err);

/* Append the audit record of a seed to <audit_dir>/<id>.jsonl: event "workspace", "op": "seed",
 * "repo" (as given), "rev" (the full commit id), "requested" (REV as given, or "HEAD").
 * Returns 0 / -1 with *err. */
int workspace_seed_audit (const char *audit_dir, const char *id, const char *repo, const char *requested,
                          const char *sha, asbx_err_t *err);

#endif
