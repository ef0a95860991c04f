/* test_rootless_oci.c - src/runtime/rootless_oci.c: what a container without a cgroup refuses up
 * front (each linux.resources field that only a cgroup could enforce, named in the error; deny
 * device rules and an empty resources object accepted), and the pid namespace walk that replaces
 * the cgroup for `ps` (a child in its own pid namespace is found with its namespace's other
 * process; our own namespace is refused). The walk needs CLONE_NEWPID: as root or in a user
 * namespace of our own; skipped when neither can be made. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libocispec/oci_spec.h"
#include "runtime/rootless_oci.h"

/* the check on a config whose linux section is `lin` (JSON); returns the error message or NULL */
static char *
check (const char *lin)
{
  char *json = NULL;
  asbx_err_t err = NULL, perr = NULL;
  struct oci_spec *s;
  char *msg = NULL;

  assert_true (asprintf (&json, "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"},\"linux\":%s}", lin) > 0);
  s = oci_spec_parse (json, strlen (json), "config.json", &perr);
  if (!s)
    fail_msg ("parse %s: %s", lin, perr ? perr->msg : "?");
  if (rootless_oci_check (s, "b/config.json", &err) < 0)
    {
      assert_non_null (err);
      msg = strdup (err->msg);
      asbx_error_free (&err);
    }
  oci_spec_free (s);
  free (json);
  return msg;
}

static void
expect_refused (const char *lin, const char *field)
{
  char *m = check (lin);
  if (!m)
    fail_msg ("accepted: %s", lin);
  if (!strstr (m, field) || !strstr (m, "b/config.json"))
    fail_msg ("`%s` does not name %s and the file", m, field);
  free (m);
}

static void
test_refused_fields (void **state)
{
  (void) state;
  expect_refused ("{\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"},"
                  "{\"allow\":true,\"type\":\"c\",\"major\":1,\"minor\":3,\"access\":\"rwm\"}]}}",
                  "linux.resources.devices[1]");
  expect_refused ("{\"resources\":{\"cpu\":{\"shares\":512}}}", "linux.resources.cpu");
  expect_refused ("{\"resources\":{\"cpu\":{\"realtimeRuntime\":1000}}}", "linux.resources.cpu");
  expect_refused ("{\"resources\":{\"cpu\":{\"mems\":\"0\"}}}", "linux.resources.cpu.cpus/mems");
  expect_refused ("{\"resources\":{\"memory\":{\"reservation\":1000000}}}", "linux.resources.memory");
  expect_refused ("{\"resources\":{\"memory\":{\"swappiness\":10}}}", "linux.resources.memory.swappiness");
  expect_refused ("{\"resources\":{\"memory\":{\"disableOOMKiller\":true}}}",
                  "linux.resources.memory.disableOOMKiller");
  expect_refused ("{\"resources\":{\"blockIO\":{\"weight\":100}}}", "linux.resources.blockIO");
  expect_refused ("{\"resources\":{\"hugepageLimits\":[{\"pageSize\":\"2MB\",\"limit\":0}]}}",
                  "linux.resources.hugepageLimits");
  expect_refused ("{\"resources\":{\"network\":{\"classID\":1}}}", "linux.resources.network");
  expect_refused ("{\"resources\":{\"unified\":{\"pids.max\":\"10\"}}}", "linux.resources.unified");
}

static void
test_accepted (void **state)
{
  static const char *const ok[] = {
    "{}",
    "{\"resources\":{}}",
    "{\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}]}}",
    /* rootless_check's (runtime/rootless.c), not this check's */
    "{\"resources\":{\"memory\":{\"limit\":1000000}}}",
    "{\"resources\":{\"pids\":{\"limit\":10}}}",
    /* unset values as engines write them */
    "{\"resources\":{\"memory\":{\"swappiness\":18446744073709551615}}}",
  };
  (void) state;
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    {
      char *m = check (ok[i]);
      if (m)
        fail_msg ("refused %s: %s", ok[i], m);
    }
}

static void
test_pidns_walk (void **state)
{
  int p[2];
  char c;
  pid_t child;
  pid_t *pids = NULL;
  size_t n = 0;
  asbx_err_t err = NULL;
  (void) state;

  /* our own pid namespace: refused (its processes are not a container's) */
  assert_int_equal (rootless_pidns_pids (getpid (), &pids, &n, &err), -1);
  assert_non_null (err);
  asbx_error_free (&err);

  if (unshare (CLONE_NEWPID) < 0 && (unshare (CLONE_NEWUSER) < 0 || unshare (CLONE_NEWPID) < 0))
    skip ();
  assert_int_equal (pipe (p), 0);
  child = fork (); /* pid 1 of the new namespace */
  assert_true (child >= 0);
  if (child == 0)
    {
      if (fork () == 0) /* pid 2 */
        {
          close (p[0]);
          pause ();
          _exit (0);
        }
      close (p[0]);
      if (write (p[1], "x", 1) != 1)
        _exit (1);
      pause ();
      _exit (0);
    }
  close (p[1]);
  assert_int_equal (read (p[0], &c, 1), 1);
  assert_int_equal (rootless_pidns_pids (child, &pids, &n, &err), 0);
  assert_int_equal (n, 2);
  assert_int_equal (pids[0], child);
  assert_true (pids[1] != child && pids[1] > 0);
  kill (pids[1], SIGKILL);
  kill (child, SIGKILL); /* the namespace's init: the kernel kills pid 2 with it */
  waitpid (child, NULL, 0);
  free (pids);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_refused_fields),
    cmocka_unit_test (test_accepted),
    cmocka_unit_test (test_pidns_walk),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
