/* dns_rebind.c - the addresses an allowed name's answer may not open (see dns_rebind.h).
 * Threat model: the answer's addresses are chosen by whoever controls the allowed domain's
 * zone (or spoofs the upstream); nothing here trusts them. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/doc.h"
#include "monitor/dns_build.h"
#include "monitor/dns_rebind.h"

void
dns_rebind_init (struct dns_rebind *r, const struct policy_plan *plan)
{
  struct ifaddrs *ifa = NULL;
  r->plan = plan;
  r->host_len = 0;
  if (getifaddrs (&ifa) < 0)
    return;
  for (struct ifaddrs *i = ifa; i && r->host_len < ASBX_ARRAY_SIZE (r->host); i = i->ifa_next)
    {
      if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
        continue;
      typeof (r->host[0]) *h = &r->host[r->host_len++];
      h->family = i->ifa_addr->sa_family;
      if (h->family == AF_INET)
        memcpy (h->a, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, 4);
      else
        memcpy (h->a, &((struct sockaddr_in6 *) i->ifa_addr)->sin6_addr, 16);
    }
  freeifaddrs (ifa);
}

/* an allowedCidrs entry covering the address (with any port: the entry's own port is given to
 * the address so that pval_cidr_covers compares prefixes only) */
static bool
cidr_lifts (const struct policy_plan *pl, int family, const char *text)
{
  for (size_t i = 0; i < pl->allowed_cidrs_len; i++)
    {
      const char *c = pl->allowed_cidrs[i], *slash = strchr (c, '/'), *port = slash ? strchr (slash, ':') : NULL;
      cleanup_free char *inner = port ? xasprintf (family == AF_INET ? "%s/32%s" : "[%s]/128%s", text, port)
                                      : xasprintf (family == AF_INET ? "%s/32" : "%s/128", text);
      if (pval_cidr_covers (c, inner))
        return true;
    }
  return false;
}

const char *
dns_rebind_refused (const struct dns_rebind *r, int family, const unsigned char *a, const char *text)
{
  static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };
  if (cidr_lifts (r->plan, family, text))
    return NULL;
  const char *why = dns_addr_special (family, a);
  if (why)
    return why;
  for (size_t i = 0; i < r->host_len; i++)
    {
      const typeof (r->host[0]) *h = &r->host[i];
      if ((h->family == family && memcmp (h->a, a, family == AF_INET ? 4 : 16) == 0)
          || (h->family == AF_INET && family == AF_INET6 && memcmp (a, mapped, 12) == 0
              && memcmp (h->a, a + 12, 4) == 0))
        return "host address";
    }
  return NULL;
}
