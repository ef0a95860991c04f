/*
 * probe process actions: sysctl, sleep, clock, raw syscalls (syscall, int80), forks and exewatch.
 */
#include "probe.h"

int
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

int
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

int
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
int
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
int
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

/* forks N: fork N children that wait in pause(), then kill them all. Prints {"op":"forks",
 * "ok":children made,"result":"ok"|errno name of the first fork that failed}. */
int
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

/* exewatch SEC: for SEC seconds, watch every other process of the pid namespace, hold its
 * /proc/PID/exe with O_PATH, and keep trying to reopen that for writing through
 * /proc/self/fd/N -- also after the process exited, when the kernel no longer refuses with
 * ETXTBSY (the CVE-2019-5736 mechanism). A reopen that works is proved writable by writing
 * back the byte already at offset 0 (content unchanged). Prints {"op":"exewatch","seen",
 * "exes":[names],"writable":[names]}; exit 0. */
#define WATCH_MAX 512
int
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
