/* sni_parse.h - the SNI/Host check's pure parsers (monitor/splice.h), split out of splice.c so
 * that tests/fuzz/fuzz_sni.c can drive them without sockets. They read only buf[0..len) and
 * write only name[0..namelen); no allocation, no syscalls, no errno. */
#ifndef ASBX_MONITOR_SNI_PARSE_H
#define ASBX_MONITOR_SNI_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* The most bytes the splice reads before it must have a name (a ClientHello record or an HTTP
 * request head longer than this is refused). */
#define SPLICE_HELLO_MAX 8192

/* The server_name (RFC 6066 §3, host_name type) of the TLS ClientHello in the first record of
 * buf[0..len) (RFC 8446 §4.1.2; TLS 1.0-1.3 records) / the Host header (RFC 9110 §7.2) of the
 * HTTP/1.x request head in buf[0..len), into name (namelen bytes: lowercased, NUL-terminated,
 * port and trailing dots dropped; only letters, digits, '-', '_', '.'; a Host value must be exactly
 * host[:port] with 1-5 digits, blanks around it only).
 * Returns 1 = found, 0 = need more bytes (the answer can only change when bytes are appended,
 * and never once len reaches SPLICE_HELLO_MAX), -1 = not there / not this protocol / a name that
 * does not fit or has other bytes. On -1 and 0, name may hold a partial copy. */
int splice_tls_sni (const unsigned char *buf, size_t len, char *name, size_t namelen);
int splice_http_host (const unsigned char *buf, size_t len, char *name, size_t namelen);

/* true for an RFC 9110 §5.6.2 token character */
bool splice_tchar (unsigned char c);

/* true for the request methods m[0..n) that take no content and whose body a server may leave
 * unread: GET, HEAD, TRACE (RFC 9110 §9.3.1, 9.3.2, 9.3.8). DELETE and OPTIONS bodies are used
 * by real APIs and are not in the list (their bodies are checked like any). */
bool splice_no_body_method (const unsigned char *m, size_t n);

/* Whether the start p[0..n) of a request body or chunk (complete: the body or chunk ends there)
 * reads the way a request line does for a server that ignores the body (issue 14: request
 * smuggling), for the most lenient parser (Python's http.server splits the line on any
 * str.split() blank and takes 3 words with "HTTP/" last for any target, or `GET x` as HTTP/0.9):
 * every control byte, space, DEL, 0x85 and 0xa0 (and LF: blank lines) is skipped before it and
 * separates words in the first line (up to LF); it reads as a request when the first word is a
 * token and a later word starts with "HTTP/" (any case), or the first word is GET or HEAD (any
 * case) followed by a second word. 1: it does, -1: it does not, 0: cannot tell yet
 * (more bytes needed). At most 512 bytes are looked at: a longer undecided first line is 1.
 * Stable under appending bytes while 0. */
int splice_body_reads_as_request (const unsigned char *p, size_t n, bool complete);

#endif
