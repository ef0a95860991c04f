/* dns_upstream.c - the DNS stub's upstream address and per-query upstream sockets (see
 * dns_upstream.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "monitor/dns_parse.h"
#include "monitor/dns_upstream.h"

int
dns_upstream_find (struct dns_upstream *u, asbx_err_t *err)
{
  const char *env = getenv ("AGENTSBX_UPSTREAM_DNS");
  cleanup_free char *conf = NULL;
  size_t len;

  u->spare = -1;
  if (env && *env)
    {
      if (dns_parse_upstream (env, &u->addr, &u->len) < 0)
        return asbx_error (err, EINVAL, "AGENTSBX_UPSTREAM_DNS: `%s` is not ADDR[:PORT]", env);
      return 0;
    }
  if (read_file_at (AT_FDCWD, "/etc/resolv.conf", 1 << 16, &conf, &len, err) < 0)
    return asbx_error_wrap (err, "no upstream resolver");
  for (char *save = NULL, *line = strtok_r (conf, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char addr[128];
      if (sscanf (line, " nameserver %127s", addr) == 1 && dns_parse_upstream (addr, &u->addr, &u->len) == 0)
        return 0;
    }
  return asbx_error (err, ENOENT, "no upstream resolver: no usable nameserver in /etc/resolv.conf");
}

int
dns_upstream_check (const struct dns_upstream *u, asbx_err_t *err)
{
  int probe_fd = socket (u->addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe_fd < 0)
    return asbx_error (err, errno, "upstream socket");
  close (probe_fd);
  return 0;
}

uint16_t
dns_upstream_id (uint16_t prev)
{
  /* 256 ids per getrandom(2) (issue 20: one syscall per query before); each id is used once */
  static uint16_t pool[256];
  static size_t left;
  uint16_t id = prev;
  if (left == 0 && getrandom (pool, sizeof pool, 0) == (ssize_t) sizeof pool)
    left = ASBX_ARRAY_SIZE (pool);
  if (left == 0)
    return id ^ (uint16_t) now_ns ();
  id = pool[--left];
  pool[left] = 0; /* not kept past its use */
  return id;
}

/* a new socket connected to u (the kernel picks a random ephemeral port), or -1 */
static int
connected (const struct dns_upstream *u)
{
  int fd = socket (u->addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd >= 0 && connect (fd, (const struct sockaddr *) &u->addr, u->len) < 0)
    {
      close (fd);
      return -1;
    }
  return fd;
}

void
dns_upstream_refill (struct dns_upstream *u)
{
  if (u->spare < 0)
    u->spare = connected (u);
}

void
dns_upstream_close (struct dns_upstream *u)
{
  if (u->spare >= 0)
    close (u->spare);
  u->spare = -1;
}

int
dns_upstream_send (struct dns_upstream *u, int ep, const unsigned char *q, size_t qlen)
{
  struct epoll_event ev = { .events = EPOLLIN };
  int fd = u->spare >= 0 ? u->spare : connected (u);
  u->spare = -1;
  ev.data.fd = fd;
  if (fd < 0 || epoll_ctl (ep, EPOLL_CTL_ADD, fd, &ev) < 0 || send (fd, q, qlen, 0) < 0)
    {
      if (fd >= 0)
        close (fd);
      return -1;
    }
  return fd;
}

ssize_t
dns_upstream_recv (const struct dns_upstream *u, int fd, unsigned char *m, size_t size)
{
  struct sockaddr_storage from;
  socklen_t flen = sizeof from;
  ssize_t n = recvfrom (fd, m, size, MSG_DONTWAIT, (struct sockaddr *) &from, &flen);

  if (n < 0)
    return -1;
  if (flen != u->len || memcmp (&from, &u->addr, flen) != 0)
    return 0; /* not from our upstream */
  return n;
}
