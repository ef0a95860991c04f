/* test_cgroup_resources.c - the v1<->v2 conversions, the cgroup v2 (and v1) writers against a
 * fake cgroup directory (regular files in a temp dir: what we write is what the file holds),
 * and the device BPF program: built for a rule list and, when running as root on a host with
 * a cgroup2 mount, loaded into the kernel, attached to a scratch cgroup and exercised by a
 * child process opening /dev/null (allowed) and /dev/zero (denied). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

static char tmpl[64];

static struct cgroup_dir
fake (int version, const char *const *files)
{
  struct cgroup_dir d = { .fd = -1, .version = version, .where = NULL };
  strcpy (tmpl, "/tmp/asbx-cgtest-XXXXXX");
  assert_non_null (mkdtemp (tmpl));
  for (size_t i = 0; files[i]; i++)
    {
      char p[256];
      snprintf (p, sizeof p, "%s/%s", tmpl, files[i]);
      int fd = open (p, O_CREAT | O_WRONLY, 0644);
      assert_true (fd >= 0);
      close (fd);
    }
  d.fd = open (tmpl, O_PATH | O_DIRECTORY);
  d.where = xstrdup (tmpl);
  return d;
}

static char *
get (const char *file)
{
  char p[256], *out = NULL;
  snprintf (p, sizeof p, "%s/%s", tmpl, file);
  asbx_err_t e = NULL;
  assert_int_equal (read_file_at (AT_FDCWD, p, 4096, &out, NULL, &e), 0);
  return out;
}

static void
done (struct cgroup_dir *d)
{
  char cmd[128];
  snprintf (cmd, sizeof cmd, "rm -rf %s", tmpl);
  assert_int_equal (system (cmd), 0);
  cgroup_dir_clear (d);
}

static void
test_conversions (void **state)
{
  (void) state;
  assert_int_equal (cgroup_shares_to_weight (0), 0);
  assert_int_equal (cgroup_shares_to_weight (2), 1);
  assert_int_equal (cgroup_shares_to_weight (1024), 39);
  assert_int_equal (cgroup_shares_to_weight (262144), 10000);
  assert_int_equal (cgroup_blkio_to_io_weight (10), 1);
  assert_int_equal (cgroup_blkio_to_io_weight (500), 4950);
  assert_int_equal (cgroup_blkio_to_io_weight (1000), 10000);
  int64_t out = 0;
  asbx_err_t e = NULL;
  assert_int_equal (cgroup_swap_to_v2 (200, 100, &out, &e), 0);
  assert_int_equal (out, 100);
  assert_int_equal (cgroup_swap_to_v2 (-1, 100, &out, &e), 0);
  assert_int_equal (out, -1);
  assert_int_equal (cgroup_swap_to_v2 (100, -1, &out, &e), -1);
  asbx_error_free (&e);
  assert_int_equal (cgroup_swap_to_v2 (50, 100, &out, &e), -1);
  assert_non_null (strstr (e->msg, "memory.swap"));
  asbx_error_free (&e);
}

static void
test_v2_memory_cpu_pids_io (void **state)
{
  static const char *const files[] = { "memory.max",      "memory.low", "memory.swap.max", "memory.current",
                                       "cpu.weight",      "cpu.max",    "cpu.max.burst",   "cpu.idle",
                                       "pids.max",        "io.weight",  "io.max",          "cpuset.cpus",
                                       "hugetlb.2MB.max", NULL };
  struct cgroup_dir d = fake (2, files);
  struct oci_memory m = { .has_limit = true,
                          .limit = 64 << 20,
                          .has_swap = true,
                          .swap = 96 << 20,
                          .has_reservation = true,
                          .reservation = 1 << 20 };
  struct oci_cpu c = { .has_shares = true,
                       .shares = 1024,
                       .has_quota = true,
                       .quota = 50000,
                       .has_period = true,
                       .period = 100000,
                       .has_burst = true,
                       .burst = 1000,
                       .cpus = (char *) "0-1" };
  struct oci_block_io b = { .has_weight = true, .weight = 500 };
  struct oci_throttle_device t = { .major = 8, .minor = 0, .rate = 1048576 };
  struct oci_hugepage_limit h = { .page_size = (char *) "2MB", .limit = 4 << 20 };
  asbx_err_t e = NULL;
  (void) state;

  b.throttle_read_bps_device = &t;
  b.throttle_read_bps_device_len = 1;
  assert_int_equal (cgroup_memory_set (&d, &m, &e), 0);
  assert_string_equal (get ("memory.max"), "67108864");
  assert_string_equal (get ("memory.swap.max"), "33554432");
  assert_string_equal (get ("memory.low"), "1048576");
  assert_int_equal (cgroup_cpu_set (&d, &c, &e), 0);
  assert_string_equal (get ("cpu.weight"), "39");
  assert_string_equal (get ("cpu.max"), "50000 100000");
  assert_string_equal (get ("cpu.max.burst"), "1000");
  assert_int_equal (cgroup_cpuset_set (&d, &c, &e), 0);
  assert_string_equal (get ("cpuset.cpus"), "0-1");
  assert_int_equal (cgroup_pids_set (&d, -1, &e), 0);
  assert_string_equal (get ("pids.max"), "max");
  assert_int_equal (cgroup_blkio_set (&d, &b, &e), 0);
  assert_string_equal (get ("io.weight"), "default 4950");
  assert_string_equal (get ("io.max"), "8:0 rbps=1048576");
  assert_int_equal (cgroup_hugetlb_set (&d, &h, 1, &e), 0);
  assert_string_equal (get ("hugetlb.2MB.max"), "4194304");
  /* fields v2 does not have: errors naming the field */
  struct oci_cpu rt = { .has_realtime_runtime = true, .realtime_runtime = 1000 };
  assert_int_equal (cgroup_cpu_set (&d, &rt, &e), -1);
  assert_non_null (strstr (e->msg, "cpu.realtimeRuntime"));
  asbx_error_free (&e);
  struct oci_memory sw = { .has_swappiness = true, .swappiness = 10 };
  assert_int_equal (cgroup_memory_set (&d, &sw, &e), -1);
  assert_non_null (strstr (e->msg, "memory.swappiness"));
  asbx_error_free (&e);
  h.page_size = (char *) "3MB";
  assert_int_equal (cgroup_hugetlb_set (&d, &h, 1, &e), -1);
  assert_non_null (strstr (e->msg, "3MB"));
  asbx_error_free (&e);
  /* unified: plain names only, file must exist */
  assert_int_equal (cgroup_unified_set (&d, "cpu.idle", "1", &e), 0);
  assert_string_equal (get ("cpu.idle"), "1");
  assert_int_equal (cgroup_unified_set (&d, "../x.max", "1", &e), -1);
  asbx_error_free (&e);
  assert_int_equal (cgroup_unified_set (&d, "memory.high", "1", &e), -1);
  assert_non_null (strstr (e->msg, "memory.high"));
  asbx_error_free (&e);
  done (&d);
}

static void
test_v2_swap_without_accounting (void **state)
{
  static const char *const files[] = { "memory.max", NULL };
  struct cgroup_dir d = fake (2, files);
  struct oci_memory m = { .has_limit = true, .limit = 64 << 20, .has_swap = true, .swap = 64 << 20 };
  asbx_err_t e = NULL;
  (void) state;
  /* swap == limit = "no swap": skipped without memory.swap.max (runc does the same) */
  assert_int_equal (cgroup_memory_set (&d, &m, &e), 0);
  m.swap = 128 << 20;
  assert_int_equal (cgroup_memory_set (&d, &m, &e), -1);
  assert_non_null (strstr (e->msg, "memory.swap"));
  asbx_error_free (&e);
  done (&d);
}

static void
test_v1_devices_rules (void **state)
{
  static const char *const files[] = { "devices.allow", "devices.deny", NULL };
  struct oci_device_cgroup cfg[] = {
    { .allow = true, .type = (char *) "c", .has_major = true, .major = 4, .access = (char *) "rw" },
    { .allow = true, .type = (char *) "x", .access = (char *) "r" }
  };
  cleanup_free struct cgroup_dev_rule *r = NULL;
  struct cgroup_dir d = fake (1, files);
  asbx_err_t e = NULL;
  size_t n = 0;
  (void) state;
  assert_int_equal (cgroup_dev_rules_build (cfg, 2, NULL, 0, &r, &n, &e), -1);
  assert_non_null (strstr (e->msg, "devices[1].type"));
  asbx_error_free (&e);
  assert_int_equal (cgroup_dev_rules_build (cfg, 1, NULL, 0, &r, &n, &e), 0);
  assert_false (r[0].allow);
  assert_int_equal (r[0].type, 'a');
  assert_int_equal (r[1].major, 4);
  assert_int_equal (r[1].minor, -1);
  assert_int_equal (cgroup_devices_v1_set (&d, r, n, &e), 0);
  /* the fake file keeps the last write: the last default rule (tun) */
  assert_string_equal (get ("devices.allow"), "c 10:200 rwm");
  assert_string_equal (get ("devices.deny"), "a");
  done (&d);
}

/* Real kernel: attach to a scratch cgroup on the host's cgroup2 mount (hybrid or unified). */
static void
test_bpf_program_in_kernel (void **state)
{
  const char *mnt = access ("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0 ? "/sys/fs/cgroup/unified"
                                                                              : "/sys/fs/cgroup";
  struct oci_device_cgroup cfg[] = { { .allow = false,
                                       .type = (char *) "c",
                                       .has_major = true,
                                       .major = 1,
                                       .has_minor = true,
                                       .minor = 3,
                                       .access = (char *) "w" } };
  cleanup_free struct cgroup_dev_rule *r = NULL;
  cleanup_free void *insns = NULL;
  char dir[256];
  asbx_err_t e = NULL;
  size_t n = 0, ni = 0;
  int fd, status;
  pid_t pid;
  (void) state;

  assert_int_equal (cgroup_dev_rules_build (cfg, 1, NULL, 0, &r, &n, &e), 0);
  assert_int_equal (cgroup_devices_bpf_build (r, n, &insns, &ni, &e), 0);
  assert_true (ni > 10);
  if (geteuid () != 0 || access (mnt, W_OK) != 0)
    skip ();
  snprintf (dir, sizeof dir, "%s/asbx-bpftest-%d", mnt, (int) getpid ());
  if (mkdir (dir, 0755) < 0)
    skip ();
  fd = open (dir, O_PATH | O_DIRECTORY);
  /* the default list allows /dev/null rwm after our deny of w - last rule wins, so deny only
   * /dev/zero here by a rule list without defaults: build by hand */
  struct cgroup_dev_rule own[] = { { false, 'a', -1, -1, 7 }, { true, 'c', 1, 3, 7 }, { true, 'c', 1, 5, 2 } };
  int rc = cgroup_devices_bpf_attach (fd, own, 3, &e);
  if (rc < 0)
    fprintf (stderr, "attach: %s\n", e->msg);
  assert_int_equal (rc, 0);
  pid = fork ();
  if (pid == 0)
    {
      char p[300], b[16];
      int n2 = snprintf (b, sizeof b, "%d", (int) getpid ());
      snprintf (p, sizeof p, "%s/cgroup.procs", dir);
      int c = open (p, O_WRONLY);
      if (c < 0 || write (c, b, (size_t) n2) < 0)
        _exit (10);
      int a = open ("/dev/null", O_RDWR);    /* allowed rwm */
      int z = open ("/dev/zero", O_RDONLY);  /* allowed r */
      int zw = open ("/dev/zero", O_WRONLY); /* w denied */
      int f = open ("/dev/full", O_RDONLY);  /* not listed: denied */
      _exit ((a >= 0 ? 0 : 1) | (z >= 0 ? 0 : 2) | (zw < 0 && errno == EPERM ? 0 : 4) | (f < 0 ? 0 : 8));
    }
  waitpid (pid, &status, 0);
  close (fd);
  rmdir (dir);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_conversions),
    cmocka_unit_test (test_v2_memory_cpu_pids_io),
    cmocka_unit_test (test_v2_swap_without_accounting),
    cmocka_unit_test (test_v1_devices_rules),
    cmocka_unit_test (test_bpf_program_in_kernel),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
