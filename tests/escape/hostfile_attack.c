/* hostfile_attack.c - the syscall-level attempts of tests/escape/test_workspace_privilege.py:
 * make a file on a host-visible path setuid/setgid, a device, or give it file capabilities,
 * each by one system call (no libc wrapper in between that could refuse first). Built static by
 * the test, run inside the container: `hostfile_attack OP PATH [SRC]`; with SRC
 * the created file is filled with SRC's bytes (a copy of `id`, so the host can run it as another
 * user) - after the attempt, or before it for fchmod/fchmodat2/setcap, whose write would clear
 * what they set. Prints "OP ok" or "OP errno N" and exits 0 either way: the verdict is the host's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

struct how
{
  uint64_t flags, mode, resolve;
};

/* VFS_CAP_REVISION_2 (linux/capability.h): cap_setuid (7) permitted, effective flag set */
static const uint32_t fcaps[5] = { 0x02000001u, 1u << 7, 0, 0, 0 };

static void
fill (const char *path, const char *src)
{
  char buf[65536];
  ssize_t n;
  int in, out;

  if (!src || (in = open (src, O_RDONLY)) < 0)
    return;
  out = open (path, O_WRONLY | O_TRUNC);
  while (out >= 0 && (n = read (in, buf, sizeof buf)) > 0)
    if (write (out, buf, (size_t) n) != n)
      break;
  close (in);
  if (out >= 0)
    close (out);
}

static int
put (const char *file, const char *text)
{
  int fd = open (file, O_WRONLY);
  ssize_t n = fd < 0 ? -1 : write (fd, text, strlen (text));
  if (fd >= 0)
    close (fd);
  return n < 0 ? -1 : 0;
}

/* A nested user namespace whose root is host uid/gid 12345, mapped from outside with our
 * CAP_SETUID/CAP_SETGID: its root creates `path` (owned by 12345 on the host) and writes a file
 * capability (v3, rootid 12345) on it. -1 with errno when a step is refused. */
static long
userns_other (const char *path, const char *src)
{
  int go[2], ready[2], st = 0, e = 0;
  char proc[64], c = 0;
  pid_t pid;

  if (pipe (go) < 0 || pipe (ready) < 0)
    return -1;
  pid = fork ();
  if (pid == 0)
    {
      int fd;
      if (unshare (CLONE_NEWUSER) < 0)
        e = errno;
      if (write (ready[1], &e, sizeof e) != sizeof e || read (go[0], &c, 1) != 1 || e)
        _exit (e ? e : 100);
      if (setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0)
        _exit (errno);
      fd = open (path, O_CREAT | O_WRONLY, 0755);
      if (fd < 0)
        _exit (errno);
      fill (path, src);
      _exit (fsetxattr (fd, "security.capability", fcaps, sizeof fcaps, 0) < 0 ? errno : 0);
    }
  if (pid < 0 || read (ready[0], &e, sizeof e) != sizeof e)
    return -1;
  if (!e)
    {
      snprintf (proc, sizeof proc, "/proc/%d/uid_map", (int) pid);
      if (put (proc, "0 12345 1\n") < 0)
        e = errno;
      snprintf (proc, sizeof proc, "/proc/%d/gid_map", (int) pid);
      if (!e && put (proc, "0 12345 1\n") < 0)
        e = errno;
    }
  if (write (go[1], "x", 1) != 1 || waitpid (pid, &st, 0) < 0)
    return -1;
  if (e || !WIFEXITED (st) || WEXITSTATUS (st))
    {
      errno = e ? e : WIFEXITED (st) ? WEXITSTATUS (st) : EINTR;
      return -1;
    }
  return 0;
}

static long
attempt (const char *op, const char *path, const char *src)
{
  struct how h = { O_CREAT | O_WRONLY, 04755, 0 };
  long r = -1;

  if (strcmp (op, "openat") == 0)
    r = openat (AT_FDCWD, path, O_CREAT | O_WRONLY, 04755);
  else if (strcmp (op, "open") == 0)
    r = syscall (SYS_open, path, O_CREAT | O_WRONLY, 04755);
  else if (strcmp (op, "creat") == 0)
    r = syscall (SYS_creat, path, 04755);
  else if (strcmp (op, "openat2") == 0)
    r = syscall (SYS_openat2, AT_FDCWD, path, &h, sizeof h);
  else if (strcmp (op, "mknod-reg") == 0)
    r = mknod (path, S_IFREG | 04755, 0);
  else if (strcmp (op, "mknod-chr") == 0)
    r = mknod (path, S_IFCHR | 0666, makedev (1, 3));
  else if (strcmp (op, "mkfifo") == 0)
    r = mknod (path, S_IFIFO | 06666, 0);
  else if (strcmp (op, "io_uring") == 0)
    {
      /* IORING_OP_OPENAT takes a mode: being able to set up a ring is the finding */
      char params[120] = { 0 };
      r = syscall (SYS_io_uring_setup, 1, params);
      if (r >= 0)
        close ((int) r);
    }
#ifdef __x86_64__
  else if (strcmp (op, "chmod-int80") == 0)
    {
      /* the i386 ABI from a 64-bit process (seccomp sees AUDIT_ARCH_I386): chmod is 15 there;
       * the path must lie below 4 GiB, so it is copied to a static buffer */
      static char low[4096];
      long ret;
      if (close (open (path, O_CREAT | O_WRONLY, 0755)) < 0)
        return -1;
      snprintf (low, sizeof low, "%s", path);
      __asm__ volatile("int $0x80" : "=a"(ret) : "a"(15L), "b"(low), "c"(04755L) : "memory");
      if (ret < 0)
        errno = (int) -ret, r = -1;
      else
        r = 0;
    }
#endif
  else if (strcmp (op, "userns-setcap") == 0)
    {
      /* a nested user namespace gives every capability back (over inodes its ids map):
       * CAP_SETFCAP there writes a file capability the host honours when its root is ours */
      char uid_map[64], gid_map[64];
      int fd;
      snprintf (uid_map, sizeof uid_map, "0 %d 1\n", (int) geteuid ());
      snprintf (gid_map, sizeof gid_map, "0 %d 1\n", (int) getegid ());
      if (unshare (CLONE_NEWUSER) < 0 || put ("/proc/self/uid_map", uid_map) < 0
          || put ("/proc/self/setgroups", "deny") < 0 || put ("/proc/self/gid_map", gid_map) < 0)
        return -1;
      fd = open (path, O_CREAT | O_WRONLY, 0755);
      if (fd < 0)
        return -1;
      fill (path, src);
      r = fsetxattr (fd, "security.capability", fcaps, sizeof fcaps, 0);
      close (fd);
    }
  else if (strcmp (op, "userns-other") == 0)
    r = userns_other (path, src);
  else if (strcmp (op, "mkdir-sgid") == 0)
    r = mkdir (path, 02777) < 0 ? -1 : chmod (path, 02777);
  else if (strcmp (op, "fchmodat2") == 0 || strcmp (op, "fchmod") == 0 || strcmp (op, "setcap") == 0)
    {
      int fd = open (path, O_CREAT | O_WRONLY, 0755);
      if (fd < 0)
        return -1;
      fill (path, src); /* before: a write drops security.capability (and S_ISUID without CAP_FSETID) */
      if (strcmp (op, "fchmodat2") == 0)
        r = syscall (SYS_fchmodat2, AT_FDCWD, path, 04755, 0);
      else if (strcmp (op, "fchmod") == 0)
        r = fchmod (fd, 06755);
      else
        r = fsetxattr (fd, "security.capability", fcaps, sizeof fcaps, 0);
      close (fd);
    }
  else
    {
      fprintf (stderr, "unknown op %s\n", op);
      _exit (2);
    }
  if (r >= 0 && strncmp (op, "open", 4) == 0)
    close ((int) r);
  if (r >= 0 && strcmp (op, "creat") == 0)
    close ((int) r);
  return r;
}

int
main (int argc, char **argv)
{
  if (argc < 3)
    return 2;
  const char *src = argc > 3 ? argv[3] : NULL;
  bool filled = strncmp (argv[1], "fchmod", 6) == 0 || strstr (argv[1], "setcap") != NULL;

  if (attempt (argv[1], argv[2], src) < 0)
    printf ("%s errno %d\n", argv[1], errno);
  else
    printf ("%s ok\n", argv[1]);
  if (!filled)
    fill (argv[2], src);
  return 0;
}
