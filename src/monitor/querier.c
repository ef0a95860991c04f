/* querier.c - the sender of a DNS query, found within a budget (see querier.h).
 * Source of the protocol: linux/sock_diag.h, linux/inet_diag.h (struct inet_diag_req_v2, the
 * INET_DIAG_REQ_BYTECODE filter, INET_DIAG_BC_S_EQ compares the socket's local port in host
 * order, the operand in the next op's `no`) and the kernel's inet_diag_bc_run().
 * Threat model: the container decides how many sockets, processes and fds there are; every loop
 * here is bounded by the budgets of querier.h, and a pid can be reused between the kernel's answer
 * and our readlink: the worst case is a wrong or null pid in an approval question, never a
 * decision (decisions are by name). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/netns_call.h"
#include "monitor/querier.h"

struct querier
{
  int netns; /* the container's network namespace (a dup of the caller's fd) */
  int diag;  /* NETLINK_SOCK_DIAG in it; -1 after an abandoned dump, until reopened */
  querier_members_fn members;
  void *data;
  uint64_t window_start, window_spent; /* the per-second budget */
};

/* a fresh NETLINK_SOCK_DIAG socket inside q->netns, or -1 with *err */
static int
diag_open (int netns_fd, asbx_err_t *err)
{
  int fd = linux_netns_socket (netns_fd, AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG, err);
  if (fd < 0)
    return asbx_error_wrap (err, "querier: NETLINK_SOCK_DIAG socket in the container's network namespace");
  struct timeval tv = { .tv_usec = 20000 };
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

struct querier *
querier_new (int netns_fd, querier_members_fn members, void *data, asbx_err_t *err)
{
  int diag = diag_open (netns_fd, err);
  if (diag < 0)
    return NULL;
  struct querier *q = xmalloc0 (sizeof *q);
  *q = (struct querier){
    .netns = fcntl (netns_fd, F_DUPFD_CLOEXEC, 3), .diag = diag, .members = members, .data = data
  };
  return q;
}

void
querier_set_members (struct querier *q, querier_members_fn fn, void *data)
{
  q->members = fn;
  q->data = data;
}

void
querier_free (struct querier *q)
{
  if (!q)
    return;
  if (q->diag >= 0)
    close (q->diag);
  if (q->netns >= 0)
    close (q->netns);
  free (q);
}

static uint16_t
from_port (const struct sockaddr_storage *from)
{
  return ntohs (from->ss_family == AF_INET ? ((const struct sockaddr_in *) from)->sin_port
                                           : ((const struct sockaddr_in6 *) from)->sin6_port);
}

/* does the diag entry's local address (family fam) fit `from`: equal, v4-mapped, or wildcard */
static bool
addr_fits (unsigned fam, const uint32_t src[4], const struct sockaddr_storage *from)
{
  uint32_t want[4] = { 0 };
  static const uint32_t zero[4];
  if (from->ss_family == AF_INET)
    {
      uint32_t a = ((const struct sockaddr_in *) from)->sin_addr.s_addr;
      if (fam == AF_INET)
        return src[0] == a || src[0] == 0;
      want[2] = htonl (0xffff), want[3] = a;
    }
  else
    {
      memcpy (want, &((const struct sockaddr_in6 *) from)->sin6_addr, sizeof want);
      if (fam == AF_INET)
        return false;
    }
  return memcmp (src, want, sizeof want) == 0 || memcmp (src, zero, sizeof zero) == 0;
}

/* one filtered dump (family fam, protocol proto, local port) -> the first fitting inode, or 0.
 * A dump left unfinished (deadline, timeout) closes the socket: the kernel would refuse the next
 * dump on it (EBUSY) until this one was read to its end. */
static unsigned long
diag_inode (struct querier *q, int fam, int proto, const struct sockaddr_storage *from, uint64_t deadline)
{
  struct
  {
    struct nlmsghdr nh;
    struct inet_diag_req_v2 r;
    struct nlattr bc;
    struct inet_diag_bc_op op[2];
  } __attribute__ ((packed)) req = { 0 };
  uint16_t port = from_port (from);
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.r.sdiag_family = (uint8_t) fam;
  req.r.sdiag_protocol = (uint8_t) proto;
  req.r.idiag_states = ~0u;
  req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  req.bc.nla_type = INET_DIAG_REQ_BYTECODE;
  req.bc.nla_len = NLA_HDRLEN + sizeof req.op;
  /* sport == port: jump to the end (accept) when true, past it (reject) when false */
  req.op[0] = (struct inet_diag_bc_op){ .code = INET_DIAG_BC_S_EQ, .yes = sizeof req.op, .no = sizeof req.op + 4 };
  req.op[1] = (struct inet_diag_bc_op){ .no = port };
  if (send (q->diag, &req, sizeof req, 0) < 0)
    return 0;
  unsigned long found = 0;
  char buf[16384] __attribute__ ((aligned (4)));
  for (;;)
    {
      ssize_t n = recv (q->diag, buf, sizeof buf, 0);
      if (n <= 0)
        break; /* timeout (SO_RCVTIMEO) or error */
      for (struct nlmsghdr *h = (struct nlmsghdr *) buf; NLMSG_OK (h, (size_t) n); h = NLMSG_NEXT (h, n))
        {
          if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
            return found;
          struct inet_diag_msg *dm = NLMSG_DATA (h);
          if (!found && h->nlmsg_len >= NLMSG_LENGTH (sizeof *dm) && ntohs (dm->id.idiag_sport) == port
              && addr_fits (dm->idiag_family, dm->id.idiag_src, from))
            found = dm->idiag_inode;
        }
      if (now_ns () > deadline)
        break;
    }
  close (q->diag);
  q->diag = -1;
  return found;
}

/* the member holding socket:[inode], newest first, within `links` readlinks and `deadline` */
static pid_t
holder (struct querier *q, unsigned long inode, uint64_t deadline, char *exe, size_t exelen)
{
  const pid_t *v = NULL;
  size_t n = q->members ? q->members (q->data, &v) : 0;
  char want[64], path[320], link[64];
  size_t links = 0;
  snprintf (want, sizeof want, "socket:[%lu]", inode);
  for (size_t i = n; i-- > 0;)
    {
      snprintf (path, sizeof path, "/proc/%d/fd", (int) v[i]);
      cleanup_closedir DIR *d = opendir (path);
      struct dirent *de;
      while (d && (de = readdir (d)))
        {
          if (de->d_name[0] == '.')
            continue;
          if (++links > QUERIER_FDS_PER_LOOKUP || ((links & 255) == 0 && now_ns () > deadline))
            return 0;
          snprintf (path, sizeof path, "/proc/%d/fd/%s", (int) v[i], de->d_name);
          ssize_t l = readlink (path, link, sizeof link - 1);
          if (l <= 0)
            continue;
          link[l] = '\0';
          if (strcmp (link, want) != 0)
            continue;
          snprintf (path, sizeof path, "/proc/%d/exe", (int) v[i]);
          l = readlink (path, exe, exelen - 1);
          exe[l > 0 ? l : 0] = '\0';
          return v[i];
        }
    }
  return 0;
}

pid_t
querier_find (struct querier *q, bool tcp, const struct sockaddr_storage *from, char *exe, size_t exelen)
{
  uint64_t start = now_ns ();
  exe[0] = '\0';
  if (q && q->diag < 0 && q->netns >= 0)
    {
      asbx_err_t e = NULL;
      q->diag = diag_open (q->netns, &e);
      asbx_error_free (&e);
    }
  if (!q || q->diag < 0 || (from->ss_family != AF_INET && from->ss_family != AF_INET6))
    return 0;
  if (start - q->window_start >= 1000000000ull)
    q->window_start = start, q->window_spent = 0;
  if (q->window_spent >= QUERIER_NS_PER_SEC)
    return 0; /* this second's budget is spent: unknown */
  uint64_t budget = QUERIER_NS_PER_SEC - q->window_spent;
  uint64_t deadline = start + (budget < QUERIER_NS_PER_LOOKUP ? budget : QUERIER_NS_PER_LOOKUP);
  int proto = tcp ? IPPROTO_TCP : IPPROTO_UDP;
  int other = from->ss_family == AF_INET ? AF_INET6 : AF_INET;
  unsigned long inode = diag_inode (q, from->ss_family, proto, from, deadline);
  if (!inode && q->diag >= 0 && now_ns () < deadline)
    inode = diag_inode (q, other, proto, from, deadline);
  pid_t pid = inode && now_ns () < deadline ? holder (q, inode, deadline, exe, exelen) : 0;
  q->window_spent += now_ns () - start;
  return pid;
}
