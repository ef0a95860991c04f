/* oci_spec.h - the OCI runtime-spec (1.0.0 .. 1.2.x) config.json as C structs.
 *
 * Source: https://github.com/opencontainers/runtime-spec config.md, config-linux.md (v1.2.0).
 * Every field of the Linux part is represented, including fields later issues enforce, so that
 * enforcement never needs the parser to change.
 *
 * Conventions:
 *  - Strings are heap-owned, NULL when absent. String arrays are NULL-terminated (NULL when
 *    absent) with a separate length `*_len`.
 *  - Optional scalars carry a `has_*` flag (1 = present in the JSON). A present JSON `null` for
 *    an optional field is treated as absent.
 *  - Arrays of structs are `T *x; size_t x_len;`.
 *  - Maps (annotations, sysctl, unified, ...) are `struct oci_map` with parallel key/value arrays
 *    in document order.
 *  - Everything is freed by oci_spec_free().
 */
#ifndef ASBX_OCI_SPEC_H
#define ASBX_OCI_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct oci_map
{
  char **keys;
  char **values;
  size_t len;
};

/* linux.uidMappings / gidMappings, mounts[].uidMappings */
struct oci_id_mapping
{
  uint32_t container_id; /* containerID */
  uint32_t host_id;      /* hostID */
  uint32_t size;
};

struct oci_rlimit
{
  char *type; /* "RLIMIT_NOFILE" ... */
  uint64_t soft;
  uint64_t hard;
};

struct oci_capabilities
{
  char **bounding;
  size_t bounding_len;
  char **effective;
  size_t effective_len;
  char **inheritable;
  size_t inheritable_len;
  char **permitted;
  size_t permitted_len;
  char **ambient;
  size_t ambient_len;
  /* a set that is absent is not the same as an empty set for some runtimes; we record it */
  bool has_bounding, has_effective, has_inheritable, has_permitted, has_ambient;
};

struct oci_user
{
  uint32_t uid;
  uint32_t gid;
  bool has_umask;
  uint32_t umask;
  uint32_t *additional_gids; /* additionalGids */
  size_t additional_gids_len;
  char *username; /* windows only; parsed, unused */
};

struct oci_scheduler
{
  char *policy; /* SCHED_OTHER ... required when scheduler present */
  bool has_nice;
  int32_t nice;
  bool has_priority;
  int32_t priority;
  char **flags;
  size_t flags_len;
  bool has_runtime, has_deadline, has_period;
  uint64_t runtime, deadline, period; /* ns */
};

struct oci_io_priority
{
  char *class_; /* IOPRIO_CLASS_RT|BE|IDLE */
  int32_t priority;
};

struct oci_cpu_affinity
{
  char *initial;
  char *final;
};

struct oci_process
{
  bool terminal;
  bool has_console_size;
  uint32_t console_height, console_width; /* consoleSize.height/.width */
  char *cwd;                              /* required, absolute */
  char **env;
  size_t env_len;
  char **args;
  size_t args_len;
  char *command_line; /* windows */
  struct oci_rlimit *rlimits;
  size_t rlimits_len;
  char *apparmor_profile;
  struct oci_capabilities *capabilities; /* NULL when absent */
  bool no_new_privileges;
  bool has_oom_score_adj;
  int32_t oom_score_adj;
  struct oci_scheduler *scheduler;
  char *selinux_label;
  struct oci_io_priority *io_priority;
  struct oci_cpu_affinity *exec_cpu_affinity;
  struct oci_user user;
  bool has_user; /* added: "user" present (uid/gid then required) */
};

struct oci_root
{
  char *path; /* required */
  bool readonly;
};

struct oci_mount
{
  char *destination; /* required */
  char *source;
  char *type;
  char **options;
  size_t options_len;
  struct oci_id_mapping *uid_mappings;
  size_t uid_mappings_len;
  struct oci_id_mapping *gid_mappings;
  size_t gid_mappings_len;
};

struct oci_hook
{
  char *path; /* required, absolute */
  char **args;
  size_t args_len;
  char **env;
  size_t env_len;
  bool has_timeout;
  int64_t timeout; /* seconds, > 0 when present */
};

struct oci_hooks
{
  struct oci_hook *prestart;
  size_t prestart_len;
  struct oci_hook *create_runtime;
  size_t create_runtime_len;
  struct oci_hook *create_container;
  size_t create_container_len;
  struct oci_hook *start_container;
  size_t start_container_len;
  struct oci_hook *poststart;
  size_t poststart_len;
  struct oci_hook *poststop;
  size_t poststop_len;
};

struct oci_namespace
{
  char *type; /* pid network mount ipc uts user cgroup time */
  char *path;
};

struct oci_time_offset
{
  int64_t secs;
  uint32_t nanosecs;
};

struct oci_device
{
  char *type; /* c b u p */
  char *path;
  int64_t major, minor; /* required for c/b/u */
  bool has_major, has_minor;
  bool has_file_mode;
  uint32_t file_mode;
  bool has_uid, has_gid;
  uint32_t uid, gid;
};

/* linux.resources.devices[] */
struct oci_device_cgroup
{
  bool allow;
  char *type; /* a c b, NULL = all */
  bool has_major, has_minor;
  int64_t major, minor; /* -1 = wildcard */
  char *access;         /* rwm */
};

struct oci_memory
{
  bool has_limit, has_reservation, has_swap, has_kernel, has_kernel_tcp, has_swappiness;
  int64_t limit, reservation, swap, kernel, kernel_tcp; /* bytes; -1 = unlimited */
  uint64_t swappiness;
  bool has_disable_oom_killer, has_use_hierarchy, has_check_before_update;
  bool disable_oom_killer, use_hierarchy, check_before_update;
};

struct oci_cpu
{
  bool has_shares, has_quota, has_burst, has_period, has_realtime_runtime, has_realtime_period, has_idle;
  uint64_t shares;
  int64_t quota;
  uint64_t burst;
  uint64_t period;
  int64_t realtime_runtime;
  uint64_t realtime_period;
  int64_t idle;
  char *cpus;
  char *mems;
};

struct oci_weight_device
{
  int64_t major, minor;
  bool has_weight, has_leaf_weight;
  uint16_t weight, leaf_weight;
};

struct oci_throttle_device
{
  int64_t major, minor;
  uint64_t rate;
};

struct oci_block_io
{
  bool has_weight, has_leaf_weight;
  uint16_t weight, leaf_weight;
  struct oci_weight_device *weight_device;
  size_t weight_device_len;
  struct oci_throttle_device *throttle_read_bps_device;
  size_t throttle_read_bps_device_len;
  struct oci_throttle_device *throttle_write_bps_device;
  size_t throttle_write_bps_device_len;
  struct oci_throttle_device *throttle_read_iops_device;
  size_t throttle_read_iops_device_len;
  struct oci_throttle_device *throttle_write_iops_device;
  size_t throttle_write_iops_device_len;
};

struct oci_hugepage_limit
{
  char *page_size; /* pageSize "2MB" */
  uint64_t limit;
};

struct oci_net_priority
{
  char *name;
  uint32_t priority;
};

struct oci_network
{
  bool has_class_id;
  uint32_t class_id;
  struct oci_net_priority *priorities;
  size_t priorities_len;
};

struct oci_rdma
{
  char *device; /* map key */
  bool has_hca_handles, has_hca_objects;
  uint32_t hca_handles, hca_objects;
};

struct oci_resources
{
  struct oci_device_cgroup *devices;
  size_t devices_len;
  struct oci_memory *memory;
  struct oci_cpu *cpu;
  bool has_pids;
  int64_t pids_limit; /* pids.limit; <= 0 = unlimited per spec */
  struct oci_block_io *block_io;
  struct oci_hugepage_limit *hugepage_limits;
  size_t hugepage_limits_len;
  struct oci_network *network;
  struct oci_rdma *rdma;
  size_t rdma_len;
  struct oci_map unified;
};

struct oci_seccomp_arg
{
  uint32_t index;
  uint64_t value;
  bool has_value_two;
  uint64_t value_two;
  char *op; /* SCMP_CMP_* */
};

struct oci_seccomp_syscall
{
  char **names;
  size_t names_len;
  char *action;
  bool has_errno_ret;
  uint32_t errno_ret;
  struct oci_seccomp_arg *args;
  size_t args_len;
};

struct oci_seccomp
{
  char *default_action;
  bool has_default_errno_ret;
  uint32_t default_errno_ret;
  char **architectures;
  size_t architectures_len;
  char **flags;
  size_t flags_len;
  char *listener_path;
  char *listener_metadata;
  struct oci_seccomp_syscall *syscalls;
  size_t syscalls_len;
};

struct oci_intel_rdt
{
  char *clos_id;
  char *l3_cache_schema;
  char *mem_bw_schema;
  char **schemata;
  size_t schemata_len;
  bool has_enable_cmt, has_enable_mbm;
  bool enable_cmt, enable_mbm;
};

struct oci_personality
{
  char *domain; /* LINUX LINUX32 */
  char **flags;
  size_t flags_len;
};

struct oci_net_device
{
  char *host_name; /* map key */
  char *name;      /* optional new name */
};

/* linux.memoryPolicy (1.3): set_mempolicy(2) for the container's processes */
struct oci_memory_policy
{
  char *mode;  /* required: MPOL_DEFAULT ... (names checked by linux/mempolicy.c) */
  char *nodes; /* "0-3,7", NULL when absent */
  char **flags;
  size_t flags_len;
};

struct oci_linux
{
  struct oci_namespace *namespaces;
  size_t namespaces_len;
  struct oci_id_mapping *uid_mappings;
  size_t uid_mappings_len;
  struct oci_id_mapping *gid_mappings;
  size_t gid_mappings_len;
  bool has_time_offsets_monotonic, has_time_offsets_boottime;
  struct oci_time_offset time_offsets_monotonic, time_offsets_boottime;
  struct oci_device *devices;
  size_t devices_len;
  char *cgroups_path;
  struct oci_resources *resources;
  char *rootfs_propagation; /* shared slave private unbindable */
  struct oci_seccomp *seccomp;
  struct oci_map sysctl;
  char **masked_paths;
  size_t masked_paths_len;
  char **readonly_paths;
  size_t readonly_paths_len;
  char *mount_label;
  struct oci_intel_rdt *intel_rdt;
  struct oci_personality *personality;
  struct oci_net_device *net_devices;
  size_t net_devices_len;
  struct oci_memory_policy *memory_policy; /* memoryPolicy, NULL when absent */
};

struct oci_spec
{
  char *oci_version;
  struct oci_process *process; /* required for create/start */
  struct oci_root *root;
  char *hostname;
  char *domainname;
  struct oci_mount *mounts;
  size_t mounts_len;
  struct oci_hooks *hooks;
  struct oci_map annotations;
  struct oci_linux *linux_; /* "linux" */
};

/* Parse config.json text. `name` is used in error messages (usually the file path).
 * Errors name the JSON path: "config.json: process.rlimits[2].hard: expected unsigned integer".
 * Malformed JSON, duplicate keys, nesting deeper than 64, numbers out of range and an ociVersion
 * outside 1.0.0..1.2.x are errors. Unknown keys are ignored (runtime-spec config.md).
 * Returns a new spec (free with oci_spec_free) or NULL with *err set (errnum EINVAL). */
struct oci_spec *oci_spec_parse (const char *json, size_t len, const char *name, asbx_err_t *err);

/* Read and parse a file (at most 16 MiB). NULL with *err set naming the file. */
struct oci_spec *oci_spec_parse_file (const char *path, asbx_err_t *err);

void oci_spec_free (struct oci_spec *spec);

/* Parse a process.json as `runc exec --process` takes (a `process` object at top level).
 * Same error rules. */
struct oci_process *oci_process_parse (const char *json, size_t len, const char *name, asbx_err_t *err);
void oci_process_free (struct oci_process *p);

/* A deep copy of `p` (every string and array its own; free with oci_process_free). NULL -> NULL.
 * For the internal container model (spec/model.h), which narrows a copy and leaves the parsed
 * config as it was. */
struct oci_process *oci_process_dup (const struct oci_process *p);

/* Lookup in a map; NULL when absent. */
const char *oci_map_get (const struct oci_map *m, const char *key);

/* runtime-spec state (runtime.md "State"). */
struct oci_state
{
  const char *oci_version;
  const char *id;
  const char *status; /* creating created running stopped */
  int pid;            /* 0 = omit (stopped) */
  const char *bundle;
  const struct oci_map *annotations;
  /* added, optional (NULL = omitted): what `runc state` prints beyond the spec and go-runc reads */
  const char *rootfs;
  const char *created; /* RFC 3339 */
  const char *owner;
};

/* Serialize the state as JSON (one object, no trailing newline unless `pretty`; pretty = 2-space
 * indent as `runc state`). pid omitted when 0, annotations when NULL or empty.
 * Returns a heap string or NULL with *err set (EINVAL: a string is not valid UTF-8). */
char *oci_state_to_json (const struct oci_state *st, bool pretty, asbx_err_t *err);

/* The `features` document (features.md, runtime-spec 1.1+) for this build. Lists the
 * hooks, mount options, namespaces, capabilities and seccomp details the runtime accepts.
 * `seccomp_actions` etc. are supplied by the caller so this library stays mechanism-free. */
struct oci_features_input
{
  const char *oci_version_min, *oci_version_max;
  const char *const *hooks;
  const char *const *mount_options;
  const char *const *namespaces;
  const char *const *capabilities;
  bool cgroup_v1, cgroup_v2, cgroup_systemd, cgroup_systemd_user, cgroup_rdma;
  bool seccomp_enabled;
  const char *const *seccomp_actions;
  const char *const *seccomp_operators;
  const char *const *seccomp_archs;
  const char *const *seccomp_known_flags;
  const char *const *seccomp_supported_flags;
  bool apparmor_enabled, selinux_enabled, intel_rdt_enabled, mount_extensions_idmap;
  const char *const *memory_policy_modes; /* linux.memoryPolicy.modes (1.3); NULL = omitted */
  const char *const *memory_policy_flags; /* linux.memoryPolicy.flags */
  const struct oci_map *annotations;
};
/* Serialize as features.md: pretty (4-space indent, as `runc features`), no trailing newline.
 * A NULL list is omitted ("unknown"), an empty list is written as [] ("none"). Heap string or NULL
 * with *err set (EINVAL: a string is not valid UTF-8). */
char *oci_features_to_json (const struct oci_features_input *in, asbx_err_t *err);

#endif
