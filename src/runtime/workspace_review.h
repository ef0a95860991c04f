/* workspace_review.h - create's part of the review workspace (issue 18, docs/policy.md "Review
 * workspace"): the workspace mount of config.json (the mount whose destination is
 * filesystem.workspace.path) becomes an overlay whose lower is the host workspace and whose
 * upper is <workspacesDir>/<id>/upper (runtime/workspace_layout.h).
 *
 * Where the overlay is made: in the container's init, inside its user and mount namespaces, in
 * place of the bind (linux/rootfs.c, LINUX_MOUNT_SRC_OVERLAY), from layer fds this process (P)
 * opened and checked. Not here on the host side before the init, because
 * - a non-root caller cannot mount overlayfs in the host's user namespace at all; in the
 *   container's user namespace it can (userxattr), so one path serves root, root with a user
 *   namespace (user-owned workspaces in quick mode) and rootless alike;
 * - overlayfs does every copy-up with the mounter's credentials: mounted by the container's root
 *   the upper's files belong to the container's root (its host uid), as the files a direct bind
 *   would have received, and a host-root mounter would create root-owned files on behalf of a
 *   user namespace;
 * - the overlay then exists only in the container's mount namespace: nothing of it is visible on
 *   the host or left behind when the container goes.
 * P keeps what needs host privileges: it resolves and pins the lower (realpath, then opened beneath
 * "/" with no symlink in its path), creates the layout (0700, upper/ and work/ owned by the
 * container root's host ids) and opens the layer fds the init inherits. */
#ifndef ASBX_RUNTIME_WORKSPACE_REVIEW_H
#define ASBX_RUNTIME_WORKSPACE_REVIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "linux/ns.h"
#include "linux/overlay.h"
#include "linux/rootfs.h"
#include "policy/plan.h"

/* the state dir's record of a review workspace: two lines, the workspaces directory and the
 * audit directory of the container */
#define WS_REVIEW_MARK "workspace"

struct ws_review
{
  bool active;
  bool created;      /* this create made <id>/ (undo removes it); false: resumed (undo marks it stopped) */
  bool meta_written; /* meta.json says running */
  char *dir;         /* the workspaces directory */
  int dirfd;         /* <dir>/<id>, -1 */
  int lockfd;        /* its lock, held until ws_review_done */
  char *lower_path;  /* a non-root caller's: the paths the init resolves (linux/overlay.h) */
  char *layout_path;
  struct linux_overlay ovl;
};

/* For a plan in review mode: find the workspace mount in spec (a bind whose destination is
 * plan->ws_path; none, or not a bind, is an error naming config_path and the policy field),
 * create or resume <workspacesDir>/<id>/ (resume: the directory exists, is stopped and its
 * lower is the same directory), write meta.json (state running, startedNs now: before the
 * init, so just before its mount), record WS_REVIEW_MARK in the state dir (state_dirfd), and
 * set the mount's entry of *srcs (allocated when NULL) to LINUX_MOUNT_SRC_OVERLAY. userns: the
 * init runs in a user namespace (userxattr). A plan in direct mode: nothing, 0.
 * 0, or -1 with *err; on failure nothing is left but a resumed directory. */
int ws_review_prepare (const struct policy_plan *plan, const struct oci_spec *spec, const struct ns_plan *ns,
                       const char *id, const char *config_path, int state_dirfd, struct linux_mount_src **srcs,
                       struct ws_review *r, asbx_err_t *err);

/* Once the init is spawned (it has its copies; it closes its copy of the lock, init_args
 * close_fds): close the clones, the directory and the lock here, before the monitor is forked
 * (a lock inherited by a long-lived process would hold the workspace for the whole run). */
void ws_review_spawned (struct ws_review *r);

/* At the end of create: ws_review_spawned, then with `failed` (the container never ran) remove a
 * directory this create made, or mark a resumed one stopped again; free. */
void ws_review_done (struct ws_review *r, const char *id, bool failed);

/* At delete (state dir dirfd of container id): when the container had a review workspace,
 * its meta.json state becomes "stopped". Best effort: problems are logged. */
void ws_review_stopped (int state_dirfd, const char *id);

struct ws_meta;

/* Append a `workspace` record to <audit_dir>/<id>.jsonl: action ("stopped", "snapshot"), the
 * snapshot's name (or NULL), the workspace, the number of changed entries, the snapshots.
 * Best effort: a failure is logged. */
void ws_audit_record (const char *audit_dir, const struct ws_meta *m, const char *action, const char *snapshot,
                      uint64_t changed);

#endif
