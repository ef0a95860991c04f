/* test_cgroup.c - unit tests for the pure parts of the cgroup module: /proc/cgroups,
 * /proc/self/mountinfo and /proc/self/cgroup parsing from fixture text (unified, legacy and
 * hybrid hosts), cgroupsPath resolution (".." refused, relative per hierarchy, systemd form) and
 * the linux.resources gate. No root, no cgroup filesystem touched. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "linux/cgroup_internal.h"
#include "linux/cgroup_systemd.h"

static const char proc_cgroups_hybrid[] = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
                                          "cpuset\t3\t1\t1\ncpu\t1\t1\t1\ncpuacct\t2\t1\t1\nblkio\t7\t1\t1\n"
                                          "memory\t4\t27\t1\ndevices\t5\t1\t1\nfreezer\t6\t1\t1\n"
                                          "net_cls\t0\t1\t1\nperf_event\t0\t1\t1\nnet_prio\t0\t1\t1\n"
                                          "hugetlb\t0\t1\t1\npids\t8\t1\t1\nrdma\t0\t1\t0\n";

/* this CI machine: v1 controllers one per mount, name=systemd, cgroup2 at unified */
static const char mountinfo_hybrid[] =
    "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char self_hybrid[] = "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"
                                  "4:memory:/process_api/7db4\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";

/* a classic systemd legacy host: co-mounted cpu,cpuacct with extra super options, a duplicate
 * bind mount of the memory hierarchy, and an escaped mountpoint */
static const char mountinfo_legacy[] =
    "25 24 0:22 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,release_agent=/x,name=systemd\n"
    "26 24 0:23 / /sys/fs/cgroup/cpu,cpuacct rw shared:7 - cgroup cgroup rw,cpuacct,cpu\n"
    "27 24 0:24 /sub /run/mem\\040bind rw - cgroup cgroup rw,memory\n"
    "28 24 0:24 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    "29 24 0:25 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset,clone_children\n";

static const char mountinfo_unified[] = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 "
                                        "rw,nsdelegate,memory_recursiveprot\n";

static void
load (const char *mi, const char *self, struct cgroup_layout_info *info)
{
  asbx_err_t err = NULL;
  cleanup_strv char **ctrl = cgroup_parse_proc_cgroups (proc_cgroups_hybrid, &err);
  assert_non_null (ctrl);
  assert_int_equal (cgroup_parse_mountinfo (mi, ctrl, info, &err), 0);
  if (self)
    assert_int_equal (cgroup_parse_self (self, info, &err), 0);
  assert_null (err);
}

static void
test_proc_cgroups (void **state)
{
  asbx_err_t err = NULL;
  cleanup_strv char **v = cgroup_parse_proc_cgroups (proc_cgroups_hybrid, &err);
  size_t n = 0;
  (void) state;
  for (; v[n]; n++)
    assert_string_not_equal (v[n], "rdma"); /* disabled */
  assert_int_equal (n, 12);
  assert_null (cgroup_parse_proc_cgroups ("#h\ncpu 1\n", &err));
  assert_non_null (err);
  asbx_error_free (&err);
}

static void
test_mountinfo_hybrid (void **state)
{
  struct cgroup_layout_info info;
  static const char *keys[] = { "",        "blkio",   "cpu",    "cpuacct",      "cpuset",
                                "devices", "freezer", "memory", "name=systemd", "pids" };
  (void) state;
  load (mountinfo_hybrid, self_hybrid, &info);
  assert_int_equal (info.layout, CGROUP_LAYOUT_HYBRID);
  assert_int_equal (info.n, 10);
  for (size_t i = 0; i < info.n; i++)
    {
      assert_string_equal (info.h[i].key, keys[i]);
      assert_int_equal (info.h[i].version, i == 0 ? 2 : 1);
      assert_int_equal (info.h[i].cpuset, strcmp (keys[i], "cpuset") == 0);
      assert_non_null (info.h[i].own);
    }
  assert_string_equal (info.h[0].mountpoint, "/sys/fs/cgroup/unified");
  assert_string_equal (info.h[7].own, "/process_api/7db4");
  assert_string_equal (info.h[8].mountpoint, "/sys/fs/cgroup/systemd");
  cgroup_layout_info_clear (&info);
}

static void
test_mountinfo_legacy (void **state)
{
  struct cgroup_layout_info info;
  (void) state;
  load (mountinfo_legacy, "4:memory:/m\n3:cpu,cpuacct:/c\n2:cpuset:/\n1:name=systemd:/user.slice\n", &info);
  assert_int_equal (info.layout, CGROUP_LAYOUT_LEGACY);
  assert_int_equal (info.n, 4);
  assert_string_equal (info.h[0].key, "cpu,cpuacct");
  assert_string_equal (info.h[0].own, "/c");
  assert_string_equal (info.h[1].key, "cpuset");
  assert_true (info.h[1].cpuset);
  /* the bind mount of a sub-tree came first; the full mount wins */
  assert_string_equal (info.h[2].key, "memory");
  assert_string_equal (info.h[2].mountpoint, "/sys/fs/cgroup/memory");
  assert_string_equal (info.h[2].mount_root, "/");
  assert_string_equal (info.h[3].key, "name=systemd");
  assert_string_equal (info.h[3].own, "/user.slice");
  cgroup_layout_info_clear (&info);

  /* only the escaped bind mount: unescaped mountpoint and its root kept */
  load ("27 24 0:24 /sub /run/mem\\040bind rw - cgroup cgroup rw,memory\n", NULL, &info);
  assert_string_equal (info.h[0].mountpoint, "/run/mem bind");
  assert_string_equal (info.h[0].mount_root, "/sub");
  cgroup_layout_info_clear (&info);
}

static void
test_mountinfo_unified_and_errors (void **state)
{
  struct cgroup_layout_info info;
  asbx_err_t err = NULL;
  char *ctrl[] = { "memory", NULL };
  (void) state;
  load (mountinfo_unified, "0::/user.slice/session-1.scope\n", &info);
  assert_int_equal (info.layout, CGROUP_LAYOUT_UNIFIED);
  assert_int_equal (info.n, 1);
  assert_string_equal (info.h[0].own, "/user.slice/session-1.scope");
  cgroup_layout_info_clear (&info);

  assert_int_equal (cgroup_parse_mountinfo ("22 1 0:21 / / rw - ext4 /dev/sda rw\n", ctrl, &info, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  asbx_error_free (&err);
  assert_int_equal (cgroup_parse_mountinfo ("garbage line\n", ctrl, &info, &err), -1);
  asbx_error_free (&err);
}

static char *
resolve (const struct cgroup_layout_info *info, const char *p, bool systemd, bool running, char **msg)
{
  asbx_err_t err = NULL;
  struct cgroup_systemd_unit unit = { NULL, NULL, NULL };
  char *r = cgroup_resolve_path_in (info, p, "ctr1", systemd, running, &unit, &err);
  cgroup_systemd_unit_clear (&unit);
  *msg = err ? strdup (err->msg) : NULL;
  asbx_error_free (&err);
  return r;
}

static void
test_resolve (void **state)
{
  struct cgroup_layout_info info;
  char *msg, *r;
  (void) state;
  load (mountinfo_hybrid, self_hybrid, &info);

  r = resolve (&info, NULL, false, false, &msg);
  assert_string_equal (r, "/agentsbx/ctr1");
  free (r);
  r = resolve (&info, "/kubepods//pod1/./ctr1/", false, false, &msg);
  assert_string_equal (r, "/kubepods/pod1/ctr1");
  free (r);

  static const char *bad[] = { "/a/../../etc", "..", "a/..", "/..", "/", "//", "/a\nb", "rel;x", "a:b" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      r = resolve (&info, bad[i], false, false, &msg);
      if (r)
        fail_msg ("`%s` accepted as `%s`", bad[i], r);
      assert_non_null (strstr (msg, "linux.cgroupsPath"));
      free (msg);
    }

  /* relative: below our own cgroup, which differs in memory -> list form */
  r = resolve (&info, "x/y", false, false, &msg);
  assert_non_null (r);
  assert_non_null (strstr (r, "memory:/process_api/7db4/x/y;"));
  assert_non_null (strstr (r, "name=systemd:/x/y;"));
  assert_true (strncmp (r, ":/x/y;", 6) == 0);
  for (size_t i = 0; i < info.n; i++)
    {
      asbx_err_t err = NULL;
      char *p = cgroup_path_in_hier (r, &info.h[i], &err);
      assert_string_equal (p, strcmp (info.h[i].key, "memory") == 0 ? "/process_api/7db4/x/y" : "/x/y");
      free (p);
    }
  free (r);
  cgroup_layout_info_clear (&info);

  /* relative with the same own cgroup everywhere -> one absolute path */
  load (mountinfo_unified, "0::/user.slice\n", &info);
  r = resolve (&info, "x", false, false, &msg);
  assert_string_equal (r, "/user.slice/x");
  free (r);
  cgroup_layout_info_clear (&info);
}

/* a partial per-hierarchy list (a non-root caller's delegated hierarchies) covers only those */
static void
test_path_covers (void **state)
{
  struct cgroup_layout_info info;
  (void) state;
  load (mountinfo_hybrid, self_hybrid, &info);
  const char *part = "memory:/u/alice/c1;pids:/u/alice/c1";
  for (size_t i = 0; i < info.n; i++)
    {
      bool want = strcmp (info.h[i].key, "memory") == 0 || strcmp (info.h[i].key, "pids") == 0;
      if (cgroup_path_covers (part, &info.h[i]) != want)
        fail_msg ("hierarchy `%s`: covers %d", info.h[i].key, !want);
      assert_true (cgroup_path_covers ("/agentsbx/c1", &info.h[i]));
    }
  cgroup_layout_info_clear (&info);
}

static void
test_resolve_systemd (void **state)
{
  struct cgroup_layout_info info;
  char *msg;
  (void) state;
  load (mountinfo_hybrid, self_hybrid, &info);
  assert_null (resolve (&info, "system.slice:docker:abc", false, false, &msg));
  assert_string_equal (msg, "systemd cgroup driver requested but systemd is not running (no /run/systemd/system): "
                            "Operation not supported");
  free (msg);
  assert_null (resolve (&info, "/a/b", true, false, &msg));
  assert_non_null (strstr (msg, "systemd is not running"));
  free (msg);
  /* systemd running: the systemd driver's path (or, built without libsystemd, its clear error);
   * the driver itself is tested in test_cgroup_systemd.c */
  char *r = resolve (&info, "system.slice:docker:abc", false, true, &msg);
  assert_true (r ? strcmp (r, "/system.slice/docker-abc.scope") == 0 : strstr (msg, "without libsystemd") != NULL);
  free (r);
  free (msg);
  cgroup_layout_info_clear (&info);
}

static const char *
check_res (const struct oci_resources *r)
{
  static char buf[512];
  asbx_err_t err = NULL;
  if (cgroup_check_resources (r, &err) == 0)
    return NULL;
  snprintf (buf, sizeof buf, "%s", err->msg);
  asbx_error_free (&err);
  return buf;
}

static void
test_resources_gate (void **state)
{
  /* the gate is now static validation only (the controllers apply the rest); malformed device
   * rules are refused before anything is created */
  struct oci_resources r = { 0 };
  struct oci_memory mem = { .has_limit = true, .limit = 1 << 20 };
  struct oci_device_cgroup two[2] = { { .allow = false, .access = "rwm" },
                                      { .allow = true, .type = "c", .access = "rwm" } };
  struct oci_device_cgroup bad = { .allow = true, .type = "c", .access = "rwx" };
  (void) state;

  assert_null (check_res (NULL));
  r.memory = &mem;
  r.devices = two;
  r.devices_len = 2;
  assert_null (check_res (&r));
  r.devices = &bad;
  r.devices_len = 1;
  assert_non_null (strstr (check_res (&r), "linux.resources.devices[0].access"));
  bad.access = "r";
  bad.type = "z";
  assert_non_null (strstr (check_res (&r), "linux.resources.devices[0].type"));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_proc_cgroups),     cmocka_unit_test (test_mountinfo_hybrid),
    cmocka_unit_test (test_mountinfo_legacy), cmocka_unit_test (test_mountinfo_unified_and_errors),
    cmocka_unit_test (test_resolve),          cmocka_unit_test (test_resolve_systemd),
    cmocka_unit_test (test_path_covers),      cmocka_unit_test (test_resources_gate),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
