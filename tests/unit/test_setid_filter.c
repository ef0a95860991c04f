/* test_setid_filter.c - linux/setid_filter.h: in a child that loaded the filter (after
 * no_new_privs), every way to set S_ISUID/S_ISGID on a file fails with EPERM and leaves the
 * file's mode as it was, plain modes still work, openat2 answers ENOSYS, unshare EPERM. What is
 * asserted is the kernel's answer and the mode stat(2) reports. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/openat2.h>

#include <cmocka.h>

#include "linux/setid_filter.h"

/* each check's exit code tells which failed */
static int
child (const char *dir)
{
  asbx_err_t err = NULL;
  struct stat st;
  char f[4096], d[4096];
  snprintf (f, sizeof f, "%s/f", dir);
  snprintf (d, sizeof d, "%s/d", dir);
  umask (022);
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || linux_load_setid_filter (&err) < 0)
    return 2;
  int fd = open (f, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    return 3;
  if (chmod (f, 04755) == 0 || errno != EPERM || fchmod (fd, 02755) == 0 || errno != EPERM)
    return 4;
  if (fchmodat (AT_FDCWD, f, 06755, 0) == 0 || errno != EPERM)
    return 5;
  if (stat (f, &st) < 0 || (st.st_mode & 07777) != 0644)
    return 6;
  if (chmod (f, 0755) < 0 || stat (f, &st) < 0 || (st.st_mode & 07777) != 0755)
    return 7; /* plain modes pass */
  if (open (d, O_WRONLY | O_CREAT, 04755) >= 0 || errno != EPERM || mkdir (d, 02755) == 0 || errno != EPERM)
    return 8;
  if (mknod (d, S_IFIFO | 04644, 0) == 0 || errno != EPERM)
    return 9;
  struct open_how how = { .flags = O_WRONLY | O_CREAT, .mode = 04755 };
  if (syscall (SYS_openat2, AT_FDCWD, d, &how, sizeof how) >= 0 || errno != ENOSYS)
    return 10;
  if (unshare (CLONE_NEWUTS) == 0 || errno != EPERM)
    return 11;
  if (access (d, F_OK) == 0)
    return 12; /* nothing was made by the refused calls */
  close (fd);
  return 0;
}

static void
test_setid_modes_refused (void **state)
{
  (void) state;
  char dir[] = "/tmp/asbx-setid-XXXXXX";
  assert_non_null (mkdtemp (dir));
  pid_t pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    _exit (child (dir));
  int st = 0;
  assert_int_equal (waitpid (pid, &st, 0), pid);
  char f[4096];
  snprintf (f, sizeof f, "%s/f", dir);
  unlink (f);
  rmdir (dir);
  assert_true (WIFEXITED (st));
  assert_int_equal (WEXITSTATUS (st), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_setid_modes_refused),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
