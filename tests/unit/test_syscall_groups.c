/* test_syscall_groups.c - the syscall groups of src/policy/syscall_groups.h against the filter the
 * runtime really builds from them (runtime/policy_process.c policy_build_groups_filter). The program
 * is run here by a small classic-BPF interpreter over a struct seccomp_data per rule, so no root,
 * no syscall is made and nothing is installed:
 *   - each rule of each group, with the argument its condition matches, answers the group's errno
 *     when (only) that group is denied - every member is in the filter;
 *   - the same call with no group denied is allowed (unless a host-file rule, which holds under
 *     every policy, covers that syscall): the answer is the group's;
 *   - a conditional rule's call with the condition unmet (argument 0) is allowed;
 *   - the allowExec rules (policy_exec_rules) likewise, and only with exec set. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "linux/seccomp_bpf.h"
#include "policy/syscall_groups.h"
#include "runtime/policy_apply.h"
#include "runtime/policy_hostfiles.h"

/* Run a seccomp program (linux/Documentation/userspace-api/seccomp_filter.rst: classic BPF over
 * struct seccomp_data, 32-bit loads); the return value, or 0 (KILL) on a malformed program. */
static uint32_t
run_bpf (const struct sock_filter *prog, unsigned short len, const struct seccomp_data *d)
{
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
  for (unsigned pc = 0; pc < len; pc++)
    {
      const struct sock_filter *f = &prog[pc];
      uint32_t src = BPF_SRC (f->code) == BPF_X ? x : f->k;
      switch (BPF_CLASS (f->code))
        {
        case BPF_LD:
        case BPF_LDX:
          {
            uint32_t v;
            if (BPF_MODE (f->code) == BPF_ABS && f->k + 4 <= sizeof (*d) && f->k % 4 == 0)
              memcpy (&v, (const char *) d + f->k, 4);
            else if (BPF_MODE (f->code) == BPF_IMM)
              v = f->k;
            else if (BPF_MODE (f->code) == BPF_MEM && f->k < BPF_MEMWORDS)
              v = mem[f->k];
            else if (BPF_MODE (f->code) == BPF_LEN)
              v = sizeof (*d);
            else
              return 0;
            if (BPF_CLASS (f->code) == BPF_LD)
              a = v;
            else
              x = v;
            break;
          }
        case BPF_ST:
        case BPF_STX:
          if (f->k >= BPF_MEMWORDS)
            return 0;
          mem[f->k] = BPF_CLASS (f->code) == BPF_ST ? a : x;
          break;
        case BPF_ALU:
          switch (BPF_OP (f->code))
            {
            case BPF_ADD: a += src; break;
            case BPF_SUB: a -= src; break;
            case BPF_MUL: a *= src; break;
            case BPF_DIV:
              if (src == 0)
                return 0;
              a /= src;
              break;
            case BPF_MOD:
              if (src == 0)
                return 0;
              a %= src;
              break;
            case BPF_OR: a |= src; break;
            case BPF_AND: a &= src; break;
            case BPF_XOR: a ^= src; break;
            case BPF_LSH: a <<= src & 31; break;
            case BPF_RSH: a >>= src & 31; break;
            case BPF_NEG: a = -a; break;
            default: return 0;
            }
          break;
        case BPF_JMP:
          {
            bool t;
            switch (BPF_OP (f->code))
              {
              case BPF_JA: pc += f->k; continue;
              case BPF_JEQ: t = a == src; break;
              case BPF_JGT: t = a > src; break;
              case BPF_JGE: t = a >= src; break;
              case BPF_JSET: t = (a & src) != 0; break;
              default: return 0;
              }
            pc += t ? f->jt : f->jf;
            break;
          }
        case BPF_RET: return BPF_RVAL (f->code) == BPF_A ? a : f->k;
        case BPF_MISC:
          if (BPF_MISCOP (f->code) == BPF_TAX)
            x = a;
          else
            a = x;
          break;
        default: return 0;
        }
    }
  return 0; /* fell off the end: the kernel refuses such a program */
}

/* The answer of the filter built for (deny, exec) to `rule`'s syscall, with the rule's argument
 * set to `argv` (the other arguments 0), on the native architecture. */
static uint32_t
answer (unsigned deny, bool exec, const struct policy_syscall_rule *rule, uint64_t argv)
{
  struct linux_seccomp f = { 0 };
  asbx_err_t err = NULL;
  if (policy_build_groups_filter (deny, exec, false, &f, &err) < 0)
    fail_msg ("policy_build_groups_filter (0x%x): %s", deny, err->msg);
  int nr = seccomp_syscall_resolve_name (rule->syscall);
  if (nr == __NR_SCMP_ERROR || nr < 0)
    fail_msg ("%s: not a syscall of this architecture", rule->syscall);
  struct seccomp_data d = { .nr = nr, .arch = seccomp_arch_native () };
  if (rule->arg >= 0)
    d.args[rule->arg] = argv;
  uint32_t r = run_bpf (f.insns, f.len, &d);
  linux_seccomp_release (&f);
  return r;
}

static bool
in_hostfile_rules (const char *name)
{
  for (size_t i = 0; i < policy_hostfile_rules_len; i++)
    if (strcmp (policy_hostfile_rules[i].syscall, name) == 0)
      return true;
  return false;
}

/* `rule` refused with its errno by the filter of (deny, exec), and not by the filter without it */
static void
check_rule (const char *what, const struct policy_syscall_rule *rule, unsigned deny, bool exec)
{
  uint32_t want = SECCOMP_RET_ERRNO | ((uint32_t) rule->errno_ret & SECCOMP_RET_DATA);
  uint64_t match = rule->arg >= 0 ? rule->value_two : 0;
  uint32_t got = answer (deny, exec, rule, match);
  if (got != want)
    fail_msg ("%s: %s (arg%d = 0x%llx) answers 0x%x in the built filter, want ERRNO(%d)", what, rule->syscall,
              rule->arg, (unsigned long long) match, got, rule->errno_ret);
  if (in_hostfile_rules (rule->syscall))
    return;
  got = answer (0, false, rule, match);
  if (got != SECCOMP_RET_ALLOW)
    fail_msg ("%s: %s refused (0x%x) with no group denied", what, rule->syscall, got);
  if (rule->arg >= 0 && (got = answer (deny, exec, rule, 0)) != SECCOMP_RET_ALLOW)
    fail_msg ("%s: %s with arg%d = 0 refused (0x%x): the condition is not applied", what, rule->syscall, rule->arg,
              got);
}

static void
test_every_member_in_filter (void **state)
{
  size_t checked = 0;
  assert_int_equal (policy_syscall_groups_len, POLICY_SYSI_COUNT);
  for (size_t g = 0; g < policy_syscall_groups_len; g++)
    {
      const struct policy_sysgroup *grp = &policy_syscall_groups[g];
      assert_int_equal (grp->bit, 1u << g);
      assert_ptr_equal (policy_syscall_group_by_name (grp->name), grp);
      assert_true (grp->rules_len > 0);
      for (size_t i = 0; i < grp->rules_len; i++, checked++)
        check_rule (grp->name, &grp->rules[i], grp->bit, false);
    }
  print_message ("%zu group rules checked in the built filter\n", checked);
}

static void
test_exec_rules_in_filter (void **state)
{
  for (size_t i = 0; i < policy_exec_rules_len; i++)
    {
      check_rule ("allowExec", &policy_exec_rules[i], 0, true);
      uint64_t match = policy_exec_rules[i].arg >= 0 ? policy_exec_rules[i].value_two : 0;
      assert_int_equal (answer (0, false, &policy_exec_rules[i], match), SECCOMP_RET_ALLOW);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_every_member_in_filter),
    cmocka_unit_test (test_exec_rules_in_filter),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
