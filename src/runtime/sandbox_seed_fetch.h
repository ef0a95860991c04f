/* sandbox_seed_fetch.h - `sandbox --seed-git URL[@REV]` (issue 18: "a URL reachable under the
 * policy at seed time"): the clone of a network repository is made INSIDE a throwaway sandbox
 * (quick mode, id <id>-seed) under the run's own policy, so that the fetch goes through the
 * policy's network section exactly as the agent's traffic would (the DNS stub's allowlist, the
 * SNI/Host check, the nftables table), never through the host's network directly. Its
 * /workspace is a fresh empty directory beside the workspaces directory (every container hides
 * the workspaces directory wherever a bind shows it), .<name>-seed-<id>, which is renamed to
 * <workspacesDir>/<id>/lower once the clone is checked out: the clone's output directory becomes
 * the review workspace's lower, as for a local seed.
 *
 * The remote is hostile. git runs inside with no system or global configuration
 * (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null, HOME an empty directory of the sandbox's
 * /tmp), no credential helper, no prompt, hooks pointed at an empty directory (core.hooksPath)
 * and an empty template, no fsmonitor, no submodules, protocol.allow=never but for the URL's own
 * scheme, no redirect followed, transfer.fsckObjects=true and a `git fsck` of the clone before
 * the checkout (the dumb HTTP walker checks nothing itself). ssh is refused before this (no key
 * reaches the sandbox: runtime/workspace_seed.h workspace_seed_url). The commit checked out is
 * read back from the clone's .git/HEAD by the host (opened O_NOFOLLOW below the lower's fd,
 * never by running git on the host over what the sandbox wrote) and must be a full commit id. */
#ifndef ASBX_RUNTIME_SANDBOX_SEED_FETCH_H
#define ASBX_RUNTIME_SANDBOX_SEED_FETCH_H

#include "core/error.h"
#include "runtime/container.h"
#include "runtime/workspace_seed.h"

struct sandbox_seed;

/* Is `u` (of `url`) reachable under the policy the run will have (resolved from g as create
 * resolves it, `agent` by default)? Refused, with one error naming the URL, the host or port, the
 * policy key (network.mode, network.deniedDomains, network.allowedDomains, network.ports) and
 * the policy's source: a policy without network (mode none), a host the deny list names or the
 * allow list does not, a port the policy does not open; and a policy whose workspace mode is
 * review (the seed sandbox writes the lower directly). Nothing is created. 0 / -1 with *err. */
int sandbox_seed_fetch_check (const struct asbx_global *g, const char *url, const struct seed_url *u, asbx_err_t *err);

/* Clone `url` at `rev` (NULL: the remote's HEAD) in the seed sandbox <id>-seed, check the commit
 * out detached and move the clone to <dfd>/lower (dfd: the workspace's directory
 * <workspacesDir>/<id>, `where` its path; s->dir: the workspaces directory). On success
 * s->lower, s->lower_st (the lower's identity) and s->sha (the full commit id) are set. On
 * failure *err names the URL and the seed sandbox's exit status (git's own message went to
 * standard error) and the clone's directory is removed; the caller removes <dfd>. 0 / -1. */
int sandbox_seed_fetch (const struct asbx_global *g, const char *id, int dfd, const char *where, const char *url,
                        const struct seed_url *u, const char *rev, struct sandbox_seed *s, asbx_err_t *err);

#endif
