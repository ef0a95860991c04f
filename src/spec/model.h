/* model.h - the container's internal model: what the runtime acts on, built once from the parsed
 * config.json (libocispec, left as parsed) and what the agent policy asks of it (struct
 * spec_narrowing, filled by the runtime from the compiled plan: runtime/policy_apply.h
 * policy_model_narrowing; spec/ does not include policy/), before anything touches the kernel (runc's
 * libcontainer/specconv does the same for its own config; shared/design/ARCHITECTURE.md §1-2). Pure: no syscalls; host
 * facts come in as arguments.
 *
 * What the policy changes lives in the model, never in the spec:
 *   process     the spec's process, narrowed (spec_narrow_process): no_new_privs, capabilities ∩
 *               capabilities.allow, no CAP_NET_ADMIN/CAP_NET_RAW unless network.mode is open, the
 *               host-file capabilities (runtime/policy_hostfiles.h), RLIMIT_NOFILE/RLIMIT_FSIZE;
 *               plus the systemd socket-activation variables (LISTEN_FDS, LISTEN_PID)
 *   resources   linux.resources with memory.limit, pids.limit and the cpu quota the smaller of
 *               the spec's and the policy's
 *   namespaces  linux.namespaces plus a new network namespace for network.mode none/filtered
 *   root        root.readonly or the policy's filesystem.readonlyRoot
 * Everything else is the spec's own. `view` shows the whole as a struct oci_spec, for the
 * mechanisms (linux/) that take one: its process, root and linux_ are the model's.
 * exec narrows its process (process.json or the saved config's, with its flags) through the same
 * spec_narrow_process, with the narrowing of the plan saved at create. */
#ifndef ASBX_SPEC_MODEL_H
#define ASBX_SPEC_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

/* What the model needs to know of the host (the caller finds out; spec/ makes no syscalls). */
struct spec_model_host
{
  /* the spec's user namespace cannot be host root's (policy_userns_isolating, which reads the
   * runtime's own /proc/self/uid_map): CAP_CHOWN and CAP_FSETID may stay under a policy */
  bool userns_isolating;
  /* systemd socket activation (sd_listen_fds(3)): the number of fds from LISTEN_FDS to pass on
   * (1..1024), 0 for none: the process gets LISTEN_FDS=N and LISTEN_PID=1, as runc does */
  unsigned listen_fds;
};

/* What the agent policy asks of the container (all zero / NULL: nothing). */
struct spec_narrowing
{
  bool active;          /* a policy applies: the rest is enforced, a new mount namespace is required */
  bool rootfs_readonly; /* filesystem.readonlyRoot */
  bool restrict_caps;   /* capabilities.allow given: every set ∩ caps_allow */
  char *const *caps_allow;
  size_t caps_allow_len;
  /* network.mode none/filtered: no CAP_NET_ADMIN/CAP_NET_RAW, and a network namespace (a new one
   * unless the spec joins one) */
  bool isolate_net;
  /* the network is enforced outside this kernel (a vm-tier guest, runtime/vm_net.h): the
   * container stays in the runtime's network namespace, whose only NIC is the host's filtered
   * one; isolate_net's capability drop still holds */
  bool netns_runtime;
  uint64_t memory_bytes;    /* limits.memory, bytes; 0 = none */
  uint64_t pids;            /* limits.pids; 0 = none */
  double cpus;              /* limits.cpus, fraction of one CPU; <= 0 = none */
  uint64_t open_files;      /* limits.openFiles (RLIMIT_NOFILE); 0 = none */
  uint64_t file_size_bytes; /* limits.fileSize (RLIMIT_FSIZE), bytes; 0 = none */
};

struct spec_model
{
  const struct oci_spec *spec;     /* config.json as parsed (borrowed; never modified) */
  struct spec_narrowing narrowing; /* what was applied (caps_allow borrowed); zero: plain OCI */
  struct oci_process *process;     /* the effective process (owned deep copy), NULL when the spec has none */
  bool root_readonly;              /* root.readonly || filesystem.readonlyRoot */
  /* the effective linux.namespaces: the spec's entries (borrowed strings) + the policy's network */
  struct oci_namespace *namespaces;
  size_t namespaces_len;
  /* the effective linux.resources: the spec's (borrowed) or, narrowed, `res` (a copy whose memory
   * and cpu are mem/cpu, every other member the spec's) */
  const struct oci_resources *resources;
  struct oci_resources res;
  struct oci_memory mem;
  struct oci_cpu cpu;
  /* the spec as the runtime acts on it (see above) */
  struct oci_spec view;
  struct oci_root view_root;
  struct oci_linux view_linux;
};

/* Build the model from `spec` (kept as it is, borrowed for the model's life) and `n` (NULL or
 * inactive: nothing narrowed, the model is the spec; its caps_allow is borrowed for the model's
 * life). Under an active narrowing the spec must give
 * the container a new mount namespace (linux.namespaces `mount` without path: the policy's
 * mounts are the container's own), else EINVAL naming linux.namespaces. *out: heap (free with
 * spec_model_free); it points into itself, so it is never copied. 0 / -1 with *err (*out NULL). */
int spec_model_build (const struct oci_spec *spec, const struct spec_narrowing *n, const struct spec_model_host *host,
                      struct spec_model **out, asbx_err_t *err);

void spec_model_free (struct spec_model *m);

/* Narrow one process (the init's copy in the model, or an exec'd process: caller-owned) for an
 * active narrowing, in place: no_new_privs, every capability set ∩ capabilities.allow (when
 * restricted) minus CAP_NET_ADMIN/CAP_NET_RAW unless network.mode is open, minus CAP_SETFCAP and
 * CAP_MKNOD and, without `userns_isolating`, CAP_CHOWN and CAP_FSETID (runtime/policy_hostfiles.h);
 * RLIMIT_NOFILE and RLIMIT_FSIZE the smaller of the process's and the policy's (added when
 * absent). Nothing for NULL or an inactive narrowing; `p->capabilities` may be NULL. */
void spec_narrow_process (struct oci_process *p, const struct spec_narrowing *n, bool userns_isolating);

/* The network entry of the effective namespaces: true when there is one, with *path its path
 * (NULL for a new namespace). */
bool spec_model_netns (const struct spec_model *m, const char **path);

/* Is mount m a bind mount: type "bind", or a "bind"/"rbind" option (runtime-spec config.md
 * "Mounts": runc and crun take either as a bind whatever the type says)? */
bool spec_mount_is_bind (const struct oci_mount *m);

#endif
