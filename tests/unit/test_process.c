/* test_process.c - unit tests for the pure parts of src/linux/process.h: rlimit name table and
 * pre-flight check, capability names, sysctl validation rules. No root needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/error.h"
#include "linux/process.h"

static void
test_rlimit_names (void **state)
{
  static const char *names[] = { "RLIMIT_AS",     "RLIMIT_CORE",   "RLIMIT_CPU",        "RLIMIT_DATA",
                                 "RLIMIT_FSIZE",  "RLIMIT_LOCKS",  "RLIMIT_MEMLOCK",    "RLIMIT_MSGQUEUE",
                                 "RLIMIT_NICE",   "RLIMIT_NOFILE", "RLIMIT_NPROC",      "RLIMIT_RSS",
                                 "RLIMIT_RTPRIO", "RLIMIT_RTTIME", "RLIMIT_SIGPENDING", "RLIMIT_STACK" };
  int seen = 0;
  (void) state;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    {
      int r = linux_rlimit_from_name (names[i]);
      assert_true (r >= 0 && r < RLIM_NLIMITS);
      assert_string_equal (linux_rlimit_name (r), names[i]);
      seen |= 1 << r;
    }
  assert_int_equal (seen, (1 << RLIM_NLIMITS) - 1);
  assert_int_equal (linux_rlimit_from_name ("RLIMIT_NOFILE"), RLIMIT_NOFILE);
  assert_int_equal (linux_rlimit_from_name ("rlimit_nofile"), -1);
  assert_int_equal (linux_rlimit_from_name ("NOFILE"), -1);
  assert_int_equal (linux_rlimit_from_name (""), -1);
  assert_int_equal (linux_rlimit_from_name (NULL), -1);
  assert_null (linux_rlimit_name (99));
}

static int
check_rlimits (struct oci_rlimit *rl, size_t n, char **msg)
{
  struct oci_process p = { 0 };
  asbx_err_t err = NULL;
  int r;
  p.rlimits = rl;
  p.rlimits_len = n;
  r = linux_rlimits_check (&p, &err);
  *msg = NULL;
  if (err)
    {
      *msg = strdup (err->msg);
      asbx_error_free (&err);
    }
  return r;
}

static void
test_rlimit_check (void **state)
{
  struct rlimit cur;
  char *msg;
  (void) state;
  getrlimit (RLIMIT_NOFILE, &cur);

  struct oci_rlimit ok[] = { { "RLIMIT_NOFILE", 10, cur.rlim_max }, { "RLIMIT_CORE", 0, 0 } };
  assert_int_equal (check_rlimits (ok, 2, &msg), 0);
  assert_null (msg);

  struct oci_rlimit unknown[] = { { "RLIMIT_NOFILE", 1, 1 }, { "RLIMIT_BOGUS", 0, 0 } };
  assert_int_equal (check_rlimits (unknown, 2, &msg), -1);
  assert_non_null (strstr (msg, "process.rlimits[1].type: unknown rlimit `RLIMIT_BOGUS`"));
  free (msg);

  struct oci_rlimit inverted[] = { { "RLIMIT_CORE", 5, 1 } };
  assert_int_equal (check_rlimits (inverted, 1, &msg), -1);
  assert_non_null (strstr (msg, "soft limit 5 is above the hard limit 1"));
  free (msg);

  struct oci_rlimit dup[] = { { "RLIMIT_CORE", 0, 0 }, { "RLIMIT_CORE", 0, 0 } };
  assert_int_equal (check_rlimits (dup, 2, &msg), -1);
  assert_non_null (strstr (msg, "process.rlimits[1].type: duplicate RLIMIT_CORE"));
  free (msg);
}

/* Above the hard limit: only an error when CAP_SYS_RESOURCE is missing (as on the CI host). */
static void
test_rlimit_check_raise (void **state)
{
  struct rlimit cur;
  char *msg;
  (void) state;
  getrlimit (RLIMIT_NOFILE, &cur);
  if (cur.rlim_max == RLIM_INFINITY)
    skip ();
  struct oci_rlimit big[] = { { "RLIMIT_NOFILE", 1024, (uint64_t) cur.rlim_max + 1 } };
  if (check_rlimits (big, 1, &msg) == 0)
    {
      /* we hold CAP_SYS_RESOURCE */
      assert_null (msg);
      return;
    }
  assert_non_null (strstr (msg, "process.rlimits[0]: RLIMIT_NOFILE hard"));
  assert_non_null (strstr (msg, "lacks CAP_SYS_RESOURCE"));
  free (msg);
}

static void
test_cap_names (void **state)
{
  int c;
  (void) state;
  assert_int_equal (linux_cap_from_name ("CAP_CHOWN", &c), 0);
  assert_int_equal (c, 0);
  assert_int_equal (linux_cap_from_name ("CAP_SYS_ADMIN", &c), 0);
  assert_int_equal (c, 21);
  assert_int_equal (linux_cap_from_name ("CAP_NOPE", &c), -1);
  assert_int_equal (linux_cap_from_name ("cap_chown", &c), -1);
  assert_int_equal (linux_cap_from_name ("12", &c), -1);
  assert_int_equal (linux_cap_from_name ("all", &c), -1);
  assert_int_equal (linux_cap_from_name ("CAP_", &c), -1);
  assert_int_equal (linux_cap_from_name ("CAP_CHOWN,CAP_KILL", &c), -1);
  assert_true (linux_cap_last_cap () >= 36);
}

static void
test_caps_check (void **state)
{
  char *b[] = { "CAP_CHOWN", "CAP_KILL", NULL };
  char *bad[] = { "CAP_CHOWN", "CAP_KILL", "CAP_SETUID", "CAP_FOO", NULL };
  struct oci_capabilities c = { 0 };
  asbx_err_t err = NULL;
  (void) state;
  c.bounding = b;
  c.bounding_len = 2;
  assert_int_equal (linux_caps_check (&c, &err), 0);
  assert_null (err);
  assert_int_equal (linux_caps_check (NULL, &err), 0);
  c.ambient = bad;
  c.ambient_len = 4;
  assert_int_equal (linux_caps_check (&c, &err), -1);
  assert_string_equal (err->msg, "process.capabilities.ambient[3]: unknown capability `CAP_FOO`: Invalid argument");
  asbx_error_free (&err);
}

static const struct
{
  const char *key;
  unsigned long flags;
  int ok;
} sysctl_cases[] = {
  { "kernel.msgmax", CLONE_NEWIPC, 1 },
  { "kernel.msgmax", 0, 0 },
  { "kernel.msgmnb", CLONE_NEWIPC, 1 },
  { "kernel.msgmni", CLONE_NEWIPC, 1 },
  { "kernel.sem", CLONE_NEWIPC, 1 },
  { "kernel.shmall", CLONE_NEWIPC, 1 },
  { "kernel.shmmax", CLONE_NEWIPC, 1 },
  { "kernel.shmmni", CLONE_NEWIPC, 1 },
  { "kernel.shm_rmid_forced", CLONE_NEWIPC, 1 },
  { "kernel.shm_rmid_forced", CLONE_NEWNET | CLONE_NEWUTS, 0 },
  { "fs.mqueue.queues_max", CLONE_NEWIPC, 1 },
  { "fs.mqueue.msg_max", 0, 0 },
  { "fs.file-max", CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS, 0 },
  { "net.ipv4.ip_forward", CLONE_NEWNET, 1 },
  { "net.ipv4.ip_forward", CLONE_NEWIPC, 0 },
  { "net.core.somaxconn", CLONE_NEWNET, 1 },
  { "kernel.hostname", CLONE_NEWUTS, 1 },
  { "kernel.domainname", CLONE_NEWUTS, 1 },
  { "kernel.domainname", 0, 0 },
  { "kernel.pid_max", ~0ul, 0 },
  { "vm.overcommit_memory", ~0ul, 0 },
  { "kernel.shmmax.", CLONE_NEWIPC, 0 },
  { "net..ipv4", CLONE_NEWNET, 0 },
  { "net.ipv4/../../x", CLONE_NEWNET, 0 },
  { "net/ipv4/ip_forward", CLONE_NEWNET, 0 },
  { ".net.ipv4", CLONE_NEWNET, 0 },
  { "net.ipv4 x", CLONE_NEWNET, 0 },
  { "", ~0ul, 0 },
  { "kernel.msgmaxx", CLONE_NEWIPC, 0 },
};

static void
test_sysctl_rules (void **state)
{
  (void) state;
  for (size_t i = 0; i < sizeof sysctl_cases / sizeof sysctl_cases[0]; i++)
    {
      asbx_err_t err = NULL;
      int r = linux_sysctl_check_key (sysctl_cases[i].key, sysctl_cases[i].flags, &err);
      if (sysctl_cases[i].ok != (r == 0))
        fail_msg ("case %zu `%s` flags %#lx: got %d (%s)", i, sysctl_cases[i].key, sysctl_cases[i].flags, r,
                  err ? err->msg : "");
      if (r < 0)
        assert_non_null (strstr (err->msg, "linux.sysctl"));
      asbx_error_free (&err);
    }
}

static void
test_sysctl_map (void **state)
{
  char *k[] = { "kernel.shmmax", "net.ipv4.ip_forward" }, *v[] = { "1", "1" };
  struct oci_map m = { k, v, 2 };
  asbx_err_t err = NULL;
  (void) state;
  assert_int_equal (linux_sysctl_check (&m, CLONE_NEWIPC | CLONE_NEWNET, &err), 0);
  assert_int_equal (linux_sysctl_check (&m, CLONE_NEWIPC, &err), -1);
  assert_non_null (strstr (err->msg, "`net.ipv4.ip_forward` is not allowed in the host's network namespace"));
  asbx_error_free (&err);
  assert_int_equal (linux_sysctl_check (NULL, 0, &err), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_rlimit_names),       cmocka_unit_test (test_rlimit_check),
    cmocka_unit_test (test_rlimit_check_raise), cmocka_unit_test (test_cap_names),
    cmocka_unit_test (test_caps_check),         cmocka_unit_test (test_sysctl_rules),
    cmocka_unit_test (test_sysctl_map),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
