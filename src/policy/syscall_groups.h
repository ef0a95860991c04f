/* syscall_groups.h - THE table of the policy's syscall groups (POLICY.md §2 `syscalls.deny`):
 * each group's member syscalls, the argument conditions under which they are refused, and the
 * errno returned. Pure data: the compiler validates group names against it, the enforcement
 * (runtime/policy_apply.c) turns the denied groups into one seccomp filter stacked on the OCI
 * filter, and docs/policy.md lists the same members. */
#ifndef ASBX_POLICY_SYSCALL_GROUPS_H
#define ASBX_POLICY_SYSCALL_GROUPS_H

#include <stddef.h>
#include <stdint.h>

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
  unsigned bit;     /* POLICY_SYS_* of plan.h */
  const struct policy_syscall_rule *rules;
  size_t rules_len;
  const char *doc; /* one line for docs/policy.md and `policy explain` */
};

extern const struct policy_sysgroup policy_syscall_groups[];
extern const size_t policy_syscall_groups_len;

/* Refused whenever filesystem.allowExec is set, whatever syscalls.deny says (docs/policy.md
 * "Native code under allowExec"): memfd_create, memfd_secret (ENOSYS), shmat with SHM_EXEC. */
extern const struct policy_syscall_rule policy_exec_rules[];
extern const size_t policy_exec_rules_len;

/* The group named `name`, or NULL. */
const struct policy_sysgroup *policy_syscall_group_by_name (const char *name);

#endif
