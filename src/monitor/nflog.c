/* nflog.c - the NFLOG listener of the DNS stub (see nflog.h). Raw nfnetlink (no
 * libnetfilter_log): two config messages (bind the group, copy packets), then NFULNL_MSG_PACKET
 * messages whose NFULA_PAYLOAD starts at the network header. Source: linux/netfilter/
 * nfnetlink_log.h and the kernel's nfnetlink_log.c (message layout), RFC 791/8200 (headers).
 * Threat model: the packet bytes are the container's; lengths are checked before every read,
 * addresses reach the audit log only through inet_ntop, the prefix only through the audit
 * writer's escaping. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "core/cleanup.h"
#include "linux/nft.h"
#include "policy/nft_ruleset.h"
#include "monitor/audit.h"
#include "monitor/nflog.h"

static int
config (int fd, uint16_t group, uint16_t type, const void *payload, uint16_t plen)
{
  char buf[NLMSG_SPACE (sizeof (struct nfgenmsg) + NLA_HDRLEN + 16)] __attribute__ ((aligned (4))) = { 0 };
  struct nlmsghdr *nh = (struct nlmsghdr *) buf;
  struct nfgenmsg *g = NLMSG_DATA (nh);
  struct nlattr *a = (struct nlattr *) (g + 1);
  nh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  g->nfgen_family = AF_UNSPEC;
  g->version = NFNETLINK_V0;
  g->res_id = htons (group);
  a->nla_type = type;
  a->nla_len = (uint16_t) (NLA_HDRLEN + plen);
  memcpy ((char *) a + NLA_HDRLEN, payload, plen);
  nh->nlmsg_len = (uint32_t) NLMSG_LENGTH (sizeof *g + NLA_ALIGN (a->nla_len));
  if (send (fd, buf, nh->nlmsg_len, 0) < 0)
    return -1;
  /* the ack: an NLMSG_ERROR with error 0, or the errno */
  char ack[512] __attribute__ ((aligned (4)));
  ssize_t n = recv (fd, ack, sizeof ack, 0);
  struct nlmsghdr *r = (struct nlmsghdr *) ack;
  if (n < (ssize_t) NLMSG_LENGTH (sizeof (struct nlmsgerr)) || r->nlmsg_type != NLMSG_ERROR)
    return errno = EPROTO, -1;
  struct nlmsgerr *e = NLMSG_DATA (r);
  return e->error ? (errno = -e->error, -1) : 0;
}

int
nflog_open (uint16_t group, asbx_err_t *err)
{
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  struct nfulnl_msg_config_cmd cmd = { .command = NFULNL_CFG_CMD_BIND };
  struct nfulnl_msg_config_mode mode = { .copy_range = htonl (128), .copy_mode = NFULNL_COPY_PACKET };
  cleanup_close int fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0 || bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
    return asbx_error (err, errno, "network audit: nfnetlink socket");
  if (config (fd, group, NFULA_CFG_CMD, &cmd, sizeof cmd) < 0)
    return asbx_error (err, errno, "network audit: bind NFLOG group %u", group);
  if (config (fd, group, NFULA_CFG_MODE, &mode, sizeof mode) < 0)
    return asbx_error (err, errno, "network audit: NFLOG copy mode");
  /* one packet per message, sent at once: the kernel's default batches up to 100 packets or 1 s,
   * and a container that exits sooner would take its last refusals with it */
  uint32_t qthresh = htonl (1);
  if (config (fd, group, NFULA_CFG_QTHRESH, &qthresh, sizeof qthresh) < 0)
    return asbx_error (err, errno, "network audit: NFLOG queue threshold");
  int fl = 1;
  if (setsockopt (fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &fl, sizeof fl) < 0)
    return asbx_error (err, errno, "network audit: NETLINK_NO_ENOBUFS");
  return steal_fd (&fd);
}

static const char *
proto_name (unsigned p)
{
  return p == IPPROTO_TCP      ? "tcp"
         : p == IPPROTO_UDP    ? "udp"
         : p == IPPROTO_ICMP   ? "icmp"
         : p == IPPROTO_ICMPV6 ? "icmpv6"
         : p == IPPROTO_SCTP   ? "sctp"
                               : NULL;
}

/* one packet: its destination, protocol and port into a `network` record */
static void
audit_packet (const unsigned char *pkt, size_t len, const char *prefix, const char *id, int audit_fd)
{
  char addr[INET6_ADDRSTRLEN], pbuf[16];
  unsigned proto;
  size_t l4;
  /* link-local multicast (IGMP, MLD reports the kernel sends when an interface comes up) never
   * leaves the link: refused without a record, or every container would start with noise */
  if ((len >= 20 && pkt[0] >> 4 == 4 && pkt[16] == 224 && pkt[17] == 0 && pkt[18] == 0)
      || (len >= 40 && pkt[0] >> 4 == 6 && pkt[24] == 0xff && (pkt[25] & 0x0f) == 0x02))
    return;
  if (len >= 20 && pkt[0] >> 4 == 4)
    {
      proto = pkt[9];
      l4 = (size_t) (pkt[0] & 0xf) * 4;
      inet_ntop (AF_INET, pkt + 16, addr, sizeof addr);
    }
  else if (len >= 40 && pkt[0] >> 4 == 6)
    {
      proto = pkt[6]; /* extension headers are not followed: the port is then left out */
      l4 = 40;
      inet_ntop (AF_INET6, pkt + 24, addr, sizeof addr);
    }
  else
    return;
  const char *pn = proto_name (proto);
  if (!pn)
    snprintf (pbuf, sizeof pbuf, "%u", proto), pn = pbuf;
  struct audit_rec *r = audit_rec_new (id, "network");
  audit_rec_str (r, "addr", addr);
  if ((proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) && l4 + 4 <= len)
    audit_rec_int (r, "port", pkt[l4 + 2] << 8 | pkt[l4 + 3]);
  audit_rec_str (r, "proto", pn);
  audit_rec_str (r, "decision", "refused");
  audit_rec_str (r, "rule", prefix && *prefix ? prefix : "default");
  asbx_err_t e = NULL;
  if (audit_rec_write (r, audit_fd, &e) < 0)
    asbx_error_free (&e);
}

size_t
nflog_dispatch (int fd, const char *id, int audit_fd)
{
  char buf[8192] __attribute__ ((aligned (4)));
  size_t packets = 0;
  for (int round = 0; round < 32; round++)
    {
      ssize_t n = recv (fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0)
        return packets;
      for (struct nlmsghdr *nh = (struct nlmsghdr *) buf; NLMSG_OK (nh, (size_t) n); nh = NLMSG_NEXT (nh, n))
        {
          if (nh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET)
              || nh->nlmsg_len < NLMSG_LENGTH (sizeof (struct nfgenmsg)))
            continue;
          packets++;
          const unsigned char *p = (const unsigned char *) NLMSG_DATA (nh) + sizeof (struct nfgenmsg);
          size_t left = nh->nlmsg_len - NLMSG_LENGTH (sizeof (struct nfgenmsg));
          const unsigned char *payload = NULL;
          size_t plen = 0;
          char prefix[64] = "";
          while (left >= NLA_HDRLEN)
            {
              const struct nlattr *a = (const struct nlattr *) p;
              if (a->nla_len < NLA_HDRLEN || a->nla_len > left)
                break;
              size_t dl = a->nla_len - NLA_HDRLEN;
              if ((a->nla_type & NLA_TYPE_MASK) == NFULA_PAYLOAD)
                payload = p + NLA_HDRLEN, plen = dl;
              else if ((a->nla_type & NLA_TYPE_MASK) == NFULA_PREFIX && dl > 0)
                snprintf (prefix, sizeof prefix, "%.*s", (int) strnlen ((const char *) p + NLA_HDRLEN, dl),
                          (const char *) p + NLA_HDRLEN);
              size_t step = NLA_ALIGN (a->nla_len);
              if (step > left)
                break;
              p += step, left -= step;
            }
          if (payload)
            audit_packet (payload, plen, prefix, id, audit_fd);
        }
    }
  return packets;
}

/* a failed arm leaves the count to the next NFLOG activity or to the end of the container */
static void
unlogged_arm (struct nflog_unlogged *u, uint64_t ns)
{
  struct itimerspec it = { .it_value = { .tv_sec = (time_t) (ns / 1000000000u),
                                         .tv_nsec = (long) (ns % 1000000000u) } };
  if (u->tfd >= 0)
    (void) timerfd_settime (u->tfd, 0, &it, NULL);
}

/* Whether the table's unlogged counter can have moved. It counts the refused packets its log
 * limit turned away, and the limit's bucket is full at the table's load with
 * POLICY_NFT_LOG_BURST packets (the kernel's nft_limit_init): none is turned away before that
 * many went through it. Each one that went through is an NFLOG message that this socket
 * received (w->packets), or that its full receive buffer dropped (sk_drops, SO_MEMINFO: with
 * NETLINK_NO_ENOBUFS the kernel still counts them), or that was logged before the monitor bound
 * the group - then only the kernel's own packets can be refused (the container has not started:
 * MLD and IGMP reports when its interfaces come up, a handful), hence PRE_BIND_MARGIN. Below
 * that the counter is 0 and is not read: the read is a libnftables context in the container's
 * namespace (a dlopen in the monitor, two setns, a netlink cache fetch): 1-2 ms of CPU, and up
 * to ~50 ms of wall was seen at the end of a short sandbox. A replaced table (the monitor's load
 * before pasta) starts a full bucket again: the count here only errs towards reading. */
#define PRE_BIND_MARGIN 50
static bool
unlogged_possible (const struct nflog_watch *w)
{
  uint32_t mi[SK_MEMINFO_VARS] = { 0 };
  socklen_t len = sizeof mi;
  if (getsockopt (w->fd, SOL_SOCKET, SO_MEMINFO, mi, &len) < 0 || len < (SK_MEMINFO_DROPS + 1) * sizeof (uint32_t))
    return true; /* cannot tell: read it */
  return w->packets + mi[SK_MEMINFO_DROPS] + PRE_BIND_MARGIN >= POLICY_NFT_LOG_BURST;
}

/* the counter read of struct nflog_watch (nflog.h), on NFLOG activity, when u->tfd fires and
 * with `force` at the end of the container */
static void
unlogged_sync (struct nflog_watch *w, nflog_nft_fn get_nft, void *data, bool force)
{
  struct nflog_unlogged *u = &w->unlogged;
  struct timespec ts;
  uint64_t now, v, ticks;
  asbx_err_t e = NULL;

  if (u->tfd >= 0 && read (u->tfd, &ticks, sizeof ticks) < 0)
    ticks = 0; /* not expired (EAGAIN): a call for NFLOG activity */
  clock_gettime (CLOCK_MONOTONIC, &ts);
  now = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
  if (!unlogged_possible (w))
    return;
  struct linux_nft *nft = get_nft (data);
  if (!nft)
    return;
  if (!force && u->last_ns && now - u->last_ns < 1000000000ull)
    {
      unlogged_arm (u, 1000000000ull - (now - u->last_ns));
      return;
    }
  u->last_ns = now;
  if (linux_nft_counter (nft, POLICY_NFT_TABLE, POLICY_NFT_UNLOGGED, &v, &e) < 0)
    {
      asbx_error_free (&e);
      return;
    }
  if (v != u->seen)
    {
      audit_sink_suppressed_add ("network", v > u->seen ? v - u->seen : v);
      unlogged_arm (u, 1000000000ull); /* the flood may go on: look again in a second */
    }
  u->seen = v;
}

void
nflog_watch_init (struct nflog_watch *w)
{
  *w = (struct nflog_watch){ .fd = -1, .unlogged.tfd = -1, .audit_fd = -1 };
}

int
nflog_watch_open (struct nflog_watch *w, const char *id, int audit_fd, asbx_err_t *err)
{
  int fd = nflog_open (POLICY_NFT_LOG_GROUP, err);
  if (fd < 0)
    return -1;
  return nflog_watch_adopt (w, fd, id, audit_fd, err);
}

int
nflog_watch_adopt (struct nflog_watch *w, int fd, const char *id, int audit_fd, asbx_err_t *err)
{
  w->id = id;
  w->audit_fd = audit_fd;
  w->fd = fd;
  w->unlogged = (struct nflog_unlogged){ .tfd = timerfd_create (CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK) };
  if (w->unlogged.tfd < 0)
    return asbx_error (err, errno, "network audit: timerfd_create");
  return 0;
}

void
nflog_watch_close (struct nflog_watch *w)
{
  if (w->fd >= 0)
    close (w->fd);
  if (w->unlogged.tfd >= 0)
    close (w->unlogged.tfd);
  w->fd = w->unlogged.tfd = -1;
}

bool
nflog_watch_owns (const struct nflog_watch *w, int fd)
{
  return fd >= 0 && (fd == w->fd || fd == w->unlogged.tfd);
}

void
nflog_watch_dispatch (struct nflog_watch *w, int fd, nflog_nft_fn nft, void *data)
{
  if (fd == w->fd)
    w->packets += nflog_dispatch (fd, w->id, w->audit_fd);
  unlogged_sync (w, nft, data, false); /* at most once a second */
}

void
nflog_watch_finish (struct nflog_watch *w, nflog_nft_fn nft, void *data)
{
  if (w->fd < 0)
    return;
  w->packets += nflog_dispatch (w->fd, w->id, w->audit_fd);
  unlogged_sync (w, nft, data, true);
}

void
nflog_watch_before_reload (struct nflog_watch *w, nflog_nft_fn nft, void *data)
{
  nflog_watch_finish (w, nft, data);
  w->unlogged.seen = 0;
}
