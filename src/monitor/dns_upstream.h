/* dns_upstream.h - the DNS stub's upstream resolver (monitor/dnsstub.h): its address, and the
 * per-query upstream sockets (issue 14) - one fresh UDP socket per forwarded query, connected
 * to the upstream (the kernel then drops datagrams from any other address or port) and so bound
 * to a random ephemeral port (ip_local_port_range), under a fresh random query id: an off-path
 * spoofer must guess port and id. The next query's socket is made ahead (dns_upstream_refill,
 * after an answer is sent: socket + connect off the query's path, issue 20); its port is as
 * random, it is polled only once its query is sent, and what it received before (only the
 * upstream's address and port can reach a connected socket) fails the id check. The sockets live in the monitor's
 * (host's) network namespace: the container's table never sees that traffic. */
#ifndef ASBX_MONITOR_DNS_UPSTREAM_H
#define ASBX_MONITOR_DNS_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/error.h"

struct dns_upstream
{
  struct sockaddr_storage addr;
  socklen_t len;
  int spare; /* the next query's socket (connected, not yet polled), or -1; owned by this copy */
};

/* Fill *u (spare -1): $AGENTSBX_UPSTREAM_DNS ("ADDR[:PORT]", "[V6]:PORT") when set, else the first usable
 * `nameserver` of /etc/resolv.conf. 0 / -1 with *err (EINVAL naming the variable; ENOENT: no
 * usable nameserver; the read's errno wrapped as "no upstream resolver"). */
int dns_upstream_find (struct dns_upstream *u, asbx_err_t *err);

/* Check that a socket of u's family can be had at all (the real ones are made per query).
 * 0 / -1 with *err ("upstream socket", socket(2)'s errno). */
int dns_upstream_check (const struct dns_upstream *u, asbx_err_t *err);

/* A fresh random query id (from getrandom(2), 256 at a time, each handed out once; should that
 * fail, `prev` mixed with the clock). Not thread-safe (the monitor's loop is one thread). */
uint16_t dns_upstream_id (uint16_t prev);

/* Send the query q[0..qlen) from a socket of its own (u's spare, else a new one): non-blocking,
 * connected to u, added to the epoll set ep (EPOLLIN, data.fd = the socket). Returns the socket
 * (the caller closes it, which also ends its epoll registration), or -1 with nothing left open
 * (the client retries). */
int dns_upstream_send (struct dns_upstream *u, int ep, const unsigned char *q, size_t qlen);

/* Make u's spare socket if there is none (a failure leaves it -1: the next send makes its own). */
void dns_upstream_refill (struct dns_upstream *u);

/* Close u's spare socket (u's end). */
void dns_upstream_close (struct dns_upstream *u);

/* One datagram from the per-query socket fd into m[0..size), never blocking: its length; 0 when
 * one was read that did not come from u's address and port (dropped: the query waits on); -1
 * when none could be read (errno: EAGAIN when there is none). */
ssize_t dns_upstream_recv (const struct dns_upstream *u, int fd, unsigned char *m, size_t size);

#endif
