/* dns_setlife.c - the stub's lower bound of its set elements' ends (see dns_setlife.h). */
#include <string.h>
#include <sys/socket.h>

#include "policy/nft_ruleset.h"
#include "monitor/dns_setlife.h"

static size_t
alen (int family)
{
  return family == AF_INET ? 4 : 16;
}

/* the entry of a, or -1 */
static int
find (const struct dns_setlife *s, int family, const unsigned char *a)
{
  for (int i = 0; i < DNS_SETLIFE_MAX; i++)
    if (s->e[i].until_ns && s->e[i].family == family && memcmp (s->e[i].a, a, alen (family)) == 0)
      return i;
  return -1;
}

bool
dns_setlife_decide (const struct dns_setlife *s, int family, const unsigned char *a, uint64_t now, uint32_t *ttl)
{
  uint64_t life = (uint64_t) policy_nft_ttl (*ttl) * 1000000000ull;
  int i = find (s, family, a);
  uint64_t left = i >= 0 && s->e[i].until_ns > now ? s->e[i].until_ns - now : 0;
  if (left >= life / 2 && left >= DNS_SETLIFE_MARGIN_NS)
    {
      uint64_t secs = left / 1000000000ull;
      if (*ttl > secs)
        *ttl = (uint32_t) secs; /* no client caches the address past its elements */
      return false;
    }
  if (*ttl > POLICY_NFT_TTL_CEIL)
    *ttl = POLICY_NFT_TTL_CEIL;
  return true;
}

void
dns_setlife_note (struct dns_setlife *s, int family, const unsigned char *a, uint64_t started, uint32_t ttl)
{
  uint64_t until = started + (uint64_t) policy_nft_ttl (ttl) * 1000000000ull - DNS_SETLIFE_MARGIN_NS;
  int i = find (s, family, a);
  if (i < 0)
    {
      i = 0;
      for (int k = 1; k < DNS_SETLIFE_MAX && s->e[i].until_ns; k++)
        if (s->e[k].until_ns < s->e[i].until_ns)
          i = k; /* a free entry (0), else the one that ends first */
    }
  s->e[i].until_ns = until;
  s->e[i].family = family;
  memset (s->e[i].a, 0, sizeof s->e[i].a);
  memcpy (s->e[i].a, a, alen (family));
}
