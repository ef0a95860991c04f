/* test_dns_chain - monitor/dns_build.c dns_answer_chain: the CNAME chain of an upstream answer,
 * which the DNS stub checks for an intercepted name (issue 19: an allowed name aliased to an
 * intercepted one). Answers are built here byte by byte on top of the stub's own query. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "monitor/dns_build.h"

struct msg
{
  unsigned char b[1024];
  size_t n, qend;
  unsigned an;
};

static void
put16 (struct msg *m, unsigned v)
{
  m->b[m->n++] = (unsigned char) (v >> 8);
  m->b[m->n++] = (unsigned char) v;
}

static void
put_name (struct msg *m, const char *name)
{
  while (*name)
    {
      const char *dot = strchr (name, '.');
      size_t l = dot ? (size_t) (dot - name) : strlen (name);
      m->b[m->n++] = (unsigned char) l;
      memcpy (m->b + m->n, name, l);
      m->n += l;
      name += l + (dot ? 1 : 0);
    }
  m->b[m->n++] = 0;
}

/* the answer to the stub's query for qname, type A */
static void
start (struct msg *m, const char *qname)
{
  memset (m, 0, sizeof *m);
  m->n = dns_build_query (m->b, sizeof m->b, 0x1234, qname, DNS_T_A, &m->qend);
  assert_true (m->n > 0);
  m->n = m->qend; /* no OPT */
  m->b[2] |= 0x80;
}

static void
rr (struct msg *m, const char *owner, unsigned type, const char *target)
{
  put_name (m, owner);
  put16 (m, type);
  put16 (m, DNS_C_IN);
  put16 (m, 0);
  put16 (m, 60);
  if (type == DNS_T_CNAME)
    {
      size_t at = m->n;
      put16 (m, 0);
      put_name (m, target);
      m->b[at] = (unsigned char) ((m->n - at - 2) >> 8);
      m->b[at + 1] = (unsigned char) (m->n - at - 2);
    }
  else
    {
      put16 (m, 4);
      static const unsigned char a[4] = { 203, 0, 113, 1 };
      memcpy (m->b + m->n, a, 4);
      m->n += 4;
    }
  m->an++;
  m->b[6] = (unsigned char) (m->an >> 8);
  m->b[7] = (unsigned char) m->an;
}

static void
chain_in_order (void **state)
{
  (void) state;
  struct msg m;
  char names[8][256];
  start (&m, "www.allowed.test");
  rr (&m, "www.allowed.test", DNS_T_CNAME, "API.test");
  rr (&m, "api.test", DNS_T_CNAME, "edge.cdn.test");
  rr (&m, "edge.cdn.test", DNS_T_A, NULL);
  assert_int_equal (dns_answer_chain (m.b, m.n, m.qend, names, 8), 3);
  assert_string_equal (names[0], "www.allowed.test");
  assert_string_equal (names[1], "api.test"); /* lower case */
  assert_string_equal (names[2], "edge.cdn.test");
}

static void
chain_out_of_order_and_unrelated (void **state)
{
  (void) state;
  struct msg m;
  char names[8][256];
  start (&m, "www.allowed.test");
  rr (&m, "api.test", DNS_T_CNAME, "edge.cdn.test"); /* before the link that reaches it */
  rr (&m, "other.test", DNS_T_CNAME, "stray.test");  /* not reached from the question */
  rr (&m, "www.allowed.test", DNS_T_CNAME, "api.test");
  rr (&m, "edge.cdn.test", DNS_T_CNAME, "www.allowed.test"); /* a loop: no name twice */
  assert_int_equal (dns_answer_chain (m.b, m.n, m.qend, names, 8), 3);
  assert_string_equal (names[1], "api.test");
  assert_string_equal (names[2], "edge.cdn.test");
}

static void
chain_bounded_and_malformed (void **state)
{
  (void) state;
  struct msg m;
  char names[8][256];
  start (&m, "a.test");
  rr (&m, "a.test", DNS_T_CNAME, "b.test");
  rr (&m, "b.test", DNS_T_CNAME, "c.test");
  rr (&m, "c.test", DNS_T_CNAME, "d.test");
  assert_int_equal (dns_answer_chain (m.b, m.n, m.qend, names, 2), 2);     /* at most max */
  assert_int_equal (dns_answer_chain (m.b, m.n - 3, m.qend, names, 8), 3); /* a cut record is not read */
  assert_int_equal (dns_answer_chain (m.b, 10, m.qend, names, 8), 0);      /* shorter than its question */
  start (&m, "a.test");
  assert_int_equal (dns_answer_chain (m.b, m.n, m.qend, names, 8), 1); /* no records: the question only */
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (chain_in_order),
    cmocka_unit_test (chain_out_of_order_and_unrelated),
    cmocka_unit_test (chain_bounded_and_malformed),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
