/* spawn.h - creating the container's init process: P forks the stage child S, which joins the
 * namespaces given by path, creates the new ones, and forks I (the container's init). The whole
 * message exchange is drawn in runtime/sync.h. */
#ifndef ASBX_RUNTIME_SPAWN_H
#define ASBX_RUNTIME_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "linux/ns.h"
#include "linux/rootfs.h"
#include "policy/plan.h"
#include "spec/model.h"

/* Everything the init process needs; filled by container_create.c, read-only in the children. */
struct linux_seccomp;
struct init_args
{
  /* the container model (spec/model.h): the effective process, resources, namespaces and root
   * (config.json narrowed by the policy); `spec` is its view (&model->view), for the mechanisms
   * that take a struct oci_spec - never the parsed config itself */
  const struct spec_model *model;
  const struct oci_spec *spec;
  const struct ns_plan *ns;
  const char *bundle;      /* absolute */
  const char *rootfs;      /* absolute, real path */
  const char *cgroup_path; /* relative to the hierarchy roots */
  /* the systemd unit cgroup_resolve_path gave for cgroup_path (linux/cgroup_systemd.h), or NULL */
  const struct cgroup_systemd_unit *cgroup_unit;
  int sync_fd;      /* child end of the socketpair */
  int start_fd;     /* listening socket start.sock: I accepts `start`'s connection on it */
  int console_fd;   /* connected --console-socket, or -1 */
  int preserve_fds; /* fds 3 .. 3+preserve_fds-1 stay open in the container */
  bool no_pivot;
  bool no_new_keyring;
  /* fds of the runtime the children must close at once: the state dir fd carries the
   * container's flock, which a child would otherwise hold until exec; the memfd of the
   * environment's secrets (runtime/secret_env.h) must never be open in the container */
  int close_fds[7];
  const struct policy_plan *plan; /* the agent policy (inactive plan or NULL: plain OCI) */
  /* linux.seccomp as P compiled it (through the state root's cache, linux/seccomp_cache.h, which
   * the init cannot reach after pivot_root and should not touch at all); the init has its own
   * copy through fork and installs it. NULL: the init compiles spec->linux_->seccomp itself. */
  const struct linux_seccomp *seccomp_filter;
  /* per spec mount: the source P prepared (idmapped clone, linux/idmap.h; in a new user
   * namespace the bind sources, linux_rootfs_open_bind_sources), NULL = none */
  const struct linux_mount_src *mount_srcs;
  int unixsock_fd; /* socketpair end to the monitor for the unix-socket confinement's
                      notify fd (monitor/unixsock.h), or -1 */
  /* a non-root caller (runtime/rootless.h): nobody can write vm.memfd_noexec for the container,
   * so the init does not check it (memfd_create stays refused by the policy's seccomp rules) */
  bool rootless;
  /* the container's egress CA (runtime/egress_ca.h) when the plan intercepts, else NULL: the
   * init binds its certificate into the trust store (runtime/egress_trust.h) and wipes its own
   * copy (through fork) of the key before anything of the container runs */
  struct egress_ca *egress_ca;
  /* the joined network namespace's egress is another container's (runtime/egress_share.h): its
   * table is loaded already and must not be replaced (that would empty the sets its DNS stub
   * filled), so step 3c is skipped; egress_ca is then the owner's certificate */
  bool egress_shared;
};

/* Fork S and, through it, I. Places S in the cgroup first (so I and a new cgroup namespace are
 * rooted there), writes the id maps for a new user namespace. On success *init_pid is I's pid
 * (in our pid namespace; I is our child because we are a subreaper) and *cgroup_mask what
 * cgroup_enter created. On failure everything spawned is killed and reaped; the cgroup is the
 * caller's to remove (mask set as far as known). 0 / -1 with *err. */
int spawn_init (struct init_args *a, int parent_sync_fd, pid_t *init_pid, unsigned long *cgroup_mask, asbx_err_t *err);

/* The container init's main: the ordered step list (runtime/init.c). Never returns. */
void init_main (struct init_args *a) __attribute__ ((noreturn));

#endif
