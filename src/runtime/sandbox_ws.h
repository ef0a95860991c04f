/* sandbox_ws.h - which host directories quick mode accepts as its read-write /workspace. */
#ifndef ASBX_RUNTIME_SANDBOX_WS_H
#define ASBX_RUNTIME_SANDBOX_WS_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/policy.h"
#include "runtime/container.h"

/* The policy inputs of a quick-mode run before its bundle exists: g's --profile, --policy,
 * --config, --audit-dir and state root, with the sandbox's default ceiling `agent`
 * (agentsbx-sandbox(8)). For the checks made before create (the workspace, a seed's URL), so
 * that they judge the policy create will compile. The strings are g's (borrowed). */
struct policy_inputs sandbox_policy_inputs (const struct asbx_global *g);

/* Refuse a workspace that would hand the sandboxed command the host (docs/policy.md §7,
 * docs/security.md): the host's root, a kernel filesystem, a system directory or anything at or
 * below /etc, /boot, /run, /var/log, /var/lib, /var/spool, /var/mail; a directory below or above
 * the directories the built-in profiles execute from; a directory that is or contains a home
 * directory (a directory entry of /home, /root, a home field of /etc/passwd), or that lies in a
 * home's dot-directory (~/.ssh, ~/.config); one that is, contains or lies in the audit
 * directory in use, the state root (g->root) or a denyRead/denyWrite path of the effective policy
 * (resolved as create does: g's flags, the host config, the sandbox default `agent`). The homes are those of the host,
 * and with
 * --rootfs also those of that rootfs (at their host path). g: for the audit dir and state root;
 * arg: what the user gave (NULL = the current directory); ws: its realpath; rootfs: the realpath
 * of --rootfs or NULL. Returns 0, or -1 with *err naming the workspace, the path and why (or a policy error). */
int sandbox_check_workspace (const struct asbx_global *g, const char *arg, const char *ws, const char *rootfs,
                             asbx_err_t *err);

/* The workspace as a directory, not a name (a rename or symlink swap between check and mount had
 * bound the host's /root: outside tester, 2026-12-01). sandbox_workspace_pin: ws (a realpath)
 * opened beneath / with no symlink in its path, its identity into *st; EINVAL/ENOENT/ELOOP...
 * from openat2, or errnum 0 when it is not a directory. sandbox_workspace_still: ws still names
 * that directory after the checks. sandbox_workspace_mounted_is: the container's /workspace
 * (/proc/PID/root/workspace of its init) is that directory, before the command starts. Each
 * returns 0, or -1 with *err naming the workspace. With review (sandbox --review), the
 * container's /workspace must be an overlay and the lower that create pinned (meta.json's
 * lowerDev/lowerIno) that directory. */
int sandbox_workspace_pin (const char *ws, struct stat *st, asbx_err_t *err);
int sandbox_workspace_still (const char *ws, const struct stat *want, asbx_err_t *err);
int sandbox_workspace_mounted_is (const struct asbx_global *g, const char *id, bool review, pid_t pid, const char *ws,
                                  const struct stat *want, asbx_err_t *err);

/* true when path is dir or below it ("/procfoo" is not below "/proc"; everything is below "/") */
bool sandbox_path_under (const char *path, const char *dir);

#endif
