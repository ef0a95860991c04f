/* test_userdirs.c - src/runtime/userdirs.c: the state root and audit directory of a non-root
 * caller. The state root is accepted only as a real directory of the caller's, mode 0700, made
 * if missing; whatever another user could have prepared (another owner, a symlink, group/other
 * bits) is refused and left as it was. Runs as any uid: "another owner" is uid 65534 when we
 * are root, else skipped (chown needs root). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "runtime/userdirs.h"

static char base[] = "/tmp/asbx-userdirs-XXXXXX";

static char *
state_root_in (const char *xdg, asbx_err_t *err)
{
  setenv ("XDG_RUNTIME_DIR", xdg, 1);
  return asbx_user_state_root (err);
}

static void
test_made_0700 (void **state)
{
  asbx_err_t err = NULL;
  char *r = state_root_in (base, &err);
  char want[PATH_MAX];
  struct stat st;
  (void) state;
  snprintf (want, sizeof want, "%s/agentsbx", base);
  assert_non_null (r);
  assert_string_equal (r, want);
  assert_int_equal (lstat (r, &st), 0);
  assert_true (S_ISDIR (st.st_mode));
  assert_int_equal (st.st_mode & 07777, 0700);
  assert_int_equal (st.st_uid, geteuid ());
  free (r);
  r = state_root_in (base, &err); /* existing and ours: accepted again */
  assert_non_null (r);
  free (r);
  rmdir (want);
}

static void
expect_refused (const char *path, const char *xdg)
{
  asbx_err_t err = NULL;
  char *r = state_root_in (xdg, &err);
  assert_null (r);
  assert_non_null (err);
  assert_non_null (strstr (err->msg, path));
  asbx_error_free (&err);
}

static void
test_group_writable_refused (void **state)
{
  char d[PATH_MAX];
  struct stat st;
  (void) state;
  snprintf (d, sizeof d, "%s/agentsbx", base);
  assert_int_equal (mkdir (d, 0700), 0);
  assert_int_equal (chmod (d, 0770), 0);
  expect_refused (d, base);
  assert_int_equal (lstat (d, &st), 0);
  assert_int_equal (st.st_mode & 07777, 0770); /* not repaired */
  rmdir (d);
}

static void
test_symlink_refused (void **state)
{
  char d[PATH_MAX], target[PATH_MAX];
  (void) state;
  snprintf (d, sizeof d, "%s/agentsbx", base);
  snprintf (target, sizeof target, "%s/elsewhere", base);
  assert_int_equal (mkdir (target, 0700), 0);
  assert_int_equal (symlink (target, d), 0);
  expect_refused (d, base);
  unlink (d);
  rmdir (target);
}

static void
test_other_owner_refused (void **state)
{
  char d[PATH_MAX];
  (void) state;
  if (geteuid () != 0)
    skip (); /* chown to another uid needs root */
  snprintf (d, sizeof d, "%s/agentsbx", base);
  assert_int_equal (mkdir (d, 0700), 0);
  assert_int_equal (chown (d, 65534, 65534), 0);
  expect_refused (d, base);
  rmdir (d);
}

static void
test_relative_xdg_refused (void **state)
{
  asbx_err_t err = NULL;
  (void) state;
  assert_null (state_root_in ("run/user/1", &err));
  assert_non_null (strstr (err->msg, "XDG_RUNTIME_DIR"));
  asbx_error_free (&err);
}

static void
test_audit_dir_precedence (void **state)
{
  asbx_err_t err = NULL;
  char *d;
  (void) state;
  setenv ("XDG_STATE_HOME", "/srv/state", 1);
  setenv ("HOME", "/home/someone", 1);
  d = asbx_user_audit_dir (&err);
  assert_string_equal (d, "/srv/state/agentsbx");
  free (d);
  setenv ("XDG_STATE_HOME", "relative/ignored", 1); /* the XDG spec: relative values are ignored */
  d = asbx_user_audit_dir (&err);
  assert_string_equal (d, "/home/someone/.local/state/agentsbx");
  free (d);
  unsetenv ("XDG_STATE_HOME");
  d = asbx_user_audit_dir (&err);
  assert_string_equal (d, "/home/someone/.local/state/agentsbx");
  free (d);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_made_0700),
    cmocka_unit_test (test_group_writable_refused),
    cmocka_unit_test (test_symlink_refused),
    cmocka_unit_test (test_other_owner_refused),
    cmocka_unit_test (test_relative_xdg_refused),
    cmocka_unit_test (test_audit_dir_precedence),
  };
  if (!mkdtemp (base))
    return 1;
  int r = cmocka_run_group_tests (tests, NULL, NULL);
  rmdir (base);
  return r;
}
