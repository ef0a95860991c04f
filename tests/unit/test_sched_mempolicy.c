/* test_sched_mempolicy.c - unit tests for the pure checks of linux/sched.c and linux/mempolicy.c
 * (issue 15): names, ranges and the node-list syntax, each refusal naming its JSON path. The
 * kernel side (sched_setattr, ioprio_set, set_mempolicy) is covered by
 * tests/integration/test_sched_mempolicy.py. No root needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "core/error.h"
#include "linux/process.h"

/* 0 when accepted; else 1 and the message contains `needle` */
static int
mp (const char *mode, const char *nodes, const char *flag, const char *needle)
{
  char *flags[] = { (char *) flag, NULL };
  struct oci_memory_policy m = {
    .mode = (char *) mode, .nodes = (char *) nodes, .flags = flags, .flags_len = flag ? 1 : 0
  };
  asbx_err_t err = NULL;
  if (linux_mempolicy_check (&m, &err) == 0)
    return 0;
  assert_non_null (err);
  if (needle && !strstr (err->msg, needle))
    fail_msg ("`%s` not in `%s`", needle, err->msg);
  asbx_error_free (&err);
  return 1;
}

static void
test_mempolicy_accepts (void **state)
{
  (void) state;
  assert_int_equal (mp ("MPOL_DEFAULT", NULL, NULL, NULL), 0);
  assert_int_equal (mp ("MPOL_LOCAL", "", NULL, NULL), 0);
  assert_int_equal (mp ("MPOL_BIND", "0", NULL, NULL), 0);
  assert_int_equal (mp ("MPOL_BIND", "0-3,7,9-9", NULL, NULL), 0);
  assert_int_equal (mp ("MPOL_INTERLEAVE", "1023", "MPOL_F_STATIC_NODES", NULL), 0);
  assert_int_equal (mp ("MPOL_PREFERRED", NULL, NULL, NULL), 0); /* empty = local */
  assert_int_equal (mp ("MPOL_PREFERRED_MANY", "0,1", "MPOL_F_RELATIVE_NODES", NULL), 0);
  assert_int_equal (mp ("MPOL_WEIGHTED_INTERLEAVE", "0", "MPOL_F_NUMA_BALANCING", NULL), 0);
  asbx_err_t err = NULL;
  assert_int_equal (linux_mempolicy_check (NULL, &err), 0);
}

static void
test_mempolicy_refuses (void **state)
{
  (void) state;
  assert_int_equal (mp ("MPOL_BOGUS", NULL, NULL, "linux.memoryPolicy.mode"), 1);
  assert_int_equal (mp ("mpol_bind", "0", NULL, "linux.memoryPolicy.mode"), 1);
  assert_int_equal (mp ("MPOL_BIND", NULL, NULL, "linux.memoryPolicy.nodes: required"), 1);
  assert_int_equal (mp ("MPOL_INTERLEAVE", "", NULL, "required"), 1);
  assert_int_equal (mp ("MPOL_DEFAULT", "0", NULL, "must be empty"), 1);
  assert_int_equal (mp ("MPOL_LOCAL", "1", NULL, "must be empty"), 1);
  static const char *const bad[] = { "x", "-1", "1-", "3-1", "0,,1", "0 ", "1024", "0-1024", "99999999999999999999" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal (mp ("MPOL_BIND", bad[i], NULL, "linux.memoryPolicy.nodes"), 1);
  assert_int_equal (mp ("MPOL_BIND", "0", "MPOL_F_NOPE", "linux.memoryPolicy.flags[0]"), 1);
}

static int
sc (const char *policy, const char *flag, int nice, bool has_nice, const char *io_class, int prio, const char *needle)
{
  char *flags[] = { (char *) flag, NULL };
  struct oci_scheduler s = {
    .policy = (char *) policy, .flags = flags, .flags_len = flag ? 1 : 0, .nice = nice, .has_nice = has_nice
  };
  struct oci_io_priority io = { .class_ = (char *) io_class, .priority = prio };
  struct oci_process p = { .scheduler = policy ? &s : NULL, .io_priority = io_class ? &io : NULL };
  asbx_err_t err = NULL;
  if (linux_sched_check (&p, "config.json: ", &err) == 0)
    return 0;
  if (needle && !strstr (err->msg, needle))
    fail_msg ("`%s` not in `%s`", needle, err->msg);
  assert_non_null (strstr (err->msg, "config.json: process."));
  asbx_error_free (&err);
  return 1;
}

static void
test_sched_checks (void **state)
{
  (void) state;
  assert_int_equal (sc ("SCHED_OTHER", NULL, -20, true, NULL, 0, NULL), 0);
  assert_int_equal (sc ("SCHED_BATCH", "SCHED_FLAG_RESET_ON_FORK", 19, true, NULL, 0, NULL), 0);
  assert_int_equal (sc ("SCHED_FIFO", NULL, 0, false, "IOPRIO_CLASS_RT", 7, NULL), 0);
  assert_int_equal (sc (NULL, NULL, 0, false, "IOPRIO_CLASS_IDLE", 0, NULL), 0);
  assert_int_equal (sc ("SCHED_NOPE", NULL, 0, false, NULL, 0, "process.scheduler.policy"), 1);
  assert_int_equal (sc ("SCHED_OTHER", NULL, 20, true, NULL, 0, "process.scheduler.nice"), 1);
  assert_int_equal (sc ("SCHED_OTHER", NULL, -21, true, NULL, 0, "process.scheduler.nice"), 1);
  assert_int_equal (sc ("SCHED_OTHER", "SCHED_FLAG_UTIL_CLAMP_MAX", 0, false, NULL, 0, "process.scheduler.flags[0]"),
                    1);
  assert_int_equal (sc ("SCHED_DEADLINE", NULL, 0, false, NULL, 0, "SCHED_DEADLINE"), 1);
  assert_int_equal (sc (NULL, NULL, 0, false, "IOPRIO_CLASS_X", 0, "process.ioPriority.class"), 1);
  assert_int_equal (sc (NULL, NULL, 0, false, "IOPRIO_CLASS_BE", 8, "process.ioPriority.priority"), 1);
  assert_int_equal (sc (NULL, NULL, 0, false, "IOPRIO_CLASS_BE", -1, "process.ioPriority.priority"), 1);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_mempolicy_accepts),
    cmocka_unit_test (test_mempolicy_refuses),
    cmocka_unit_test (test_sched_checks),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
