/* test_secret_env.c - the runtime's environment secrets (runtime/secret_env.c): stash moves every
 * AGENTSBX_SECRET_* entry out of environ (also one without '=', and an invalid name, which is not
 * kept) into a sealed memfd of NAME=VALUE records that survives one execve, adopt takes that memfd
 * back from AGENTSBX_SECRETS_FD (close-on-exec again) and refuses a plain file named there, and
 * a verb that keeps nothing makes no memfd. No root needed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "monitor/secret_tpl.h"
#include "runtime/secret_env.h"

extern char **environ;

static char *test_env[8];

/* environ = the entries given (a private array: the test owns its strings) */
static void
set_environ (const char *const *entries, size_t n)
{
  for (size_t i = 0; i < n; i++)
    test_env[i] = (char *) entries[i];
  test_env[n] = NULL;
  environ = test_env;
}

static bool
environ_has (const char *prefix)
{
  for (char **e = environ; *e; e++)
    if (strncmp (*e, prefix, strlen (prefix)) == 0)
      return true;
  return false;
}

static void
test_stash_and_adopt (void **state)
{
  (void) state;
  static const char *const entries[] = {
    "PATH=/usr/bin",
    "AGENTSBX_SECRET_gh=ghp-123",
    "AGENTSBX_SECRET_b.c=two",
    "AGENTSBX_SECRET_bad/name=x",
    "AGENTSBX_SECRET_noequals",
    "AGENTSBX_SECRETS_FD=7",
    "HOME=/root",
  };
  set_environ (entries, 7);
  assert_true (secret_env_present ());
  assert_int_equal (secret_env_stash (true), 0);
  assert_false (environ_has ("AGENTSBX_SECRET_"));
  assert_true (environ_has ("PATH=") && environ_has ("HOME="));
  const char *v = getenv (SECRET_ENV_FD_VAR);
  assert_non_null (v);
  int fd = v ? atoi (v) : -1;
  assert_true (fd > 2);
  assert_int_equal (fcntl (fd, F_GETFD) & FD_CLOEXEC, 0); /* for the one execve */
  assert_true ((fcntl (fd, F_GET_SEALS) & F_SEAL_WRITE) != 0);
  assert_int_equal (write (fd, "x", 1), -1); /* sealed */
  char buf[64] = { 0 };
  static const char want[] = "gh=ghp-123\0b.c=two";
  assert_int_equal (pread (fd, buf, sizeof buf, 0), (ssize_t) sizeof want);
  assert_memory_equal (buf, want, sizeof want);
  assert_int_equal (secret_env_has (fd, "gh", 2), 1);
  assert_int_equal (secret_env_has (fd, "bad/name", 8), 0);
  /* the re-executed image */
  secret_env_adopt ();
  assert_int_equal (secret_env_fd (), fd);
  assert_null (getenv (SECRET_ENV_FD_VAR));
  assert_int_equal (fcntl (fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
}

static void
test_drop_only_and_refused_fd (void **state)
{
  (void) state;
  static const char *const entries[] = { "AGENTSBX_SECRET_gh=ghp-123", "TERM=dumb" };
  set_environ (entries, 2);
  assert_int_equal (secret_env_stash (false), 0);
  assert_false (environ_has ("AGENTSBX_SECRET_"));
  assert_null (getenv (SECRET_ENV_FD_VAR)); /* no memfd for a verb that keeps nothing */
  assert_false (secret_env_present ());
  /* a plain file named by the variable is not taken (only a sealed memfd is) */
  char path[] = "/tmp/asbx-secret-env-XXXXXX";
  int fd = mkstemp (path);
  assert_true (fd > 2);
  unlink (path);
  char num[16];
  snprintf (num, sizeof num, "%d", fd);
  static char var[64];
  snprintf (var, sizeof var, SECRET_ENV_FD_VAR "=%s", num);
  const char *const e2[] = { var };
  set_environ (e2, 1);
  secret_env_adopt ();
  assert_int_not_equal (secret_env_fd (), fd);
  assert_null (getenv (SECRET_ENV_FD_VAR));
  close (fd);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_drop_only_and_refused_fd),
    cmocka_unit_test (test_stash_and_adopt),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
