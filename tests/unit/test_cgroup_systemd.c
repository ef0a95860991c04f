/* test_cgroup_systemd.c - unit tests for the pure parts of the systemd cgroup driver: slice
 * expansion (systemd.slice(5)), "slice:prefix:name" parsing into unit name and cgroup path,
 * the resource -> unit property mapping, and the clear errors when systemd is not running or
 * the build has no libsystemd. No D-Bus, no root. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "linux/cgroup_systemd.h"

static char *
expand (const char *s)
{
  asbx_err_t err = NULL;
  char *r = cgroup_systemd_expand_slice (s, &err);
  if (r == NULL)
    {
      assert_non_null (err);
      assert_int_equal (err->errnum, EINVAL);
    }
  asbx_error_free (&err);
  return r;
}

static void
test_expand_slice (void **state)
{
  static const struct
  {
    const char *in, *out;
  } ok[] = {
    { "system.slice", "/system.slice" },
    { "a-b-c.slice", "/a.slice/a-b.slice/a-b-c.slice" },
    { "kubepods-burstable-pod1.slice", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice" },
    { "-.slice", "" },
  };
  static const char *bad[] = { "system", ".slice", "a--b.slice", "-a.slice", "a-.slice", "a/b.slice", "a b.slice" };
  (void) state;
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    {
      char *r = expand (ok[i].in);
      assert_non_null (r);
      assert_string_equal (r, ok[i].out);
      free (r);
    }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      char *r = expand (bad[i]);
      if (r)
        fail_msg ("`%s` accepted as `%s`", bad[i], r);
    }
}

static int
parse (const char *p, struct cgroup_systemd_unit *u, char **msg)
{
  asbx_err_t err = NULL;
  int r = cgroup_systemd_parse (p, "ctr1", u, &err);
  *msg = err ? strdup (err->msg) : NULL;
  asbx_error_free (&err);
  return r;
}

static void
test_parse (void **state)
{
  static const struct
  {
    const char *in, *slice, *unit, *path;
  } ok[] = {
    { "system.slice:agentsbx:abc", "system.slice", "agentsbx-abc.scope", "/system.slice/agentsbx-abc.scope" },
    { ":agentsbx:abc", "system.slice", "agentsbx-abc.scope", "/system.slice/agentsbx-abc.scope" },
    { "a-b.slice:p:n", "a-b.slice", "p-n.scope", "/a.slice/a-b.slice/p-n.scope" },
    { "system.slice::n", "system.slice", "n.scope", "/system.slice/n.scope" },
    { "system.slice:p:x-y.slice", "system.slice", "x-y.slice", "/x.slice/x-y.slice" },
    { NULL, "system.slice", "agentsbx-ctr1.scope", "/system.slice/agentsbx-ctr1.scope" },
    { "", "system.slice", "agentsbx-ctr1.scope", "/system.slice/agentsbx-ctr1.scope" },
  };
  static const char *bad[] = { "/a/b",
                               "a:b",
                               "a:b:c:d",
                               "system.slice:p:",
                               "system.slice:p:a/b",
                               "x:p:n",
                               "system.slice:p/q:n",
                               "a--b.slice:p:n",
                               "system.slice:p:-.slice" };
  struct cgroup_systemd_unit u;
  char *msg;
  (void) state;
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    {
      assert_int_equal (parse (ok[i].in, &u, &msg), 0);
      assert_string_equal (u.slice, ok[i].slice);
      assert_string_equal (u.unit, ok[i].unit);
      assert_string_equal (u.path, ok[i].path);
      cgroup_systemd_unit_clear (&u);
    }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      if (parse (bad[i], &u, &msg) == 0)
        fail_msg ("`%s` accepted as unit %s path %s", bad[i], u.unit, u.path);
      assert_non_null (strstr (msg, "linux.cgroupsPath"));
      free (msg);
    }
}

static const struct cgroup_sd_prop *
find (const struct cgroup_sd_prop *p, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (p[i].name, name) == 0)
      return &p[i];
  return NULL;
}

static void
test_props (void **state)
{
  struct oci_memory mem = { .has_limit = true, .limit = 64 << 20, .has_reservation = true, .reservation = 1 << 20 };
  struct oci_cpu cpu = { .has_shares = true,
                         .shares = 1024,
                         .has_quota = true,
                         .quota = 50001,
                         .has_period = true,
                         .period = 100000,
                         .cpus = (char *) "0-2,9",
                         .mems = (char *) "0" };
  struct oci_resources res = { .memory = &mem, .cpu = &cpu, .has_pids = true, .pids_limit = 42 };
  struct cgroup_sd_prop *p = NULL;
  const struct cgroup_sd_prop *x;
  asbx_err_t err = NULL;
  size_t n = 0;
  (void) state;

  assert_int_equal (cgroup_systemd_resource_props (&res, true, &p, &n, &err), 0);
  assert_non_null (x = find (p, n, "MemoryMax"));
  assert_int_equal (x->u, 64 << 20);
  assert_non_null (x = find (p, n, "MemoryLow"));
  assert_non_null (x = find (p, n, "CPUWeight"));
  assert_int_equal (x->u, 39); /* 1 + (1022 * 9999) / 262142 */
  assert_non_null (x = find (p, n, "CPUQuotaPerSecUSec"));
  assert_int_equal (x->u, 510000); /* 500010 rounded up to 10 ms */
  assert_non_null (x = find (p, n, "CPUQuotaPeriodUSec"));
  assert_int_equal (x->u, 100000);
  assert_non_null (x = find (p, n, "TasksMax"));
  assert_int_equal (x->u, 42);
  assert_non_null (x = find (p, n, "AllowedCPUs"));
  assert_int_equal (x->nbytes, 2);
  assert_int_equal (x->bytes[0], 0x07);
  assert_int_equal (x->bytes[1], 0x02);
  assert_non_null (x = find (p, n, "AllowedMemoryNodes"));
  assert_int_equal (x->bytes[0], 0x01);
  assert_null (find (p, n, "MemoryLimit"));
  cgroup_sd_props_free (p, n);

  /* v1 names; unlimited is infinity; cpusets are not systemd properties on v1 */
  mem.limit = -1;
  res.pids_limit = -1;
  cpu.has_quota = false;
  assert_int_equal (cgroup_systemd_resource_props (&res, false, &p, &n, &err), 0);
  assert_non_null (x = find (p, n, "MemoryLimit"));
  assert_true (x->u == UINT64_MAX);
  assert_non_null (x = find (p, n, "CPUShares"));
  assert_int_equal (x->u, 1024);
  assert_non_null (x = find (p, n, "TasksMax"));
  assert_true (x->u == UINT64_MAX);
  assert_non_null (x = find (p, n, "CPUQuotaPerSecUSec")); /* period alone: quota infinity */
  assert_true (x->u == UINT64_MAX);
  assert_null (find (p, n, "AllowedCPUs"));
  assert_null (find (p, n, "MemoryMax"));
  cgroup_sd_props_free (p, n);

  /* nothing set: no property; a bad cpu list is an error naming the field */
  assert_int_equal (cgroup_systemd_resource_props (NULL, true, &p, &n, &err), 0);
  assert_int_equal (n, 0);
  cgroup_sd_props_free (p, n);
  cpu.cpus = (char *) "3-1";
  assert_int_equal (cgroup_systemd_resource_props (&res, true, &p, &n, &err), -1);
  assert_non_null (strstr (err->msg, "linux.resources.cpu.cpus"));
  asbx_error_free (&err);
}

static void
test_prepare (void **state)
{
  asbx_err_t err = NULL;
  struct cgroup_systemd_unit unit = { NULL, NULL, NULL };
  char *r;
  (void) state;

  r = cgroup_systemd_prepare ("system.slice:agentsbx:abc", "abc", false, &unit, &err);
  assert_null (r);
  assert_string_equal (err->msg, "systemd cgroup driver requested but systemd is not running (no "
                                 "/run/systemd/system): Operation not supported");
  asbx_error_free (&err);
  assert_false (cgroup_systemd_is_pending (&unit, "/system.slice/agentsbx-abc.scope"));
  assert_false (cgroup_systemd_is_pending (NULL, "/system.slice/agentsbx-abc.scope"));

  r = cgroup_systemd_prepare ("system.slice:agentsbx:abc", "abc", true, &unit, &err);
#ifdef HAVE_LIBSYSTEMD
  assert_string_equal (r, "/system.slice/agentsbx-abc.scope");
  assert_true (cgroup_systemd_is_pending (&unit, r));
  assert_false (cgroup_systemd_is_pending (&unit, "/agentsbx/abc"));
  free (r);
  cgroup_systemd_unit_clear (&unit);
#else
  assert_null (r);
  assert_non_null (strstr (err->msg, "built without libsystemd"));
  asbx_error_free (&err);
#endif
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_expand_slice),
    cmocka_unit_test (test_parse),
    cmocka_unit_test (test_props),
    cmocka_unit_test (test_prepare),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
