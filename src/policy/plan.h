/* plan.h - the compiled agent policy: the one document the policy compiler (src/policy/, pure,
 * no syscalls) hands to the enforcement (runtime/ + linux/). Every field is already the
 * intersection ceiling ∩ request; enforcement never sees a raw policy document.
 * Design: ../shared/design/POLICY.md §2-§3. Units are in the names (bytes, seconds). */
#ifndef ASBX_POLICY_PLAN_H
#define ASBX_POLICY_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* abstract filesystem rights; linux/landlock_ruleset maps them to LANDLOCK_ACCESS_FS_* */
#define POLICY_FS_READ 0x1u
#define POLICY_FS_WRITE 0x2u
#define POLICY_FS_EXEC 0x4u

enum policy_mount_kind
{
  POLICY_MOUNT_BIND_RW, /* allowWrite: rw bind of the path onto itself (nosuid, nodev, noexec unless exec granted) */
  POLICY_MOUNT_BIND_RO, /* denyWrite: ro bind of the path onto itself */
  POLICY_MOUNT_MASK,    /* denyRead: empty ro tmpfs over a directory, /dev/null over a file */
  POLICY_MOUNT_TMPFS,   /* a fresh tmpfs (e.g. the `locked` profile's /tmp) */
};

struct policy_mount
{
  enum policy_mount_kind kind;
  char *path;    /* absolute, inside the container */
  bool noexec;   /* for writable mounts: writable and executable are disjoint by default */
  bool optional; /* `?` rule: enforced when the path exists, else audited as not enforceable */
  char *origin;  /* source and JSON path of the rule: "profile agent: filesystem.allowWrite[0]" */
  /* Added by the compiler (POLICY.md §2, deny rules on missing paths). For MASK / BIND_RO only:
   * true when a writable grant (allowWrite or tmpfs) covers the path from above. If the path
   * does not exist at create, a non-optional rule with writable_parent makes create fail naming
   * `origin` (nothing to mount over, and Landlock cannot carve the hole); without
   * writable_parent a missing path holds by itself (nobody can create it) and the mount is
   * skipped; an optional rule is skipped and audited as not enforceable. */
  bool writable_parent;
  /* Added: NULL, or the `~/x` form (every home directory): the rule is not on `path` ("/home")
   * itself but on `path/<entry>/<each_child>` for every directory entry of `path` in the
   * container's rootfs at create (a runtime fact, resolved in the rootfs). /root/x is emitted
   * as a separate ordinary rule. writable_parent then refers to `path`. */
  char *each_child;
};

struct policy_fs_rule
{
  char *path;      /* absolute; a directory covers its hierarchy */
  unsigned rights; /* POLICY_FS_* granted beneath path */
  bool optional;
  char *origin;
};

enum policy_net_mode
{
  POLICY_NET_OPEN = 0,
  POLICY_NET_NONE,
  POLICY_NET_FILTERED,
};

enum policy_approval
{
  POLICY_APPROVAL_DENY = 0,
  POLICY_APPROVAL_ASK,
};

/* The values of the policy's enumerated fields as written in documents, NULL-terminated, index =
 * the value (plan.c): the one copy the parser, the merge, the JSON writers, `policy explain` and
 * the schema's enums (made by gen-schema at build time) use. */
extern const char *const policy_net_mode_names[];   /* network.mode, index = enum policy_net_mode */
extern const char *const policy_approval_names[];   /* approvals.network, index = enum policy_approval */
extern const char *const policy_on_timeout_names[]; /* approvals.onTimeout: 0 deny, 1 allow */
extern const char *const policy_on_full_names[];    /* audit.onFull: 0 kill, 1 continue */
extern const char *const policy_isolation_names[];  /* isolation, index = enum policy_isolation */
extern const char *const policy_ws_mode_names[];    /* filesystem.workspace.mode, index = enum policy_ws_mode */

/* audit event kinds (POLICY.md §6); lifecycle, policy, denial and limit are always on */
#define POLICY_AUDIT_LIFECYCLE 0x01u
#define POLICY_AUDIT_POLICY 0x02u
#define POLICY_AUDIT_EXEC 0x04u
#define POLICY_AUDIT_NETWORK 0x08u
#define POLICY_AUDIT_DNS 0x10u
#define POLICY_AUDIT_DENIAL 0x20u
#define POLICY_AUDIT_LIMIT 0x40u
#define POLICY_AUDIT_APPROVAL 0x80u

/* network.credentials[] entry (issue 19) */
struct policy_credential
{
  char *host;   /* exact host name, lower case, no port */
  char *header; /* header name as written ("Authorization") */
  char *value;  /* template: text with ${secret:NAME} references, resolved by the monitor */
};

/* network.http[].allow[] entry: a request is allowed by it when its method is one of `methods`
 * (none = any) and the path of its request target (as sent, without the query string) matches
 * one of `paths` (fnmatch(3) patterns without FNM_PATHNAME, so `*` crosses `/`; none = any) */
struct policy_http_allow
{
  char **methods;
  size_t methods_len;
  char **paths;
  size_t paths_len;
};

/* network.http[] entry (issue 19) */
struct policy_http_host
{
  char *host;                      /* exact host name, lower case */
  struct policy_http_allow *allow; /* none = every method and path */
  size_t allow_len;
  uint64_t max_body_bytes; /* request body cap; 0 = none */
};

#define POLICY_DEFAULT_WS_PATH "/workspace"

/* filesystem.workspace.mode (issue 18) */
enum policy_ws_mode
{
  POLICY_WS_DIRECT = 0, /* the workspace is a read-write bind: writes reach the host at once */
  POLICY_WS_REVIEW,     /* an overlay over the host workspace; writes go to an upper layer kept
                           by agentsbx until `workspace apply` or `discard` */
};

/* isolation (issue 22; docs/security.md "Isolation tiers"): the boundary around the container */
enum policy_isolation
{
  POLICY_ISOLATION_CONTAINER = 0, /* namespaces, Landlock, seccomp, cgroups on the host kernel */
  POLICY_ISOLATION_VM,            /* the same, inside a microVM with its own kernel (runtime/vm.h) */
};

struct policy_plan
{
  bool active;          /* false: no ceiling and no request -> plain OCI, nothing added */
  char *digest;         /* "sha256:..." of effective_json */
  char *effective_json; /* the effective policy, canonical JSON (for audit and `policy explain`) */
  char **sources;       /* human-readable provenance lines ("ceiling: profile agent (built-in)") */
  size_t sources_len;

  /* filesystem */
  bool rootfs_readonly;
  /* filesystem.workspace (issue 18): the container path of the workspace mount (default
   * "/workspace"), its mode, and where review upper layers are kept (host config workspacesDir,
   * default /var/lib/agentsbx/workspaces; a non-root caller's $XDG_DATA_HOME/agentsbx/workspaces);
   * workspaces_dir is hidden from every container */
  char *ws_path;
  enum policy_ws_mode ws_mode;
  enum policy_isolation isolation;
  char *workspaces_dir;
  struct policy_mount *mounts;
  size_t mounts_len;
  bool landlock; /* apply a Landlock ruleset */
  struct policy_fs_rule *fs_rules;
  size_t fs_rules_len;

  /* syscalls: groups to deny (POLICY_SYS_* bits of policy/syscall_groups.h, the one table of the
   * groups), stacked on the OCI filter */
  unsigned deny_groups;
  /* syscalls.denyWriteExecMemory: prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN) for the
   * container's processes (no W+X mapping, no mapping made executable later) */
  bool deny_write_exec_memory;

  /* capabilities: when restrict_caps, every set becomes set ∩ caps_allow */
  bool restrict_caps;
  char **caps_allow;
  size_t caps_allow_len;

  /* network */
  enum policy_net_mode net_mode;
  /* never from a policy document: set by a vm-tier guest's runtime (runtime/vm_net.h), whose host
   * enforces net_mode on the VM's only NIC. Here: no nftables table, DNS stub or pasta; the
   * container shares the guest's network namespace; the resolver file names the host's stub */
  bool net_outside;
  bool allow_local_binding;
  char **allowed_domains;
  size_t allowed_domains_len;
  char **denied_domains;
  size_t denied_domains_len;
  char **allowed_cidrs; /* "10.0.0.0/8" or "10.0.0.1/32:443", "[2001:db8::]/32:443" */
  size_t allowed_cidrs_len;
  uint16_t *ports;
  size_t ports_len;
  /* network.allowUnixSockets: pathname unix sockets (container view) that `none`/`filtered` let
   * the container connect to besides those under its writable grants (monitor/unixsock.c) */
  char **allow_unix_sockets;
  size_t allow_unix_sockets_len;

  /* network.credentials[] and network.http[] (issue 19): the hosts listed in either are
   * intercepted by the egress (TLS terminated with a leaf of the container's own CA, re-encrypted
   * to the real host with full verification); every other host keeps the SNI check only.
   * credentials: a header the egress adds to every request to `host`; `value` is the template
   * as written, with ${secret:NAME} references that the monitor resolves from secrets_dir at each
   * request (a secret's value is never in the plan, the container or the effective policy).
   * http_hosts: per-host request rules; a host may appear more than once (ceiling ∩ request keeps
   * both): a request must pass EVERY entry of its host. */
  struct policy_credential *credentials;
  size_t credentials_len;
  struct policy_http_host *http_hosts;
  size_t http_hosts_len;
  char *secrets_dir;      /* host config secretsDir (default /etc/agentsbx/secrets; a non-root
                             caller's user config may name its own); hidden from every container */
  char *upstream_ca_file; /* host config upstreamCaFile: extra CAs trusted when verifying
                             upstreams, besides the host's store; NULL = none */

  /* limits; 0 = not limited by the policy */
  uint64_t memory_bytes;
  uint64_t pids;
  double cpus; /* fraction of one CPU, 0 = unlimited */
  uint64_t open_files;
  uint64_t file_size_bytes;
  uint64_t wall_clock_seconds;
  uint64_t cpu_seconds;
  uint64_t failed_execs;

  /* approvals */
  enum policy_approval approvals_network;
  uint64_t approvals_timeout_seconds;
  bool approvals_on_timeout_allow; /* onTimeout: "allow" (false = "deny") */

  /* audit */
  unsigned audit_events;
  char *audit_dir; /* host config auditDir / --audit-dir; default /var/log/agentsbx */
  /* Host directories no policy container may see (issue 13 §3): the audit directory (the one in
   * use and the default), the state root (the one in use and the default: it holds every
   * container's state and approvals.sock). Wherever the container's view shows the same
   * directory (device and inode) at that path, e.g. through the sandbox's /var bind, it is
   * masked like a denyRead. Set by policy_resolve for an active plan. */
  char **hidden_paths;
  size_t hidden_paths_len;
  bool audit_syslog;           /* added: host config "auditSyslog": true = also send records to syslog */
  bool enable_kernel_audit;    /* added: host config "enableKernelAudit": the monitor turns kernel audit
                                  on (audit_enabled 0 -> 1, host-wide, left on) so Landlock denials are
                                  reported */
  bool audit_on_full_continue; /* audit.onFull "continue": a full audit disk drops records (counted)
                                  instead of killing the container (the default, "kill") */

  /* host config rootless.cgroupParent (unexpanded), or NULL: the cgroup delegated to a non-root
   * caller (runtime/rootless_cgroup.h) */
  char *rootless_cgroup_parent;

  /* degradations the policy accepts ("landlock", ...) */
  char **degrade;
  size_t degrade_len;

  /* clamps applied under onWiden=clamp: one line per narrowed field, for the audit log */
  char **clamps;
  size_t clamps_len;
};

void policy_plan_free (struct policy_plan *p);

/* The ${secret:NAME} references of a credential value template (policy_credential.value, checked
 * at parse: NAME is [A-Za-z0-9_.-]+, neither . nor ..): calls fn for each NAME in order (`name`
 * points into `value`, `len` bytes, not NUL-terminated). Pure (policy/egress_doc.c). */
void policy_secret_refs (const char *value, void (*fn) (void *ud, const char *name, size_t len), void *ud);

#endif
