/*
 * probe escape NAME: attempts a sandbox must refuse (added for tests/escape and the policy tests).
 */
#include "probe.h"

/* ---- escape attempts (added for tests/escape) ---- */

/* The attempts each policy syscall group must refuse (test_policy_syscalls.py runs every one,
 * and fails for a group of `agentsbx policy groups` that no attempt names): the attempt, its
 * group, the errno the policy answers with, and the answers it gets without a policy (a reachable
 * call: success, or the kernel's own refusal of our malformed arguments). A new group is one line
 * here and its attempt in cmd_escape. */
// clang-format off
static const struct
{
  const char *name, *group, *refused, *control;
} group_attempts[] = {
  { "io_uring", "io_uring", "EPERM", "ok" },
  { "userns", "userns", "EPERM", "ok" },
  { "clone3", "userns", "ENOSYS", "ok" },
  { "bpf", "bpf", "EPERM", "EINVAL" },
  { "keyctl", "keyring", "EPERM", "ok" },
  { "add_key", "keyring", "EPERM", "ok" },
  { "perf", "perf", "EPERM", "EFAULT" },
  { "ptrace", "ptrace", "EPERM", "ok" },
  { "ptrace_sibling", "ptrace", "EPERM", "ok" },
  { "mount", "mount", "EPERM", "ok" },
  { "fsopen", "mount", "EPERM", "ok" },
  { "kmod", "kmod", "EPERM", "EBADF ENOSYS" },
  { "tiocsti", "tiocsti", "EPERM", "ok" },
  { "tioclinux", "tiocsti", "EPERM", "EINVAL ENOTTY ok" },
  { "packet", "raw-sockets", "EPERM", "ok" },
  { "rawip", "raw-sockets", "EPERM", "ok" },
};
// clang-format on

/* escape list: the table above as {"op":"escape-list","attempts":[{"name","group","refused",
 * "control":[errno names or "ok"]}...]} */
int
cmd_escape_list (void)
{
  obj_open ();
  kstr ("op", "escape-list");
  key ("attempts");
  arr_open ();
  for (size_t i = 0; i < sizeof (group_attempts) / sizeof (group_attempts[0]); i++)
    {
      char ctl[64];
      snprintf (ctl, sizeof (ctl), "%s", group_attempts[i].control);
      obj_open ();
      kstr ("name", group_attempts[i].name);
      kstr ("group", group_attempts[i].group);
      kstr ("refused", group_attempts[i].refused);
      key ("control");
      arr_open ();
      for (char *sp, *t = strtok_r (ctl, " ", &sp); t; t = strtok_r (NULL, " ", &sp))
        vstr (t);
      arr_close ();
      obj_close ();
    }
  arr_close ();
  obj_close ();
  putchar ('\n');
  return 0;
}

/* escape NAME: one attempt a sandbox must refuse, made the way hostile code would make it.
 * NAME: io_uring (io_uring_setup), ptrace (PTRACE_ATTACH to a child of ours: allowed by the
 * kernel without CAP_SYS_PTRACE, so only a filter stops it), userns (unshare CLONE_NEWUSER),
 * keyctl (join a named session keyring), add_key, mount (tmpfs on /tmp), fsopen (new mount API).
 * Added for the policy tests: clone3 (with CLONE_NEWUSER), tiocsti / tioclinux (on a pty we
 * opened), packet / rawip (raw sockets), ptrace_sibling (PTRACE_ATTACH to $SIBLING), bpf / perf /
 * kmod (calls whose reachable answer is EINVAL / EFAULT / EBADF-or-ENOSYS, never a success).
 * Prints {"op":"escape","name","result":"ok"|errno name,"errno"}; exit 0 when it worked. */
int
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
