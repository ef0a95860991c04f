/* test_workspace_meta.c - src/runtime/workspace_meta.c and workspace_layout.c: meta.json written and read back (every
 * key of the shared layout, a uint64 beyond INT64_MAX, the seed object, snapshots and protect),
 * a broken meta.json refused naming the file and the JSON path, snapshot names, and the tree
 * removal that never follows a symlink out of the directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "runtime/workspace_layout.h"

static char base[] = "/tmp/asbx-wsmeta-XXXXXX";

static void
test_round_trip (void **state)
{
  char *snaps[] = { "first", "snap-2", NULL };
  char *protect[] = { ".git/hooks", ".git/config", NULL };
  struct ws_meta m = {
    .id = "c1",
    .workspace = "/srv/proj \"x\"",
    .lower_dev = 65024,
    .lower_ino = 18446744073709551615ull,
    .created = "2026-12-01T19:00:00.000000001Z",
    .started_ns = 1796154471729820349ull,
    .xattr = "user",
    .state = "running",
    .snapshots = snaps,
    .snapshots_len = 2,
    .seed_repo = "/src/repo",
    .seed_rev = "0123456789abcdef0123456789abcdef01234567",
    .protect = protect,
    .protect_len = 2,
  };
  struct ws_meta r;
  asbx_err_t err = NULL;
  int fd = open (base, O_RDONLY | O_DIRECTORY);
  (void) state;

  assert_true (fd >= 0);
  assert_int_equal (ws_meta_write (fd, base, &m, &err), 0);
  assert_int_equal (ws_meta_read (fd, base, &r, &err), 0);
  assert_string_equal (r.id, "c1");
  assert_string_equal (r.workspace, m.workspace);
  assert_true (r.lower_dev == 65024 && r.lower_ino == m.lower_ino && r.started_ns == m.started_ns);
  assert_string_equal (r.xattr, "user");
  assert_string_equal (r.state, "running");
  assert_int_equal (r.snapshots_len, 2);
  assert_string_equal (r.snapshots[1], "snap-2");
  assert_null (r.image);
  assert_string_equal (r.seed_rev, m.seed_rev);
  assert_int_equal (r.protect_len, 2);
  assert_string_equal (r.protect[0], ".git/hooks");
  ws_meta_clear (&r);
  /* no temp file left beside it */
  assert_int_equal (faccessat (fd, "meta.json.tmp", F_OK, 0), -1);
  close (fd);
}

static void
test_bad_meta_named (void **state)
{
  asbx_err_t err = NULL;
  struct ws_meta r;
  int fd = open (base, O_RDONLY | O_DIRECTORY);
  static const char bad[] = "{\"id\": \"c1\", \"workspace\": \"/w\", \"lowerDev\": 1, \"lowerIno\": 2, \"created\": "
                            "\"x\", \"startedNs\": 3, \"xattr\": \"security\", \"state\": \"running\"}";
  (void) state;
  assert_true (fd >= 0);
  unlinkat (fd, "meta.json", 0);
  int w = openat (fd, "meta.json", O_WRONLY | O_CREAT, 0600);
  assert_true (w >= 0 && write_all (w, bad, sizeof bad - 1) == 0);
  close (w);
  assert_int_equal (ws_meta_read (fd, base, &r, &err), -1);
  assert_non_null (strstr (err->msg, "meta.json"));
  assert_non_null (strstr (err->msg, "xattr"));
  asbx_error_free (&err);
  close (fd);
}

static void
test_names (void **state)
{
  asbx_err_t err = NULL;
  (void) state;
  assert_int_equal (ws_name_check ("snap-1_a.b", &err), 0);
  assert_int_equal (ws_name_check (".hidden", &err), -1);
  asbx_error_free (&err);
  assert_int_equal (ws_name_check ("a/b", &err), -1);
  asbx_error_free (&err);
  assert_int_equal (ws_name_check ("", &err), -1);
  asbx_error_free (&err);
  assert_int_equal (ws_name_check ("01234567890123456789012345678901234567890123456789012345678901234", &err), -1);
  asbx_error_free (&err);
}

static void
test_remove_tree_keeps_link_target (void **state)
{
  char path[256], outside[256];
  asbx_err_t err = NULL;
  int fd = open (base, O_RDONLY | O_DIRECTORY);
  (void) state;
  snprintf (outside, sizeof outside, "%s/outside", base);
  assert_int_equal (mkdir (outside, 0700), 0);
  snprintf (path, sizeof path, "%s/outside/keep", base);
  close (open (path, O_WRONLY | O_CREAT, 0600));
  snprintf (path, sizeof path, "%s/t", base);
  assert_int_equal (mkdir (path, 0700), 0);
  snprintf (path, sizeof path, "%s/t/d", base);
  assert_int_equal (mkdir (path, 0000), 0);
  snprintf (path, sizeof path, "%s/t/link", base);
  assert_int_equal (symlink (outside, path), 0);
  assert_int_equal (ws_remove_tree (fd, "t", "t", &err), 0);
  snprintf (path, sizeof path, "%s/outside/keep", base);
  assert_int_equal (access (path, F_OK), 0);
  assert_int_equal (faccessat (fd, "t", F_OK, AT_SYMLINK_NOFOLLOW), -1);
  assert_int_equal (ws_remove_tree (fd, "t", "t", &err), 0); /* gone: 0 */
  close (fd);
}

static int
teardown (void **state)
{
  char cmd[300];
  (void) state;
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", base);
  return system (cmd) == 0 ? 0 : -1;
}

int
main (void)
{
  if (mkdtemp (base) == NULL)
    return 1;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_round_trip),
    cmocka_unit_test (test_bad_meta_named),
    cmocka_unit_test (test_names),
    cmocka_unit_test (test_remove_tree_keeps_link_target),
  };
  return cmocka_run_group_tests (tests, NULL, teardown);
}
