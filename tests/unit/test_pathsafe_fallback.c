/* test_pathsafe_fallback.c - the userspace openat2 emulation against the real openat2.
 *
 * The proof is an equality table: every (root, path, open flags, resolve flags) case is resolved
 * by ps_openat2_fallback() and by the kernel's openat2, and both must give the same object
 * (st_dev, st_ino, O_PATH or not) or the same errno. The tree holds symlinks to "/", "../../..",
 * absolute and relative chains, loops, a 41-link chain, ".." at the root, and the root "/" and
 * "/proc" cases reach procfs magic links (/proc/self/fd/N, root, cwd, exe, ns). Then O_CREAT
 * through a dangling link, and a rename race: a directory moved out of the root while the walk
 * stands in it must never let ".." reach a file outside. Needs no root.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "linux/pathsafe.h"

static char top[64];     /* T: mkdtemp */
static char rootdir[96]; /* T/root: the container root */
static int secret_fd = -1;

static void
mk (const char *rel, const char *link_target)
{
  char p[256];
  snprintf (p, sizeof p, "%s/%s", rootdir, rel);
  if (link_target)
    assert_int_equal (symlink (link_target, p), 0);
  else if (rel[strlen (rel) - 1] == '/')
    assert_int_equal (mkdir (p, 0755), 0);
  else
    {
      int fd = open (p, O_CREAT | O_EXCL | O_WRONLY, 0644);
      assert_true (fd >= 0);
      close (fd);
    }
}

static int
setup (void **state)
{
  char p[160];
  (void) state;
  snprintf (top, sizeof top, "/tmp/asbx-psfb.XXXXXX");
  if (!mkdtemp (top))
    return -1;
  snprintf (rootdir, sizeof rootdir, "%s/root", top);
  mkdir (rootdir, 0755);
  snprintf (p, sizeof p, "%s/out", top);
  mkdir (p, 0755);
  snprintf (p, sizeof p, "%s/secret", top);
  secret_fd = open (p, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  const char *dirs[] = { "a/", "a/b/", "a/b/c/", "etc/", "d/", NULL };
  for (int i = 0; dirs[i]; i++)
    mk (dirs[i], NULL);
  mk ("a/b/c/file", NULL);
  mk ("etc/hostname", NULL);
  mk ("link_root", "/");
  mk ("a/b/up3", "../../..");
  mk ("a/b/up5", "../../../../..");
  mk ("abs_etc", "/etc");
  mk ("abs_host", "/etc/hostname");
  mk ("chain1", "chain2");
  mk ("chain2", "/a/b");
  mk ("chain3", "a/b/c/../c");
  mk ("loop1", "loop2");
  mk ("loop2", "loop1");
  mk ("self", "self");
  mk ("dangling", "nonexist");
  mk ("dotdot", "..");
  mk ("file_link", "a/b/c/file");
  mk ("trail", "a/b/");
  mk ("empty_target", "a/../../../../");
  mk ("secret_rel", "../secret");
  mk ("proc", "/proc");
  /* n0 -> n1 -> ... -> n40 -> etc/hostname: n0 needs 41 links, n1 40 (the limit) */
  for (int i = 0; i <= 40; i++)
    {
      char name[16], tgt[32];
      snprintf (name, sizeof name, "n%d", i);
      if (i == 40)
        snprintf (tgt, sizeof tgt, "etc/hostname");
      else
        snprintf (tgt, sizeof tgt, "n%d", i + 1);
      mk (name, tgt);
    }
  return 0;
}

static int
teardown (void **state)
{
  char cmd[128];
  (void) state;
  close (secret_fd);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", top);
  return system (cmd) == 0 ? 0 : -1;
}

static int
real_openat2 (int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
  struct open_how how = { .flags = flags | O_CLOEXEC, .mode = mode, .resolve = resolve };
  int fd, eloops = 0;
  /* ELOOP is retried too: when a rename or mount anywhere on the host makes the kernel drop from
   * RCU-walk to ref-walk mid-lookup, the links already followed are counted again, so a chain of
   * 20 or more symlinks can fail spuriously (seen on 6.18 while other tests ran). The reference
   * answer is the one a quiet system gives. */
  do
    fd = (int) syscall (SYS_openat2, dirfd, path, &how, sizeof how);
  while (fd < 0 && (errno == EAGAIN || (errno == ELOOP && ++eloops < 64)));
  return fd;
}

static int
fallback (int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
  int fd;
  do
    fd = ps_openat2_fallback (dirfd, path, flags, mode, resolve);
  while (fd < 0 && errno == EAGAIN);
  return fd;
}

/* Resolve with both; returns 1 when they agree (printing the case otherwise). */
static int
same_result (int dirfd, const char *rootname, const char *path, int flags, uint64_t resolve)
{
  int kfd = real_openat2 (dirfd, path, (uint64_t) flags, 0, resolve);
  int kerr = errno;
  int ffd = fallback (dirfd, path, (uint64_t) flags, 0, resolve);
  int ferr = errno;
  int ok;

  if (kfd >= 0 && ffd >= 0)
    {
      struct stat a, b;
      assert_int_equal (fstat (kfd, &a), 0);
      assert_int_equal (fstat (ffd, &b), 0);
      ok = a.st_dev == b.st_dev && a.st_ino == b.st_ino
           && (fcntl (kfd, F_GETFL) & (O_PATH | O_ACCMODE)) == (fcntl (ffd, F_GETFL) & (O_PATH | O_ACCMODE))
           && (fcntl (ffd, F_GETFD) & FD_CLOEXEC);
    }
  else
    ok = kfd < 0 && ffd < 0 && kerr == ferr;
  if (!ok)
    print_error ("MISMATCH root=%s path=%s flags=%#o resolve=%#llx: kernel %s, fallback %s\n", rootname, path,
                 (unsigned) flags, (unsigned long long) resolve, kfd >= 0 ? "fd" : strerror (kerr),
                 ffd >= 0 ? "fd" : strerror (ferr));
  if (kfd >= 0)
    close (kfd);
  if (ffd >= 0)
    close (ffd);
  return ok;
}

static const int open_flags[] = {
  O_PATH,
  O_PATH | O_NOFOLLOW,
  O_PATH | O_DIRECTORY,
  O_RDONLY,
  O_RDONLY | O_NOFOLLOW,
  O_RDONLY | O_DIRECTORY,
  O_PATH | O_DIRECTORY | O_NOFOLLOW,
};
static const uint64_t resolves[] = {
  RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  RESOLVE_IN_ROOT,
  RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS,
  RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
  RESOLVE_BENEATH,
  RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
};
#define N(a) (sizeof (a) / sizeof ((a)[0]))

static int
table (int dirfd, const char *rootname, const char *const *paths, int *cases)
{
  int bad = 0;
  for (size_t p = 0; paths[p]; p++)
    for (size_t f = 0; f < N (open_flags); f++)
      for (size_t r = 0; r < N (resolves); r++)
        {
          (*cases)++;
          bad += !same_result (dirfd, rootname, paths[p], open_flags[f], resolves[r]);
        }
  return bad;
}

static void
test_equality_table (void **state)
{
  static const char *const tree_paths[] = {
    "a/b/c/file",
    "/a/b/c/file",
    "a//b/./c/file",
    "a/b/c/file/",
    "a/b/c/",
    "a/b/c/.",
    "a/b/c/..",
    ".",
    "/",
    "..",
    "../../..",
    "../etc/hostname",
    "/../../etc/hostname",
    "a/../a/b",
    "a/b/../../..",
    "link_root",
    "link_root/",
    "link_root/etc/hostname",
    "a/b/up3",
    "a/b/up3/etc/hostname",
    "a/b/up5/etc",
    "abs_etc",
    "abs_etc/hostname",
    "abs_host",
    "chain1",
    "chain1/c/file",
    "chain3/file",
    "loop1",
    "loop1/x",
    "self",
    "dangling",
    "dangling/",
    "dotdot",
    "dotdot/etc/hostname",
    "file_link",
    "file_link/",
    "trail",
    "trail/c",
    "empty_target",
    "secret_rel",
    "../secret",
    "n0",
    "n1",
    "n39",
    "nonexistent",
    "a/nonexistent/x",
    "a/b/c/file/x",
    "",
    "proc/self/status",
    NULL,
  };
  static const char *const host_paths[] = {
    "/proc/self/status",
    "/proc/self",
    "/proc/self/",
    "/proc/mounts",
    "/proc/self/root",
    "/proc/self/root/etc",
    "/proc/self/cwd",
    "/proc/self/exe",
    "/proc/self/fd",
    "/proc/self/fd/0",
    "/proc/self/ns/mnt",
    "/proc/thread-self/attr/current",
    "/proc/1/root",
    "proc/self/fd/1",
    NULL, /* + /proc/self/fd/<secret>, filled in below */
    NULL,
  };
  static const char *const proc_paths[] = {
    "thread-self/attr/current",
    "self/fd/0",
    "self/root",
    "self/root/etc",
    "self/cwd/.",
    "self/status",
    "mounts",
    "sys/kernel/ostype",
    "../proc",
    "self/../self/status",
    NULL,
  };
  char secret_path[64];
  const char *hp[N (host_paths)];
  int cases = 0, bad = 0;
  int rfd = open (rootdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int hfd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int pfd = open ("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  (void) state;

  assert_true (rfd >= 0 && hfd >= 0 && pfd >= 0);
  memcpy (hp, host_paths, sizeof hp);
  snprintf (secret_path, sizeof secret_path, "/proc/self/fd/%d", secret_fd);
  hp[N (host_paths) - 2] = secret_path;
  bad += table (rfd, rootdir, tree_paths, &cases);
  bad += table (hfd, "/", hp, &cases);
  bad += table (pfd, "/proc", proc_paths, &cases);
  bad += table (AT_FDCWD, "cwd", proc_paths, &cases);
  print_message ("equality table: %d cases, %d mismatches\n", cases, bad);
  assert_int_equal (bad, 0);
  close (rfd);
  close (hfd);
  close (pfd);
}

static void
test_flags_refused (void **state)
{
  int rfd = open (rootdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  (void) state;
  /* unscoped or unsupported resolve flags: refused, never resolved loosely */
  assert_int_equal (ps_openat2_fallback (rfd, "a", O_PATH, 0, RESOLVE_NO_SYMLINKS), -1);
  assert_int_equal (errno, EINVAL);
  assert_int_equal (ps_openat2_fallback (rfd, "a", O_PATH, 0, RESOLVE_IN_ROOT | RESOLVE_NO_XDEV), -1);
  assert_int_equal (errno, EINVAL);
  assert_int_equal (ps_openat2_fallback (rfd, "a", O_PATH, 0, RESOLVE_IN_ROOT | RESOLVE_BENEATH), -1);
  assert_int_equal (errno, EINVAL);
  close (rfd);
}

/* O_CREAT through a dangling symlink creates the target inside the root, as the kernel does;
 * O_CREAT|O_EXCL refuses the existing link (EEXIST) for both. */
static void
test_create (void **state)
{
  int rfd = open (rootdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  const uint64_t res = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const char *paths[] = { "dangling", "link_root/a/new", "a/b/up3/d/new2", NULL };
  const char *made[] = { "nonexist", "a/new", "d/new2" };
  (void) state;

  for (int i = 0; paths[i]; i++)
    for (int pass = 0; pass < 2; pass++)
      {
        struct stat st, at;
        int fd = pass ? ps_openat2_fallback (rfd, paths[i], O_CREAT | O_WRONLY, 0600, res)
                      : real_openat2 (rfd, paths[i], O_CREAT | O_WRONLY, 0600, res);
        assert_true (fd >= 0);
        assert_int_equal (fstat (fd, &st), 0);
        assert_int_equal (fstatat (rfd, made[i], &at, AT_SYMLINK_NOFOLLOW), 0);
        assert_true (st.st_ino == at.st_ino && (st.st_mode & 07777) == 0600);
        close (fd);
        assert_int_equal (unlinkat (rfd, made[i], 0), 0);
      }
  assert_int_equal (real_openat2 (rfd, "dangling", O_CREAT | O_EXCL | O_WRONLY, 0600, res), -1);
  assert_int_equal (errno, EEXIST);
  assert_int_equal (ps_openat2_fallback (rfd, "dangling", O_CREAT | O_EXCL | O_WRONLY, 0600, res), -1);
  assert_int_equal (errno, EEXIST);
  close (rfd);
}

static volatile int racing;

static void *
renamer (void *arg)
{
  char in[160], out[160];
  (void) arg;
  snprintf (in, sizeof in, "%s/a/b", rootdir);
  snprintf (out, sizeof out, "%s/out/b", top);
  while (racing)
    {
      rename (in, out);
      rename (out, in);
    }
  return NULL;
}

/* "a/b/c/../../../secret" names root/secret (absent) - unless a/b is moved to T/out/b while the
 * walk stands in c: then three ".." reach T and T/secret, outside the root. */
static void
test_rename_race (void **state)
{
  int rfd = open (rootdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat secret;
  pthread_t th;
  int escaped = 0, naive_escaped = 0, opened = 0, iters = 20000;
  (void) state;

  assert_int_equal (fstat (secret_fd, &secret), 0);
  racing = 1;
  assert_int_equal (pthread_create (&th, NULL, renamer, NULL), 0);
  for (int i = 0; i < iters; i++)
    {
      struct stat st;
      int fd = ps_openat2_fallback (rfd, "a/b/c/../../../secret", O_PATH, 0, RESOLVE_IN_ROOT);
      if (fd >= 0)
        {
          opened++;
          if (fstat (fd, &st) == 0 && st.st_ino == secret.st_ino && st.st_dev == secret.st_dev)
            escaped++;
          close (fd);
        }
      /* the naive walk (openat of each component, no check), to show the race is real */
      int c = openat (rfd, "a/b/c", O_PATH | O_NOFOLLOW);
      if (c >= 0)
        {
          fd = openat (c, "../../../secret", O_PATH | O_NOFOLLOW);
          if (fd >= 0)
            {
              naive_escaped++;
              close (fd);
            }
          close (c);
        }
    }
  racing = 0;
  pthread_join (th, NULL);
  print_message ("rename race: %d walks, %d opened, %d escaped (a naive walk escaped %d times)\n", iters, opened,
                 escaped, naive_escaped);
  assert_int_equal (escaped, 0);
  assert_int_equal (opened, 0);
  close (rfd);
}

/* The last component needs no search permission of its own: as another uid, an O_PATH of a 0700
 * directory succeeds with openat2, and so must the fallback (a user namespace's root opening the
 * host's 0700 /var/log/agentsbx failed with EACCES); what lies inside stays EACCES in both. Run
 * as root only (the child drops to uid 65534). */
static void
test_search_permission (void **state)
{
  static const char *const paths[] = { "priv", "priv/", "priv/x", "a/../priv", NULL };
  char p[128];
  pid_t pid;
  int status;
  (void) state;

  if (geteuid () != 0)
    skip ();
  snprintf (p, sizeof p, "%s/priv", rootdir);
  mkdir (p, 0700);
  snprintf (p, sizeof p, "%s/priv/x", rootdir);
  close (open (p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      int cases = 0, rfd = open (rootdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (rfd < 0 || setgroups (0, NULL) < 0 || setresgid (65534, 65534, 65534) < 0
          || setresuid (65534, 65534, 65534) < 0)
        _exit (2);
      _exit (table (rfd, rootdir, paths, &cases) == 0 ? 0 : 1);
    }
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_equality_table), cmocka_unit_test (test_flags_refused),     cmocka_unit_test (test_create),
    cmocka_unit_test (test_rename_race),    cmocka_unit_test (test_search_permission),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
