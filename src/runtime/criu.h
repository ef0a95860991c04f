/* criu.h - `checkpoint` / `restore` through CRIU (runtime/criu.c, issue 15). */
#ifndef ASBX_RUNTIME_CRIU_H
#define ASBX_RUNTIME_CRIU_H

#include <stdbool.h>

#include "core/error.h"
#include "runtime/container.h"

/* runc's checkpoint flags (what Docker, Podman and containerd pass) */
struct asbx_checkpoint_opts
{
  const char *id;
  const char *image_path;  /* --image-path, default ./checkpoint (runc) */
  const char *work_path;   /* --work-path: CRIU's logs, default = image path */
  const char *parent_path; /* --parent-path: the previous (pre-)dump, relative to image path */
  bool leave_running, tcp_established, ext_unix_sk, shell_job, file_locks, pre_dump, lazy_pages, auto_dedup;
  const char *page_server;         /* --page-server ADDR:PORT */
  const char *manage_cgroups_mode; /* soft | full | strict | ignore */
  char **empty_ns;                 /* --empty-ns network ... */
  size_t empty_ns_len;
  int status_fd; /* --status-fd, -1 none */
};

/* runc's restore flags */
struct asbx_restore_opts
{
  const char *id;
  const char *bundle; /* --bundle, default cwd */
  const char *image_path;
  const char *work_path;
  const char *console_socket;
  const char *pid_file;
  bool detach, tcp_established, ext_unix_sk, shell_job, file_locks, no_subreaper, no_pivot, lazy_pages, auto_dedup;
  const char *manage_cgroups_mode;
  char **empty_ns;
  size_t empty_ns_len;
  const char *lsm_profile, *lsm_mount_context;
};

/* `criu check` (criu = --criu PATH, NULL = "criu" in PATH): 0 when CRIU works on this host, else
 * -1 with *err (ENOTSUP) saying why in `verb`'s name: CRIU's first error and, where known, the
 * cause (a kernel whose [vvar_vclock] mapping this CRIU cannot parse). Not installed: the exec
 * errno (ENOENT) naming the package. */
int criu_preflight (const char *criu, const char *verb, asbx_err_t *err);

/* Checkpoint a running container: refused for an agent policy (CRIU cannot capture Landlock
 * domains or the monitor), then criu_preflight, then ENOTSUP (dumping a container's mounts,
 * namespaces and cgroups is not implemented by this build). Nothing is created. 0 / -1. */
int asbx_container_checkpoint (const struct asbx_global *g, const struct asbx_checkpoint_opts *o, asbx_err_t *err);

/* Restore: the id must be unused and the bundle's config parse; refused under a policy (as
 * checkpoint), then criu_preflight, then ENOTSUP. Nothing is created. 0 / -1. */
int asbx_container_restore (const struct asbx_global *g, const struct asbx_restore_opts *o, asbx_err_t *err);

#endif
