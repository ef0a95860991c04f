/* splice_names.c - what the SNI/Host check knows of names and addresses (splice.h): the names
 * the DNS stub let through while their sets live, the intercepted hosts (the TLS relay's), and
 * the intercepted addresses kept for the container's life (splice_internal.h intercepted_addrs).
 * Split from splice.c, the relay itself; same contract. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/nft_ruleset.h"
#include "monitor/splice.h"
#include "monitor/splice_internal.h"
#include "monitor/tls_relay.h"

bool
splice_name_allowed (struct splice *s, const char *host)
{
  uint64_t now = now_ns ();
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->resolved); i++)
    if (s->resolved[i].until_ns > now && strcmp (s->resolved[i].name, host) == 0)
      return true;
  return false;
}

/* ttl seconds, clamped like the set elements', from now: the end in ns */
static uint64_t
ttl_end (uint32_t ttl)
{
  ttl = ttl < POLICY_NFT_TTL_FLOOR ? POLICY_NFT_TTL_FLOOR : ttl > POLICY_NFT_TTL_CEIL ? POLICY_NFT_TTL_CEIL : ttl;
  return now_ns () + (uint64_t) ttl * 1000000000u;
}

/* the destination as an IPv6 address (IPv4 v4-mapped) */
static struct in6_addr
dst6 (const struct sockaddr_storage *ss)
{
  struct in6_addr a = { 0 };
  if (ss->ss_family == AF_INET6)
    return ((const struct sockaddr_in6 *) ss)->sin6_addr;
  a.s6_addr[10] = a.s6_addr[11] = 0xff;
  memcpy (&a.s6_addr[12], &((const struct sockaddr_in *) ss)->sin_addr, 4);
  return a;
}

bool
splice_intercepts (const struct splice *s, const char *name)
{
  return s->tls && tls_relay_wants (s->tls, name);
}

/* the entry of a (v4-mapped for IPv4), or NULL. An address of the well-known NAT64 prefix
 * (64:ff9b::/96, RFC 6052) is looked up as the IPv4 address it embeds: through a NAT64 gateway
 * it reaches that address. */
static const char *
addr_host (const struct splice *s, const struct in6_addr *a)
{
  static const unsigned char nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
  struct in6_addr k = *a;
  if (memcmp (k.s6_addr, nat64, sizeof nat64) == 0)
    {
      memset (k.s6_addr, 0, 10);
      k.s6_addr[10] = k.s6_addr[11] = 0xff;
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->intercepted_addrs); i++)
    if (s->intercepted_addrs[i].seen_ns && memcmp (&s->intercepted_addrs[i].addr, &k, sizeof k) == 0)
      return s->intercepted_addrs[i].host;
  return NULL;
}

void
splice_on_intercepted (struct splice *s, splice_intercepted_fn fn, void *data)
{
  s->on_icpt = fn;
  s->on_icpt_data = data;
}

void
splice_addr_resolved (struct splice *s, const char *name, const char *addr, uint32_t ttl)
{
  struct in6_addr a = { 0 };
  struct in_addr a4;
  size_t slot = 0;
  bool known = false;

  (void) ttl; /* kept for the container's life (splice_internal.h: intercepted_addrs) */
  if (!splice_intercepts (s, name))
    return;
  if (inet_pton (AF_INET6, addr, &a) != 1)
    {
      if (inet_pton (AF_INET, addr, &a4) != 1)
        return;
      a.s6_addr[10] = a.s6_addr[11] = 0xff;
      memcpy (&a.s6_addr[12], &a4, 4);
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->intercepted_addrs); i++)
    {
      if (s->intercepted_addrs[i].seen_ns && memcmp (&s->intercepted_addrs[i].addr, &a, sizeof a) == 0)
        {
          slot = i;
          known = true;
          break;
        }
      if (s->intercepted_addrs[i].seen_ns < s->intercepted_addrs[slot].seen_ns)
        slot = i; /* else the entry seen longest ago (or a free one) makes room */
    }
  s->intercepted_addrs[slot].addr = a;
  s->intercepted_addrs[slot].seen_ns = now_ns ();
  snprintf (s->intercepted_addrs[slot].host, sizeof s->intercepted_addrs[slot].host, "%s", name);
  if (!known && s->on_icpt)
    {
      static const unsigned char v4mapped[12] = { [10] = 0xff, [11] = 0xff };
      bool v4 = memcmp (a.s6_addr, v4mapped, sizeof v4mapped) == 0;
      s->on_icpt (s->on_icpt_data, v4 ? AF_INET : AF_INET6, v4 ? &a.s6_addr[12] : a.s6_addr);
    }
}

const char *
splice_addr_intercepted (const struct splice *s, int family, const unsigned char *addr)
{
  struct in6_addr a = { 0 };
  if (family == AF_INET6)
    memcpy (&a, addr, 16);
  else
    {
      a.s6_addr[10] = a.s6_addr[11] = 0xff;
      memcpy (&a.s6_addr[12], addr, 4);
    }
  return addr_host (s, &a);
}

const char *
splice_dst_intercepted (const struct splice *s, const struct conn *c)
{
  struct in6_addr a = dst6 (&c->dst);
  return addr_host (s, &a);
}

void
splice_name_resolved (struct splice *s, const char *name, uint32_t ttl)
{
  uint64_t until = ttl_end (ttl); /* as long as the set elements the answer made */
  size_t slot = 0;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->resolved); i++)
    {
      if (strcmp (s->resolved[i].name, name) == 0)
        {
          slot = i;
          break;
        }
      if (s->resolved[i].until_ns < s->resolved[slot].until_ns)
        slot = i; /* else the entry that ends first makes room */
    }
  if (strcmp (s->resolved[slot].name, name) == 0 && s->resolved[slot].until_ns > until)
    return;
  snprintf (s->resolved[slot].name, sizeof s->resolved[slot].name, "%s", name);
  s->resolved[slot].until_ns = until;
}
