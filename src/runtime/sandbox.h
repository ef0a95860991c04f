/* sandbox.h - the quick mode (POLICY.md §7): run one command under a policy without a bundle. */
#ifndef ASBX_RUNTIME_SANDBOX_H
#define ASBX_RUNTIME_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "runtime/container.h"

/* What `sandbox` prints on stderr when the command has ended (sandbox_summary.h). */
enum asbx_sandbox_summary
{
  ASBX_SANDBOX_SUMMARY_TEXT = 0, /* lines for a person, only when something was denied or a limit struck */
  ASBX_SANDBOX_SUMMARY_JSON,     /* one JSON object, always (for tools) */
  ASBX_SANDBOX_SUMMARY_NONE,     /* nothing (--quiet) */
};

struct sandbox_seed;

struct asbx_sandbox_opts
{
  const char *workspace; /* host dir bound at /workspace (default: the current directory) */
  const char *rootfs;    /* host dir used as the rootfs; NULL = the host's system dirs, read-only */
  const char *image;     /* --image DIR[:TAG]: an OCI image layout unpacked into the cache
                          * (runtime/oci_cache.h) is the rootfs; exclusive with rootfs */
  const char *seed_git;  /* --seed-git REPO[@REV]: the review workspace's lower is a clone
                          * (runtime/workspace_seed.h); implies review */
  const char *id;        /* container id; NULL = sandbox-<pid> */
  bool review;           /* --review: /workspace is an overlay, its changes kept in the
                            workspaces directory under the id (runtime/workspace_review.h) */
  char **argv;           /* the command */
  size_t argc;
  enum asbx_sandbox_summary summary;
  bool isolation_vm; /* --isolation vm: the policy's isolation becomes vm (runtime/vm.h) */
  bool quiet;        /* --quiet: no summary text and no warnings of ours (errors still go to stderr) */
  /* internal (runtime/sandbox_seed_fetch.h): this run is the seed sandbox of a URL seed; its
   * workspace (o->workspace, the clone's fresh empty directory) is that seed's, checked as ours
   * (sandbox_seed_is_ours) instead of as a host directory */
  const struct sandbox_seed *seed_fetch;
};

/* Build the in-memory bundle under <root>/sandbox/<id>/, create + start the container through
 * the same path an engine uses (with the `agent` profile when no --profile/--policy/host default
 * is given), wait in the foreground, delete, remove the bundle. *exit_status: the command's
 * status, 128+N for a signal; a limit kill maps to the codes documented in docs/policy.md
 * (wallclock 124, cpu 152, failed-execs 125, memory 137, pids 137). 0 / -1 with *err. */
int asbx_sandbox_run (const struct asbx_global *g, const struct asbx_sandbox_opts *o, int *exit_status,
                      asbx_err_t *err);

#endif
