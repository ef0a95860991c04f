/*
 * probe unix-socket actions: unix, unixrace, unixhold, unixsteal (added for the unix-socket
 * policy tests).
 */
#include "probe.h"

/* unix MODE PATH [CWD]: reach a pathname unix socket; prints "unix MODE ok" or "unix MODE errno=N".
 * MODE: stream, seqpacket (connect), dgram-sendto, dgram-sendmsg, dgram-connect (connect + send),
 * pair-sendto (a socketpair(SOCK_DGRAM) end sendto PATH), raw-sendto (SOCK_RAW, which af_unix
 * makes a datagram socket). CWD: chdir there first (for relative paths). PATH "@name": the abstract
 * name "\0name". */
int
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
int
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
int
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

int
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
