/* test_mountinfo.c - linux/mountinfo.c's views: which other mounts of a filesystem show a
 * directory or a part of it, from a hand-made table (the cases of the alias checks: a bind of a
 * parent, of the directory itself, of a subdirectory; another device; the owner itself). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "linux/mountinfo.h"

static struct mountinfo_entry table[] = {
  { .id = 1, .maj = 8, .min = 1, .root = "/", .point = "/" },                  /* own: the host root */
  { .id = 2, .maj = 8, .min = 1, .root = "/srv", .point = "/mnt/srv" },        /* a parent bound */
  { .id = 3, .maj = 8, .min = 1, .root = "/srv/ws", .point = "/opt/ws" },      /* the dir itself */
  { .id = 4, .maj = 8, .min = 1, .root = "/srv/ws/sub", .point = "/opt/sub" }, /* a part below */
  { .id = 5, .maj = 8, .min = 2, .root = "/srv/ws", .point = "/other" },       /* another device */
  { .id = 6, .maj = 8, .min = 1, .root = "/srv/wsx", .point = "/opt/wsx" },    /* a prefix, not a dir */
};

static void
test_place (void **state)
{
  (void) state;
  char *p = mountinfo_place (&table[2], "/opt/ws/a");
  assert_string_equal (p, "/srv/ws/a");
  free (p);
  p = mountinfo_place (&table[0], "/srv/ws");
  assert_string_equal (p, "/srv/ws");
  free (p);
  p = mountinfo_place (&table[2], "/opt/wsx");
  assert_null (p);
  assert_ptr_equal (mountinfo_find (table, 6, 4), &table[3]);
  assert_null (mountinfo_find (table, 6, 9));
}

static void
test_views (void **state)
{
  (void) state;
  struct mountinfo_view *v = NULL;
  size_t n = mountinfo_views (table, 6, &table[0], "/srv/ws", &v);
  assert_int_equal (n, 3);
  assert_ptr_equal (v[0].mount, &table[1]);
  assert_true (v[0].whole);
  assert_string_equal (v[0].at, "/mnt/srv/ws");
  assert_ptr_equal (v[1].mount, &table[2]);
  assert_true (v[1].whole);
  assert_string_equal (v[1].at, "/opt/ws");
  assert_ptr_equal (v[2].mount, &table[3]);
  assert_false (v[2].whole);
  assert_string_equal (v[2].sub, "sub");
  assert_string_equal (v[2].at, "/opt/sub");
  mountinfo_views_free (v, n);

  /* from the bind's side: the host root shows it whole at its source path */
  n = mountinfo_views (table, 6, &table[2], "/srv/ws", &v);
  assert_int_equal (n, 3);
  assert_ptr_equal (v[0].mount, &table[0]);
  assert_string_equal (v[0].at, "/srv/ws");
  mountinfo_views_free (v, n);

  /* the filesystem's root: every mount of the device shows a part of it */
  n = mountinfo_views (table, 6, &table[0], "/", &v);
  assert_int_equal (n, 4);
  assert_false (v[0].whole);
  assert_string_equal (v[0].sub, "srv");
  mountinfo_views_free (v, n);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_place),
    cmocka_unit_test (test_views),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
