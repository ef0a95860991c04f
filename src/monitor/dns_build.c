/* dns_build.c - the DNS stub's own queries and rebuilt answers (see dns_build.h).
 *
 * Threat model: the container writes the query (any bytes: trailing data, EDNS options, other
 * classes, letter case as a channel), the upstream or a spoofer the answer (records for other
 * owners, compression loops, addresses of the host's neighbours). Nothing of the container's
 * message is copied upstream: the query is made from the parsed name and type. Nothing of the
 * upstream's message reaches the container unchecked: the answer is written anew from records
 * that were parsed (bounded reads, compression pointers only strictly backwards, so no walk can
 * loop) and admitted. Fuzzed by tests/fuzz/fuzz_dns.c. */
#include <string.h>
#include <sys/socket.h>

#include "monitor/dns_build.h"
#include "monitor/dns_parse.h"

#define CHAIN_MAX 8

bool
dns_qtype_allowed (unsigned qtype)
{
  return qtype == DNS_T_A || qtype == DNS_T_AAAA || qtype == DNS_T_CNAME || qtype == DNS_T_SVCB || qtype == DNS_T_HTTPS;
}

const char *
dns_query_check (const unsigned char *m, size_t len, size_t qend, unsigned *edns_size)
{
  unsigned qtype = dns_get16 (m + qend - 4), qclass = dns_get16 (m + qend - 2);
  *edns_size = 0;
  if (qclass != DNS_C_IN)
    return "dns: class not IN";
  if (!dns_qtype_allowed (qtype))
    return "dns: type not forwarded";
  if (dns_get16 (m + 6) || dns_get16 (m + 8) || dns_get16 (m + 10) > 1)
    return "dns: records in the query";
  if (dns_get16 (m + 10) == 1)
    {
      /* only an OPT (RFC 6891 §6.1.2: root owner); its options are never passed on */
      if (qend + 11 > len || m[qend] != 0 || dns_get16 (m + qend + 1) != DNS_T_OPT)
        return "dns: records in the query";
      unsigned size = dns_get16 (m + qend + 3);
      *edns_size = size < 512 ? 512 : size;
    }
  return NULL;
}

/* name (lowercase dotted, no trailing dot; "" = the root) as wire labels; 0 if it does not fit */
static size_t
put_name (unsigned char *out, size_t outlen, const char *name)
{
  size_t o = 0;
  for (const char *p = name; *p;)
    {
      const char *dot = strchr (p, '.');
      size_t n = dot ? (size_t) (dot - p) : strlen (p);
      if (n == 0 || n > 63 || o + 1 + n + 1 > outlen)
        return 0;
      out[o++] = (unsigned char) n;
      memcpy (out + o, p, n);
      o += n;
      p += n + (dot ? 1 : 0);
    }
  if (o + 1 > outlen)
    return 0;
  out[o++] = 0;
  return o;
}

size_t
dns_build_query (unsigned char *out, size_t outlen, uint16_t id, const char *name, unsigned qtype, size_t *qend)
{
  static const unsigned char opt[11] = { 0, 0, DNS_T_OPT, DNS_EDNS_SIZE >> 8, DNS_EDNS_SIZE & 0xff };
  if (outlen < 12)
    return 0;
  memset (out, 0, 12);
  out[0] = (unsigned char) (id >> 8), out[1] = (unsigned char) id;
  out[2] = 0x01;           /* RD; opcode QUERY, nothing else */
  out[5] = 1, out[11] = 1; /* one question, one OPT */
  size_t n = put_name (out + 12, outlen - 12, name);
  if (!n || 12 + n + 4 + sizeof opt > outlen)
    return 0;
  size_t o = 12 + n;
  out[o++] = (unsigned char) (qtype >> 8), out[o++] = (unsigned char) qtype;
  out[o++] = 0, out[o++] = DNS_C_IN;
  *qend = o;
  memcpy (out + o, opt, sizeof opt);
  return o + sizeof opt;
}

/* The possibly compressed name at m[i] (m[0..len)) as lowercase dotted text in out. Every
 * pointer must point before the previous one (before i for the first): offsets strictly
 * decrease, so the walk ends. Returns the offset just past the name where it starts, or 0
 * (malformed, too long, or bytes that are no host name). */
static size_t
read_name (const unsigned char *m, size_t len, size_t i, char *out, size_t outlen)
{
  size_t o = 0, end = 0, pos = i, limit = i;
  for (;;)
    {
      if (pos >= len)
        return 0;
      unsigned n = m[pos];
      if ((n & 0xc0) == 0xc0)
        {
          if (pos + 2 > len)
            return 0;
          size_t to = (size_t) (n & 0x3f) << 8 | m[pos + 1];
          if (to >= limit)
            return 0;
          end = end ? end : pos + 2;
          limit = pos = to;
          continue;
        }
      if (n & 0xc0)
        return 0;
      if (n == 0)
        break;
      if (pos + 1 + n > len || o + n + 2 > outlen)
        return 0;
      if (o)
        out[o++] = '.';
      for (unsigned k = 0; k < n; k++)
        {
          unsigned char c = m[pos + 1 + k];
          if (!(c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return 0;
          out[o++] = (char) (c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
      pos += 1 + n;
    }
  if (outlen == 0)
    return 0;
  out[o] = '\0';
  return end ? end : pos + 1;
}

struct chain
{
  char name[CHAIN_MAX][256];
  size_t n;
};

static bool
chain_has (const struct chain *c, const char *name)
{
  for (size_t i = 0; i < c->n; i++)
    if (strcmp (c->name[i], name) == 0)
      return true;
  return false;
}

/* one record of the rebuilt answer at out[o]: owner, type, class IN, ttl, rdata */
static size_t
put_rr (unsigned char *out, size_t o, const unsigned char *owner, size_t olen, unsigned type, uint32_t ttl,
        const unsigned char *rd, size_t rdn)
{
  memcpy (out + o, owner, olen);
  o += olen;
  unsigned char f[10] = { (unsigned char) (type >> 8),
                          (unsigned char) type,
                          0,
                          DNS_C_IN,
                          (unsigned char) (ttl >> 24),
                          (unsigned char) (ttl >> 16),
                          (unsigned char) (ttl >> 8),
                          (unsigned char) ttl,
                          (unsigned char) (rdn >> 8),
                          (unsigned char) rdn };
  memcpy (out + o, f, 10);
  memcpy (out + o + 10, rd, rdn);
  return o + 10 + rdn;
}

/* the rdata of one answer record as it is written out (CNAME: the target uncompressed; SVCB and
 * HTTPS: as sent when the target is uncompressed; A/AAAA: as sent), or false to leave it out */
static bool
rr_rdata (const unsigned char *up, size_t rd0, size_t rdlen, unsigned type, unsigned qtype, unsigned char *buf,
          size_t buflen, const unsigned char **rdp, size_t *rdn, char *target)
{
  if (type == DNS_T_CNAME)
    {
      target[0] = '\0';
      if (read_name (up, rd0 + rdlen, rd0, target, 256) != rd0 + rdlen || !target[0])
        return false;
      *rdn = put_name (buf, buflen, target);
      *rdp = buf;
      return *rdn > 0;
    }
  if (type != qtype)
    return false;
  if ((type == DNS_T_A && rdlen == 4) || (type == DNS_T_AAAA && rdlen == 16))
    {
      *rdp = up + rd0, *rdn = rdlen;
      return true;
    }
  if (type != DNS_T_SVCB && type != DNS_T_HTTPS)
    return false;
  size_t p = rd0 + 2, e = rd0 + rdlen;
  while (p < e && up[p] && !(up[p] & 0xc0))
    p += 1 + up[p];
  if (rdlen < 3 || p >= e || up[p] != 0)
    return false; /* a compressed (RFC 9460 §2.2: MUST NOT) or overlong target */
  *rdp = up + rd0, *rdn = rdlen;
  return true;
}

size_t
dns_rebuild_answer (const unsigned char *up, size_t uplen, const unsigned char *q, size_t qend, const unsigned char *cq,
                    size_t cqlen, bool rd, bool edns, unsigned char *out, size_t outlen, dns_admit_fn admit, void *data)
{
  static const unsigned char opt[11] = { 0, 0, DNS_T_OPT, DNS_EDNS_SIZE >> 8, DNS_EDNS_SIZE & 0xff };
  size_t reserve = edns ? sizeof opt : 0;
  struct chain ch;
  ch.n = 1; /* not zeroed: 2 KiB per answer; only name[0..n) is read */
  if (qend < 17 || uplen < qend || !(up[2] & 0x80) || ((up[2] >> 3) & 0xf) != 0 || dns_get16 (up + 4) != 1
      || memcmp (up + 12, q + 12, qend - 12) != 0 || cqlen != qend - 12 || 12 + cqlen + reserve > outlen
      || !read_name (q, qend, 12, ch.name[0], sizeof ch.name[0]))
    return 0;
  unsigned qtype = dns_get16 (q + qend - 4), rcode = up[3] & 0xf, an = 0;
  bool tc = (up[2] & 0x02) != 0;
  size_t o = 12 + cqlen, i = qend;
  memcpy (out + 12, cq, cqlen);
  for (unsigned k = 0; rcode == 0 && k < dns_get16 (up + 6); k++)
    {
      char owner[256], target[256];
      unsigned char ow[256], buf[256];
      const unsigned char *rdp;
      size_t r = read_name (up, uplen, i, owner, sizeof owner), rdn;
      if (!r || r + 10 > uplen)
        break;
      unsigned type = dns_get16 (up + r), cls = dns_get16 (up + r + 2), rdlen = dns_get16 (up + r + 8);
      uint32_t ttl = (uint32_t) dns_get16 (up + r + 4) << 16 | dns_get16 (up + r + 6);
      size_t rd0 = r + 10;
      if (rd0 + rdlen > uplen)
        break;
      i = rd0 + rdlen;
      bool in = chain_has (&ch, owner), addr = type == DNS_T_A || type == DNS_T_AAAA;
      if (cls != DNS_C_IN || !rr_rdata (up, rd0, rdlen, type, qtype, buf, sizeof buf, &rdp, &rdn, target))
        continue;
      if (!in)
        {
          if (addr)
            admit (data, type == DNS_T_A ? AF_INET : AF_INET6, rdp, &ttl, false); /* audited, left out */
          continue;
        }
      size_t olen = put_name (ow, sizeof ow, owner);
      if (o + olen + 10 + rdn + reserve > outlen)
        {
          tc = true;
          break;
        }
      if (addr && admit (data, type == DNS_T_A ? AF_INET : AF_INET6, rdp, &ttl, true) != NULL)
        continue;
      if (type == DNS_T_CNAME && ch.n < CHAIN_MAX && !chain_has (&ch, target))
        memcpy (ch.name[ch.n++], target, sizeof target);
      o = put_rr (out, o, ow, olen, type, ttl, rdp, rdn);
      an++;
    }
  memset (out, 0, 12);
  out[2] = (unsigned char) (0x80 | (tc ? 0x02 : 0) | (rd ? 0x01 : 0));
  out[3] = (unsigned char) (0x80 | rcode);
  out[5] = 1;
  out[6] = (unsigned char) (an >> 8), out[7] = (unsigned char) an;
  out[11] = edns ? 1 : 0;
  memcpy (out + o, opt, reserve);
  return o + reserve;
}

size_t
dns_answer_chain (const unsigned char *up, size_t uplen, size_t qend, char (*names)[256], size_t max)
{
  size_t n = 1;
  if (max < 1 || qend < 17 || uplen < qend || !read_name (up, qend, 12, names[0], 256))
    return 0;
  /* one pass per link: a chain written in any order is found, at most max passes */
  for (bool grew = true; grew && n < max;)
    {
      grew = false;
      size_t i = qend;
      for (unsigned k = 0; k < dns_get16 (up + 6) && n < max; k++)
        {
          char owner[256], target[256];
          size_t r = read_name (up, uplen, i, owner, sizeof owner);
          if (!r || r + 10 > uplen)
            break;
          unsigned type = dns_get16 (up + r), cls = dns_get16 (up + r + 2), rdlen = dns_get16 (up + r + 8);
          size_t rd0 = r + 10;
          if (rd0 + rdlen > uplen)
            break;
          i = rd0 + rdlen;
          if (type != DNS_T_CNAME || cls != DNS_C_IN)
            continue;
          bool in = false, known = false;
          target[0] = '\0';
          if (read_name (up, rd0 + rdlen, rd0, target, sizeof target) != rd0 + rdlen || !target[0])
            continue;
          for (size_t j = 0; j < n; j++)
            {
              in = in || strcmp (names[j], owner) == 0;
              known = known || strcmp (names[j], target) == 0;
            }
          if (in && !known)
            {
              memcpy (names[n++], target, sizeof target);
              grew = true;
            }
        }
    }
  return n;
}

/* ---- special-purpose addresses ---- */

enum
{
  A_GLOBAL = 0,
  A_UNSPEC,
  A_LOOP,
  A_LINK,
  A_PRIV,
  A_CGNAT,
  A_MCAST,
  A_RESV,
  A_N
};

static int
v4_class (const unsigned char *a)
{
  if (a[0] == 0)
    return A_UNSPEC;
  if (a[0] == 127)
    return A_LOOP;
  if (a[0] == 169 && a[1] == 254)
    return A_LINK;
  if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168))
    return A_PRIV;
  if (a[0] == 100 && (a[1] & 0xc0) == 64)
    return A_CGNAT;
  if (a[0] >= 224)
    return a[0] < 240 ? A_MCAST : A_RESV;
  return A_GLOBAL;
}

const char *
dns_addr_special (int family, const unsigned char *a)
{
  static const char *const v4[A_N] = { NULL,      "unspecified", "loopback",  "link-local",
                                       "private", "cgnat",       "multicast", "reserved" };
  static const char *const mapped[A_N] = { NULL,
                                           "ipv4-mapped unspecified",
                                           "ipv4-mapped loopback",
                                           "ipv4-mapped link-local",
                                           "ipv4-mapped private",
                                           "ipv4-mapped cgnat",
                                           "ipv4-mapped multicast",
                                           "ipv4-mapped reserved" };
  static const char *const nat64[A_N] = {
    NULL,          "nat64 unspecified", "nat64 loopback", "nat64 link-local", "nat64 private",
    "nat64 cgnat", "nat64 multicast",   "nat64 reserved"
  };
  static const char *const compat[A_N] = { NULL,
                                           "ipv4-compatible unspecified",
                                           "ipv4-compatible loopback",
                                           "ipv4-compatible link-local",
                                           "ipv4-compatible private",
                                           "ipv4-compatible cgnat",
                                           "ipv4-compatible multicast",
                                           "ipv4-compatible reserved" };
  static const unsigned char zero[16], pfx_mapped[12] = { [10] = 0xff, [11] = 0xff },
                                       pfx_nat64[4] = { 0, 0x64, 0xff, 0x9b };
  if (family == AF_INET)
    return v4[v4_class (a)];
  if (memcmp (a, zero, 15) == 0 && a[15] <= 1)
    return a[15] ? "loopback" : "unspecified";
  if (memcmp (a, pfx_mapped, 12) == 0)
    return mapped[v4_class (a + 12)];
  if (memcmp (a, pfx_nat64, 4) == 0 && a[4] == 0 && a[5] <= 1) /* 64:ff9b::/96, 64:ff9b:1::/48 (RFC 8215) */
    return nat64[v4_class (a + 12)] ? nat64[v4_class (a + 12)] : (a[5] ? "nat64 local-use" : NULL);
  if (memcmp (a, zero, 12) == 0)
    return compat[v4_class (a + 12)] ? compat[v4_class (a + 12)] : "ipv4-compatible";
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
    return "link-local";
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
    return "site-local";
  if ((a[0] & 0xfe) == 0xfc)
    return "ula";
  if (a[0] == 0xff)
    return "multicast";
  return NULL;
}
