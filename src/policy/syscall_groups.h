/* syscall_groups.h - THE table of the policy's syscall groups (POLICY.md §2 `syscalls.deny`):
 * each group's member syscalls, the argument conditions under which they are refused, and the
 * errno returned. Pure data: the compiler validates group names against it, the enforcement
 * (runtime/policy_process.c) turns the denied groups into one seccomp filter stacked on the OCI
 * filter, and docs/policy.md lists the same members. */
#ifndef ASBX_POLICY_SYSCALL_GROUPS_H
#define ASBX_POLICY_SYSCALL_GROUPS_H

#include <stddef.h>
#include <stdint.h>

/* THE list of the groups, one line each, in bit order:
 *   X (ID, "name in syscalls.deny", rules array of syscall_groups.c, "one line for policy explain")
 * Group ID's bit in policy_plan.deny_groups is POLICY_SYS_ID = 1u << its position. A new group is
 * one line here and its rules array in syscall_groups.c; test_policy checks that the schema enum,
 * docs/policy.md's table and test_policy_syscalls.py's GROUPS list exactly these names, and
 * test_syscall_groups that each rule is in the built filter. */
#define POLICY_SYSCALL_GROUPS(X)                                                                                       \
  X (IO_URING, "io_uring", io_uring_rules, "io_uring_setup, io_uring_enter, io_uring_register: EPERM")                 \
  X (USERNS, "userns", userns_rules,                                                                                   \
     "unshare/clone with any CLONE_NEW* flag: EPERM; clone3: ENOSYS (libc falls back to clone); "                      \
     "setns to a user namespace: EPERM")                                                                               \
  X (BPF, "bpf", bpf_rules, "bpf: EPERM")                                                                              \
  X (KEYRING, "keyring", keyring_rules, "add_key, request_key, keyctl: EPERM")                                         \
  X (PERF, "perf", perf_rules, "perf_event_open: EPERM")                                                               \
  X (PTRACE, "ptrace", ptrace_rules, "ptrace, process_vm_readv, process_vm_writev, pidfd_getfd: EPERM")                \
  X (MOUNT, "mount", mount_rules,                                                                                      \
     "mount, umount2, pivot_root, fsopen, fsconfig, fsmount, fspick, move_mount, open_tree, mount_setattr: EPERM")     \
  X (KMOD, "kmod", kmod_rules, "init_module, finit_module, delete_module: EPERM")                                      \
  X (TIOCSTI, "tiocsti", tiocsti_rules, "ioctl TIOCSTI, TIOCLINUX: EPERM")                                             \
  X (RAW_SOCKETS, "raw-sockets", raw_socket_rules, "socket(AF_PACKET, ...), socket(..., SOCK_RAW, ...): EPERM")

/* POLICY_SYSI_ID: the group's position in the list (and in policy_syscall_groups[]) */
// clang-format off
enum policy_syscall_group_index
{
#define POLICY_SYSI_(id, name, rules, doc) POLICY_SYSI_##id,
  POLICY_SYSCALL_GROUPS (POLICY_SYSI_)
#undef POLICY_SYSI_
  POLICY_SYSI_COUNT
};

/* POLICY_SYS_ID: the group's bit in policy_plan.deny_groups (unsigned: at most 32 groups) */
enum policy_syscall_group
{
#define POLICY_SYS_(id, name, rules, doc) POLICY_SYS_##id = 1u << POLICY_SYSI_##id,
  POLICY_SYSCALL_GROUPS (POLICY_SYS_)
#undef POLICY_SYS_
};
// clang-format on
_Static_assert(POLICY_SYSI_COUNT <= 32, "policy_plan.deny_groups holds one bit per syscall group");

struct policy_syscall_rule
{
  const char *syscall; /* libseccomp name */
  int arg;             /* argument index for the condition, -1 = always */
  const char *op;      /* OCI operator name, e.g. "SCMP_CMP_MASKED_EQ" (NULL when arg == -1) */
  uint64_t value;      /* for MASKED_EQ: the mask */
  uint64_t value_two;  /* for MASKED_EQ: the value after masking */
  int errno_ret;       /* errno the call returns when refused */
};

struct policy_sysgroup
{
  const char *name; /* as written in syscalls.deny */
  unsigned bit;     /* POLICY_SYS_* above */
  const struct policy_syscall_rule *rules;
  size_t rules_len;
  const char *doc; /* one line for docs/policy.md and `policy explain` */
};

/* POLICY_SYSCALL_GROUPS as data, in the same order (policy_syscall_groups[POLICY_SYSI_ID]) */
extern const struct policy_sysgroup policy_syscall_groups[];
extern const size_t policy_syscall_groups_len;

/* Refused whenever filesystem.allowExec is set, whatever syscalls.deny says (docs/policy.md
 * "Native code under allowExec"): memfd_create, memfd_secret (ENOSYS), shmat with SHM_EXEC. */
extern const struct policy_syscall_rule policy_exec_rules[];
extern const size_t policy_exec_rules_len;

/* The group named `name`, or NULL. */
const struct policy_sysgroup *policy_syscall_group_by_name (const char *name);

#endif
