/* rootfs.h - the container's filesystem view: rootfs bind, spec mounts, devices, pivot_root,
 * masked/readonly paths, /dev/console. Source: runtime-spec config.md "Root", "Mounts",
 * config-linux.md "Devices", "Default Devices", "Default Filesystems", "Masked Paths",
 * "Readonly Paths", "Rootfs Mount Propagation"; runc's libcontainer/rootfs_linux.go behaviour.
 *
 * Threat model: the rootfs is attacker-controlled (an image). Every path inside it is resolved
 * through fds (openat2 RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS, checked with fstat/fstatfs) and
 * mounts target /proc/self/fd/N of an O_PATH fd (or the new mount API), never a re-resolved
 * string, so a symlinked /proc, /dev or /dev/null cannot make the runtime touch the host.
 *
 * All functions run in the container init process, inside its new mount namespace, with the
 * container's user namespace already entered (if any). Ordering (runtime/init.c):
 *   linux_rootfs_prepare -> [createContainer hooks] -> linux_rootfs_pivot ->
 *   linux_console_setup (if terminal) -> linux_rootfs_finalize
 */
#ifndef ASBX_LINUX_ROOTFS_H
#define ASBX_LINUX_ROOTFS_H

#include <stdbool.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* A mount source the runtime (P) prepared for one spec mount, before the container's
 * namespaces exist; the init attaches it instead of opening the source itself. */
enum linux_mount_src_kind
{
  LINUX_MOUNT_SRC_NONE,    /* fd -1: the init opens the source */
  LINUX_MOUNT_SRC_BIND,    /* a detached clone of the bind source, opened as the host's root
                              (linux_rootfs_open_bind_sources) */
  LINUX_MOUNT_SRC_IDMAP,   /* the detached idmapped clone (linux/idmap.h) */
  LINUX_MOUNT_SRC_OVERLAY, /* fd -1, `ovl` set: the bind becomes an overlay of these layer fds
                              (the review workspace, issue 18), made by the init in its own user
                              and mount namespace (linux/overlay.h) */
};

struct linux_overlay;

struct linux_mount_src
{
  int fd;
  enum linux_mount_src_kind kind;
  struct linux_overlay *ovl; /* LINUX_MOUNT_SRC_OVERLAY only; owned by whoever filled the entry */
};

/* A heap array of n entries, all LINUX_MOUNT_SRC_NONE. */
struct linux_mount_src *linux_mount_srcs_new (size_t n);

/* Close every prepared fd of the n entries and free the array (NULL: nothing). */
void linux_mount_srcs_free (struct linux_mount_src *srcs, size_t n);

struct linux_rootfs_opts
{
  const struct oci_spec *spec;
  const char *rootfs;      /* absolute host path of root.path (resolved against the bundle) */
  const char *bundle;      /* absolute bundle path (relative mount sources resolve against it) */
  bool userns;             /* running inside a new user namespace: devices are bind-mounted */
  bool new_cgroupns;       /* a `cgroup` mount may mount a fresh cgroup fs */
  const char *cgroup_path; /* the container's cgroup, relative to each hierarchy root (for cgroup mounts
                            without a cgroup namespace), may be NULL */
  bool readonly_recursive; /* agent policy: every submount of the rootfs tree (e.g. of an rbind'ed
                              host "/") read-only before the spec mounts; the top mount itself
                              becomes read-only in finalize (root.readonly) */
  bool host_mntns;         /* no mount namespace of its own (runc's "no mount entry"): the init works in
                              the runtime's; "/" keeps its propagation, the rootfs gets no self-bind
                              and the spec mounts land below it in that namespace (undone by
                              linux_rootfs_host_cleanup) */
  /* NULL, or per spec->mounts index the source the runtime prepared (a bind source's clone,
   * an idmapped clone, or none) */
  const struct linux_mount_src *srcs;
};

/* For a container in a new user namespace, called by the runtime (host root, before the user
 * namespace exists): a detached clone (open_tree OPEN_TREE_CLONE, AT_RECURSIVE for rbind) of
 * every bind mount's source, so that a source only the host's root may reach is still bound;
 * the container's mapped root would get EACCES (runc 1.2 opens its sources the same way).
 * Fills the LINUX_MOUNT_SRC_NONE entries of *srcs (allocated here when NULL and there are
 * mounts) that are binds and whose source can be opened here (the init reports the others as
 * before); idmapped entries are left as they are. Never fails.
 * linux_rootfs_close_bind_sources closes the LINUX_MOUNT_SRC_BIND entries again (NONE). */
void linux_rootfs_open_bind_sources (const struct oci_spec *spec, const char *bundle, struct linux_mount_src **srcs);
void linux_rootfs_close_bind_sources (struct linux_mount_src *srcs, size_t n);

/* Make the mount tree private (or linux.rootfsPropagation), bind-mount the rootfs onto itself,
 * perform every spec mount in order (options: bind, rbind, ro/rw, nosuid/suid, nodev/dev,
 * noexec/exec, sync/async, dirsync, remount, mand/nomand, atime/noatime, diratime/nodiratime,
 * relatime/norelatime, strictatime/nostrictatime, nosymfollow/symfollow, propagation flags
 * private/rprivate/shared/rshared/slave/rslave/unbindable/runbindable, recursive `r*` flags via
 * mount_setattr(AT_RECURSIVE), `tmpcopyup` refused clearly, any other option passed as data),
 * create the default devices and linux.devices, /dev symlinks (fd, stdin, stdout, stderr, core if
 * /proc/kcore exists), /dev/ptmx -> pts/ptmx. Destinations are resolved inside the rootfs;
 * relative destinations are taken relative to "/" as runc does. Missing destinations are created
 * (dir, or empty file when the source is not a directory).
 * *rootfd_out: an O_PATH|O_DIRECTORY fd of the rootfs mount (owned by the caller).
 * Returns 0, or -1 with *err naming the mount ("mounts[3] (/proc): mount proc: EPERM"). */
int linux_rootfs_prepare (const struct linux_rootfs_opts *opts, int *rootfd_out, asbx_err_t *err);

/* Make rootfd the root: pivot_root(".", ".") + detach old root (the trick used by runc since
 * 1.0), or with no_pivot move-mount onto / and chroot. chdir("/") afterwards.
 * Returns 0 / -1 with *err. */
int linux_rootfs_pivot (int rootfd, bool no_pivot, asbx_err_t *err);

/* Without a mount namespace of its own: chroot into rootfd (pivot_root would move the root of
 * every process of the shared namespace). 0 / -1 with *err. */
int linux_rootfs_chroot (int rootfd, asbx_err_t *err);

/* Detach (umount2 MNT_DETACH, deepest first) every mount strictly below `rootfs` in the caller's
 * mount namespace: what a container without a mount namespace of its own mounted there (its
 * spec mounts, masks, devices), at delete or after a failed create. The rootfs itself is never
 * touched (an engine may have mounted it). 0 / -1 with *err (first failure; the rest is still
 * tried). */
int linux_rootfs_host_cleanup (const char *rootfs, asbx_err_t *err);

/* After pivot_root: linux.maskedPaths (directories: read-only empty tmpfs; files: bind of
 * /dev/null; missing: skipped as the spec says), linux.readonlyPaths (recursive read-only bind;
 * missing: skipped), /dev remounted as the spec says, root.readonly (remount / read-only,
 * keeping the other flags). Also applies a shared/slave/unbindable linux.rootfsPropagation to
 * "/" (pivot_root refuses a shared new root, so this cannot happen in prepare; runc does the
 * same after pivoting). Returns 0 / -1 with *err. */
int linux_rootfs_finalize (const struct oci_spec *spec, asbx_err_t *err);

/* After pivot, when process.terminal is true: open /dev/ptmx of the container's devpts,
 * unlock it, set its size from process.consoleSize (when given), bind the slave onto
 * /dev/console (created as an empty file if missing), make the slave the controlling terminal
 * of the calling process (setsid must already have been called) and dup2 it to fds 0,1,2.
 * *master_out: the pty master (owned by the caller; sent to the console socket).
 * Returns 0 / -1 with *err. */
int linux_console_setup (const struct oci_spec *spec, int *master_out, asbx_err_t *err);

/* The same for a process joining a running container (exec --tty): a pty from the container's
 * devpts as the controlling terminal and fds 0-2, without touching /dev/console. */
int linux_pty_setup (const struct oci_process *proc, int *master_out, asbx_err_t *err);

#endif
