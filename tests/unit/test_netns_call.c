/* test_netns_call.c - linux/netns_call.h and linux/nft.h's child path, as a non-root caller:
 * a socket made in a network namespace owned by a user namespace the caller owns, which the
 * caller itself may not enter, lands in that namespace; libnftables commands run there and their
 * output comes back. Run as root, the test first becomes nobody (in a child: irreversible). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/sockios.h>

#include <cmocka.h>

#include "linux/netns_call.h"
#include "linux/nft.h"

#define FAIL(code, what)                                                                                               \
  do                                                                                                                   \
    {                                                                                                                  \
      fprintf (stderr, "%s: %s\n", what, err ? err->msg : strerror (errno));                                           \
      return code;                                                                                                     \
    }                                                                                                                  \
  while (0)

/* a child in a fresh user + network namespace, waiting for `hold` to close; its pid */
static pid_t
namespaced_child (int *hold_wr)
{
  int ready[2], hold[2];
  char c;
  if (pipe (ready) < 0 || pipe (hold) < 0)
    return -1;
  pid_t pid = fork ();
  if (pid == 0)
    {
      close (ready[0]);
      close (hold[1]);
      /* dumpable again after the credential change, so our parent may open its ns files */
      c = unshare (CLONE_NEWUSER | CLONE_NEWNET) == 0 && prctl (PR_SET_DUMPABLE, 1, 0, 0, 0) == 0 ? 'y' : 'n';
      if (write (ready[1], &c, 1) != 1)
        _exit (1);
      (void) !read (hold[0], &c, 1);
      _exit (0);
    }
  close (ready[1]);
  close (hold[0]);
  *hold_wr = hold[1];
  if (pid < 0 || read (ready[0], &c, 1) != 1 || c != 'y')
    {
      if (pid > 0)
        waitpid (pid, NULL, 0);
      return -1;
    }
  close (ready[0]);
  return pid;
}

/* the body, as a non-root process: 0 ok, 77 skip, else the failed step */
static int
as_user (void)
{
  asbx_err_t err = NULL;
  char path[64];
  struct stat want, got;
  int hold = -1;
  uint64_t packets = 1;

  pid_t ns = namespaced_child (&hold);
  if (ns < 0)
    return 77; /* no unprivileged user namespaces here */
  snprintf (path, sizeof path, "/proc/%d/ns/net", (int) ns);
  int netns = open (path, O_RDONLY | O_CLOEXEC);
  if (netns < 0 || fstat (netns, &want) < 0)
    FAIL (2, "open the child's netns");
  /* the premise: this caller may not enter it itself */
  if (setns (netns, CLONE_NEWNET) == 0 || errno != EPERM)
    FAIL (3, "setns was not refused with EPERM");
  int s = linux_netns_socket (netns, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0, &err);
  if (s < 0)
    FAIL (4, "linux_netns_socket");
  int sns = ioctl (s, SIOCGSKNS);
  if (sns < 0 || fstat (sns, &got) < 0)
    FAIL (5, "SIOCGSKNS");
  if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
    FAIL (6, "the socket is not in the child's network namespace");
  struct linux_nft *n = linux_nft_new (netns, &err);
  if (!n)
    FAIL (7, "linux_nft_new");
  if (linux_nft_run (n, "add table inet asbxt\nadd counter inet asbxt c\n", &err) < 0)
    FAIL (8, "nft add table");
  if (linux_nft_counter (n, "asbxt", "c", &packets, &err) < 0 || packets != 0)
    FAIL (9, "nft counter (the child's output)");
  if (linux_nft_run (n, "add rule inet nosuchtable c counter\n", &err) == 0)
    FAIL (10, "nft error not reported");
  if (!err || !strstr (err->msg, "nft: "))
    FAIL (11, "nft error text");
  linux_nft_free (n);
  close (hold);
  waitpid (ns, NULL, 0);
  return 0;
}

static void
test_child_path_as_user (void **state)
{
  (void) state;
  pid_t pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      if (geteuid () == 0
          && (setgroups (0, NULL) < 0 || setresgid (65534, 65534, 65534) < 0 || setresuid (65534, 65534, 65534) < 0))
        _exit (1);
      _exit (as_user ());
    }
  int status = 0;
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status));
  if (WEXITSTATUS (status) == 77)
    skip ();
  assert_int_equal (WEXITSTATUS (status), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_child_path_as_user),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
