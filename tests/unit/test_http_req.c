/* test_http_req.c - the TLS interception's HTTP/1.1 head parser, body decoder and header rewrite
 * (monitor/http_req.c): what is accepted, every ambiguity that is refused, stability under
 * split reads, and the rewrite. No root needed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "monitor/http_req.h"

static int
parse (const char *s, enum http_kind k, struct http_head *h, const char **why)
{
  return http_head_parse ((const unsigned char *) s, strlen (s), k, h, why);
}

static void
test_request_ok (void **state)
{
  (void) state;
  struct http_head h;
  const char *why;
  const char *s = "POST /repos/o/r/issues?x=1 HTTP/1.1\r\nHost: api.test\r\nContent-Length: 12\r\n"
                  "Connection: keep-alive, Close\r\nExpect: 100-continue\r\n\r\nbody";
  assert_int_equal (parse (s, HTTP_REQUEST, &h, &why), 1);
  assert_int_equal (h.len, strlen (s) - 4);
  assert_string_equal (h.method, "POST");
  assert_memory_equal (s + h.target_off, "/repos/o/r/issues?x=1", h.target_len);
  assert_int_equal (h.target_len, 21);
  assert_memory_equal (s + h.host_off, "api.test", 8);
  assert_int_equal (h.host_len, 8);
  assert_true (h.has_length && h.content_length == 12 && !h.chunked);
  assert_true (h.conn_close && h.expect_100 && h.minor == 1);
  assert_int_equal (parse ("GET / HTTP/1.0\r\nHost:  a \r\nTransfer-Encoding: Chunked\r\n\r\n", HTTP_REQUEST, &h, &why),
                    1);
  assert_true (h.chunked && h.minor == 0 && h.host_len == 1);
}

static void
test_request_incremental (void **state)
{
  (void) state;
  struct http_head h, whole;
  const char *why;
  const char *s = "GET /a HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n";
  size_t n = strlen (s);
  assert_int_equal (http_head_parse ((const unsigned char *) s, n, HTTP_REQUEST, &whole, &why), 1);
  for (size_t i = 0; i < n; i++)
    assert_int_equal (http_head_parse ((const unsigned char *) s, i, HTTP_REQUEST, &h, &why), 0);
  /* appending bytes (the body, a next request) changes nothing */
  char more[256];
  strcpy (more, s);
  strcat (more, "GET /b HTTP/1.1\r\n");
  assert_int_equal (parse (more, HTTP_REQUEST, &h, &why), 1);
  assert_int_equal (h.len, whole.len);
}

static void
test_request_refused (void **state)
{
  (void) state;
  static const char *const bad[] = {
    "GET / HTTP/1.1\nHost: x\r\n\r\n",                                             /* bare LF */
    "GET / HTTP/1.1\r\nHost: x\n\r\n",                                             /* bare LF */
    "GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n",                                     /* bare CR */
    "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",                             /* obs-fold */
    "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", /* duplicate CL */
    "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", /* other codings */
    "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1 2\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456789\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",     /* two Host */
    "GET / HTTP/1.1\r\nUser-Agent: x\r\n\r\n",          /* no Host */
    "GET / HTTP/1.1\r\nHost : x\r\n\r\n",               /* blank before the colon */
    "GET / HTTP/1.1\r\n: x\r\nHost: x\r\n\r\n",         /* empty name */
    "GET / HTTP/1.1\r\nHost: x\r\nX: a\x01\r\n\r\n",    /* control byte */
    "GET http://other/ HTTP/1.1\r\nHost: x\r\n\r\n",    /* absolute-form */
    "CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n",        /* authority-form */
    "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",            /* asterisk-form */
    "GET / HTTP/2.0\r\nHost: x\r\n\r\n",                /* version */
    "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",               /* two spaces */
    "GET / HTTP/1.1 \r\nHost: x\r\n\r\n",               /* trailing space */
    "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",            /* leading empty line */
    "G(T / HTTP/1.1\r\nHost: x\r\n\r\n",                /* method not a token */
    "VERYLONGMETHODNAME / HTTP/1.1\r\nHost: x\r\n\r\n", /* method longer than 15 */
  };
  struct http_head h;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      const char *why = NULL;
      if (parse (bad[i], HTTP_REQUEST, &h, &why) != -1)
        fail_msg ("accepted: %s", bad[i]);
      assert_non_null (why);
    }
}

static void
test_limits (void **state)
{
  (void) state;
  struct http_head h;
  const char *why;
  size_t n = HTTP_HEAD_MAX + 16;
  unsigned char *b = malloc (n);
  /* one line too long, without its LF: refused before the head limit */
  memset (b, 'a', n);
  memcpy (b, "GET /", 5);
  assert_int_equal (http_head_parse (b, HTTP_LINE_MAX - 1, HTTP_REQUEST, &h, &why), 0);
  assert_int_equal (http_head_parse (b, HTTP_LINE_MAX, HTTP_REQUEST, &h, &why), -1);
  assert_string_equal (why, "line too long");
  /* many short field lines: the head limit */
  size_t o = (size_t) sprintf ((char *) b, "GET / HTTP/1.1\r\nHost: x\r\n");
  while (o + 6 <= n)
    o += (size_t) sprintf ((char *) b + o, "A: b\r\n");
  assert_int_equal (http_head_parse (b, HTTP_HEAD_MAX, HTTP_REQUEST, &h, &why), -1);
  free (b);
}

static void
test_response (void **state)
{
  (void) state;
  struct http_head h;
  const char *why;
  assert_int_equal (parse ("HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\n", HTTP_RESPONSE, &h, &why), 1);
  assert_true (h.status == 404 && h.has_length && h.content_length == 3);
  assert_int_equal (parse ("HTTP/1.0 200\r\n\r\n", HTTP_RESPONSE, &h, &why), 1);
  assert_int_equal (parse ("HTTP/1.1 20x OK\r\n\r\n", HTTP_RESPONSE, &h, &why), -1);
  assert_int_equal (
      parse ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", HTTP_RESPONSE, &h, &why),
      -1);
}

static int
feed_all (struct http_body *d, const char *s, size_t step, size_t *used_total)
{
  size_t n = strlen (s), i = 0;
  const char *why;
  while (i < n)
    {
      size_t k = n - i < step ? n - i : step, used;
      int r = http_body_feed (d, (const unsigned char *) s + i, k, &used, &why);
      i += used;
      if (r != 0)
        {
          *used_total = i;
          return r;
        }
      assert_int_equal (used, k);
    }
  *used_total = i;
  return 0;
}

static void
test_body_chunked (void **state)
{
  (void) state;
  struct http_head h = { .chunked = true };
  const char *s = "5\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\nNEXT";
  for (size_t step = 1; step <= strlen (s); step++)
    {
      struct http_body d;
      size_t used;
      http_body_init (&d, &h);
      assert_int_equal (feed_all (&d, s, step, &used), 1);
      assert_int_equal (used, strlen (s) - 4);
      assert_int_equal (d.total, 31 + 8); /* the data and the trailer field "X-T: 1\r\n" */
    }
  /* a trailer section is bounded like a head (outside test: 2000 fields of 900 bytes passed a
   * 100-byte maxBodyBytes cap) */
  {
    struct http_body d;
    size_t used;
    const char *why;
    char *big = malloc (HTTP_HEAD_MAX + 64);
    size_t k = (size_t) sprintf (big, "0\r\n");
    while (k < HTTP_HEAD_MAX + 32)
      k += (size_t) sprintf (big + k, "X-A: aaaaaaaaaaaaaaaa\r\n");
    http_body_init (&d, &h);
    assert_int_equal (http_body_feed (&d, (const unsigned char *) big, k, &used, &why), -1);
    assert_string_equal (why, "trailer section too large");
    free (big);
  }
  static const char *const bad[] = {
    "5;ext=1\r\nhello\r\n0\r\n\r\n", "5\r\nhelloX\r\n",     "5\nhello\r\n", "\r\n", "g\r\n",
    "1000000000000000\r\n",          "0\r\nX: a\nb\r\n\r\n"
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      struct http_body d;
      size_t used;
      http_body_init (&d, &h);
      if (feed_all (&d, bad[i], 64, &used) != -1)
        fail_msg ("accepted chunked body: %s", bad[i]);
    }
}

static void
test_body_length (void **state)
{
  (void) state;
  struct http_head h = { .has_length = true, .content_length = 5 };
  struct http_body d;
  size_t used;
  http_body_init (&d, &h);
  assert_int_equal (feed_all (&d, "helloGET", 3, &used), 1);
  assert_int_equal (used, 5);
  assert_int_equal (d.total, 5);
  struct http_head none = { 0 };
  const char *why;
  http_body_init (&d, &none);
  assert_int_equal (http_body_feed (&d, (const unsigned char *) "GET", 3, &used, &why), 1);
  assert_int_equal (used, 0);
}

static void
test_head_set (void **state)
{
  (void) state;
  const char *s = "GET / HTTP/1.1\r\nHost: x\r\nauthorization: old\r\nAccept: */*\r\nAuthorization: two\r\n\r\n";
  size_t n;
  unsigned char *o = http_head_set ((const unsigned char *) s, strlen (s), "Authorization", "Bearer t", &n);
  assert_non_null (o);
  assert_string_equal ((char *) o, "GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nAuthorization: Bearer t\r\n\r\n");
  assert_int_equal (n, strlen ((char *) o));
  struct http_head h;
  const char *why;
  assert_int_equal (http_head_parse (o, n, HTTP_REQUEST, &h, &why), 1);
  free (o);
  /* a value cannot add a line */
  errno = 0;
  assert_null (http_head_set ((const unsigned char *) s, strlen (s), "X", "a\r\nHost: evil", &n));
  assert_int_equal (errno, EINVAL);
  assert_null (http_head_set ((const unsigned char *) s, strlen (s), "X Y", "a", &n));
  /* a name that is a prefix of another is not removed with it */
  const char *t = "GET / HTTP/1.1\r\nHost: x\r\nX-Ab: 1\r\n\r\n";
  o = http_head_set ((const unsigned char *) t, strlen (t), "X-A", "2", &n);
  assert_string_equal ((char *) o, "GET / HTTP/1.1\r\nHost: x\r\nX-Ab: 1\r\nX-A: 2\r\n\r\n");
  free (o);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_request_ok),      cmocka_unit_test (test_request_incremental),
    cmocka_unit_test (test_request_refused), cmocka_unit_test (test_limits),
    cmocka_unit_test (test_response),        cmocka_unit_test (test_body_chunked),
    cmocka_unit_test (test_body_length),     cmocka_unit_test (test_head_set),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
