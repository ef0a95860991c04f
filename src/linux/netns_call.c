/* netns_call.c - run code inside another network namespace; see netns_call.h for the contract.
 *
 * Mechanism: root's way is setns(2) of the calling thread there and back. A non-root caller
 * (agentsbx run by a user; its container's network namespace belongs to the container's user
 * namespace, which the caller owns) may not enter the network namespace from its own user
 * namespace, and once inside the container's user namespace it could never return to the host's
 * network namespace (that needs CAP_SYS_ADMIN over the initial user namespace). So a forked child
 * does the work: setns(CLONE_NEWUSER) to the owner (allowed to a single-threaded process holding
 * CAP_SYS_ADMIN there, which the owner's processes do), setns(CLONE_NEWNET), the callback, then
 * the results go back over a SOCK_SEQPACKET pair: one message with the header and the fds
 * (SCM_RIGHTS), one with the output. A socket keeps the namespace it was created in, and later
 * operations on it from the parent are checked against that namespace's owner, where the parent
 * (the owner, from the parent user namespace) holds the capabilities too: binds below 1024,
 * nfnetlink configuration, interface ioctls all work from the parent. The same child serves a
 * caller that is euid 0 in a user namespace not owning its own network namespace (rootless
 * Podman runs the runtime so): it could enter the container's network namespace but not come
 * back, so it too is sent to the child, which then has no user namespace to join.
 * Threat model: the namespaces are the container's; the child runs only our code, exits at once,
 * and is reaped here. Cost of the child: one fork + two setns + exit (~0.3-1 ms), per call. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/nsfs.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/netns_call.h"

struct reply
{
  int r;
  int errnum;
  unsigned mask; /* which fds[] slots follow in SCM_RIGHTS, in order */
  char msg[1024];
};

static int
call_here (int self, linux_netns_fn fn, void *arg, int *fds, size_t nfds, char **out, asbx_err_t *err)
{
  int r = fn (arg, fds, nfds, out, err);
  if (setns (self, CLONE_NEWNET) < 0)
    abort (); /* going on in the container's namespace would be worse than dying (fail closed) */
  return r;
}

static int
send_reply (int sk, const struct reply *rep, const int *fds, size_t nfds, const char *out)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int) * LINUX_NETNS_FDS_MAX)];
    struct cmsghdr align;
  } u;
  int sent[LINUX_NETNS_FDS_MAX];
  size_t n = 0;
  for (size_t i = 0; i < nfds; i++)
    if (rep->mask & (1u << i))
      sent[n++] = fds[i];
  struct iovec iov = { .iov_base = (void *) rep, .iov_len = sizeof *rep };
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
  if (n)
    {
      memset (&u, 0, sizeof u);
      mh.msg_control = u.buf;
      mh.msg_controllen = CMSG_SPACE (sizeof (int) * n);
      struct cmsghdr *c = CMSG_FIRSTHDR (&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN (sizeof (int) * n);
      memcpy (CMSG_DATA (c), sent, sizeof (int) * n);
    }
  if (sendmsg (sk, &mh, MSG_NOSIGNAL) < 0)
    return -1;
  size_t len = out ? strlen (out) : 0;
  if (len >= LINUX_NETNS_OUT_MAX)
    len = LINUX_NETNS_OUT_MAX - 1;
  return send (sk, out ? out : "", len, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

int
linux_netns_enter_owner (int netns_fd, asbx_err_t *err)
{
  struct stat own, ours;
  int userns = ioctl (netns_fd, NS_GET_USERNS);
  if (userns < 0)
    return asbx_error (err, errno, "find the user namespace owning the network namespace");
  /* already there (euid 0 in the owner, as under rootless Podman): setns would say EINVAL */
  bool here = fstat (userns, &own) == 0 && stat ("/proc/self/ns/user", &ours) == 0 && own.st_dev == ours.st_dev
              && own.st_ino == ours.st_ino;
  int r = here ? 0 : setns (userns, CLONE_NEWUSER);
  int e = errno;
  close (userns);
  if (r < 0)
    return asbx_error (err, e, "join the user namespace owning the network namespace");
  if (setns (netns_fd, CLONE_NEWNET) < 0)
    return asbx_error (err, errno, "enter the network namespace (from its user namespace)");
  return 0;
}

static void __attribute__ ((noreturn)) child_main (int sk, int netns_fd, linux_netns_fn fn, void *arg, size_t nfds)
{
  struct reply rep = { .r = -1 };
  int fds[LINUX_NETNS_FDS_MAX];
  char *out = NULL;
  asbx_err_t e = NULL;

  for (size_t i = 0; i < nfds; i++)
    fds[i] = -1;
  if (linux_netns_enter_owner (netns_fd, &e) == 0)
    rep.r = fn (arg, fds, nfds, &out, &e);
  if (e)
    {
      rep.r = -1;
      rep.errnum = e->errnum;
      snprintf (rep.msg, sizeof rep.msg, "%s", e->msg);
    }
  for (size_t i = 0; i < nfds; i++)
    if (fds[i] >= 0)
      rep.mask |= 1u << i;
  _exit (send_reply (sk, &rep, fds, nfds, out) < 0 ? 1 : 0);
}

/* the child's reply: the header, its fds into fds[], the output; -1 with *err when incomplete */
static int
recv_reply (int sk, struct reply *rep, int *fds, size_t nfds, char **out, asbx_err_t *err)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int) * LINUX_NETNS_FDS_MAX)];
    struct cmsghdr align;
  } u;
  struct iovec iov = { .iov_base = rep, .iov_len = sizeof *rep };
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
  ssize_t n;

  while ((n = recvmsg (sk, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
    ;
  if (n != (ssize_t) sizeof *rep)
    return asbx_error (err, n < 0 ? errno : EPROTO, "network namespace helper: no reply");
  rep->msg[sizeof rep->msg - 1] = '\0';
  size_t k = 0, got = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR (&mh); c; c = CMSG_NXTHDR (&mh, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      {
        got = (c->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        int tmp[LINUX_NETNS_FDS_MAX];
        memcpy (tmp, CMSG_DATA (c), sizeof (int) * (got < LINUX_NETNS_FDS_MAX ? got : LINUX_NETNS_FDS_MAX));
        for (size_t i = 0; i < nfds && k < got; i++)
          if (rep->mask & (1u << i))
            fds[i] = tmp[k++];
      }
  char *buf = xmalloc (LINUX_NETNS_OUT_MAX);
  while ((n = recv (sk, buf, LINUX_NETNS_OUT_MAX - 1, 0)) < 0 && errno == EINTR)
    ;
  buf[n > 0 ? n : 0] = '\0';
  if (out && n > 0)
    *out = buf;
  else
    free (buf);
  return 0;
}

static int
call_in_child (int netns_fd, linux_netns_fn fn, void *arg, int *fds, size_t nfds, char **out, asbx_err_t *err)
{
  struct reply rep = { 0 };
  int sp[2], status = 0;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
    return asbx_error (err, errno, "network namespace helper: socketpair");
  pid_t pid = fork ();
  if (pid < 0)
    {
      int e = errno;
      close (sp[0]);
      close (sp[1]);
      return asbx_error (err, e, "network namespace helper: fork");
    }
  if (pid == 0)
    {
      close (sp[0]);
      child_main (sp[1], netns_fd, fn, arg, nfds);
    }
  close (sp[1]);
  int r = recv_reply (sp[0], &rep, fds, nfds, out, err);
  close (sp[0]);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (r < 0)
    return r;
  if (rep.r < 0)
    {
      asbx_error (err, 0, "%s", rep.msg[0] ? rep.msg : "network namespace helper failed");
      if (*err)
        (*err)->errnum = rep.errnum;
      return -1;
    }
  return rep.r;
}

int
linux_netns_call (int netns_fd, linux_netns_fn fn, void *arg, int *fds, size_t nfds, char **out, asbx_err_t *err)
{
  if (out)
    *out = NULL;
  for (size_t i = 0; i < nfds; i++)
    fds[i] = -1;
  if (nfds > LINUX_NETNS_FDS_MAX)
    return asbx_error (err, EINVAL, "network namespace helper: %zu fds asked, at most %d", nfds, LINUX_NETNS_FDS_MAX);
  cleanup_close int self = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0)
    return asbx_error (err, errno, "open our network namespace");
  /* entering our own namespace first asks the kernel whether we could come back: euid 0 in a
   * user namespace that does not own our network namespace (rootless Podman runs us so) may
   * enter the container's but never return */
  if (setns (self, CLONE_NEWNET) == 0 && setns (netns_fd, CLONE_NEWNET) == 0)
    return call_here (self, fn, arg, fds, nfds, out, err);
  if (errno != EPERM)
    return asbx_error (err, errno, "enter the container's network namespace");
  return call_in_child (netns_fd, fn, arg, fds, nfds, out, err);
}

struct sock_args
{
  int domain, type, protocol;
};

static int
make_socket (void *arg, int *fds, size_t nfds, char **out, asbx_err_t *err)
{
  const struct sock_args *a = arg;
  (void) nfds;
  (void) out;
  fds[0] = socket (a->domain, a->type, a->protocol);
  return fds[0] < 0 ? asbx_error (err, errno, "socket") : 0;
}

int
linux_netns_socket (int netns_fd, int domain, int type, int protocol, asbx_err_t *err)
{
  struct sock_args a = { domain, type, protocol };
  int fd;
  if (linux_netns_call (netns_fd, make_socket, &a, &fd, 1, NULL, err) < 0)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  return fd;
}

int
linux_netns_marked_stream (int netns_fd, int family, uint32_t mark)
{
  asbx_err_t e = NULL;
  int fd = linux_netns_socket (netns_fd, family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, &e);
  if (fd < 0)
    {
      int en = e ? e->errnum : EIO;
      asbx_error_free (&e);
      errno = en;
      return -1;
    }
  if (setsockopt (fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0)
    {
      int en = errno;
      close (fd);
      errno = en;
      return -1;
    }
  return fd;
}
