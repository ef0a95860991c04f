/* policy_process.c - the agent policy's process layer: the seccomp filters the init or exec
 * installs last (the syscall groups, the host-file and exec rules, the unix-socket confinement);
 * see policy_apply.h. no_new_privs, capabilities ∩ allow and rlimits are the container model's
 * (spec/model.h spec_narrow_process). */
#include <errno.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/seccomp_bpf.h"
#include "linux/unixsock.h"
#include "policy/syscall_groups.h"
#include "runtime/policy_apply.h"
#include "runtime/policy_hostfiles.h"
#include "runtime/policy_landlock.h"
#include "runtime/policy_noexec.h"
#include "runtime/process.h"
#include "monitor/unixsock.h"

/* one rule of a group (or of policy_exec_rules) as an OCI syscall entry; names/args: 2 slots */
static void
oci_rule (const struct policy_syscall_rule *rule, struct oci_seccomp_syscall *c, char **names,
          struct oci_seccomp_arg *a)
{
  names[0] = (char *) rule->syscall;
  c->names = names;
  c->names_len = 1;
  c->action = (char *) "SCMP_ACT_ERRNO";
  c->has_errno_ret = true;
  c->errno_ret = (uint32_t) rule->errno_ret;
  if (rule->arg >= 0)
    {
      a->index = (uint32_t) rule->arg;
      a->op = (char *) rule->op;
      a->value = rule->value;
      a->value_two = rule->value_two;
      a->has_value_two = true;
      c->args = a;
      c->args_len = 1;
    }
}

/* syscalls.denyWriteExecMemory beyond PR_SET_MDWE, which judges one mapping at a time: code
 * written through a second view of the same pages and run through the first (outside tester,
 * 2026-12-01). A MAP_SHARED anonymous mapping made PROT_READ|PROT_EXEC, then duplicated by
 * mremap(old_size 0) or inherited by a fork, and the copy mprotect()ed writable (no exec gain,
 * so MDWE allows it); userfaultfd filling a PROT_READ|PROT_EXEC page with UFFDIO_COPY. Refused
 * (EPERM): userfaultfd(2), mmap(2) with PROT_EXEC and MAP_SHARED (MAP_SHARED_VALIDATE has the
 * bit too), mremap(2) with old_size 0, personality(2) setting READ_IMPLIES_EXEC (0x0400000). (A write through
 * /proc/self/mem, which the kernel forces past page protections, was refused EACCES under the profiles when checked:
 * tests/integration/test_policy_native.py keeps checking it.) */
#define WX_RULES 4
static void
add_wx_rules (struct oci_seccomp_syscall *c, char **names, struct oci_seccomp_arg *a, size_t *len)
{
  static const char *const sys[WX_RULES] = { "userfaultfd", "mmap", "mremap", "personality" };
  for (size_t i = 0; i < WX_RULES; i++)
    {
      names[2 * i] = (char *) sys[i];
      c[i].names = &names[2 * i];
      c[i].names_len = 1;
      c[i].action = (char *) "SCMP_ACT_ERRNO";
      c[i].has_errno_ret = true;
      c[i].errno_ret = EPERM;
    }
  /* mmap: arg2 & PROT_EXEC and arg3 & MAP_SHARED (two conditions: AND) */
  a[2] = (struct oci_seccomp_arg){
    .index = 2, .op = (char *) "SCMP_CMP_MASKED_EQ", .value = PROT_EXEC, .value_two = PROT_EXEC, .has_value_two = true
  };
  a[3] = (struct oci_seccomp_arg){
    .index = 3, .op = (char *) "SCMP_CMP_MASKED_EQ", .value = MAP_SHARED, .value_two = MAP_SHARED, .has_value_two = true
  };
  c[1].args = &a[2];
  c[1].args_len = 2;
  /* mremap: old_size (arg1) == 0, the duplicate of a shared mapping */
  a[4] = (struct oci_seccomp_arg){ .index = 1, .op = (char *) "SCMP_CMP_EQ", .value = 0 };
  c[2].args = &a[4];
  c[2].args_len = 1;
  /* personality(READ_IMPLIES_EXEC): every later PROT_READ mapping or attach becomes executable
   * without asking for it - a read-only second attach of a SysV segment written through a first
   * one ran code under locked (outside tester, 2026-12-01) */
  a[5] = (struct oci_seccomp_arg){
    .index = 0, .op = (char *) "SCMP_CMP_MASKED_EQ", .value = 0x0400000, .value_two = 0x0400000, .has_value_two = true
  };
  c[3].args = &a[5];
  c[3].args_len = 1;
  *len += WX_RULES;
}

/* The denied groups, plus policy_exec_rules when allowExec is set (exec), as an OCI seccomp
 * object compiled by the same code as linux.seccomp (see policy_apply.h) */
int
policy_build_groups_filter (unsigned deny, bool exec, bool wx, struct linux_seccomp *out, asbx_err_t *err)
{
#ifdef __x86_64__
  static char *arches[] = { "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", NULL };
  size_t arches_len = 3;
#else
  static char *arches[] = { NULL };
  size_t arches_len = 0;
#endif
  /* SECCOMP_FILTER_FLAG_LOG: the errno answers of THIS filter are also logged to the kernel audit
   * stream (the answer stays the errno), for the monitor's `denial` records (monitor/denials.c) */
  static char *log_flag[] = { (char *) "SECCOMP_FILTER_FLAG_LOG", NULL };
  struct oci_seccomp sc = { .default_action = (char *) "SCMP_ACT_ALLOW",
                            .architectures = arches,
                            .architectures_len = arches_len,
                            .flags = log_flag,
                            .flags_len = 1 };
  size_t n = (exec ? policy_exec_rules_len : 0) + (wx ? WX_RULES : 0);
  int r;

  for (size_t g = 0; g < policy_syscall_groups_len; g++)
    if (deny & policy_syscall_groups[g].bit)
      n += policy_syscall_groups[g].rules_len;
  n += policy_hostfile_rules_len;
  cleanup_free struct oci_seccomp_syscall *calls = xmalloc0 (sizeof (*calls) * (n + 1));
  cleanup_free struct oci_seccomp_arg *args = xmalloc0 (sizeof (*args) * 2 * (n + 1));
  cleanup_free char **names = xmalloc0 (sizeof (char *) * 2 * (n + 1));
  /* the groups' rules, then the host-file rules (runtime/policy_hostfiles.h) of every policy
   * container; their io_uring and user-namespace rules are (within) the groups', added once */
  for (size_t g = 0; g <= policy_syscall_groups_len; g++)
    {
      const struct policy_sysgroup *grp = g < policy_syscall_groups_len ? &policy_syscall_groups[g] : NULL;
      const struct policy_syscall_rule *rules = grp ? grp->rules : policy_hostfile_rules;
      size_t rules_len = grp ? grp->rules_len : policy_hostfile_rules_len;
      if (grp && !(deny & grp->bit))
        continue;
      for (size_t i = 0; i < rules_len; i++)
        {
          const struct policy_syscall_rule *rule = &rules[i];
          if (!grp && (deny & POLICY_SYS_IO_URING) && strncmp (rule->syscall, "io_uring_", 9) == 0)
            continue;
          if (!grp && (deny & POLICY_SYS_USERNS)
              && (strcmp (rule->syscall, "unshare") == 0 || strncmp (rule->syscall, "clone", 5) == 0))
            continue;
          oci_rule (rule, &calls[sc.syscalls_len], &names[2 * sc.syscalls_len], &args[2 * sc.syscalls_len]);
          sc.syscalls_len++;
        }
    }
  for (size_t i = 0; exec && i < policy_exec_rules_len; i++, sc.syscalls_len++)
    oci_rule (&policy_exec_rules[i], &calls[sc.syscalls_len], &names[2 * sc.syscalls_len], &args[2 * sc.syscalls_len]);
  if (wx)
    add_wx_rules (&calls[sc.syscalls_len], &names[2 * sc.syscalls_len], &args[2 * sc.syscalls_len], &sc.syscalls_len);
  sc.syscalls = calls;
  r = linux_seccomp_compile (&sc, out, err);
  if (r < 0)
    return asbx_error_wrap (err, "policy syscalls.deny");
  /* fail closed: a rule name this libseccomp does not know would be a silently missing rule */
  if (out->skipped_names)
    {
      linux_seccomp_release (out);
      return asbx_error (err, ENOSYS,
                         "policy: %u syscall name(s) of the policy filter are unknown to the linked libseccomp "
                         "(run with --debug to see which)",
                         out->skipped_names);
    }
  return 0;
}

int
policy_prepare_process (const struct policy_plan *plan, const struct policy_homes_seen *seen,
                        struct process_layers *out, asbx_err_t *err)
{
  struct linux_landlock *ll = NULL;

  if (!plan || !plan->active)
    return 0;
  if (plan->landlock)
    {
      ll = policy_build_landlock (plan, seen, err);
      if (!ll)
        return -1;
    }
  /* always a filter: the host-file rules hold under every policy, groups denied or not */
  bool exec = policy_exec_restricted (plan);
  linux_seccomp_release (&out->groups);
  if (policy_build_groups_filter (plan->deny_groups, exec, plan->deny_write_exec_memory, &out->groups, err) < 0)
    {
      linux_landlock_free (ll);
      return -1;
    }
  out->landlock = ll;
  out->deny_wx = plan->deny_write_exec_memory;
  return 0;
}

int
policy_prepare_unixsock (const struct policy_plan *plan, int chan, bool oci_listener, struct process_layers *out,
                         asbx_err_t *err)
{
  bool confine = unixsock_confined (plan);

  if (!unixsock_supervised (plan))
    return 0;
  if (!confine)
    {
      /* network.mode open: only the execve notification (failed execs, exec records). Without
       * the monitor's channel (an `exec` with no monitor socket) there is nothing to notify. */
      if (chan < 0)
        return 0;
      if (oci_listener && plan->failed_execs)
        return asbx_error (err, EBUSY,
                           "limits.failedExecs counts failed execve calls with a seccomp listener, and "
                           "linux.seccomp.listenerPath asks for another: the kernel allows one listener per process");
      if (oci_listener)
        return 0; /* the exec records then read /proc (argvSource proc) */
    }
  else if (chan >= 0 && oci_listener)
    return asbx_error (err, EBUSY,
                       "network.mode %s confines unix sockets with a seccomp listener, and linux.seccomp.listenerPath "
                       "asks for another: the kernel allows one listener per process",
                       plan->net_mode == POLICY_NET_NONE ? "none" : "filtered");
  linux_seccomp_release (&out->unixsock);
  if (linux_unixsock_filter_compile (confine, chan >= 0, unixsock_exec_notified (plan), &out->unixsock, err) < 0)
    return asbx_error_wrap (err, "policy network (unix socket confinement)");
  out->unixsock_chan = chan;
  return 0;
}
