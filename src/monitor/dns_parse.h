/* dns_parse.h - the DNS stub's pure message parsers (RFC 1035 §4.1), split out of dnsstub.c so
 * that tests/fuzz/fuzz_dns.c can drive them without sockets. Every function reads only
 * m[0..len) and writes only what its arguments name; no allocation, no syscalls, no errno. */
#ifndef ASBX_MONITOR_DNS_PARSE_H
#define ASBX_MONITOR_DNS_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The big-endian 16-bit value at p (the caller checked that 2 bytes are there). */
static inline uint16_t
dns_get16 (const unsigned char *p)
{
  return (uint16_t) (p[0] << 8 | p[1]);
}

/* The one question of a query in m[0..len): QR clear, opcode QUERY, QDCOUNT 1, a name of plain
 * labels (letters, digits, '-', '_'; no compression pointer - RFC 1035 §4.1.4 allows them only
 * after the question) of at most namelen - 1 characters. On success writes the name (lowercase,
 * dot-separated, no trailing dot, NUL-terminated) into name[0..namelen), its QTYPE into *qtype
 * and the offset just past QTYPE+QCLASS into *end (<= len); returns 0. Anything else: -1, and
 * name may hold a partial copy. */
int dns_parse_question (const unsigned char *m, size_t len, char *name, size_t namelen, unsigned *qtype, size_t *end);

/* For a query dns_parse_question refused: when m[0..len) is still a query (QR clear, opcode
 * QUERY, QDCOUNT 1) whose question is a walkable run of labels (each <= 63 bytes, no pointer)
 * followed by QTYPE and QCLASS, writes the name in presentation format (RFC 1035 §5.1: labels
 * joined by '.', "." for the root) with every byte other than a letter, digit, '-' or '_' as
 * \DDD (so the text is printable ASCII without '"'; cut at textlen - 1 bytes, NUL-terminated)
 * into text[0..textlen), QTYPE into *qtype and the offset past QCLASS into *end, and returns
 * 0. Anything else: -1 (a message nothing can be answered to), text holds "". */
int dns_question_text (const unsigned char *m, size_t len, char *text, size_t textlen, unsigned *qtype, size_t *end);

/* Skip the possibly compressed domain name at offset i of m[0..len) (a pointer ends it: it is
 * never followed, so no loop is possible). Returns the offset just past the name (<= len), or
 * 0 when the name runs past len. */
size_t dns_skip_name (const unsigned char *m, size_t len, size_t i);

/* Turn the query m (parsed by dns_parse_question, question ending at qend >= 12) into its
 * REFUSED answer in place: QR and RA set, opcode and RD kept, rcode 5, no records after the
 * question. Returns the answer's length (qend). */
size_t dns_make_refused (unsigned char *m, size_t qend);

/* Walking the answer section of a response for its A and AAAA records. */
struct dns_answer_iter
{
  size_t i;    /* offset of the next record */
  unsigned k;  /* records looked at */
  unsigned an; /* ANCOUNT */
};

/* one A (family AF_INET, 4 bytes) or AAAA (AF_INET6, 16 bytes) record; addr points into m */
struct dns_addr_rr
{
  int family;
  const unsigned char *addr;
  uint32_t ttl; /* seconds, as sent */
};

/* Start at qend, the end of the question that dns_parse_question found in the response m
 * (len >= 12). */
void dns_answer_begin (struct dns_answer_iter *it, const unsigned char *m, size_t len, size_t qend);

/* The next A/AAAA record of the answer section into *rr (other types and A/AAAA records of the
 * wrong RDLENGTH are skipped). false at the end of ANCOUNT records or at the first record that
 * does not fit in len (the rest of the message is then ignored, as it cannot be trusted). */
bool dns_answer_next (struct dns_answer_iter *it, const unsigned char *m, size_t len, struct dns_addr_rr *rr);

/* The resolver address s: "ADDR", "ADDR:PORT" (IPv4), "V6", "[V6]" or "[V6]:PORT" (port 1 to
 * 65535, default 53) into *ss and *len. 0, or -1 when s is none of these ($AGENTSBX_UPSTREAM_DNS,
 * resolv.conf `nameserver` values: monitor/dnsstub.h). */
int dns_parse_upstream (const char *s, struct sockaddr_storage *ss, socklen_t *len);

#endif
