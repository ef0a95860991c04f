/* test_core.c - unit tests for the shared core helpers that replaced per-file copies (issue 16):
 * the SCM_RIGHTS pair (core/fdpass.h), the small /proc reader and write_pid_file
 * (core/util.h), the JSON writer (core/json.h), and the lifecycle's transition table
 * (runtime/state.h). No root. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "core/fdpass.h"
#include "core/json.h"
#include "core/pathlex.h"
#include "core/util.h"
#include "runtime/state.h"

static void
test_fdpass (void **state)
{
  int sp[2], pp[2];
  char b = 0;
  (void) state;

  assert_int_equal (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
  assert_int_equal (pipe (pp), 0);
  assert_int_equal (fdpass_send (sp[0], pp[1], "x", 1), 1);
  int fd = fdpass_recv (sp[1], &b, 1, 0);
  assert_true (fd >= 0);
  assert_int_equal (b, 'x');
  assert_true (fcntl (fd, F_GETFD) & FD_CLOEXEC);
  /* the received fd is the pipe's write end: what goes in comes out of pp[0] */
  assert_int_equal (write (fd, "y", 1), 1);
  assert_int_equal (read (pp[0], &b, 1), 1);
  assert_int_equal (b, 'y');
  close (fd);
  /* a message without an fd, and EOF: EPROTO; nothing waiting with MSG_DONTWAIT: EAGAIN */
  assert_int_equal (fdpass_recv (sp[1], &b, 1, MSG_DONTWAIT), -1);
  assert_int_equal (errno, EAGAIN);
  assert_int_equal (write (sp[0], "z", 1), 1);
  assert_int_equal (fdpass_recv (sp[1], &b, 1, 0), -1);
  assert_int_equal (errno, EPROTO);
  close (sp[0]);
  assert_int_equal (fdpass_recv (sp[1], &b, 1, 0), -1);
  assert_int_equal (errno, EPROTO);
  close (sp[1]), close (pp[0]), close (pp[1]);
}

static void
test_read_proc_small (void **state)
{
  char buf[512], tiny[8];
  char want[32];
  (void) state;

  assert_true (read_proc_small (getpid (), "status", buf, sizeof buf) > 0);
  snprintf (want, sizeof want, "\nTgid:\t%d\n", (int) getpid ());
  assert_non_null (strstr (buf, want));
  /* cut to size - 1 bytes, NUL-terminated */
  assert_int_equal (read_proc_small (getpid (), "status", tiny, sizeof tiny), sizeof tiny - 1);
  assert_int_equal (strlen (tiny), sizeof tiny - 1);
  assert_int_equal (read_proc_small (getpid (), "no-such-file", buf, sizeof buf), -1);
  assert_int_equal (errno, ENOENT);
}

static void
test_write_pid_file (void **state)
{
  char dir[] = "/tmp/asbx-test-core-XXXXXX";
  char path[128], bad[160];
  cleanup_free char *raw = NULL;
  asbx_err_t err = NULL;
  size_t len;
  (void) state;

  assert_non_null (mkdtemp (dir));
  snprintf (path, sizeof path, "%s/pid", dir);
  assert_int_equal (write_pid_file (path, 4242, &err), 0);
  assert_int_equal (read_file_at (AT_FDCWD, path, 64, &raw, &len, &err), 0);
  assert_string_equal (raw, "4242");
  /* a directory in the way of the rename: the error names the file, no temporary stays */
  snprintf (bad, sizeof bad, "%s/sub", dir);
  assert_int_equal (mkdir (bad, 0700), 0);
  assert_int_equal (write_pid_file (bad, 1, &err), -1);
  assert_non_null (strstr (err->msg, "write --pid-file"));
  asbx_error_free (&err);
  cleanup_free char *tmp = xasprintf ("%s.%d.tmp", bad, getpid ());
  assert_int_equal (access (tmp, F_OK), -1);
  unlink (path), rmdir (bad), rmdir (dir);
}

static void
test_json (void **state)
{
  (void) state;
  yajl_gen g = json_gen_new (0);
  yajl_gen_map_open (g);
  json_gen_kv (g, "a", "b");
  json_gen_kv (g, "n", NULL);
  json_gen_str (g, "v");
  yajl_val v = yajl_tree_parse ("{\"x\":[1,true,false,null,\"s\",{\"y\":2.5}]}", NULL, 0);
  assert_non_null (v);
  json_gen_value (g, v);
  yajl_tree_free (v);
  yajl_gen_map_close (g);
  size_t len;
  cleanup_free char *out = json_gen_finish (g, true, &len);
  assert_string_equal (out, "{\"a\":\"b\",\"n\":null,\"v\":{\"x\":[1,true,false,null,\"s\",{\"y\":2.5}]}}\n");
  assert_int_equal (len, strlen (out));

  g = json_gen_new (JSON_GEN_PRETTY);
  yajl_gen_map_open (g);
  json_gen_kv (g, "a", "b");
  yajl_gen_map_close (g);
  cleanup_free char *pretty = json_gen_finish (g, false, NULL);
  assert_string_equal (pretty, "{\n  \"a\": \"b\"\n}\n");

  g = json_gen_new (JSON_GEN_VALIDATE_UTF8);
  assert_int_equal (yajl_gen_string (g, (const unsigned char *) "\xff", 1), yajl_gen_invalid_string);
  yajl_gen_free (g);
}

/* runtime-spec runtime.md "Lifecycle" and runc's rules, as the operations apply them */
static void
test_transitions (void **state)
{
  (void) state;
  assert_string_equal (asbx_status_name (ASBX_STATUS_CREATING), "creating");
  assert_string_equal (asbx_status_name (ASBX_STATUS_CREATED), "created");
  assert_string_equal (asbx_status_name (ASBX_STATUS_RUNNING), "running");
  assert_string_equal (asbx_status_name (ASBX_STATUS_PAUSED), "paused");
  assert_string_equal (asbx_status_name (ASBX_STATUS_STOPPED), "stopped");

  assert_true (asbx_status_allows (ASBX_STATUS_CREATED, ASBX_OP_START));
  for (int s = ASBX_STATUS_CREATING; s <= ASBX_STATUS_STOPPED; s++)
    if (s != ASBX_STATUS_CREATED)
      assert_false (asbx_status_allows ((enum asbx_status) s, ASBX_OP_START));
  assert_true (asbx_status_allows (ASBX_STATUS_CREATED, ASBX_OP_DELETE));
  assert_true (asbx_status_allows (ASBX_STATUS_STOPPED, ASBX_OP_DELETE));
  assert_false (asbx_status_allows (ASBX_STATUS_RUNNING, ASBX_OP_DELETE));
  assert_false (asbx_status_allows (ASBX_STATUS_PAUSED, ASBX_OP_DELETE));
  assert_true (asbx_status_allows (ASBX_STATUS_RUNNING, ASBX_OP_EXEC));
  assert_false (asbx_status_allows (ASBX_STATUS_PAUSED, ASBX_OP_EXEC));
  assert_false (asbx_status_allows (ASBX_STATUS_CREATED, ASBX_OP_EXEC));
  assert_true (asbx_status_allows (ASBX_STATUS_PAUSED, ASBX_OP_EXEC_PAUSED));
  assert_false (asbx_status_allows (ASBX_STATUS_CREATING, ASBX_OP_CHECKPOINT));
  assert_false (asbx_status_allows (ASBX_STATUS_STOPPED, ASBX_OP_CHECKPOINT));
  assert_true (asbx_status_allows (ASBX_STATUS_PAUSED, ASBX_OP_CHECKPOINT));
  assert_true (asbx_status_allows (ASBX_STATUS_CREATED, ASBX_OP_CGROUP));
  assert_false (asbx_status_allows (ASBX_STATUS_STOPPED, ASBX_OP_CGROUP));
  /* the state the hooks see */
  assert_int_equal (asbx_status_after (ASBX_OP_CREATE), ASBX_STATUS_CREATED);
  assert_int_equal (asbx_status_after (ASBX_OP_START), ASBX_STATUS_RUNNING);
  assert_int_equal (asbx_status_after (ASBX_OP_DELETE), ASBX_STATUS_STOPPED);
}

static void
expect_lexical (const char *in, bool absolute, const char *want)
{
  char *got = asbx_path_lexical (in, absolute);
  if (want == NULL)
    assert_null (got);
  else
    assert_string_equal (got, want);
  free (got);
}

/* core/pathlex.h: "." and empty components dropped, ".." refused, never resolved */
static void
test_path_lexical (void **state)
{
  (void) state;
  expect_lexical ("/a//./b/", true, "/a/b");
  expect_lexical ("a//./b/", false, "a/b");
  expect_lexical ("/a/b", false, "a/b");
  expect_lexical ("", true, "/");
  expect_lexical ("//.", true, "/");
  expect_lexical ("./", false, "");
  expect_lexical ("/a/../b", true, NULL);
  expect_lexical ("..", false, NULL);
  expect_lexical ("/a/..b/.c", true, "/a/..b/.c");
  expect_lexical ("/a/...", true, "/a/...");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_fdpass), cmocka_unit_test (test_read_proc_small), cmocka_unit_test (test_write_pid_file),
    cmocka_unit_test (test_json),   cmocka_unit_test (test_path_lexical),    cmocka_unit_test (test_transitions),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
