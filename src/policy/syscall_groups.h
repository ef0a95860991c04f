/* syscall_groups.h - THE table of the policy's syscall groups (POLICY.md §2 `syscalls.deny`):
 * each group's member syscalls, the argument conditions under which they are refused, and the
 * errno returned. Pure data: the compiler validates group names against it, the enforcement
 * (runtime/policy_process.c) turns the denied groups into one seccomp filter stacked on the OCI
 * filter, and `agentsbx policy groups` prints it (the build makes the schema's enum and
 * docs/policy-builtins.md from it). */
#ifndef ASBX_POLICY_SYSCALL_GROUPS_H
#define ASBX_POLICY_SYSCALL_GROUPS_H

#include <stddef.h>
#include <stdint.h>

/* THE list of the groups, one entry each, in bit order:
 *   X (ID, "name in syscalls.deny", "one line for policy explain", "the reference text (markdown)",
 *      rule, rule...)
 * a rule being ALWAYS (syscall, errno), FLAG (syscall, arg, bit, errno), EQ32 (syscall, arg, value,
 * errno) or MASKED (syscall, arg, mask, value, errno) (syscall_groups.c defines them, and the
 * constants rules name must be in its includes). Group ID's bit in policy_plan.deny_groups is
 * POLICY_SYS_ID = 1u << its position. A new group is one entry here and nothing else: the schema's
 * syscalls.deny enum (docs/policy.schema.json, by docs/gen-schema) and the reference table
 * (docs/policy-builtins.md, by `agentsbx policy groups --markdown`) are generated from it at build time,
 * test_syscall_groups checks that each rule is in the built filter, and test_policy_syscalls.py runs the probe attempts
 * that name the group (tests/probe/probe_escape.c). */
#define POLICY_SYSCALL_GROUPS(X)                                                                                       \
  X (IO_URING, "io_uring", "io_uring_setup, io_uring_enter, io_uring_register: EPERM",                                 \
     "`io_uring_setup`, `io_uring_enter`, `io_uring_register` (EPERM)", ALWAYS ("io_uring_setup", EPERM),              \
     ALWAYS ("io_uring_enter", EPERM), ALWAYS ("io_uring_register", EPERM))                                            \
  X (USERNS, "userns",                                                                                                 \
     "unshare/clone with any CLONE_NEW* flag: EPERM; clone3: ENOSYS (libc falls back to clone); "                      \
     "setns to a user namespace: EPERM",                                                                               \
     "`unshare` and `clone` when flags contain any of `CLONE_NEWUSER`, `CLONE_NEWNS`, `CLONE_NEWPID`, "                \
     "`CLONE_NEWNET`, `CLONE_NEWIPC`, `CLONE_NEWUTS`, `CLONE_NEWCGROUP`, `CLONE_NEWTIME` (EPERM, one rule per "        \
     "flag); `clone3` always (ENOSYS: its flags are in memory seccomp cannot read, so libc falls back to "             \
     "`clone`); `setns` with nstype `CLONE_NEWUSER` (EPERM)",                                                          \
     NS_FLAGS ("unshare", 0), NS_FLAGS ("clone", 0), ALWAYS ("clone3", ENOSYS),                                        \
     FLAG ("setns", 1, CLONE_NEWUSER, EPERM))                                                                          \
  X (BPF, "bpf", "bpf: EPERM", "`bpf` (EPERM)", ALWAYS ("bpf", EPERM))                                                 \
  X (KEYRING, "keyring", "add_key, request_key, keyctl: EPERM", "`add_key`, `request_key`, `keyctl` (EPERM)",          \
     ALWAYS ("add_key", EPERM), ALWAYS ("request_key", EPERM), ALWAYS ("keyctl", EPERM))                               \
  X (PERF, "perf", "perf_event_open: EPERM", "`perf_event_open` (EPERM)", ALWAYS ("perf_event_open", EPERM))           \
  X (PTRACE, "ptrace", "ptrace, process_vm_readv, process_vm_writev, pidfd_getfd: EPERM",                              \
     "`ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_getfd` (EPERM; pidfd_getfd makes the same "            \
     "ptrace-attach check)",                                                                                           \
     ALWAYS ("ptrace", EPERM), ALWAYS ("process_vm_readv", EPERM), ALWAYS ("process_vm_writev", EPERM),                \
     ALWAYS ("pidfd_getfd", EPERM))                                                                                    \
  X (MOUNT, "mount",                                                                                                   \
     "mount, umount2, pivot_root, fsopen, fsconfig, fsmount, fspick, move_mount, open_tree, mount_setattr: EPERM",     \
     "`mount`, `umount2`, `pivot_root`, `fsopen`, `fsconfig`, `fsmount`, `fspick`, `move_mount`, `open_tree`, "        \
     "`mount_setattr` (EPERM)",                                                                                        \
     ALWAYS ("mount", EPERM), ALWAYS ("umount2", EPERM), ALWAYS ("pivot_root", EPERM), ALWAYS ("fsopen", EPERM),       \
     ALWAYS ("fsconfig", EPERM), ALWAYS ("fsmount", EPERM), ALWAYS ("fspick", EPERM), ALWAYS ("move_mount", EPERM),    \
     ALWAYS ("open_tree", EPERM), ALWAYS ("mount_setattr", EPERM))                                                     \
  X (KMOD, "kmod", "init_module, finit_module, delete_module: EPERM",                                                  \
     "`init_module`, `finit_module`, `delete_module` (EPERM)", ALWAYS ("init_module", EPERM),                          \
     ALWAYS ("finit_module", EPERM), ALWAYS ("delete_module", EPERM))                                                  \
  X (TIOCSTI, "tiocsti", "ioctl TIOCSTI, TIOCLINUX: EPERM",                                                            \
     "`ioctl` with request (low 32 bits) `TIOCSTI` or `TIOCLINUX` (EPERM; the kernel reads the request as 32 "         \
     "bits, so the upper half is masked off)",                                                                         \
     EQ32 ("ioctl", 1, TIOCSTI, EPERM), EQ32 ("ioctl", 1, TIOCLINUX, EPERM))                                           \
  X (RAW_SOCKETS, "raw-sockets", "socket(AF_PACKET, ...), socket(..., SOCK_RAW, ...): EPERM",                          \
     "`socket` with domain (low 32 bits) `AF_PACKET`, or type `& 0xf` = `SOCK_RAW` (EPERM; "                           \
     "`SOCK_NONBLOCK`/`SOCK_CLOEXEC` are masked off)",                                                                 \
     EQ32 ("socket", 0, AF_PACKET, EPERM), MASKED ("socket", 1, 0xf, SOCK_RAW, EPERM))

/* POLICY_SYSI_ID: the group's position in the list (and in policy_syscall_groups[]) */
// clang-format off
enum policy_syscall_group_index
{
#define POLICY_SYSI_(id, name, doc, ref, ...) POLICY_SYSI_##id,
  POLICY_SYSCALL_GROUPS (POLICY_SYSI_)
#undef POLICY_SYSI_
  POLICY_SYSI_COUNT
};

/* POLICY_SYS_ID: the group's bit in policy_plan.deny_groups (unsigned: at most 32 groups) */
enum policy_syscall_group
{
#define POLICY_SYS_(id, name, doc, ref, ...) POLICY_SYS_##id = 1u << POLICY_SYSI_##id,
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
  const char *doc; /* one line for `policy explain` */
  const char *ref; /* the reference text of docs/policy-builtins.md (markdown, one paragraph) */
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
