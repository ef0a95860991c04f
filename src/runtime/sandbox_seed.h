/* sandbox_seed.h - quick mode's side of `sandbox --seed-git REPO[@REV]` (issue 18, REVIEW.md
 * "The layout"): before the bundle is made, the review workspace <workspacesDir>/<id>/ is
 * created here with its lower, a clone of REPO at REV (runtime/workspace_seed.h), and a
 * meta.json in state "stopped" naming <id>/lower as the workspace and carrying the seed (a URL
 * REPO is cloned in a seed sandbox under the run's policy: runtime/sandbox_seed_fetch.h). create
 * then resumes that directory as it resumes any stopped review workspace over the same lower
 * (runtime/workspace_review.h): the overlay's lowerdir is the clone.
 *
 * Why here and not in create: the clone must exist before the bundle's /workspace bind names it,
 * and it is made as the calling user with git, which create (also reached by engines) has no
 * business running. startedNs is taken after the clone: the clone's files are not "changed on
 * the host during the run". */
#ifndef ASBX_RUNTIME_SANDBOX_SEED_H
#define ASBX_RUNTIME_SANDBOX_SEED_H

#include <stdbool.h>
#include <sys/stat.h>

#include "core/error.h"
#include "runtime/container.h"

struct sandbox_seed
{
  char *dir;            /* the workspaces directory */
  char *lower;          /* <dir>/<id>/lower: the workspace the bundle binds */
  char *repo, *rev;     /* as given (rev NULL: HEAD) */
  char *sha;            /* the full commit id checked out */
  struct stat lower_st; /* the clone's identity, fstat from the id directory's fd */
  bool made;            /* <dir>/<id>/ was made by this run */
};

/* Create <workspacesDir>/<id>/ (ws_create, upper/ and work/ owned by the caller: the container's
 * root of a seeded run, whose lower is the caller's clone), clone `arg` (REPO[@REV]) into its
 * lower and write meta.json (state stopped, seed {repo, rev}). An existing <id>/ is refused
 * (EEXIST, naming `workspace discard`). On failure nothing of it is left. 0 or -1 with *err. */
int sandbox_seed_prepare (const struct asbx_global *g, const char *arg, const char *id, struct sandbox_seed *s,
                          asbx_err_t *err);

/* The pinned workspace `st` (sandbox_workspace_pin of s->lower) is the clone made here: it is
 * ours, so the host-directory checks (sandbox_check_workspace: /var/lib is refused) do not
 * apply; what must hold is that the name still shows that directory. 0 or -1 with *err. */
int sandbox_seed_is_ours (const struct sandbox_seed *s, const struct stat *st, asbx_err_t *err);

/* The run failed before the command started: remove <dir>/<id>/ when this run made it. */
void sandbox_seed_undo (struct sandbox_seed *s, const char *id);

void sandbox_seed_free (struct sandbox_seed *s);

/* Set meta.json "image" of the review workspace <workspacesDir>/<id> to `digest` (under its
 * lock). 0 or -1 with *err. */
int sandbox_meta_image (const struct asbx_global *g, const char *id, const char *digest, asbx_err_t *err);

#endif
