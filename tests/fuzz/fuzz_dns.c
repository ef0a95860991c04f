/* fuzz_dns.c - libFuzzer entry point for the DNS stub's message parsers (src/monitor/dns_parse.c).
 *
 * The input is one DNS message, as the container (a query) or the upstream or a spoofer (an
 * answer) could send it; it is copied into a buffer of exactly its size so that ASan sees any
 * read past the message. It goes through what dnsstub.c does with it:
 *   - as a query: dns_parse_question, then dns_make_refused on a copy (the REFUSED reply);
 *   - as an answer: the question with QR cleared (on_answer's trick), then every A/AAAA record
 *     of the answer section through inet_ntop, as fill_sets does;
 *   - as the records of an answer to the stub's own query (dns_build_query for the parsed name,
 *     monitor/dns_build.c): dns_rebuild_answer into buffers of the input's choosing, each admitted
 *     address inside the message, the result no longer than its buffer and parsed back as an
 *     answer with the client's question; dns_query_check and dns_addr_special on the way;
 *   - dns_skip_name from a few offsets chosen by the input itself.
 * Besides the sanitizers, it checks the contracts the stub relies on: a parsed name is a
 * NUL-terminated lowercase host name of at most namelen - 1 bytes, offsets never pass the
 * message's end, the walk yields at most ANCOUNT records and its addresses lie inside the message,
 * and a name buffer of any size (down to 1 byte) is never overrun.
 * Build and run: tests/fuzz/run-all.sh (FUZZ_TARGETS=dns). */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "monitor/dns_build.h"
#include "monitor/dns_parse.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(c)                                                                                                       \
  do                                                                                                                   \
    {                                                                                                                  \
      if (!(c))                                                                                                        \
        abort ();                                                                                                      \
    }                                                                                                                  \
  while (0)

static void
check_name (const char *name, size_t namelen)
{
  size_t n = strnlen (name, namelen);
  CHECK (n > 0 && n < namelen);
  CHECK (name[0] != '.' && name[n - 1] != '.');
  for (size_t i = 0; i < n; i++)
    {
      char c = name[i];
      CHECK (c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'));
      CHECK (!(c == '.' && name[i + 1] == '.'));
    }
}

/* as a query from the container: the stub's handle_query and refuse */
static void
as_query (const unsigned char *m, size_t len, size_t namelen)
{
  char *name = malloc (namelen);
  unsigned qtype = 0;
  size_t qend = 0;
  if (dns_parse_question (m, len, name, namelen, &qtype, &qend) == 0)
    {
      check_name (name, namelen);
      CHECK (qend >= 12 + 2 + 4 && qend <= len && qtype <= 0xffff);
      unsigned char *r = malloc (len);
      memcpy (r, m, len);
      CHECK (dns_make_refused (r, qend) == qend);
      CHECK ((r[2] & 0x80) && (r[3] & 0xf) == 5 && dns_get16 (r + 6) == 0 && dns_get16 (r + 10) == 0);
      CHECK (memcmp (r + 12, m + 12, qend - 12) == 0); /* the question is echoed unchanged */
      free (r);
    }
  else if (dns_question_text (m, len, name, namelen, &qtype, &qend) == 0)
    {
      /* the refused question's record text: printable ASCII, no '"' or '\\' but escapes */
      size_t n = strlen (name);
      CHECK ((n > 0 || namelen < 5) && n < namelen && qend >= 12 + 1 + 4 && qend <= len && qtype <= 0xffff);
      for (size_t i = 0; i < n; i++)
        CHECK (name[i] > 0x20 && name[i] < 0x7f && name[i] != '"');
    }
  free (name);
}

struct fz
{
  const unsigned char *m;
  size_t len;
};

static const char *
fz_admit (void *data, int family, const unsigned char *addr, uint32_t *ttl, bool in_chain)
{
  struct fz *f = data;
  *ttl /= 2; /* a lowered TTL is what the rebuilt record carries */
  CHECK (family == AF_INET || family == AF_INET6);
  CHECK (addr >= f->m && addr + (family == AF_INET ? 4 : 16) <= f->m + f->len);
  const char *why = dns_addr_special (family, addr);
  return !in_chain ? "chain" : (addr[0] & 1) ? "odd" : why; /* refuse some, admit others */
}

/* the input's records after the stub's own question for `name`: on_answer's rebuild */
static void
as_rebuilt (const unsigned char *data, size_t len, size_t qend_in, const char *name, unsigned qtype)
{
  unsigned char q[300], out[4096];
  size_t qend, lim;
  if (!dns_build_query (q, sizeof q, 0x1234, name, qtype, &qend))
    return;
  size_t n = qend + (len - qend_in);
  unsigned char *up = malloc (n);
  memcpy (up, q, qend);
  memcpy (up + qend, data + qend_in, len - qend_in);
  memcpy (up + 6, data + 6, 6); /* the input's record counts */
  up[2] |= 0x80;
  up[3] = data[3];
  struct fz f = { up, n };
  lim = 12 + (qend - 12) + 11 + (len ? data[len - 1] * 8u : 0);
  lim = lim > sizeof out ? sizeof out : lim;
  size_t r = dns_rebuild_answer (up, n, q, qend, q + 12, qend - 12, true, data[2] & 1, out, lim, fz_admit, &f);
  CHECK (r <= lim);
  /* the CNAME chain the stub checks for intercepted names: the question first, no name twice */
  char chain[8][256];
  size_t nc = dns_answer_chain (up, n, qend, chain, 8);
  CHECK (nc <= 8 && (nc == 0 || strcmp (chain[0], name) == 0));
  for (size_t a = 0; a < nc; a++)
    for (size_t b = a + 1; b < nc; b++)
      CHECK (strcmp (chain[a], chain[b]) != 0);
  if (r)
    {
      char back[256];
      unsigned t;
      size_t e;
      CHECK ((out[2] & 0x80) && memcmp (out + 12, q + 12, qend - 12) == 0);
      out[2] &= 0x7f;
      CHECK (dns_parse_question (out, r, back, sizeof back, &t, &e) == 0 && strcmp (back, name) == 0 && t == qtype);
      unsigned es;
      CHECK (!dns_qtype_allowed (qtype) || dns_query_check (q, qend + 11, qend, &es) == NULL);
    }
  free (up);
}

/* as an answer from upstream: the stub's on_answer and fill_sets */
static void
as_answer (const unsigned char *data, size_t len)
{
  char name[256];
  unsigned qtype;
  size_t qend;
  if (len < 12)
    return;
  unsigned char *m = malloc (len);
  memcpy (m, data, len);
  m[2] &= 0x7f;
  int r = dns_parse_question (m, len, name, sizeof name, &qtype, &qend);
  m[2] |= 0x80;
  if (r == 0)
    {
      struct dns_answer_iter it;
      struct dns_addr_rr rr;
      unsigned count = 0;
      check_name (name, sizeof name);
      dns_answer_begin (&it, m, len, qend);
      while (dns_answer_next (&it, m, len, &rr))
        {
          char text[INET6_ADDRSTRLEN];
          size_t alen = rr.family == AF_INET ? 4 : 16;
          CHECK (rr.family == AF_INET || rr.family == AF_INET6);
          CHECK (rr.addr >= m + qend && rr.addr + alen <= m + len);
          CHECK (inet_ntop (rr.family, rr.addr, text, sizeof text) != NULL);
          CHECK (++count <= dns_get16 (m + 6));
        }
      CHECK (!dns_answer_next (&it, m, len, &rr)); /* the end is for good */
      as_rebuilt (data, len, qend, name, qtype);
    }
  free (m);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size > 65535)
    return 0; /* larger than any DNS message (RFC 1035 §4.2.2 length prefix) */
  unsigned char *m = malloc (size ? size : 1);
  memcpy (m, data, size);
  as_query (m, size, 256); /* the stub's buffer */
  /* small name buffers: the bound must hold for any size, not just the one the stub uses */
  as_query (m, size, size ? 1 + m[size - 1] % 64 : 1);
  as_answer (m, size);
  for (size_t k = 0; k < 3 && size >= 2; k++)
    {
      size_t start = (size_t) m[k % size] % size, end = dns_skip_name (m, size, start);
      CHECK (end == 0 || (end > start && end <= size));
    }
  free (m);
  return 0;
}
