/* test_setup_toml.c - the TOML key scanner of `agentsbx setup` (runtime/setup_toml.c): key
 * paths from headers, dotted and quoted keys; strings, arrays and comments that look like
 * structure are not mistaken for it; conflicts; refusal of broken text. Every verdict here was
 * also checked with Python's tomllib when the cases were written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/setup_toml.h"

static struct toml_doc
scan_ok (const char *text)
{
  struct toml_doc d;
  char *err = NULL;
  int r = toml_scan (text, strlen (text), &d, &err);
  if (r < 0)
    fail_msg ("scan failed: %s", err);
  return d;
}

static void
test_paths (void **state)
{
  (void) state;
  struct toml_doc d = scan_ok ("version = 2\n"
                               "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
                               "  default_runtime_name = 'runc' # [not.a.table]\n"
                               "[ a . 'b.c' . d ]\r\n"
                               "x.y = 1\n"
                               "[[arr]]\n"
                               "k = 1979-05-27 07:32:00Z\n");
  assert_non_null (toml_find (&d, "version"));
  assert_non_null (toml_find (&d, "plugins.\"io.containerd.grpc.v1.cri\".containerd"));
  assert_non_null (toml_find (&d, "plugins.\"io.containerd.grpc.v1.cri\".containerd.default_runtime_name"));
  assert_null (toml_find (&d, "not.a.table"));
  assert_non_null (toml_find (&d, "a.\"b.c\".d.x.y"));
  assert_true (toml_find (&d, "arr")->array);
  assert_non_null (toml_find (&d, "arr.k"));
  toml_doc_free (&d);
}

static void
test_strings_and_arrays_hide_nothing (void **state)
{
  (void) state;
  struct toml_doc d = scan_ok ("s = \"\"\"\n[fake]\nq = \\\"\"\"\"\n"
                               "l = '''\n[fake2]\n'''\n"
                               "e = \"a\\\"]#\"\n"
                               "arr = [\n  \"x\", # [fake3]\n  [1, 2],\n  { a = 1 },\n]\n"
                               "t = { a = [1], b = { c = \"}\" } }\n");
  assert_null (toml_find (&d, "fake"));
  assert_null (toml_find (&d, "fake2"));
  assert_null (toml_find (&d, "fake3"));
  assert_non_null (toml_find (&d, "t"));
  assert_int_equal (d.n, 5);
  toml_doc_free (&d);
}

static void
test_conflicts (void **state)
{
  (void) state;
  struct toml_doc d = scan_ok ("[p.c.runtimes.runc]\nx = 1\n[engine]\nruntimes = { crun = [] }\n");
  assert_null (toml_conflict (&d, "p.c.runtimes.agentsbx"));        /* a sibling table: fine */
  assert_non_null (toml_conflict (&d, "p.c.runtimes.runc"));        /* the same table */
  assert_non_null (toml_conflict (&d, "p.c"));                      /* defined below it */
  assert_non_null (toml_conflict (&d, "engine.runtimes.agentsbx")); /* inside an inline table */
  toml_doc_free (&d);
  char *seg = toml_key_segment ("io.containerd.grpc.v1.cri");
  assert_string_equal (seg, "\"io.containerd.grpc.v1.cri\"");
  free (seg);
}

static void
test_refused (void **state)
{
  (void) state;
  static const char *const bad[] = { "x = \"open\n", "[a\n", "x = [1, 2\n", "x 1\n", "x = 1 y = 2\n", "= 1\n" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      struct toml_doc d;
      char *err = NULL;
      assert_int_equal (toml_scan (bad[i], strlen (bad[i]), &d, &err), -1);
      assert_non_null (strstr (err, "line "));
      free (err);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_paths),
    cmocka_unit_test (test_strings_and_arrays_hide_nothing),
    cmocka_unit_test (test_conflicts),
    cmocka_unit_test (test_refused),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
