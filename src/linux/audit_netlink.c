/* audit_netlink.c - the kernel audit stream as a read-only multicast listener (see the header).
 *
 * Mechanism: socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT) bound to group AUDIT_NLGRP_READLOG
 * (bit 0 of nl_groups); every record the kernel emits arrives as one datagram whose netlink type
 * is the record type and whose payload is the text auditd would write. We never send on it, so
 * we neither replace auditd nor change the host's audit configuration.
 * Threat model: the text mixes kernel-formatted fields with strings the container controls (path,
 * exe, comm); the kernel quotes or hex-encodes those, so a field cannot forge another field; the
 * values we extract stay untrusted text for the audit writer to sanitise.
 * Ordering: a record is emitted in the denied syscall, queued to kauditd and multicast later,
 * usually after the process-events connector reported the fork (and maybe the exit). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/audit_netlink.h"

int
linux_audit_open (asbx_err_t *err)
{
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1) };
  int size = 1 << 20;
  cleanup_close int fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_AUDIT);
  if (fd < 0)
    return asbx_error (err, errno, "audit netlink socket");
  if (setsockopt (fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
    (void) setsockopt (fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  if (bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0)
    return asbx_error (err, errno, "audit netlink: join the readlog multicast group");
  return steal_fd (&fd);
}

int
linux_audit_enabled (asbx_err_t *err)
{
  struct
  {
    struct nlmsghdr h;
    struct audit_status s;
  } req = {
    .h = { .nlmsg_len = NLMSG_LENGTH (0), .nlmsg_type = AUDIT_GET, .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 }
  };
  char buf[4096];
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  cleanup_close int fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
  if (fd < 0)
    return asbx_error (err, errno, "audit netlink socket");
  struct timeval tv = { .tv_sec = 1 };
  (void) setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (sendto (fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *) &sa, sizeof sa) < 0)
    return asbx_error (err, errno, "audit netlink: AUDIT_GET");
  for (int i = 0; i < 4; i++)
    {
      ssize_t n = recv (fd, buf, sizeof buf, 0);
      if (n < 0)
        return asbx_error (err, errno, "audit netlink: AUDIT_GET reply");
      struct nlmsghdr *h = (struct nlmsghdr *) buf;
      if (!NLMSG_OK (h, (size_t) n))
        break;
      if (h->nlmsg_type == NLMSG_ERROR)
        {
          struct nlmsgerr *e = NLMSG_DATA (h);
          if (e->error)
            return asbx_error (err, -e->error, "audit netlink: AUDIT_GET");
          continue; /* an ack */
        }
      if (h->nlmsg_type == AUDIT_GET && h->nlmsg_len >= NLMSG_LENGTH (2 * sizeof (uint32_t)))
        {
          struct audit_status *s = NLMSG_DATA (h);
          return (int) s->enabled;
        }
    }
  return asbx_error (err, EPROTO, "audit netlink: no AUDIT_GET reply");
}

int
linux_audit_enable (asbx_err_t *err)
{
  struct
  {
    struct nlmsghdr h;
    struct audit_status s;
  } req = { .h = { .nlmsg_len = NLMSG_LENGTH (sizeof (struct audit_status)),
                   .nlmsg_type = AUDIT_SET,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK,
                   .nlmsg_seq = 1 },
            .s = { .mask = AUDIT_STATUS_ENABLED, .enabled = 1 } };
  char buf[4096];
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  cleanup_close int fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
  if (fd < 0)
    return asbx_error (err, errno, "audit netlink socket");
  struct timeval tv = { .tv_sec = 1 };
  (void) setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (sendto (fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *) &sa, sizeof sa) < 0)
    return asbx_error (err, errno, "audit netlink: AUDIT_SET");
  ssize_t n = recv (fd, buf, sizeof buf, 0);
  struct nlmsghdr *h = (struct nlmsghdr *) buf;
  if (n < 0)
    return asbx_error (err, errno, "audit netlink: AUDIT_SET reply");
  if (!NLMSG_OK (h, (size_t) n) || h->nlmsg_type != NLMSG_ERROR)
    return asbx_error (err, EPROTO, "audit netlink: AUDIT_SET: no ack");
  struct nlmsgerr *e = NLMSG_DATA (h);
  return e->error ? asbx_error (err, -e->error, "audit netlink: AUDIT_SET") : 0;
}

bool
linux_audit_parse (int type, char *buf, size_t len, struct linux_audit_msg *m)
{
  unsigned long long sec, ms, serial;
  int off = 0;
  buf[len] = '\0';
  m->type = type;
  m->serial = 0;
  m->text = buf;
  if (sscanf (buf, "audit(%llu.%llu:%llu): %n", &sec, &ms, &serial, &off) < 3 || off == 0)
    return false;
  m->serial = serial;
  m->text = buf + off;
  return true;
}

int
linux_audit_recv (int fd, char *buf, size_t size, struct linux_audit_msg *m, asbx_err_t *err)
{
  for (;;)
    {
      ssize_t n = recv (fd, buf, size - 1, 0);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
          if (errno == ENOBUFS)
            return 2;
          return asbx_error (err, errno, "audit netlink recv");
        }
      /* the caller's buffer need not be aligned for struct nlmsghdr: copy the header out */
      struct nlmsghdr h;
      if ((size_t) n < sizeof h)
        continue;
      memcpy (&h, buf, sizeof h);
      if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > (size_t) n || h.nlmsg_type < AUDIT_FIRST_USER_MSG)
        continue; /* not a record (or a truncated datagram): skip */
      size_t len = h.nlmsg_len - NLMSG_HDRLEN;
      /* the payload is text; the kernel may or may not count a trailing NUL */
      char *text = buf + NLMSG_HDRLEN;
      while (len > 0 && text[len - 1] == '\0')
        len--;
      if (!linux_audit_parse (h.nlmsg_type, text, len, m))
        continue;
      return 1;
    }
}

static int
hexval (char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* hex-decoded copy of v[0..n), or NULL when v is not even-length hex */
static char *
hex_decode (const char *v, size_t n)
{
  if (n == 0 || n % 2)
    return NULL;
  char *out = xmalloc (n / 2 + 1);
  for (size_t i = 0; i < n; i += 2)
    {
      int a = hexval (v[i]), b = hexval (v[i + 1]);
      if (a < 0 || b < 0)
        {
          free (out);
          return NULL;
        }
      out[i / 2] = (char) (a * 16 + b);
    }
  out[n / 2] = '\0';
  return out;
}

char *
linux_audit_field (const char *text, const char *key, bool hex_ok)
{
  size_t klen = strlen (key);
  const char *p = text;
  while (*p)
    {
      while (*p == ' ')
        p++;
      const char *eq = strchr (p, '=');
      const char *sp = strchr (p, ' ');
      if (!eq)
        return NULL;
      if (sp && sp < eq)
        {
          p = sp;
          continue; /* a bare word without '=' */
        }
      const char *v = eq + 1;
      size_t vlen;
      bool quoted = *v == '"';
      if (quoted)
        {
          const char *end = strchr (v + 1, '"');
          vlen = end ? (size_t) (end - v - 1) : strlen (v + 1);
          v++;
        }
      else
        vlen = strcspn (v, " ");
      if ((size_t) (eq - p) == klen && memcmp (p, key, klen) == 0)
        {
          char *dec = (!quoted && hex_ok) ? hex_decode (v, vlen) : NULL;
          return dec ? dec : xasprintf ("%.*s", (int) vlen, v);
        }
      p = v + vlen + (quoted && v[vlen] == '"' ? 1 : 0);
    }
  return NULL;
}
