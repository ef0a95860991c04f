/* http_req.h - the HTTP/1.1 message-head parser of the egress's TLS interception
 * (monitor/tls_relay.h, issue 19): request and status lines, header fields, the body's framing
 * (RFC 9112 §6: Content-Length or `Transfer-Encoding: chunked`), a body decoder that follows that
 * framing byte by byte, and the one header rewrite the relay needs (set/replace a field).
 *
 * Pure: reads only the bytes it is given, no allocation except http_head_set's result, no
 * syscalls. The container controls every byte, so the parser refuses what two parsers could read
 * two ways (request smuggling is exactly a disagreement between the relay and the server):
 *   - a bare LF or a bare CR anywhere in the head (RFC 9112 §2.2 lets a recipient accept a bare
 *     LF as a line end; some servers do, some do not: refused, never guessed);
 *   - obs-fold (a field line starting with SP/HTAB, RFC 9112 §5.2), a field name that is not a
 *     token directly followed by ':', control bytes (except HTAB) in a value;
 *   - Content-Length together with Transfer-Encoding, two Content-Length fields (even equal),
 *     a Content-Length that is not 1-18 digits, a Transfer-Encoding other than exactly `chunked`,
 *     two Host fields, a request without Host;
 *   - request targets other than origin-form (absolute-form names its own host, authority-form
 *     is CONNECT, asterisk-form is OPTIONS *), versions other than HTTP/1.0 and HTTP/1.1;
 *   - a line longer than HTTP_LINE_MAX or a head longer than HTTP_HEAD_MAX bytes;
 *   - chunked bodies: chunk extensions, sizes of more than 15 hex digits, a chunk not followed
 *     by CRLF, trailer lines with bare LF (trailers are passed on, never interpreted). */
#ifndef ASBX_MONITOR_HTTP_REQ_H
#define ASBX_MONITOR_HTTP_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_LINE_MAX 8192  /* the longest request/status or field line, CRLF included */
#define HTTP_HEAD_MAX 16384 /* the longest head, up to and with the empty line */

enum http_kind
{
  HTTP_REQUEST = 0,
  HTTP_RESPONSE,
};

/* A parsed head. Offsets point into the buffer that was parsed (valid while it is). */
struct http_head
{
  size_t len;        /* bytes of the head, through the empty line's CRLF */
  char method[16];   /* request: the method token (NUL-terminated; longer ones are refused) */
  size_t target_off; /* request: the request target (origin-form: starts with '/') */
  size_t target_len;
  size_t host_off; /* request: the Host value without surrounding blanks */
  size_t host_len;
  int minor;  /* HTTP/1.<minor> */
  int status; /* response: the status code (100-599) */
  bool has_length;
  uint64_t content_length;
  bool chunked;
  bool conn_close; /* a Connection field lists `close` */
  bool expect_100; /* Expect: 100-continue */
  bool upgrade;    /* an Upgrade field is present */
};

/* Parse the head at the start of b[0..n) (a request or a response, per kind).
 * Returns 1 = complete (*h filled, h->len bytes), 0 = need more bytes (the answer can only change
 * when bytes are appended; never 0 once n >= HTTP_HEAD_MAX), -1 = refused: *why is a static
 * human-readable reason ("ambiguous framing: Content-Length and Transfer-Encoding"). Stable under
 * appending: a prefix answering -1 or 1 gives the same answer (and the same head) for every
 * longer input. */
int http_head_parse (const unsigned char *b, size_t n, enum http_kind kind, struct http_head *h, const char **why);

/* The body decoder: follows a message body's framing as its raw bytes pass (they are forwarded
 * unchanged, chunk framing included). */
struct http_body
{
  int st;            /* internal state */
  bool chunked;      /* chunked framing (else `left` counts Content-Length bytes) */
  uint64_t left;     /* bytes of the current chunk / of the body still to come */
  uint64_t total;    /* body bytes so far (chunked: the data bytes and the trailer section, which is
                        part of the message body (RFC 9112 §7.1.2) and can carry data: a
                        maxBodyBytes cap counts it; not the chunk framing) */
  unsigned line;     /* bytes in the current chunk-size or trailer line */
  unsigned trailers; /* bytes of the trailer section so far (at most HTTP_HEAD_MAX) */
};

/* Start decoding the body of head h (request: no framing = no body; a response without framing
 * is not supported by this decoder: it reads until the connection ends, see the caller). */
void http_body_init (struct http_body *d, const struct http_head *h);

/* Feed p[0..n): *used = how many of them belong to this message. Returns 1 = the body ended
 * (at p + *used), 0 = all n used and more is to come, -1 = a framing error (*why). */
int http_body_feed (struct http_body *d, const unsigned char *p, size_t n, size_t *used, const char **why);

/* A copy of the head head[0..n) (complete, as http_head_parse accepted it) in which every field
 * named `name` (case-insensitive) is removed and `name: value` is added as the last field.
 * name must be a token; value must have no CR, LF or NUL. Returns a heap buffer of *outlen bytes
 * (NUL-terminated besides; caller frees, and wipes it when it holds a secret), or NULL with errno
 * EINVAL (a bad name or value, a head without its empty line) or ENOMEM. */
unsigned char *http_head_set (const unsigned char *head, size_t n, const char *name, const char *value, size_t *outlen);

/* true for an RFC 9110 §5.6.2 token character */
bool http_tchar (unsigned char c);

#endif
