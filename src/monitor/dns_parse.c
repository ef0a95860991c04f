/* dns_parse.c - the DNS stub's message parsers (RFC 1035 §4.1), see dns_parse.h.
 *
 * Threat model: queries come from the container (any bytes, any length up to the stub's
 * buffer), answers from the upstream resolver or anyone spoofing it. Every read is bounded by
 * len before it happens; offsets only grow, so no input can make a walk loop; compression
 * pointers are skipped, never followed. The stub uses the results only for decisions and
 * copies (the name it matches against the policy, the addresses it puts into nft sets as
 * inet_ntop text): nothing here trusts a length field of the message.
 * Fuzzed by tests/fuzz/fuzz_dns.c. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "monitor/dns_parse.h"

int
dns_parse_question (const unsigned char *m, size_t len, char *name, size_t namelen, unsigned *qtype, size_t *end)
{
  size_t i = 12, o = 0;

  if (len < 12 || (m[2] & 0x80) || ((m[2] >> 3) & 0xf) != 0 || dns_get16 (m + 4) != 1)
    return -1;
  while (i < len && m[i])
    {
      unsigned n = m[i];
      if (n > 63 || i + 1 + n > len || o + n + 2 > namelen)
        return -1; /* compression pointers have no place in a question */
      if (o)
        name[o++] = '.';
      for (unsigned k = 0; k < n; k++)
        {
          unsigned char c = m[i + 1 + k];
          if (!(c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return -1; /* '*', '.', bytes: no such host name */
          name[o++] = (char) (c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
      i += 1 + n;
    }
  if (i + 5 > len || o == 0)
    return -1;
  name[o] = '\0';
  *qtype = dns_get16 (m + i + 1);
  *end = i + 5;
  return 0;
}

int
dns_question_text (const unsigned char *m, size_t len, char *text, size_t textlen, unsigned *qtype, size_t *end)
{
  size_t i = 12, o = 0;
  bool cut = false;
  char esc[8];

  text[0] = '\0';
  if (len < 12 || (m[2] & 0x80) || ((m[2] >> 3) & 0xf) != 0 || dns_get16 (m + 4) != 1)
    return -1;
  while (i < len && m[i])
    {
      unsigned n = m[i];
      if (n > 63 || i + 1 + n > len)
        return -1;
      for (unsigned k = 0; k <= n; k++)
        {
          unsigned char c = k ? m[i + k] : '.';
          bool plain = c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
                       || (c >= 'A' && c <= 'Z');
          if (k == 0 && i == 12)
            continue; /* no dot before the first label */
          if (k == 0 || plain)
            esc[0] = (char) c, esc[1] = '\0';
          else
            snprintf (esc, sizeof esc, "\\%03u", c);
          size_t el = strlen (esc);
          cut = cut || o + el >= textlen;
          if (!cut)
            memcpy (text + o, esc, el), o += el;
        }
      i += 1 + n;
    }
  if (i + 5 > len)
    return -1;
  if (o == 0 && textlen > 1)
    text[o++] = '.';
  text[o] = '\0';
  *qtype = dns_get16 (m + i + 1);
  *end = i + 5;
  return 0;
}

size_t
dns_skip_name (const unsigned char *m, size_t len, size_t i)
{
  while (i < len)
    {
      if ((m[i] & 0xc0) == 0xc0)
        return i + 2 <= len ? i + 2 : 0;
      if (m[i] == 0)
        return i + 1;
      i += 1 + m[i];
    }
  return 0;
}

size_t
dns_make_refused (unsigned char *m, size_t qend)
{
  m[2] = (unsigned char) ((m[2] & 0x79) | 0x80); /* QR, keep opcode 0 and RD */
  m[3] = 0x80 | 5;                               /* RA, REFUSED */
  memset (m + 6, 0, 6);                          /* no answer, authority, additional records */
  return qend;
}

void
dns_answer_begin (struct dns_answer_iter *it, const unsigned char *m, size_t len, size_t qend)
{
  *it = (struct dns_answer_iter){ .i = qend, .k = 0, .an = len >= 12 ? dns_get16 (m + 6) : 0 };
}

bool
dns_answer_next (struct dns_answer_iter *it, const unsigned char *m, size_t len, struct dns_addr_rr *rr)
{
  while (it->k < it->an)
    {
      it->k++;
      size_t i = dns_skip_name (m, len, it->i);
      if (!i || i + 10 > len)
        break;
      unsigned type = dns_get16 (m + i), rdlen = dns_get16 (m + i + 8);
      uint32_t ttl = (uint32_t) dns_get16 (m + i + 4) << 16 | dns_get16 (m + i + 6);
      i += 10;
      if (i + rdlen > len)
        break;
      it->i = i + rdlen;
      if ((type == 1 && rdlen == 4) || (type == 28 && rdlen == 16))
        {
          *rr = (struct dns_addr_rr){ .family = type == 1 ? AF_INET : AF_INET6, .addr = m + i, .ttl = ttl };
          return true;
        }
    }
  it->k = it->an; /* a record that does not fit ends the walk for good */
  return false;
}

int
dns_parse_upstream (const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
  char host[INET6_ADDRSTRLEN + 1];
  unsigned port = 53;
  const char *p = NULL;
  size_t n;

  if (*s == '[')
    {
      const char *e = strchr (s, ']');
      if (!e || (n = (size_t) (e - s - 1)) >= sizeof host)
        return -1;
      memcpy (host, s + 1, n);
      host[n] = '\0';
      if (e[1] == ':')
        p = e + 2;
      else if (e[1])
        return -1;
    }
  else
    {
      const char *c = strchr (s, ':');
      bool v6 = c && strchr (c + 1, ':');
      n = v6 || !c ? strlen (s) : (size_t) (c - s);
      if (n >= sizeof host)
        return -1;
      memcpy (host, s, n);
      host[n] = '\0';
      if (!v6 && c)
        p = c + 1;
    }
  if (p && (sscanf (p, "%u", &port) != 1 || port == 0 || port > 65535))
    return -1;
  memset (ss, 0, sizeof *ss);
  struct sockaddr_in *a4 = (struct sockaddr_in *) ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) ss;
  if (inet_pton (AF_INET, host, &a4->sin_addr) == 1)
    {
      a4->sin_family = AF_INET;
      a4->sin_port = htons ((uint16_t) port);
      *len = sizeof *a4;
    }
  else if (inet_pton (AF_INET6, host, &a6->sin6_addr) == 1)
    {
      a6->sin6_family = AF_INET6;
      a6->sin6_port = htons ((uint16_t) port);
      *len = sizeof *a6;
    }
  else
    return -1;
  return 0;
}
