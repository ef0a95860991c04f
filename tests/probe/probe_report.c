/*
 * probe report: what the kernel shows the process from the inside (ids, capabilities, seccomp,
 * namespaces, mounts, rlimits, fds, clocks, environment) as one JSON object.
 */
#include "probe.h"

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

void
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

void
kfile (const char *k, const char *path)
{
  char *s = read_file (path, NULL);
  if (s)
    chomp (s);
  kstr (k, s);
  free (s);
}

int
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
