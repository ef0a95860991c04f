/* test_landlock.c - src/linux/landlock_ruleset.c: the rights-per-ABI table and strict/best-effort
 * checks for every ABI 0..7 (pure), then rulesets enforced for real in forked children (Landlock
 * needs no root, only no_new_privs): allow/deny per fs right on a directory and on a file, TCP
 * bind/connect port rules (ABI >= 4), signal and abstract-unix scoping (ABI >= 6), and the log
 * flags (ABI >= 7). A kernel below a case's ABI skips that case with the reason. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "linux/landlock_ruleset.h"

static int kabi;
static char tmpdir[] = "/tmp/asbx-landlock-XXXXXX";

static void
test_names (void **state)
{
  enum linux_landlock_kind k;
  int abi;
  (void) state;
  assert_int_equal (linux_landlock_right_from_name ("fs.ioctl_dev", &k, &abi), ASBX_LL_FS_IOCTL_DEV);
  assert_int_equal (k, LINUX_LL_FS);
  assert_int_equal (abi, 5);
  assert_int_equal (linux_landlock_right_from_name ("net.connect_tcp", &k, &abi), ASBX_LL_NET_CONNECT_TCP);
  assert_int_equal (abi, 4);
  assert_int_equal (linux_landlock_right_from_name ("scope.signal", &k, &abi), ASBX_LL_SCOPE_SIGNAL);
  assert_int_equal (abi, 6);
  assert_int_equal (linux_landlock_right_from_name ("log.new_exec_on", &k, &abi), ASBX_LL_LOG_NEW_EXEC_ON);
  assert_int_equal (abi, 7);
  assert_int_equal (linux_landlock_right_from_name ("fs.teleport", NULL, NULL), 0);
  assert_string_equal (linux_landlock_right_name (LINUX_LL_FS, ASBX_LL_FS_REFER), "fs.refer");
}

static void
test_check_per_abi (void **state)
{
  uint64_t fs, net, scope;
  uint32_t lg;
  char *dropped = NULL;
  asbx_err_t err = NULL;
  const uint64_t all_fs = (1ULL << 16) - 1;
  /* the minimum ABI of each newest right; strict mode passes at that ABI and fails one below */
  const struct
  {
    uint64_t fs, net, scope;
    uint32_t log;
    int abi;
    const char *name;
  } cases[] = {
    { ASBX_LL_FS_READ_FILE, 0, 0, 0, 1, "fs.read_file" },
    { ASBX_LL_FS_REFER, 0, 0, 0, 2, "fs.refer" },
    { ASBX_LL_FS_TRUNCATE, 0, 0, 0, 3, "fs.truncate" },
    { 0, ASBX_LL_NET_BIND_TCP, 0, 0, 4, "net.bind_tcp" },
    { ASBX_LL_FS_IOCTL_DEV, 0, 0, 0, 5, "fs.ioctl_dev" },
    { 0, 0, ASBX_LL_SCOPE_ABSTRACT_UNIX_SOCKET, 0, 6, "scope.abstract_unix_socket" },
    { 0, 0, 0, ASBX_LL_LOG_NEW_EXEC_ON, 7, "log.new_exec_on" },
  };
  (void) state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      assert_int_equal (linux_landlock_check (cases[i].fs, cases[i].net, cases[i].scope, cases[i].log, cases[i].abi,
                                              false, &fs, &net, &scope, &lg, &dropped, &err),
                        0);
      assert_null (dropped);
      assert_int_equal (linux_landlock_check (cases[i].fs, cases[i].net, cases[i].scope, cases[i].log, cases[i].abi - 1,
                                              false, &fs, &net, &scope, &lg, &dropped, &err),
                        -1);
      char want[128];
      if (cases[i].abi - 1 == 0)
        snprintf (want, sizeof want, "landlock: not available on this kernel (ABI 0)");
      else
        snprintf (want, sizeof want, "landlock: %s needs ABI %d, the kernel has %d", cases[i].name, cases[i].abi,
                  cases[i].abi - 1);
      if (strstr (err->msg, want) == NULL)
        fail_msg ("`%s` lacks `%s`", err->msg, want);
      asbx_error_free (&err);
    }
  /* best effort on ABI 3: keeps fs up to truncate, reports the rest */
  assert_int_equal (linux_landlock_check (all_fs, ASBX_LL_NET_BIND_TCP, ASBX_LL_SCOPE_SIGNAL, ASBX_LL_LOG_NEW_EXEC_ON,
                                          3, true, &fs, &net, &scope, &lg, &dropped, &err),
                    0);
  assert_int_equal (fs, all_fs & ~ASBX_LL_FS_IOCTL_DEV);
  assert_int_equal (net, 0);
  assert_int_equal (scope, 0);
  assert_int_equal (lg, 0);
  assert_string_equal (dropped, "fs.ioctl_dev, net.bind_tcp, scope.signal, log.new_exec_on");
  free (dropped);
  /* unknown bits are always an error */
  assert_int_equal (linux_landlock_check (1ULL << 40, 0, 0, 0, 7, true, &fs, &net, &scope, &lg, &dropped, &err), -1);
  assert_non_null (strstr (err->msg, "unknown fs right bits"));
  asbx_error_free (&err);
}

static char *
p (const char *rel)
{
  static char buf[4][256];
  static int n;
  char *b = buf[n++ % 4];
  snprintf (b, 256, "%s/%s", tmpdir, rel);
  return b;
}

static int
try_open (const char *path, int flags)
{
  int fd = open (path, flags | O_CLOEXEC, 0644);
  if (fd < 0)
    return errno;
  close (fd);
  return 0;
}

/* fork, run body in the child after NNP, return the child's exit code */
static int
in_child (int (*body) (void))
{
  int st;
  pid_t pid = fork ();
  if (pid == 0)
    {
      if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        _exit (98);
      _exit (body ());
    }
  waitpid (pid, &st, 0);
  return WIFEXITED (st) ? WEXITSTATUS (st) : 200 + WTERMSIG (st);
}

static int
body_fs (void)
{
  asbx_err_t err = NULL;
  uint64_t handled = ASBX_LL_FS_READ_FILE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_READ_DIR | ASBX_LL_FS_MAKE_REG
                     | ASBX_LL_FS_TRUNCATE | ASBX_LL_FS_REMOVE_FILE;
  struct linux_landlock *ll = linux_landlock_new (handled, 0, 0, 0, kabi, false, &err);
  if (!ll)
    return 1;
  if (linux_landlock_allow_path (ll, AT_FDCWD, p ("ro"), ASBX_LL_FS_READ_FILE | ASBX_LL_FS_READ_DIR, &err) < 0
      || linux_landlock_allow_path (ll, AT_FDCWD, p ("rw/f"), ASBX_LL_FS_WRITE_FILE, &err) < 0)
    return 2;
  /* a directory-only right on a file is refused by us, naming it */
  if (linux_landlock_allow_path (ll, AT_FDCWD, p ("rw/f"), ASBX_LL_FS_MAKE_REG, &err) == 0
      || strstr (err->msg, "fs.make_reg applies to directories only") == NULL)
    return 3;
  asbx_error_free (&err);
  if (linux_landlock_restrict_self (ll, &err) < 0)
    return 4;
  linux_landlock_free (ll);
  if (try_open (p ("ro/f"), O_RDONLY) != 0)
    return 10; /* read allowed */
  if (try_open (p ("ro/f"), O_WRONLY) != EACCES)
    return 11; /* write denied */
  if (try_open (p ("ro/new"), O_WRONLY | O_CREAT) != EACCES)
    return 12; /* make_reg denied */
  if (try_open (p ("rw/f"), O_WRONLY) != 0)
    return 13; /* write allowed on the file rule */
  if (try_open (p ("rw/f"), O_RDONLY) != EACCES)
    return 14; /* read not granted there */
  if (try_open (p ("rw/f"), O_WRONLY | O_TRUNC) != EACCES)
    return 15; /* truncate handled, not granted */
  if (try_open (p ("other"), O_RDONLY | O_DIRECTORY) != EACCES)
    return 16; /* read_dir outside the rules */
  if (unlink (p ("ro/f")) == 0 || errno != EACCES)
    return 17; /* remove_file denied */
  return 0;
}

static void
test_fs_enforced (void **state)
{
  (void) state;
  if (kabi < 3)
    skip ();
  assert_int_equal (in_child (body_fs), 0);
}

static int
bind_port (int port, bool do_connect)
{
  int s = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  int r = do_connect ? connect (s, (struct sockaddr *) &a, sizeof a) : bind (s, (struct sockaddr *) &a, sizeof a);
  int e = r < 0 ? errno : 0;
  close (s);
  return e;
}

static int listen_port;

static int
body_net (void)
{
  asbx_err_t err = NULL;
  struct linux_landlock *ll = linux_landlock_new (0, ASBX_LL_NET_BIND_TCP | ASBX_LL_NET_CONNECT_TCP, 0, 0, kabi, false,
                                                  &err);
  if (!ll || linux_landlock_allow_port (ll, 0, ASBX_LL_NET_BIND_TCP, &err) < 0
      || linux_landlock_allow_port (ll, (uint16_t) listen_port, ASBX_LL_NET_CONNECT_TCP, &err) < 0
      || linux_landlock_restrict_self (ll, &err) < 0)
    return 1;
  linux_landlock_free (ll);
  if (bind_port (0, false) != 0)
    return 10; /* port 0 (ephemeral) allowed */
  if (bind_port (listen_port + 1, false) != EACCES)
    return 11;
  if (bind_port (listen_port, true) != 0)
    return 12; /* connect to the allowed port */
  if (bind_port (listen_port + 1, true) != EACCES)
    return 13;
  return 0;
}

static void
test_net_enforced (void **state)
{
  (void) state;
  if (kabi < 4)
    skip ();
  int s = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { .sin_family = AF_INET };
  socklen_t len = sizeof a;
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  assert_int_equal (bind (s, (struct sockaddr *) &a, sizeof a), 0);
  assert_int_equal (listen (s, 4), 0);
  getsockname (s, (struct sockaddr *) &a, &len);
  listen_port = ntohs (a.sin_port);
  assert_int_equal (in_child (body_net), 0);
  close (s);
}

static int
body_scope (void)
{
  asbx_err_t err = NULL;
  struct linux_landlock *ll = linux_landlock_new (0, 0, ASBX_LL_SCOPE_SIGNAL | ASBX_LL_SCOPE_ABSTRACT_UNIX_SOCKET,
                                                  kabi >= 7 ? ASBX_LL_LOG_NEW_EXEC_ON | ASBX_LL_LOG_SUBDOMAINS_OFF : 0,
                                                  kabi, false, &err);
  if (!ll || linux_landlock_restrict_self (ll, &err) < 0)
    return 1;
  linux_landlock_free (ll);
  if (kill (getppid (), 0) == 0 || errno != EPERM)
    return 10; /* signal outside the domain */
  if (kill (getpid (), 0) != 0)
    return 11; /* inside is fine */
  int s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un u = { .sun_family = AF_UNIX };
  snprintf (u.sun_path + 1, sizeof u.sun_path - 1, "asbx-landlock-%d", (int) getppid ());
  socklen_t l = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + 1 + strlen (u.sun_path + 1));
  if (connect (s, (struct sockaddr *) &u, l) == 0 || errno != EPERM)
    return 12;
  return 0;
}

static void
test_scope_enforced (void **state)
{
  (void) state;
  if (kabi < 6)
    skip ();
  int s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un u = { .sun_family = AF_UNIX };
  snprintf (u.sun_path + 1, sizeof u.sun_path - 1, "asbx-landlock-%d", (int) getpid ());
  socklen_t l = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + 1 + strlen (u.sun_path + 1));
  assert_int_equal (bind (s, (struct sockaddr *) &u, l), 0);
  assert_int_equal (listen (s, 4), 0);
  assert_int_equal (in_child (body_scope), 0);
  close (s);
}

static int
body_best_effort_old_abi (void)
{
  /* pretend ABI 2: truncate/ioctl/net/scope dropped and reported; what is left still enforced */
  asbx_err_t err = NULL;
  struct linux_landlock *ll = linux_landlock_new (ASBX_LL_FS_READ_FILE | ASBX_LL_FS_TRUNCATE | ASBX_LL_FS_IOCTL_DEV,
                                                  ASBX_LL_NET_BIND_TCP, ASBX_LL_SCOPE_SIGNAL, 0, 2, true, &err);
  if (!ll || strcmp (linux_landlock_dropped (ll), "fs.truncate, fs.ioctl_dev, net.bind_tcp, scope.signal") != 0)
    return 1;
  if (linux_landlock_allow_path (ll, AT_FDCWD, p ("ro"), ASBX_LL_FS_READ_FILE | ASBX_LL_FS_TRUNCATE, &err) < 0
      || linux_landlock_restrict_self (ll, &err) < 0)
    return 2;
  linux_landlock_free (ll);
  if (try_open (p ("ro/f"), O_RDONLY) != 0 || try_open (p ("rw/f"), O_RDONLY) != EACCES)
    return 10;
  if (kill (getppid (), 0) != 0)
    return 11; /* scope dropped: signals still pass */
  return 0;
}

static void
test_best_effort_enforced (void **state)
{
  (void) state;
  if (kabi < 2)
    skip ();
  assert_int_equal (in_child (body_best_effort_old_abi), 0);
}

static int
setup (void **state)
{
  (void) state;
  kabi = linux_landlock_abi ();
  fprintf (stderr, "# Landlock ABI of this kernel: %d\n", kabi);
  if (!mkdtemp (tmpdir))
    return -1;
  mkdir (p ("ro"), 0755);
  mkdir (p ("rw"), 0755);
  mkdir (p ("other"), 0755);
  close (open (p ("ro/f"), O_CREAT | O_WRONLY, 0644));
  close (open (p ("rw/f"), O_CREAT | O_WRONLY, 0644));
  return 0;
}

static int
teardown (void **state)
{
  (void) state;
  unlink (p ("ro/f"));
  unlink (p ("ro/new"));
  unlink (p ("rw/f"));
  rmdir (p ("ro"));
  rmdir (p ("rw"));
  rmdir (p ("other"));
  rmdir (tmpdir);
  return 0;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_names),          cmocka_unit_test (test_check_per_abi),
    cmocka_unit_test (test_fs_enforced),    cmocka_unit_test (test_net_enforced),
    cmocka_unit_test (test_scope_enforced), cmocka_unit_test (test_best_effort_enforced),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
