/* nft_ruleset.c - the network policy as nftables text (pure; see nft_ruleset.h).
 *
 * Threat model: everything in the container is hostile, including code that holds every
 * capability except CAP_NET_ADMIN (it cannot touch the table). It may use any address family,
 * raw or mapped addresses (`::ffff:a.b.c.d` leaves as IPv4 and meets the same rules), any
 * resolver address (all port-53 traffic is redirected to the stub), and UDP to any port.
 * Ordering inside the output chain matters: the DNS-stub accept comes before the loopback
 * decision (the stub stays reachable when allowLocalBinding is false), and the reject rules are
 * last, so anything not granted above is refused at once rather than left to time out. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/nft_ruleset.h"

/* Canonical allowedCidrs forms (values.c pval_cidr): "a.b.c.d/n", "a.b.c.d/n:port", "v6/n",
 * "[v6]/n:port". Writes the "addr/n" part into pfx and the port (0 = any). */
static int
cidr_split (const char *s, char *pfx, size_t pfxlen, int *family, unsigned *port)
{
  char addr[INET6_ADDRSTRLEN + 8];
  unsigned char bin[16];
  const char *rest;
  unsigned bits;
  int used = 0;

  *port = 0;
  if (*s == '[')
    {
      const char *e = strchr (s, ']');
      if (!e || (size_t) (e - s - 1) >= sizeof addr)
        return -1;
      memcpy (addr, s + 1, (size_t) (e - s - 1));
      addr[e - s - 1] = '\0';
      rest = e + 1;
    }
  else
    {
      const char *slash = strchr (s, '/');
      if (!slash || (size_t) (slash - s) >= sizeof addr)
        return -1;
      memcpy (addr, s, (size_t) (slash - s));
      addr[slash - s] = '\0';
      rest = slash;
    }
  if (inet_pton (AF_INET, addr, bin) == 1)
    *family = AF_INET;
  else if (inet_pton (AF_INET6, addr, bin) == 1)
    *family = AF_INET6;
  else
    return -1;
  if (sscanf (rest, "/%u%n", &bits, &used) != 1 || bits > (*family == AF_INET ? 32u : 128u))
    return -1;
  rest += used;
  if (*rest == ':' && (sscanf (rest + 1, "%u%n", port, &used) != 1 || *port == 0 || *port > 65535 || rest[1 + used]))
    return -1;
  if (*rest && *rest != ':')
    return -1;
  if ((size_t) snprintf (pfx, pfxlen, "%s/%u", addr, bits) >= pfxlen)
    return -1;
  return 0;
}

bool
policy_nft_has_intercept_sets (const struct policy_plan *plan)
{
  return plan && plan->net_mode == POLICY_NET_FILTERED && plan->allowed_cidrs_len
         && (plan->credentials_len || plan->http_hosts_len);
}

static void
emit_sets (FILE *f, const struct policy_plan *plan)
{
  if (policy_nft_has_intercept_sets (plan))
    fprintf (f, "\tset " POLICY_NFT_ICPT4 " {\n\t\ttype ipv4_addr\n\t}\n\tset " POLICY_NFT_ICPT6
                " {\n\t\ttype ipv6_addr\n\t}\n");
  fprintf (f, "\tset " POLICY_NFT_SET4 " {\n\t\ttype ipv4_addr . inet_service\n\t\tflags timeout\n\t}\n");
  fprintf (f, "\tset " POLICY_NFT_SET6 " {\n\t\ttype ipv6_addr . inet_service\n\t\tflags timeout\n\t}\n");
  /* every DNS query, to any address, goes to the stub (nat runs before the filter chains) */
  /* TCP to an address+port a name opened goes to the monitor's SNI/Host check first; its own
   * upstream connections carry the mark and go out as they are */
  fprintf (f,
           "\tchain dns {\n\t\ttype nat hook output priority -100; policy accept;\n"
           "\t\tmeta l4proto { tcp, udp } th dport %d redirect to :%d\n"
           "\t\tmeta mark != 0x%08x ip daddr . tcp dport @" POLICY_NFT_SET4 " redirect to :%d\n"
           "\t\tmeta mark != 0x%08x ip6 daddr . tcp dport @" POLICY_NFT_SET6 " redirect to :%d\n\t}\n",
           POLICY_NFT_DNS_PORT, POLICY_NFT_DNS_PORT, POLICY_NFT_SPLICE_MARK, POLICY_NFT_SPLICE_PORT,
           POLICY_NFT_SPLICE_MARK, POLICY_NFT_SPLICE_PORT);
}

/* Our own reject rules answer a refused packet with a TCP reset or an ICMP error addressed to
 * the sender - the container itself - over loopback. Those answers pass both chains again;
 * without these rules they would be dropped when allowLocalBinding is false, and the refused
 * connect would hang instead of failing at once. Over loopback they reach nothing outside. */
static void
emit_rejects_over_lo (FILE *f, const char *dir)
{
  fprintf (f, "\t\t%s \"lo\" tcp flags & rst == rst accept\n", dir);
  fprintf (f, "\t\t%s \"lo\" icmp type destination-unreachable accept\n", dir);
  fprintf (f, "\t\t%s \"lo\" icmpv6 type destination-unreachable accept\n", dir);
}

/* What is refused is logged to the monitor (monitor/nflog.c), rate limited so a flood cannot
 * drown the audit log; a packet the limit keeps from the log goes on to the next rule and is
 * counted there, in the named counter the monitor reads (monitor/nflog.c): every refused
 * packet is either logged or counted, never neither. A regular chain, so `return` goes back to
 * the output chain's reject rules. */
static void
emit_log_chain (FILE *f)
{
  fprintf (f, "\tcounter " POLICY_NFT_UNLOGGED " { }\n");
  fprintf (f,
           "\tchain " POLICY_NFT_LOG_CHAIN " {\n\t\tlimit rate " POLICY_NFT_LOG_RATE
           " log prefix \"" POLICY_NFT_LOG_PREFIX "\" group %d return\n\t\tcounter name \"" POLICY_NFT_UNLOGGED
           "\"\n\t}\n",
           POLICY_NFT_LOG_GROUP);
}

static int
emit_output (FILE *f, const struct policy_plan *plan, asbx_err_t *err)
{
  bool filtered = plan->net_mode == POLICY_NET_FILTERED;

  fprintf (f, "\tchain output {\n\t\ttype filter hook output priority 0; policy drop;\n");
  emit_rejects_over_lo (f, "oifname");
  if (filtered)
    fprintf (f,
             "\t\tip daddr 127.0.0.1 meta l4proto { tcp, udp } th dport %d accept\n"
             "\t\tip6 daddr ::1 meta l4proto { tcp, udp } th dport %d accept\n"
             "\t\tip daddr 127.0.0.1 tcp dport %d accept\n\t\tip6 daddr ::1 tcp dport %d accept\n",
             POLICY_NFT_DNS_PORT, POLICY_NFT_DNS_PORT, POLICY_NFT_SPLICE_PORT, POLICY_NFT_SPLICE_PORT);
  if (plan->allow_local_binding)
    fprintf (f, "\t\toifname \"lo\" accept\n");
  if (filtered)
    {
      fprintf (f, "\t\tct state established,related accept\n");
      fprintf (f, "\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit } accept\n");
      /* TCP only: what a name opened is checked by name (SNI/Host), which UDP (QUIC) is not */
      fprintf (f, "\t\tip daddr . tcp dport @" POLICY_NFT_SET4 " accept\n");
      fprintf (f, "\t\tip6 daddr . tcp dport @" POLICY_NFT_SET6 " accept\n");
      /* an intercepted host's address is reached only through the TLS relay (redirected by
       * the nat chain when a name opened it, so never seen here as such): not by a range */
      if (policy_nft_has_intercept_sets (plan))
        {
          const char *fam[] = { "ip daddr @" POLICY_NFT_ICPT4, "ip6 daddr @" POLICY_NFT_ICPT6 };
          for (size_t k = 0; k < 2; k++)
            {
              if (plan->audit_events & POLICY_AUDIT_NETWORK)
                fprintf (f, "\t\t%s jump " POLICY_NFT_LOG_CHAIN "\n", fam[k]);
              fprintf (
                  f, "\t\t%s meta l4proto tcp reject with tcp reset\n\t\t%s reject with icmpx type admin-prohibited\n",
                  fam[k], fam[k]);
            }
        }
      for (size_t i = 0; i < plan->allowed_cidrs_len; i++)
        {
          char pfx[INET6_ADDRSTRLEN + 8];
          int family;
          unsigned port;
          if (cidr_split (plan->allowed_cidrs[i], pfx, sizeof pfx, &family, &port) < 0)
            return asbx_error (err, EINVAL, "network.allowedCidrs[%zu]: `%s` is not in canonical form", i,
                               plan->allowed_cidrs[i]);
          if (port)
            fprintf (f, "\t\t%s daddr %s meta l4proto { tcp, udp } th dport %u accept\n",
                     family == AF_INET ? "ip" : "ip6", pfx, port);
          else
            fprintf (f, "\t\t%s daddr %s accept\n", family == AF_INET ? "ip" : "ip6", pfx);
        }
    }
  /* filtered with `network` audit: what is refused goes past the log chain first */
  if (filtered && (plan->audit_events & POLICY_AUDIT_NETWORK))
    fprintf (f, "\t\tjump " POLICY_NFT_LOG_CHAIN "\n");
  /* refuse the rest at once: a reset for TCP, ICMP admin-prohibited for everything else */
  fprintf (f, "\t\tmeta l4proto tcp reject with tcp reset\n\t\treject with icmpx type admin-prohibited\n\t}\n");
  return 0;
}

static void
emit_input (FILE *f, const struct policy_plan *plan)
{
  bool filtered = plan->net_mode == POLICY_NET_FILTERED;

  fprintf (f, "\tchain input {\n\t\ttype filter hook input priority 0; policy drop;\n");
  emit_rejects_over_lo (f, "iifname");
  if (filtered)
    fprintf (
        f, "\t\tiifname \"lo\" meta l4proto { tcp, udp } th dport %d accept\n\t\tiifname \"lo\" tcp dport %d accept\n",
        POLICY_NFT_DNS_PORT, POLICY_NFT_SPLICE_PORT);
  if (plan->allow_local_binding)
    fprintf (f, "\t\tiifname \"lo\" accept\n");
  if (filtered)
    {
      fprintf (f, "\t\tct state established,related accept\n");
      fprintf (f, "\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-advert } accept\n");
    }
  fprintf (f, "\t}\n");
}

int
policy_nft_ruleset (const struct policy_plan *plan, char **out, asbx_err_t *err)
{
  cleanup_free char *buf = NULL;
  size_t len = 0;
  FILE *f;
  int r;

  *out = NULL;
  if (!plan || !plan->active || plan->net_mode == POLICY_NET_OPEN)
    return 0;
  f = open_memstream (&buf, &len);
  if (!f)
    return asbx_error (err, errno, "open_memstream");
  /* add + delete + define: one transaction that replaces any earlier copy of the table */
  fprintf (f, "table inet " POLICY_NFT_TABLE "\ndelete table inet " POLICY_NFT_TABLE "\n");
  fprintf (f, "table inet " POLICY_NFT_TABLE " {\n");
  if (plan->net_mode == POLICY_NET_FILTERED)
    emit_sets (f, plan);
  if (plan->net_mode == POLICY_NET_FILTERED && (plan->audit_events & POLICY_AUDIT_NETWORK))
    emit_log_chain (f); /* before the output chain that jumps to it */
  r = emit_output (f, plan, err);
  if (r == 0)
    emit_input (f, plan);
  fprintf (f, "}\n");
  if (fclose (f) != 0 && r == 0)
    return asbx_error (err, errno, "open_memstream");
  if (r < 0)
    return -1;
  *out = steal_ptr (&buf);
  return 0;
}

uint32_t
policy_nft_ttl (uint32_t t)
{
  return t < POLICY_NFT_TTL_FLOOR ? POLICY_NFT_TTL_FLOOR : t > POLICY_NFT_TTL_CEIL ? POLICY_NFT_TTL_CEIL : t;
}

char *
policy_nft_allow_cmd (const char *addr, const uint16_t *ports, size_t n, uint32_t timeout_s)
{
  unsigned char bin[16];
  const char *set;
  cleanup_free char *elems = NULL, *bare = NULL;
  size_t len = 0;
  FILE *f;

  if (inet_pton (AF_INET, addr, bin) == 1)
    set = POLICY_NFT_SET4;
  else if (inet_pton (AF_INET6, addr, bin) == 1)
    set = POLICY_NFT_SET6;
  else
    return NULL;
  if (n == 0)
    return NULL;
  f = open_memstream (&elems, &len);
  if (!f)
    return NULL;
  for (size_t i = 0; i < n; i++)
    fprintf (f, "%s%s . %u timeout %us", i ? ", " : "", addr, (unsigned) ports[i], policy_nft_ttl (timeout_s));
  if (fclose (f) != 0)
    return NULL;
  f = open_memstream (&bare, &len);
  if (!f)
    return NULL;
  for (size_t i = 0; i < n; i++)
    fprintf (f, "%s%s . %u", i ? ", " : "", addr, (unsigned) ports[i]);
  if (fclose (f) != 0)
    return NULL;
  /* add (no-op when present), delete, add: the element ends up with the new timeout either way */
  return xasprintf ("add element inet %s %s { %s }\ndelete element inet %s %s { %s }\n"
                    "add element inet %s %s { %s }\n",
                    POLICY_NFT_TABLE, set, bare, POLICY_NFT_TABLE, set, bare, POLICY_NFT_TABLE, set, elems);
}
