/* syscall_groups.c - the member syscalls of each policy syscall group, as data (the rules are
 * written in the header's POLICY_SYSCALL_GROUPS; this file expands them).
 *
 * Conditions: seccomp sees only syscall arguments, never memory, so a group that is about
 * flags inside a struct (clone3's clone_args) refuses the whole call with ENOSYS, which libc
 * treats as "clone3 missing" and falls back to clone, whose flags we can see. Several rules for
 * one syscall are OR'ed (any matching rule refuses). */
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/ioctl.h>

#include "policy/plan.h"
#include "policy/syscall_groups.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

#define ALWAYS(name, e)                                                                                                \
  {                                                                                                                    \
    name, -1, NULL, 0, 0, e                                                                                            \
  }
#define FLAG(name, argi, bit, e)                                                                                       \
  {                                                                                                                    \
    name, argi, "SCMP_CMP_MASKED_EQ", (bit), (bit), e                                                                  \
  }
#define EQ32(name, argi, v, e)                                                                                         \
  {                                                                                                                    \
    name, argi, "SCMP_CMP_MASKED_EQ", 0xffffffffu, (v), e                                                              \
  }

#define MASKED(name, argi, mask, v, e)                                                                                 \
  {                                                                                                                    \
    name, argi, "SCMP_CMP_MASKED_EQ", (mask), (v), e                                                                   \
  }

/* a new namespace of any kind (the user namespace is what matters; the others need
 * CAP_SYS_ADMIN, which only a new user namespace would give) */
#define NS_FLAGS(sc, argi)                                                                                             \
  FLAG (sc, argi, CLONE_NEWUSER, EPERM), FLAG (sc, argi, CLONE_NEWNS, EPERM), FLAG (sc, argi, CLONE_NEWPID, EPERM),    \
      FLAG (sc, argi, CLONE_NEWNET, EPERM), FLAG (sc, argi, CLONE_NEWIPC, EPERM),                                      \
      FLAG (sc, argi, CLONE_NEWUTS, EPERM), FLAG (sc, argi, CLONE_NEWCGROUP, EPERM),                                   \
      FLAG (sc, argi, CLONE_NEWTIME, EPERM)

/* each group's rules: one array per entry of POLICY_SYSCALL_GROUPS, named after its ID */
#define RULES(id, n, d, ref, ...) static const struct policy_syscall_rule rules_##id[] = { __VA_ARGS__ };
POLICY_SYSCALL_GROUPS (RULES)
#undef RULES

#define GROUP(id, n, d, ref, ...)                                                                                      \
  { n, POLICY_SYS_##id, rules_##id, sizeof (rules_##id) / sizeof (rules_##id[0]), d, ref },
const struct policy_sysgroup policy_syscall_groups[] = { POLICY_SYSCALL_GROUPS (GROUP) };
#undef GROUP
const size_t policy_syscall_groups_len = sizeof (policy_syscall_groups) / sizeof (policy_syscall_groups[0]);

#ifndef SHM_EXEC
#define SHM_EXEC 0100000
#endif
/* filesystem.allowExec (issue 13 §2): memory the agent fills that the kernel would map
 * executable with no mount to carry noexec. A memfd (even MFD_NOEXEC_SEAL, even under
 * vm.memfd_noexec=2: those cover execve only, checked on 6.18) and a memfd_secret area can be
 * mapped PROT_EXEC through their fd (dlopen("/proc/self/fd/N")), or mapped twice, writable and
 * executable; a SysV segment can be attached twice, the second time with SHM_EXEC. ENOSYS for
 * memfd_create/memfd_secret: what callers check to fall back (glib, systemd, JVM ZGC use a tmpfs
 * file then, which is on a noexec mount). */
const struct policy_syscall_rule policy_exec_rules[] = {
  ALWAYS ("memfd_create", ENOSYS),
  ALWAYS ("memfd_secret", ENOSYS),
  FLAG ("shmat", 2, SHM_EXEC, EPERM),
};
const size_t policy_exec_rules_len = sizeof (policy_exec_rules) / sizeof (policy_exec_rules[0]);

const struct policy_sysgroup *
policy_syscall_group_by_name (const char *name)
{
  for (size_t i = 0; i < policy_syscall_groups_len; i++)
    if (name && strcmp (policy_syscall_groups[i].name, name) == 0)
      return &policy_syscall_groups[i];
  return NULL;
}
