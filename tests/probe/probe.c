/*
 * probe: a small static program copied into every integration-test rootfs as /probe.
 *
 * It reports what the kernel shows the process from the inside (ids, capabilities, seccomp,
 * namespaces, mounts, rlimits, fds, environment...) as one JSON object, and runs a few active
 * checks (write a file, stat a path, read a sysctl) so tests assert on what the container can
 * observe rather than on what the runtime claims. It links statically so it needs nothing from
 * the rootfs, and writes JSON by hand so it depends on no library.
 *
 * Usage: probe report | write PATH [DATA] | openw PATH | mapx PATH | stat PATH | readlink PATH | exit N |
 *        sleep SEC | ls DIR | catfile PATH | sysctl KEY | clock | kill PID SIG |
 *        syscall NAME|NR [ARG...] | int80 NR [ARG...] | escape NAME | exewatch SEC |
 *        read PATH | link OLD NEW | rename OLD NEW | symlink TARGET NEW | mkdir PATH | exec PATH [ARG...] |
 *        forks N
 * Active checks print one JSON object; a failed syscall is reported by errno name and makes the
 * probe exit 1, success exits 0.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *
errno_name (int e)
{
  switch (e)
    {
/* clang-format off */
#define E(x) case x: return #x;
      E (EPERM) E (ENOENT) E (ESRCH) E (EINTR) E (EIO) E (ENXIO) E (E2BIG) E (ENOEXEC) E (EBADF) E (ECHILD)
      E (EAGAIN) E (ENOMEM) E (EACCES) E (EFAULT) E (EBUSY) E (EEXIST) E (EXDEV) E (ENODEV) E (ENOTDIR)
      E (EISDIR) E (EINVAL) E (ENFILE) E (EMFILE) E (ENOTTY) E (ETXTBSY) E (EFBIG) E (ENOSPC) E (ESPIPE)
      E (EROFS) E (EMLINK) E (EPIPE) E (ERANGE) E (ENAMETOOLONG) E (ENOSYS) E (ENOTEMPTY) E (ELOOP)
      E (EOPNOTSUPP) E (EDQUOT) E (EOVERFLOW) E (ENOTCONN) E (ECONNREFUSED) E (EADDRINUSE) E (ENETUNREACH)
      E (EAFNOSUPPORT)
#undef E
    default: return "EUNKNOWN";
    }
}
/* clang-format on */

/* ---- minimal JSON writer ---- */

static int need_comma;

static void
jstr (const char *s)
{
  putchar ('"');
  for (const unsigned char *p = (const unsigned char *) s; *p; p++)
    {
      switch (*p)
        {
        case '"': fputs ("\\\"", stdout); break;
        case '\\': fputs ("\\\\", stdout); break;
        case '\n': fputs ("\\n", stdout); break;
        case '\r': fputs ("\\r", stdout); break;
        case '\t': fputs ("\\t", stdout); break;
        default:
          /* Control bytes and non-ASCII are escaped so the output is always valid JSON, even
           * for names that are not UTF-8. */
          if (*p < 0x20 || *p >= 0x7f)
            printf ("\\u%04x", *p);
          else
            putchar (*p);
        }
    }
  putchar ('"');
}

static void
sep (void)
{
  if (need_comma)
    putchar (',');
  need_comma = 1;
}

static void
key (const char *k)
{
  sep ();
  jstr (k);
  putchar (':');
  need_comma = 0;
}

static void
obj_open (void)
{
  sep ();
  putchar ('{');
  need_comma = 0;
}
static void
obj_close (void)
{
  putchar ('}');
  need_comma = 1;
}
static void
arr_open (void)
{
  sep ();
  putchar ('[');
  need_comma = 0;
}
static void
arr_close (void)
{
  putchar (']');
  need_comma = 1;
}
static void
vstr (const char *s)
{
  sep ();
  if (s)
    jstr (s);
  else
    fputs ("null", stdout);
}
static void
vint (long long v)
{
  sep ();
  printf ("%lld", v);
}
static void
vuint (unsigned long long v)
{
  sep ();
  printf ("%llu", v);
}
static void
vbool (int b)
{
  sep ();
  fputs (b ? "true" : "false", stdout);
}
static void
kstr (const char *k, const char *s)
{
  key (k);
  vstr (s);
}
static void
kint (const char *k, long long v)
{
  key (k);
  vint (v);
}

/* ---- helpers ---- */

/* Reads a whole small file; returns a malloc'd NUL-terminated buffer or NULL with errno set. */
static char *
read_file (const char *path, size_t *len)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc (cap);
  for (;;)
    {
      if (n + 1 >= cap)
        buf = realloc (buf, cap *= 2);
      ssize_t r = read (fd, buf + n, cap - n - 1);
      if (r < 0)
        {
          int e = errno;
          close (fd);
          free (buf);
          errno = e;
          return NULL;
        }
      if (r == 0)
        break;
      n += r;
    }
  close (fd);
  buf[n] = 0;
  if (len)
    *len = n;
  return buf;
}

static void
chomp (char *s)
{
  size_t n = strlen (s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
    s[--n] = 0;
}

/* Decodes the \ooo escapes the kernel uses in mountinfo fields, in place. */
static void
unescape_octal (char *s)
{
  char *w = s;
  for (char *r = s; *r; r++)
    {
      if (r[0] == '\\' && isdigit ((unsigned char) r[1]) && isdigit ((unsigned char) r[2])
          && isdigit ((unsigned char) r[3]))
        {
          *w++ = (char) ((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
          r += 3;
        }
      else
        {
          *w++ = *r;
        }
    }
  *w = 0;
}

static void
report_status (void)
{
  static const char *keys[] = { "Uid",    "Gid",        "Groups",  "CapInh", "CapPrm",          "CapEff", "CapBnd",
                                "CapAmb", "NoNewPrivs", "Seccomp", "Umask",  "Seccomp_filters", NULL };
  char *buf = read_file ("/proc/self/status", NULL);
  key ("status");
  obj_open ();
  for (char *line = buf ? strtok (buf, "\n") : NULL; line; line = strtok (NULL, "\n"))
    {
      char *colon = strchr (line, ':');
      if (!colon)
        continue;
      *colon = 0;
      for (int i = 0; keys[i]; i++)
        {
          if (strcmp (line, keys[i]) == 0)
            {
              char *v = colon + 1;
              while (*v == '\t' || *v == ' ')
                v++;
              chomp (v);
              kstr (line, v);
            }
        }
    }
  obj_close ();
  free (buf);
}

static void
report_ids (void)
{
  gid_t groups[NGROUPS_MAX];
  int n = getgroups (NGROUPS_MAX, groups);
  kint ("uid", getuid ());
  kint ("gid", getgid ());
  kint ("euid", geteuid ());
  kint ("egid", getegid ());
  key ("groups");
  arr_open ();
  for (int i = 0; i < n; i++)
    vint (groups[i]);
  arr_close ();
}

static void
report_namespaces (void)
{
  static const char *ns[] = { "cgroup", "ipc", "mnt", "net", "pid", "pid_for_children", "time", "time_for_children",
                              "user",   "uts", NULL };
  key ("namespaces");
  obj_open ();
  for (int i = 0; ns[i]; i++)
    {
      char path[64], target[256];
      snprintf (path, sizeof (path), "/proc/self/ns/%s", ns[i]);
      ssize_t r = readlink (path, target, sizeof (target) - 1);
      if (r < 0)
        continue;
      target[r] = 0;
      kstr (ns[i], target);
    }
  obj_close ();
}

static void
report_mounts (void)
{
  char *buf = read_file ("/proc/self/mountinfo", NULL);
  key ("mounts");
  arr_open ();
  for (char *save = NULL, *line = buf ? strtok_r (buf, "\n", &save) : NULL; line; line = strtok_r (NULL, "\n", &save))
    {
      char *f[64];
      int nf = 0;
      for (char *s2 = NULL, *t = strtok_r (line, " ", &s2); t && nf < 64; t = strtok_r (NULL, " ", &s2))
        f[nf++] = t;
      int dash = -1;
      for (int i = 6; i < nf; i++)
        if (strcmp (f[i], "-") == 0)
          {
            dash = i;
            break;
          }
      if (nf < 6 || dash < 0 || dash + 3 > nf)
        continue;
      unescape_octal (f[3]);
      unescape_octal (f[4]);
      unescape_octal (f[dash + 2]);
      obj_open ();
      kstr ("root", f[3]);
      kstr ("mountpoint", f[4]);
      kstr ("options", f[5]);
      key ("optional");
      arr_open ();
      for (int i = 6; i < dash; i++)
        vstr (f[i]);
      arr_close ();
      kstr ("fstype", f[dash + 1]);
      kstr ("source", f[dash + 2]);
      kstr ("super_options", dash + 3 < nf ? f[dash + 3] : "");
      obj_close ();
    }
  arr_close ();
  free (buf);
}

static void
report_rlimits (void)
{
  static const struct
  {
    const char *name;
    int res;
  } rl[] = {
    { "RLIMIT_CPU", RLIMIT_CPU },           { "RLIMIT_FSIZE", RLIMIT_FSIZE },
    { "RLIMIT_DATA", RLIMIT_DATA },         { "RLIMIT_STACK", RLIMIT_STACK },
    { "RLIMIT_CORE", RLIMIT_CORE },         { "RLIMIT_RSS", RLIMIT_RSS },
    { "RLIMIT_NPROC", RLIMIT_NPROC },       { "RLIMIT_NOFILE", RLIMIT_NOFILE },
    { "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK },   { "RLIMIT_AS", RLIMIT_AS },
    { "RLIMIT_LOCKS", RLIMIT_LOCKS },       { "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING },
    { "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE }, { "RLIMIT_NICE", RLIMIT_NICE },
    { "RLIMIT_RTPRIO", RLIMIT_RTPRIO },     { "RLIMIT_RTTIME", RLIMIT_RTTIME },
  };
  key ("rlimits");
  obj_open ();
  for (size_t i = 0; i < sizeof (rl) / sizeof (rl[0]); i++)
    {
      struct rlimit r;
      if (getrlimit (rl[i].res, &r) < 0)
        continue;
      key (rl[i].name);
      obj_open ();
      key ("soft");
      vuint (r.rlim_cur);
      key ("hard");
      vuint (r.rlim_max);
      obj_close ();
    }
  obj_close ();
}

static void
report_fds (void)
{
  DIR *d = opendir ("/proc/self/fd");
  key ("fds");
  obj_open ();
  if (d)
    {
      int self = dirfd (d);
      struct dirent *de;
      while ((de = readdir (d)))
        {
          if (de->d_name[0] == '.' || atoi (de->d_name) == self)
            continue;
          char path[300], target[PATH_MAX];
          snprintf (path, sizeof (path), "/proc/self/fd/%s", de->d_name);
          ssize_t r = readlink (path, target, sizeof (target) - 1);
          target[r < 0 ? 0 : r] = 0;
          kstr (de->d_name, r < 0 ? errno_name (errno) : target);
        }
      closedir (d);
    }
  obj_close ();
}

static void
report_clocks (void)
{
  struct timespec m, b;
  clock_gettime (CLOCK_MONOTONIC, &m);
  clock_gettime (CLOCK_BOOTTIME, &b);
  key ("clocks");
  obj_open ();
  key ("monotonic");
  sep ();
  printf ("%lld.%09ld", (long long) m.tv_sec, m.tv_nsec);
  key ("boottime");
  sep ();
  printf ("%lld.%09ld", (long long) b.tv_sec, b.tv_nsec);
  obj_close ();
}

static void
kfile (const char *k, const char *path)
{
  char *s = read_file (path, NULL);
  if (s)
    chomp (s);
  kstr (k, s);
  free (s);
}

static int
cmd_report (void)
{
  struct utsname u;
  char cwd[PATH_MAX];

  uname (&u);
  obj_open ();
  report_ids ();
  report_status ();
  kstr ("cwd", getcwd (cwd, sizeof (cwd)) ? cwd : NULL);
  kstr ("hostname", u.nodename);
  kstr ("domainname", u.domainname);
  kint ("pid", getpid ());
  kint ("ppid", getppid ());
  kint ("pgrp", getpgrp ());
  kint ("sid", getsid (0));
  report_namespaces ();
  report_mounts ();
  report_rlimits ();
  report_fds ();
  key ("env");
  arr_open ();
  for (char **e = environ; e && *e; e++)
    vstr (*e);
  arr_close ();
  kfile ("oom_score_adj", "/proc/self/oom_score_adj");
  kfile ("cgroup", "/proc/self/cgroup");
  kfile ("uptime", "/proc/uptime");
  report_clocks ();
  key ("tty");
  obj_open ();
  for (int fd = 0; fd < 3; fd++)
    {
      char k[16];
      snprintf (k, sizeof (k), "%d", fd);
      key (k);
      obj_open ();
      key ("isatty");
      vbool (isatty (fd));
      char *n = ttyname (fd);
      kstr ("ttyname", n);
      obj_close ();
    }
  obj_close ();
  obj_close ();
  putchar ('\n');
  return 0;
}

static int
result (const char *what, const char *path, int rc)
{
  int e = errno;
  obj_open ();
  kstr ("op", what);
  kstr ("path", path);
  kstr ("result", rc < 0 ? errno_name (e) : "ok");
  obj_close ();
  putchar ('\n');
  return rc < 0 ? 1 : 0;
}

static int
cmd_write (const char *path, const char *data)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int rc = fd;
  if (fd >= 0)
    {
      ssize_t w = write (fd, data, strlen (data));
      rc = w < 0 ? -1 : 0;
      int e = errno;
      close (fd);
      errno = e;
    }
  return result ("write", path, rc);
}

/* Maps the first page of a file PROT_READ|PROT_EXEC (what ld.so and dlopen do with a library's
 * code): refused with EPERM on a noexec mount (mm/mmap.c do_mmap, path_noexec). */
static int
cmd_mapx (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  int rc = fd;
  if (fd >= 0)
    {
      void *p = mmap (NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
      rc = p == MAP_FAILED ? -1 : 0;
      int e = errno;
      if (p != MAP_FAILED)
        munmap (p, 4096);
      close (fd);
      errno = e;
    }
  return result ("mapx", path, rc);
}

/* Opens for writing without creating, truncating or writing: checks that a path cannot be
 * opened writable (e.g. a host binary) without ever modifying it. */
static int
cmd_openw (const char *path)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  int e = errno;
  if (fd >= 0)
    close (fd);
  errno = e;
  return result ("openw", path, fd);
}

static int
cmd_stat (const char *path)
{
  struct stat st;
  if (lstat (path, &st) < 0)
    return result ("stat", path, -1);
  const char *type = S_ISREG (st.st_mode)    ? "file"
                     : S_ISDIR (st.st_mode)  ? "dir"
                     : S_ISLNK (st.st_mode)  ? "symlink"
                     : S_ISCHR (st.st_mode)  ? "char"
                     : S_ISBLK (st.st_mode)  ? "block"
                     : S_ISFIFO (st.st_mode) ? "fifo"
                     : S_ISSOCK (st.st_mode) ? "socket"
                                             : "unknown";
  obj_open ();
  kstr ("op", "stat");
  kstr ("path", path);
  kstr ("result", "ok");
  kstr ("type", type);
  kint ("mode", st.st_mode & 07777);
  kint ("uid", st.st_uid);
  kint ("gid", st.st_gid);
  kint ("size", st.st_size);
  kint ("major", major (st.st_rdev));
  kint ("minor", minor (st.st_rdev));
  kint ("dev", st.st_dev);
  kint ("ino", st.st_ino);
  obj_close ();
  putchar ('\n');
  return 0;
}

static int
cmd_readlink (const char *path)
{
  char target[PATH_MAX];
  ssize_t r = readlink (path, target, sizeof (target) - 1);
  if (r < 0)
    return result ("readlink", path, -1);
  target[r] = 0;
  obj_open ();
  kstr ("op", "readlink");
  kstr ("path", path);
  kstr ("result", "ok");
  kstr ("target", target);
  obj_close ();
  putchar ('\n');
  return 0;
}

static int
cmd_ls (const char *path)
{
  DIR *d = opendir (path);
  if (!d)
    return result ("ls", path, -1);
  obj_open ();
  kstr ("op", "ls");
  kstr ("path", path);
  kstr ("result", "ok");
  key ("entries");
  arr_open ();
  struct dirent *de;
  while ((de = readdir (d)))
    if (strcmp (de->d_name, ".") && strcmp (de->d_name, ".."))
      vstr (de->d_name);
  arr_close ();
  obj_close ();
  putchar ('\n');
  closedir (d);
  return 0;
}

static int
cmd_catfile (const char *path)
{
  size_t len;
  char *s = read_file (path, &len);
  if (!s)
    {
      fprintf (stderr, "probe: %s: %s\n", path, errno_name (errno));
      return 1;
    }
  fwrite (s, 1, len, stdout);
  free (s);
  return 0;
}

static int
cmd_sysctl (const char *k)
{
  char path[PATH_MAX] = "/proc/sys/";
  size_t off = strlen (path);
  for (const char *p = k; *p && off < sizeof (path) - 1; p++)
    path[off++] = *p == '.' ? '/' : *p;
  path[off] = 0;
  char *s = read_file (path, NULL);
  if (!s)
    return result ("sysctl", k, -1);
  chomp (s);
  obj_open ();
  kstr ("op", "sysctl");
  kstr ("path", k);
  kstr ("result", "ok");
  kstr ("value", s);
  obj_close ();
  putchar ('\n');
  free (s);
  return 0;
}

static void
on_signal (int sig)
{
  /* pid 1 of a pid namespace ignores default-action signals, so the probe handles the usual
   * termination signals itself and exits as a shell would (128 + signal). */
  char msg[32];
  int n = snprintf (msg, sizeof (msg), "probe: signal %d\n", sig);
  if (write (1, msg, n) < 0)
    {
      /* nothing to do: exiting anyway */
    }
  _exit (128 + sig);
}

static int
cmd_sleep (const char *secs)
{
  static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT };
  for (size_t i = 0; i < sizeof (sigs) / sizeof (sigs[0]); i++)
    signal (sigs[i], on_signal);
  struct timespec ts = { .tv_sec = atol (secs), .tv_nsec = 0 };
  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
  return 0;
}

static int
cmd_clock (void)
{
  obj_open ();
  report_clocks ();
  kfile ("uptime", "/proc/uptime");
  obj_close ();
  putchar ('\n');
  return 0;
}

/* ---- seccomp checks (added for tests/integration/test_seccomp.py) ---- */

static const struct
{
  const char *name;
  long nr;
} syscall_names[] = {
  { "getpid", SYS_getpid },
  { "getppid", SYS_getppid },
  { "mkdir", SYS_mkdir },
  { "mkdirat", SYS_mkdirat },
  { "umask", SYS_umask },
  { "personality", SYS_personality },
  { "unshare", SYS_unshare },
  { "setns", SYS_setns },
  { "sethostname", SYS_sethostname },
  { "chdir", SYS_chdir },
  { "socket", SYS_socket },
  { "getcpu", SYS_getcpu },
  { "kcmp", SYS_kcmp },
  { "ptrace", SYS_ptrace },
  { "acct", SYS_acct },
  { "keyctl", SYS_keyctl },
  { "clone3", 435 },
  { "getuid", SYS_getuid },
  { "getgid", SYS_getgid },
  { "dup", SYS_dup },
  { "close", SYS_close },
  { "getpriority", SYS_getpriority },
  { "mount", SYS_mount },
};

static long
syscall_nr (const char *name)
{
  for (size_t i = 0; i < sizeof (syscall_names) / sizeof (syscall_names[0]); i++)
    if (strcmp (syscall_names[i].name, name) == 0)
      return syscall_names[i].nr;
  char *end;
  long nr = strtol (name, &end, 0);
  return *end || end == name ? -1 : nr;
}

/* An argument that parses as an integer is passed as one, anything else as a string pointer. */
static long
syscall_arg (const char *a)
{
  char *end;
  long v = strtol (a, &end, 0);
  return *end || end == a ? (long) a : v;
}

/* syscall NAME|NR [ARG...]: one raw syscall in this process (so a kill action kills the probe);
 * prints {"op":"syscall","name","result":"ok"|errno name,"errno","ret"}. */
static int
cmd_syscall (int argc, char **argv)
{
  long a[6] = { 0 };
  long nr = syscall_nr (argv[0]);
  if (nr < 0)
    {
      fprintf (stderr, "probe: unknown syscall %s\n", argv[0]);
      return 2;
    }
  for (int i = 1; i < argc && i <= 6; i++)
    a[i - 1] = syscall_arg (argv[i]);
  fflush (stdout);
  errno = 0;
  long r = syscall (nr, a[0], a[1], a[2], a[3], a[4], a[5]);
  int e = errno;
  obj_open ();
  kstr ("op", "syscall");
  kstr ("name", argv[0]);
  kstr ("result", r < 0 ? errno_name (e) : "ok");
  kint ("errno", r < 0 ? e : 0);
  kint ("ret", r);
  obj_close ();
  putchar ('\n');
  return r < 0 ? 1 : 0;
}

/* int80 NR [ARG...]: a 32-bit (i386 ABI) syscall through int $0x80, in a child. Reports
 * "result": "ok"/errno name, or "signal" with the signal that ended the child: SIGSEGV means
 * the kernel has no IA32 emulation (the call cannot be made on this machine at all), SIGSYS a
 * seccomp kill. */
static int
cmd_int80 (int argc, char **argv)
{
  long a[3] = { 0 };
  long nr = strtol (argv[0], NULL, 0);
  int fds[2];
  for (int i = 1; i < argc && i <= 3; i++)
    a[i - 1] = strtol (argv[i], NULL, 0);
  if (pipe (fds) < 0)
    return 1;
  fflush (stdout);
  pid_t pid = fork ();
  if (pid == 0)
    {
      long r;
#if defined(__x86_64__)
      __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a[0]), "c"(a[1]), "d"(a[2]) : "memory");
#else
      r = -ENOSYS;
#endif
      if (write (fds[1], &r, sizeof (r)) < 0)
        _exit (3);
      _exit (0);
    }
  close (fds[1]);
  long r = 0;
  ssize_t got = read (fds[0], &r, sizeof (r));
  int st = 0;
  waitpid (pid, &st, 0);
  obj_open ();
  kstr ("op", "int80");
  kint ("nr", nr);
  if (got == (ssize_t) sizeof (r))
    {
      kstr ("result", r < 0 && r > -4096 ? errno_name ((int) -r) : "ok");
      kint ("ret", r);
    }
  else
    {
      kstr ("result", "signal");
      kint ("signal", WIFSIGNALED (st) ? WTERMSIG (st) : 0);
    }
  obj_close ();
  putchar ('\n');
  return got == (ssize_t) sizeof (r) && r >= 0 ? 0 : 1;
}

/* ---- path operations for the policy tests (added for tests/integration/test_policy_*) ---- */

/* read PATH: {"op":"read","path","result","data"} with the first 256 bytes of the file. */
static int
cmd_read (const char *path)
{
  size_t len;
  char *s = read_file (path, &len);
  if (!s)
    return result ("read", path, -1);
  if (len > 256)
    s[256] = 0;
  obj_open ();
  kstr ("op", "read");
  kstr ("path", path);
  kstr ("result", "ok");
  kstr ("data", s);
  obj_close ();
  putchar ('\n');
  free (s);
  return 0;
}

/* link OLD NEW | rename OLD NEW | symlink TARGET NEW | mkdir PATH | exec PATH [ARG...]:
 * one syscall each, reported as {"op","path","result"} (path = the second name; exec reports
 * only when execve failed, else the program runs). */
static int
cmd_pathop (const char *op, int argc, char **argv)
{
  int rc;
  if (strcmp (op, "link") == 0)
    rc = link (argv[0], argv[1]);
  else if (strcmp (op, "rename") == 0)
    rc = rename (argv[0], argv[1]);
  else if (strcmp (op, "symlink") == 0)
    rc = symlink (argv[0], argv[1]);
  else if (strcmp (op, "mkdir") == 0)
    return result (op, argv[0], mkdir (argv[0], 0755));
  else if (strcmp (op, "exec") == 0)
    {
      fflush (stdout);
      execv (argv[0], argv);
      return result (op, argv[0], -1);
    }
  else
    return 2;
  (void) argc;
  return result (op, argv[1], rc);
}

/* forks N: fork N children that wait in pause(), then kill them all. Prints {"op":"forks",
 * "ok":children made,"result":"ok"|errno name of the first fork that failed}. */
static int
cmd_forks (const char *count)
{
  int n = atoi (count), made = 0, e = 0;
  pid_t kids[4096];
  for (; made < n && made < 4096; made++)
    {
      pid_t pid = fork ();
      if (pid < 0)
        {
          e = errno;
          break;
        }
      if (pid == 0)
        {
          pause ();
          _exit (0);
        }
      kids[made] = pid;
    }
  for (int i = 0; i < made; i++)
    {
      kill (kids[i], SIGKILL);
      waitpid (kids[i], NULL, 0);
    }
  obj_open ();
  kstr ("op", "forks");
  kint ("ok", made);
  kstr ("result", e ? errno_name (e) : "ok");
  obj_close ();
  putchar ('\n');
  return e ? 1 : 0;
}

/* ---- escape attempts (added for tests/escape) ---- */

/* escape NAME: one attempt a sandbox must refuse, made the way hostile code would make it.
 * NAME: io_uring (io_uring_setup), ptrace (PTRACE_ATTACH to a child of ours: allowed by the
 * kernel without CAP_SYS_PTRACE, so only a filter stops it), userns (unshare CLONE_NEWUSER),
 * keyctl (join a named session keyring), add_key, mount (tmpfs on /tmp), fsopen (new mount API).
 * Added for the policy tests: clone3 (with CLONE_NEWUSER), tiocsti / tioclinux (on a pty we
 * opened), packet / rawip (raw sockets), ptrace_sibling (PTRACE_ATTACH to $SIBLING), bpf / perf /
 * kmod (calls whose reachable answer is EINVAL / EFAULT / EBADF-or-ENOSYS, never a success).
 * Prints {"op":"escape","name","result":"ok"|errno name,"errno"}; exit 0 when it worked. */
static int
cmd_escape (const char *name)
{
  long r = -1;
  errno = 0;
  if (strcmp (name, "io_uring") == 0)
    {
      unsigned char params[120];
      memset (params, 0, sizeof (params));
      r = syscall (425 /* io_uring_setup */, 4, params);
    }
  else if (strcmp (name, "ptrace") == 0)
    {
      pid_t child = fork ();
      if (child == 0)
        {
          pause ();
          _exit (0);
        }
      r = syscall (SYS_ptrace, 16 /* PTRACE_ATTACH */, child, 0, 0);
      int e = errno;
      kill (child, SIGKILL);
      waitpid (child, NULL, 0);
      errno = e;
    }
  else if (strcmp (name, "userns") == 0)
    {
      r = syscall (SYS_unshare, 0x10000000 /* CLONE_NEWUSER */);
    }
  else if (strcmp (name, "keyctl") == 0)
    {
      r = syscall (SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, "asbx-escape");
    }
  else if (strcmp (name, "add_key") == 0)
    {
      r = syscall (SYS_add_key, "user", "asbx-escape", "x", 1, -3 /* session keyring */);
    }
  else if (strcmp (name, "mount") == 0)
    {
      r = syscall (SYS_mount, "none", "/tmp", "tmpfs", 0, NULL);
    }
  else if (strcmp (name, "fsopen") == 0)
    {
      r = syscall (430 /* fsopen */, "tmpfs", 0);
    }
  else if (strcmp (name, "clone3") == 0)
    {
      /* clone3 with CLONE_NEWUSER (a struct clone_args of 88 bytes, flags first) */
      unsigned long long args[11];
      memset (args, 0, sizeof (args));
      args[0] = 0x10000000;
      args[4] = SIGCHLD;
      fflush (stdout);
      r = syscall (435 /* clone3 */, args, sizeof (args));
      if (r == 0)
        _exit (0);
      if (r > 0)
        waitpid (r, NULL, 0);
    }
  else if (strcmp (name, "tiocsti") == 0 || strcmp (name, "tioclinux") == 0)
    {
      /* inject a byte into a pty we opened (TIOCSTI), or TIOCLINUX subcode 6 on it */
      int m = open ("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
      char c = strcmp (name, "tiocsti") == 0 ? 'x' : 6;
      if (m >= 0)
        {
          int unlock = 0;
          ioctl (m, TIOCSPTLCK, &unlock);
          r = ioctl (m, strcmp (name, "tiocsti") == 0 ? TIOCSTI : TIOCLINUX, &c);
          int e = errno;
          close (m);
          errno = e;
        }
    }
  else if (strcmp (name, "packet") == 0)
    {
      r = socket (17 /* AF_PACKET */, SOCK_RAW, 0);
    }
  else if (strcmp (name, "rawip") == 0)
    {
      r = socket (AF_INET, SOCK_RAW, IPPROTO_ICMP);
    }
  else if (strcmp (name, "ptrace_sibling") == 0)
    {
      /* PTRACE_ATTACH to a process that is not our descendant: the parent's other child */
      pid_t sib = getenv ("SIBLING") ? atoi (getenv ("SIBLING")) : 0;
      r = syscall (SYS_ptrace, 16 /* PTRACE_ATTACH */, sib, 0, 0);
      if (r == 0)
        syscall (SYS_ptrace, 17 /* PTRACE_DETACH */, sib, 0, 0);
    }
  else if (strcmp (name, "bpf") == 0)
    {
      r = syscall (SYS_bpf, 999, NULL, 0); /* unknown command: EINVAL when bpf is reachable */
    }
  else if (strcmp (name, "perf") == 0)
    {
      r = syscall (SYS_perf_event_open, NULL, 0, -1, -1, 0); /* EFAULT when reachable */
    }
  else if (strcmp (name, "kmod") == 0)
    {
      r = syscall (SYS_finit_module, -1, "", 0); /* EBADF when reachable */
    }
  else
    {
      fprintf (stderr, "probe: unknown escape %s\n", name);
      return 2;
    }
  int e = errno;
  obj_open ();
  kstr ("op", "escape");
  kstr ("name", name);
  kstr ("result", r < 0 ? errno_name (e) : "ok");
  kint ("errno", r < 0 ? e : 0);
  obj_close ();
  putchar ('\n');
  return r < 0 ? 1 : 0;
}

/* exewatch SEC: for SEC seconds, watch every other process of the pid namespace, hold its
 * /proc/PID/exe with O_PATH, and keep trying to reopen that for writing through
 * /proc/self/fd/N -- also after the process exited, when the kernel no longer refuses with
 * ETXTBSY (the CVE-2019-5736 mechanism). A reopen that works is proved writable by writing
 * back the byte already at offset 0 (content unchanged). Prints {"op":"exewatch","seen",
 * "exes":[names],"writable":[names]}; exit 0. */
#define WATCH_MAX 512
static int
cmd_exewatch (const char *secs)
{
  static struct
  {
    pid_t pid;
    int fd;
    int done;
    char exe[256];
  } w[WATCH_MAX];
  int n = 0, nwritable = 0;
  static char writable[WATCH_MAX][256];
  struct timespec start, now;
  clock_gettime (CLOCK_MONOTONIC, &start);
  do
    {
      DIR *d = opendir ("/proc");
      struct dirent *de;
      while (d && (de = readdir (d)) != NULL && n < WATCH_MAX)
        {
          pid_t pid = atoi (de->d_name);
          int known = 0;
          if (pid <= 0 || pid == getpid ())
            continue;
          for (int i = 0; i < n && !known; i++)
            known = w[i].pid == pid;
          if (known)
            continue;
          char path[64];
          snprintf (path, sizeof (path), "/proc/%d/exe", pid);
          int fd = open (path, O_PATH | O_CLOEXEC);
          if (fd < 0)
            continue;
          w[n].pid = pid;
          w[n].fd = fd;
          w[n].done = 0;
          ssize_t l = readlink (path, w[n].exe, sizeof (w[n].exe) - 1);
          w[n].exe[l > 0 ? l : 0] = 0;
          n++;
        }
      if (d)
        closedir (d);
      for (int i = 0; i < n; i++)
        {
          if (w[i].done)
            continue;
          char path[64];
          unsigned char b;
          snprintf (path, sizeof (path), "/proc/self/fd/%d", w[i].fd);
          int fd = open (path, O_RDWR | O_CLOEXEC);
          if (fd < 0)
            continue;
          if (pread (fd, &b, 1, 0) == 1 && pwrite (fd, &b, 1, 0) == 1)
            {
              snprintf (writable[nwritable++], 256, "%s", w[i].exe);
              w[i].done = 1;
            }
          close (fd);
        }
      clock_gettime (CLOCK_MONOTONIC, &now);
    }
  while (now.tv_sec - start.tv_sec < atol (secs));
  obj_open ();
  kstr ("op", "exewatch");
  kint ("seen", n);
  key ("exes");
  arr_open ();
  for (int i = 0; i < n; i++)
    vstr (w[i].exe);
  arr_close ();
  key ("writable");
  arr_open ();
  for (int i = 0; i < nwritable; i++)
    vstr (writable[i]);
  arr_close ();
  obj_close ();
  putchar ('\n');
  return 0;
}

static int usage (void);

/* unix MODE PATH [CWD]: reach a pathname unix socket; prints "unix MODE ok" or "unix MODE errno=N".
 * MODE: stream, seqpacket (connect), dgram-sendto, dgram-sendmsg, dgram-connect (connect + send),
 * pair-sendto (a socketpair(SOCK_DGRAM) end sendto PATH), raw-sendto (SOCK_RAW, which af_unix
 * makes a datagram socket). CWD: chdir there first (for relative paths). PATH "@name": the abstract
 * name "\0name". */
static int
cmd_unix (const char *mode, const char *path, const char *cwd)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  socklen_t len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + strlen (path));
  char msg[] = "probe-datagram";
  int fd = -1, sv[2], r = -1;

  if (strlen (path) >= sizeof a.sun_path)
    len = sizeof a; /* truncated on purpose: the kernel's own answer */
  memcpy (a.sun_path, path, strlen (path) < sizeof a.sun_path ? strlen (path) : sizeof a.sun_path);
  if (path[0] == '@')
    a.sun_path[0] = '\0';
  if (cwd && chdir (cwd) < 0)
    {
      printf ("unix %s chdir errno=%d\n", mode, errno);
      return 0;
    }
  if (strcmp (mode, "stream") == 0 || strcmp (mode, "seqpacket") == 0)
    {
      fd = socket (AF_UNIX, mode[0] == 's' && mode[1] == 't' ? SOCK_STREAM : SOCK_SEQPACKET, 0);
      r = fd < 0 ? -1 : connect (fd, (struct sockaddr *) &a, len);
    }
  else if (strcmp (mode, "dgram-sendto") == 0 || strcmp (mode, "raw-sendto") == 0)
    {
      fd = socket (AF_UNIX, mode[0] == 'r' ? SOCK_RAW : SOCK_DGRAM, 0);
      r = fd < 0 ? -1 : (int) sendto (fd, msg, sizeof msg, 0, (struct sockaddr *) &a, len);
    }
  else if (strcmp (mode, "dgram-sendmsg") == 0)
    {
      struct iovec iov = { msg, sizeof msg };
      struct msghdr mh = { .msg_name = &a, .msg_namelen = len, .msg_iov = &iov, .msg_iovlen = 1 };
      fd = socket (AF_UNIX, SOCK_DGRAM, 0);
      r = fd < 0 ? -1 : (int) sendmsg (fd, &mh, 0);
    }
  else if (strcmp (mode, "dgram-connect") == 0)
    {
      fd = socket (AF_UNIX, SOCK_DGRAM, 0);
      r = fd < 0 ? -1 : connect (fd, (struct sockaddr *) &a, len);
      if (r == 0)
        r = (int) send (fd, msg, sizeof msg, 0);
    }
  else if (strcmp (mode, "pair-sendto") == 0)
    {
      r = socketpair (AF_UNIX, SOCK_DGRAM, 0, sv);
      if (r == 0)
        r = (int) sendto (sv[0], msg, sizeof msg, 0, (struct sockaddr *) &a, len);
    }
  else
    return usage ();
  if (r < 0)
    printf ("unix %s errno=%d\n", mode, errno);
  else
    printf ("unix %s ok\n", mode);
  return 0;
}

/* unixrace ALLOWED DENIED N: N stream connects whose address a second process (sharing the
 * address buffer's memory) flips between ALLOWED and DENIED all the time - a checker that
 * reads the address and then lets the kernel re-read it loses this race. Prints
 * "unixrace ok=K refused=R". */
static int
cmd_unixrace (const char *allowed, const char *denied, const char *n_s)
{
  struct sockaddr_un *a = mmap (NULL, sizeof *a, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int n = atoi (n_s), ok = 0, refused = 0;
  if (a == MAP_FAILED || strlen (allowed) >= sizeof a->sun_path || strlen (denied) >= sizeof a->sun_path)
    return 2;
  a->sun_family = AF_UNIX;
  strcpy (a->sun_path, allowed);
  /* the allowed name is ours: a listener the won races land on */
  struct sockaddr_un la = { .sun_family = AF_UNIX };
  strcpy (la.sun_path, allowed);
  unlink (allowed);
  int lfd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (lfd < 0 || bind (lfd, (struct sockaddr *) &la, sizeof la) < 0 || listen (lfd, 4096) < 0)
    printf ("unixrace listen errno=%d\n", errno);
  pid_t flipper = fork ();
  if (flipper == 0)
    for (unsigned i = 0;; i++)
      {
        char tmp[sizeof a->sun_path] = "";
        strcpy (tmp, i & 1 ? denied : allowed);
        memcpy (a->sun_path, tmp, sizeof tmp);
      }
  for (int i = 0; i < n; i++)
    {
      int fd = socket (AF_UNIX, SOCK_STREAM, 0);
      if (fd >= 0 && connect (fd, (struct sockaddr *) a, sizeof *a) == 0)
        ok++;
      else
        refused++;
      if (fd >= 0)
        close (fd);
      int c = lfd >= 0 ? accept (lfd, NULL, NULL) : -1;
      if (c >= 0)
        close (c);
      sched_yield (); /* let the flipper run even when it shares our CPU */
    }
  kill (flipper, SIGKILL);
  waitpid (flipper, NULL, 0);
  printf ("unixrace ok=%d refused=%d\n", ok, refused);
  return 0;
}

/* unixhold SEC: create an unconnected AF_UNIX stream socket, print "unixhold pid=P fd=F", sleep.
 * unixsteal PID FD PATH: take that socket with pidfd_getfd(2) and connect it to PATH - a way
 * around a supervisor that only watches the process tree it was installed in. */
static int
cmd_unixhold (const char *sec)
{
  int fd = socket (AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0)
    printf ("unixhold errno=%d\n", errno);
  else
    printf ("unixhold pid=%d fd=%d\n", (int) getpid (), fd);
  fflush (stdout);
  sleep ((unsigned) atoi (sec));
  return 0;
}

static int
cmd_unixsteal (const char *pid_s, const char *fd_s, const char *path)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  int pidfd = (int) syscall (SYS_pidfd_open, atoi (pid_s), 0);
  int fd = pidfd < 0 ? -1 : (int) syscall (SYS_pidfd_getfd, pidfd, atoi (fd_s), 0);
  if (fd < 0)
    {
      printf ("unixsteal getfd errno=%d\n", errno);
      return 0;
    }
  snprintf (a.sun_path, sizeof a.sun_path, "%s", path);
  if (connect (fd, (struct sockaddr *) &a, sizeof a) < 0)
    printf ("unixsteal connect errno=%d\n", errno);
  else
    printf ("unixsteal ok\n");
  return 0;
}

static int
usage (void)
{
  fputs ("usage: probe report | write PATH [DATA] | openw PATH | mapx PATH | stat PATH | readlink PATH |"
         " exit N | sleep SEC | ls DIR | catfile PATH | sysctl KEY | clock | syscall NAME|NR [ARG..] |"
         " int80 NR [ARG..] | escape NAME | exewatch SEC | read PATH | link OLD NEW |"
         " rename OLD NEW | symlink TARGET NEW | mkdir PATH | exec PATH [ARG..] | forks N |"
         " unix MODE PATH [CWD] | unixrace ALLOWED DENIED N | unixhold SEC | unixsteal PID FD PATH\n",
         stderr);
  return 2;
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    return usage ();
  const char *c = argv[1];
  int rc;
  if (strcmp (c, "report") == 0)
    rc = cmd_report ();
  else if (strcmp (c, "write") == 0 && argc >= 3)
    rc = cmd_write (argv[2], argc >= 4 ? argv[3] : "probe\n");
  else if (strcmp (c, "openw") == 0 && argc == 3)
    rc = cmd_openw (argv[2]);
  else if (strcmp (c, "mapx") == 0 && argc == 3)
    rc = cmd_mapx (argv[2]);
  else if (strcmp (c, "stat") == 0 && argc == 3)
    rc = cmd_stat (argv[2]);
  else if (strcmp (c, "readlink") == 0 && argc == 3)
    rc = cmd_readlink (argv[2]);
  else if (strcmp (c, "exit") == 0 && argc == 3)
    return atoi (argv[2]);
  else if (strcmp (c, "sleep") == 0 && argc == 3)
    rc = cmd_sleep (argv[2]);
  else if (strcmp (c, "ls") == 0 && argc == 3)
    rc = cmd_ls (argv[2]);
  else if (strcmp (c, "catfile") == 0 && argc == 3)
    rc = cmd_catfile (argv[2]);
  else if (strcmp (c, "sysctl") == 0 && argc == 3)
    rc = cmd_sysctl (argv[2]);
  else if (strcmp (c, "clock") == 0)
    rc = cmd_clock ();
  else if (strcmp (c, "syscall") == 0 && argc >= 3)
    rc = cmd_syscall (argc - 2, argv + 2);
  else if (strcmp (c, "int80") == 0 && argc >= 3)
    rc = cmd_int80 (argc - 2, argv + 2);
  else if (strcmp (c, "escape") == 0 && argc == 3)
    rc = cmd_escape (argv[2]);
  else if (strcmp (c, "forks") == 0 && argc == 3)
    rc = cmd_forks (argv[2]);
  else if (strcmp (c, "read") == 0 && argc == 3)
    rc = cmd_read (argv[2]);
  else if ((strcmp (c, "link") == 0 || strcmp (c, "rename") == 0 || strcmp (c, "symlink") == 0) && argc == 4)
    rc = cmd_pathop (c, argc - 2, argv + 2);
  else if ((strcmp (c, "mkdir") == 0 && argc == 3) || (strcmp (c, "exec") == 0 && argc >= 3))
    rc = cmd_pathop (c, argc - 2, argv + 2);
  else if (strcmp (c, "unix") == 0 && (argc == 4 || argc == 5))
    rc = cmd_unix (argv[2], argv[3], argc == 5 ? argv[4] : NULL);
  else if (strcmp (c, "unixhold") == 0 && argc == 3)
    rc = cmd_unixhold (argv[2]);
  else if (strcmp (c, "unixsteal") == 0 && argc == 5)
    rc = cmd_unixsteal (argv[2], argv[3], argv[4]);
  else if (strcmp (c, "unixrace") == 0 && argc == 5)
    rc = cmd_unixrace (argv[2], argv[3], argv[4]);
  else if (strcmp (c, "exewatch") == 0 && argc == 3)
    rc = cmd_exewatch (argv[2]);
  else
    return usage ();
  fflush (stdout);
  return rc;
}
