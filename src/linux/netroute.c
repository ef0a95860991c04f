/* netroute.c - the route of last resort (see netroute.h). Message layouts: linux/rtnetlink.h,
 * linux/if_link.h (IFLA_LINKINFO, IFLA_INFO_KIND, IFLA_INFO_DATA), linux/veth.h
 * (VETH_INFO_PEER: a struct ifinfomsg followed by the peer's attributes). */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "core/cleanup.h"
#include "linux/netroute.h"

#define IFNAME "asbx0"
#define PEERNAME "asbx1"

struct msg
{
  char buf[1024] __attribute__ ((aligned (4)));
  size_t len;
};

static struct nlmsghdr *
msg_start (struct msg *m, uint16_t type, uint16_t flags, const void *hdr, size_t hlen)
{
  memset (m, 0, sizeof *m);
  struct nlmsghdr *nh = (struct nlmsghdr *) m->buf;
  nh->nlmsg_type = type;
  nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
  memcpy (m->buf + NLMSG_HDRLEN, hdr, hlen);
  m->len = NLMSG_HDRLEN + NLMSG_ALIGN (hlen);
  return nh;
}

/* append an attribute; returns its offset (for nests) */
static size_t
attr (struct msg *m, uint16_t type, const void *data, size_t dlen)
{
  size_t off = m->len;
  struct rtattr *a = (struct rtattr *) (m->buf + off);
  a->rta_type = type;
  a->rta_len = (unsigned short) RTA_LENGTH (dlen);
  if (dlen)
    memcpy (RTA_DATA (a), data, dlen);
  m->len += RTA_ALIGN (a->rta_len);
  return off;
}

static void
nest_end (struct msg *m, size_t off)
{
  ((struct rtattr *) (m->buf + off))->rta_len = (unsigned short) (m->len - off);
}

/* send m and read its ack: 0, or -1 with errno */
static int
talk (int fd, struct msg *m)
{
  ((struct nlmsghdr *) m->buf)->nlmsg_len = (uint32_t) m->len;
  if (send (fd, m->buf, m->len, 0) < 0)
    return -1;
  char ack[1024] __attribute__ ((aligned (4)));
  ssize_t n = recv (fd, ack, sizeof ack, 0);
  struct nlmsghdr *r = (struct nlmsghdr *) ack;
  if (n < (ssize_t) NLMSG_LENGTH (sizeof (struct nlmsgerr)) || r->nlmsg_type != NLMSG_ERROR)
    return errno = EPROTO, -1;
  int e = ((struct nlmsgerr *) NLMSG_DATA (r))->error;
  return e ? (errno = -e, -1) : 0;
}

static int
add_veth (int fd)
{
  struct msg m;
  struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
  msg_start (&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof ifi);
  attr (&m, IFLA_IFNAME, IFNAME, sizeof IFNAME);
  size_t li = attr (&m, IFLA_LINKINFO, NULL, 0);
  attr (&m, IFLA_INFO_KIND, "veth", 4);
  size_t data = attr (&m, IFLA_INFO_DATA, NULL, 0);
  size_t peer = attr (&m, VETH_INFO_PEER, &ifi, sizeof ifi);
  attr (&m, IFLA_IFNAME, PEERNAME, sizeof PEERNAME);
  nest_end (&m, peer);
  nest_end (&m, data);
  nest_end (&m, li);
  return talk (fd, &m);
}

static int
link_up (int fd, int idx)
{
  struct msg m;
  struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = idx, .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
  msg_start (&m, RTM_NEWLINK, 0, &ifi, sizeof ifi);
  return talk (fd, &m);
}

static int
add_addr (int fd, int family, int idx, const char *text)
{
  struct msg m;
  unsigned char a[16];
  size_t alen = family == AF_INET ? 4 : 16;
  struct ifaddrmsg ifa = { .ifa_family = (unsigned char) family,
                           .ifa_prefixlen = (unsigned char) (alen * 8),
                           .ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0,
                           .ifa_scope = RT_SCOPE_UNIVERSE,
                           .ifa_index = (unsigned) idx };
  inet_pton (family, text, a);
  msg_start (&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof ifa);
  attr (&m, IFA_LOCAL, a, alen);
  attr (&m, IFA_ADDRESS, a, alen);
  return talk (fd, &m);
}

static int
add_default_route (int fd, int family, int idx)
{
  struct msg m;
  uint32_t oif = (uint32_t) idx, prio = UINT32_MAX;
  struct rtmsg rt = { .rtm_family = (unsigned char) family,
                      .rtm_table = RT_TABLE_MAIN,
                      .rtm_protocol = RTPROT_STATIC,
                      .rtm_scope = family == AF_INET ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE,
                      .rtm_type = RTN_UNICAST };
  msg_start (&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rt, sizeof rt);
  attr (&m, RTA_OIF, &oif, sizeof oif);
  attr (&m, RTA_PRIORITY, &prio, sizeof prio);
  return talk (fd, &m);
}

int
linux_net_last_resort (asbx_err_t *err)
{
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  cleanup_close int fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  const char *what = "rtnetlink socket";
  int idx = 0, peer = 0;

  if (fd < 0 || bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
    goto fail;
  what = "add veth " IFNAME;
  if (add_veth (fd) < 0)
    goto fail;
  idx = (int) if_nametoindex (IFNAME);
  peer = (int) if_nametoindex (PEERNAME);
  what = "bring " IFNAME " up";
  if (!idx || !peer || link_up (fd, idx) < 0 || link_up (fd, peer) < 0)
    goto fail;
  what = "add 192.0.0.8/32";
  if (add_addr (fd, AF_INET, idx, "192.0.0.8") < 0)
    goto fail;
  what = "add the IPv4 default route";
  if (add_default_route (fd, AF_INET, idx) < 0)
    goto fail;
  if (add_addr (fd, AF_INET6, idx, "100::1") < 0)
    {
      if (errno == EAFNOSUPPORT || errno == EACCES || errno == EPERM || errno == EOPNOTSUPP)
        return 0; /* no IPv6 in this namespace: nothing to route */
      what = "add 100::1/128";
      goto fail;
    }
  what = "add the IPv6 default route";
  if (add_default_route (fd, AF_INET6, idx) < 0)
    goto fail;
  return 0;
fail:
  return asbx_error (err, errno, "network audit: route of last resort: %s", what);
}
