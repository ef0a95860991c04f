/* test_lsm.c - src/linux/{lsm_procattr,apparmor,selinux}.c: mount-option and change-onexec
 * command building, the "LSM not enabled: ignore" rule, and the procfs-fd writer refusing a fake
 * /proc (a directory tree on tmpfs, a symlink) without writing into it. The enabled write paths
 * cannot run on a host where neither AppArmor nor SELinux is active; the real-procfs case checks
 * that the write reaches the kernel (which then refuses it with no LSM behind the attribute). */
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
#include <unistd.h>

#include "core/error.h"
#include "linux/lsm_procattr.h"

static void
test_context_option (void **state)
{
  const char *l = "system_u:object_r:container_file_t:s0:c1,c2";
  char *s;
  (void) state;
  s = linux_selinux_context_option (NULL, l);
  assert_string_equal (s, "context=\"system_u:object_r:container_file_t:s0:c1,c2\"");
  free (s);
  s = linux_selinux_context_option ("size=64k,mode=755", l);
  assert_string_equal (s, "size=64k,mode=755,context=\"system_u:object_r:container_file_t:s0:c1,c2\"");
  free (s);
  s = linux_selinux_context_option ("mode=755", "");
  assert_string_equal (s, "mode=755");
  free (s);
  s = linux_apparmor_exec_command ("docker-default");
  assert_string_equal (s, "exec docker-default");
  free (s);
}

static void
test_disabled_is_ignored (void **state)
{
  asbx_err_t err = NULL;
  (void) state;
  if (linux_selinux_enabled () || linux_apparmor_enabled ())
    skip (); /* this case is about hosts without the LSM */
  assert_int_equal (linux_apparmor_apply ("docker-default", &err), 0);
  assert_int_equal (linux_selinux_apply ("system_u:system_r:container_t:s0", &err), 0);
  assert_null (err);
  char *d = linux_selinux_mount_data ("mode=755", "system_u:object_r:container_file_t:s0");
  assert_string_equal (d, "mode=755"); /* runc: label dropped when SELinux is off */
  free (d);
  assert_null (linux_selinux_mount_data (NULL, NULL));
}

static void
test_fake_proc_refused (void **state)
{
  char dir[] = "/tmp/asbx-fakeproc-XXXXXX";
  char path[256], link[256];
  asbx_err_t err = NULL;
  struct stat sb;
  (void) state;
  assert_non_null (mkdtemp (dir));
  snprintf (path, sizeof path, "%s/thread-self", dir);
  mkdir (path, 0755);
  snprintf (path, sizeof path, "%s/thread-self/attr", dir);
  mkdir (path, 0755);
  snprintf (path, sizeof path, "%s/thread-self/attr/exec", dir);
  close (open (path, O_CREAT | O_WRONLY, 0644));
  assert_int_equal (linux_lsm_write_attr (dir, "exec", "x", 1, &err), -1);
  assert_int_equal (err->errnum, EXDEV);
  assert_non_null (strstr (err->msg, "is not on procfs"));
  asbx_error_free (&err);
  /* a symlink named like /proc pointing at the fake tree: not followed, not procfs */
  snprintf (link, sizeof link, "%s-link", dir);
  assert_int_equal (symlink (dir, link), 0);
  assert_int_equal (linux_lsm_write_attr (link, "exec", "x", 1, &err), -1);
  asbx_error_free (&err);
  assert_int_equal (stat (path, &sb), 0);
  assert_int_equal (sb.st_size, 0); /* nothing was written into the fake attr file */
  unlink (link);
  unlink (path);
  snprintf (path, sizeof path, "%s/thread-self/attr", dir);
  rmdir (path);
  snprintf (path, sizeof path, "%s/thread-self", dir);
  rmdir (path);
  rmdir (dir);
}

static void
test_real_proc_reaches_kernel (void **state)
{
  asbx_err_t err = NULL;
  (void) state;
  if (linux_selinux_enabled () || linux_apparmor_enabled ())
    skip (); /* a real LSM would accept or judge the label: not this case */
  int r = linux_lsm_write_attr ("/proc", "exec", "bogus_label", 11, &err);
  if (r == 0)
    return;                           /* some LSM accepted the write: the path works */
  assert_true (err->errnum != EXDEV); /* passed the procfs checks, refused by the kernel */
  asbx_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_context_option),
    cmocka_unit_test (test_disabled_is_ignored),
    cmocka_unit_test (test_fake_proc_refused),
    cmocka_unit_test (test_real_proc_reaches_kernel),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
