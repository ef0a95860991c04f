/* fuzz_http.c - libFuzzer entry point for the TLS interception's HTTP/1.1 parser
 * (src/monitor/http_req.c).
 *
 * The input is what the container sends after the TLS handshake (the relay parses the
 * plaintext), or what an upstream answers. Beyond the sanitizers (exact-size heap copies) this
 * checks:
 *   - the head answer is stable under appending bytes: a prefix that says -1 or 1 gives the
 *     same answer (and the same head length) for the whole input - else what the relay decides
 *     would depend on how the container split its writes;
 *   - never "need more" at HTTP_HEAD_MAX bytes; a complete head lies within the input and its
 *     target and Host lie within the head;
 *   - the body decoder consumes the same bytes and counts the same body whatever the pieces;
 *   - http_head_set's output parses again as a head, with the one field set.
 * Build and run: tests/fuzz/run-all.sh (FUZZ_TARGETS=http). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/http_req.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(c)                                                                                                       \
  do                                                                                                                   \
    {                                                                                                                  \
      if (!(c))                                                                                                        \
        abort ();                                                                                                      \
    }                                                                                                                  \
  while (0)

static int
head (const unsigned char *b, size_t n, enum http_kind k, struct http_head *h)
{
  const char *why;
  unsigned char *copy = malloc (n ? n : 1);
  memcpy (copy, b, n);
  int r = http_head_parse (copy, n, k, h, &why);
  free (copy);
  CHECK (r >= -1 && r <= 1);
  CHECK (r != -1 || why != NULL);
  if (r == 1)
    {
      CHECK (h->len <= n && h->len <= HTTP_HEAD_MAX);
      if (k == HTTP_REQUEST)
        CHECK (h->target_off + h->target_len <= h->len && h->host_off + h->host_len <= h->len);
    }
  if (n >= HTTP_HEAD_MAX)
    CHECK (r != 0);
  return r;
}

/* the body at p[0..n) fed in pieces of `step`: returns the decoder's answer, *used, *total */
static int
body (const struct http_head *h, const unsigned char *p, size_t n, size_t step, size_t *used, uint64_t *total)
{
  struct http_body d;
  const char *why;
  size_t i = 0;
  int r = 0;
  http_body_init (&d, h);
  if (!h->chunked && !(h->has_length && h->content_length))
    {
      size_t u;
      r = http_body_feed (&d, p, n, &u, &why);
      CHECK (r == 1 && u == 0);
    }
  while (r == 0 && i < n)
    {
      size_t k = n - i < step ? n - i : step, u;
      unsigned char *copy = malloc (k);
      memcpy (copy, p + i, k);
      r = http_body_feed (&d, copy, k, &u, &why);
      free (copy);
      CHECK (u <= k && (r != 0 || u == k));
      i += u;
    }
  *used = i;
  *total = d.total;
  return r;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size > 2 * HTTP_HEAD_MAX)
    return 0;
  size_t split = size >= 2 ? ((size_t) data[size - 1] << 8 | data[size - 2]) % size : 0;
  for (int k = HTTP_REQUEST; k <= HTTP_RESPONSE; k++)
    {
      struct http_head whole, part;
      int r = head (data, size, (enum http_kind) k, &whole);
      int p = head (data, split, (enum http_kind) k, &part);
      if (p == -1)
        CHECK (r == -1);
      if (p == 1)
        CHECK (r == 1 && part.len == whole.len);
      if (r != 1)
        continue;
      /* the body: one piece vs pieces of 1 + data[0] % 7 bytes */
      size_t u1, u2;
      uint64_t t1, t2;
      int b1 = body (&whole, data + whole.len, size - whole.len, size, &u1, &t1);
      int b2 = body (&whole, data + whole.len, size - whole.len, 1 + data[0] % 7, &u2, &t2);
      CHECK (b1 == b2 && u1 == u2 && t1 == t2);
      /* the rewrite */
      size_t on;
      unsigned char *o = http_head_set (data, whole.len, "X-Agentsbx-Test", "v", &on);
      CHECK (o != NULL);
      struct http_head again;
      if (on <= HTTP_HEAD_MAX - HTTP_LINE_MAX) /* else the field may push it past the limit */
        CHECK (head (o, on, (enum http_kind) k, &again) == 1 && again.len == on);
      free (o);
    }
  return 0;
}
