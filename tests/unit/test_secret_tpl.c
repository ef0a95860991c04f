/* test_secret_tpl.c - credential templates (monitor/secret_tpl.c): secrets read through the
 * directory fd at each call (a rotated file applies at once), symlinks, FIFOs, directories and
 * multi-line or oversized files refused, bad names refused, the value never in the error; the
 * runtime's environment secrets (a sealed memfd of NAME=VALUE records, runtime/secret_env.h)
 * used for a name with no file, with the same rules. No root needed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "monitor/secret_tpl.h"

static char dir[64];
static int dfd = -1;

static void
put (const char *name, const char *text, size_t n)
{
  int fd = openat (dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, text, n), (ssize_t) n);
  close (fd);
}

static int
setup (void **state)
{
  (void) state;
  snprintf (dir, sizeof dir, "/tmp/asbx-secret-XXXXXX");
  assert_non_null (mkdtemp (dir));
  dfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (dfd >= 0);
  return 0;
}

static int
teardown (void **state)
{
  (void) state;
  static const char *const names[] = { "tok", "crlf", "link", "multi", "empty", "big", "fifo", "new" };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    unlinkat (dfd, names[i], 0);
  unlinkat (dfd, "sub", AT_REMOVEDIR);
  close (dfd);
  rmdir (dir);
  return 0;
}

static char *
expand (const char *tpl, char *why)
{
  why[0] = '\0';
  return secret_expand (dfd, -1, tpl, why, 300);
}

static void
test_expand_and_rotate (void **state)
{
  (void) state;
  char why[300];
  put ("tok", "abc123\n", 7);
  put ("crlf", "x y\r\n", 5);
  char *v = expand ("Bearer ${secret:tok}", why);
  assert_string_equal (v, "Bearer abc123");
  free (v);
  v = expand ("${secret:tok}:${secret:crlf}", why);
  assert_string_equal (v, "abc123:x y");
  free (v);
  /* rotated on the host (a new file renamed over the old): the next call reads the new one */
  put ("new", "rotated\n", 8);
  assert_int_equal (renameat (dfd, "new", dfd, "tok"), 0);
  v = expand ("Bearer ${secret:tok}", why);
  assert_string_equal (v, "Bearer rotated");
  free (v);
  /* literal text, an unterminated reference and other ${...} pass as they are */
  v = expand ("a ${other} ${secret:tok", why);
  assert_string_equal (v, "a ${other} ${secret:tok");
  free (v);
}

static void
test_refused (void **state)
{
  (void) state;
  char why[300];
  put ("tok", "topsecret\n", 10);
  assert_int_equal (symlinkat ("tok", dfd, "link"), 0);
  put ("multi", "topsecret\nX-Evil: 1\n", 20);
  put ("empty", "\n", 1);
  char *big = malloc (SECRET_MAX + 2);
  memset (big, 'a', SECRET_MAX + 1);
  put ("big", big, SECRET_MAX + 1);
  free (big);
  assert_int_equal (mkfifoat (dfd, "fifo", 0600), 0);
  assert_int_equal (mkdirat (dfd, "sub", 0700), 0);
  static const struct
  {
    const char *tpl, *why;
  } cases[] = {
    { "${secret:link}", "Too many levels of symbolic links" }, /* O_NOFOLLOW */
    { "${secret:multi}", "not one line" },
    { "${secret:empty}", "not one line" },
    { "${secret:big}", "too long" },
    { "${secret:fifo}", "not a regular file" }, /* and the open did not block */
    { "${secret:sub}", "not a regular file" },
    { "${secret:absent}", "No such file" },
    { "${secret:../tok}", "bad secret name" },
    { "${secret:}", "bad secret name" },
    { "${secret:..}", "bad secret name" },
    { "${secret:.}", "bad secret name" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      char *v = expand (cases[i].tpl, why);
      if (v)
        fail_msg ("accepted %s: %s", cases[i].tpl, v);
      if (!strstr (why, cases[i].why))
        fail_msg ("%s: %s", cases[i].tpl, why);
      assert_null (strstr (why, "topsecret"));
    }
  assert_null (secret_expand (-1, -1, "${secret:tok}", why, sizeof why));
  /* a value longer than VALUE_MAX in all */
  char tpl[VALUE_MAX + 8];
  memset (tpl, 'x', VALUE_MAX + 2);
  tpl[VALUE_MAX + 2] = '\0';
  assert_null (expand (tpl, why));
}

static void
test_environment_secrets (void **state)
{
  (void) state;
  char why[300];
  static const char rec[] = "gh=env-value-1\0multi=a\nX-Evil: 1\0empty=\0tok=from-env\0";
  int efd = memfd_create ("test-secrets", MFD_CLOEXEC);
  assert_true (efd >= 0);
  assert_int_equal (write (efd, rec, sizeof rec - 1), (ssize_t) sizeof rec - 1);
  put ("tok", "from-file\n", 10);
  why[0] = '\0';
  char *v = secret_expand (dfd, efd, "Bearer ${secret:gh}", why, sizeof why);
  assert_non_null (v);
  assert_string_equal (v, "Bearer env-value-1");
  free (v);
  /* a file of that name is read first (create refuses a name in both places) */
  v = secret_expand (dfd, efd, "${secret:tok}", why, sizeof why);
  assert_string_equal (v, "from-file");
  free (v);
  /* no directory at all (Docker: none was made) */
  v = secret_expand (-1, efd, "${secret:gh}", why, sizeof why);
  assert_string_equal (v, "env-value-1");
  free (v);
  assert_int_equal (secret_env_has (efd, "gh", 2), 1);
  assert_int_equal (secret_env_has (efd, "g", 1), 0); /* a prefix of a name is not the name */
  assert_int_equal (secret_env_has (efd, "nope", 4), 0);
  assert_int_equal (secret_env_has (-1, "gh", 2), 0);
  static const struct
  {
    const char *tpl, *why;
  } cases[] = {
    { "${secret:multi}", "not one line" },
    { "${secret:empty}", "not one line" },
    { "${secret:absent}", "nor AGENTSBX_SECRET_absent in the runtime's environment" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      why[0] = '\0';
      v = secret_expand (dfd, efd, cases[i].tpl, why, sizeof why);
      if (v)
        fail_msg ("accepted %s: %s", cases[i].tpl, v);
      if (!strstr (why, cases[i].why))
        fail_msg ("%s: %s", cases[i].tpl, why);
      assert_null (strstr (why, "X-Evil"));
    }
  close (efd);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_expand_and_rotate, setup, teardown),
    cmocka_unit_test_setup_teardown (test_refused, setup, teardown),
    cmocka_unit_test_setup_teardown (test_environment_secrets, setup, teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
