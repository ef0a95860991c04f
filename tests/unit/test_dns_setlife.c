/* test_dns_setlife - monitor/dns_setlife.c: when the DNS stub writes an answer's address into the
 * allow sets, and the TTL it hands out when it does not (issue 20). The times are the stub's
 * own clock values passed in: the kernel's side (elements expiring) is test_egress.py's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "policy/nft_ruleset.h"
#include "monitor/dns_setlife.h"

#define S 1000000000ull

static const unsigned char A4[4] = { 203, 0, 113, 7 }, B4[4] = { 203, 0, 113, 8 };
static const unsigned char A6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 7 };

static void
unknown_address_is_written (void **state)
{
  (void) state;
  struct dns_setlife *s = calloc (1, sizeof *s);
  uint32_t ttl = 300;
  assert_true (dns_setlife_decide (s, AF_INET, A4, 1000 * S, &ttl));
  assert_int_equal (ttl, 300);
  ttl = 200000; /* longer than any element lives: the TTL handed out is the ceiling */
  assert_true (dns_setlife_decide (s, AF_INET, A4, 1000 * S, &ttl));
  assert_int_equal (ttl, POLICY_NFT_TTL_CEIL);
  free (s);
}

static void
living_element_is_not_written_and_caps_the_ttl (void **state)
{
  (void) state;
  struct dns_setlife *s = calloc (1, sizeof *s);
  dns_setlife_note (s, AF_INET, A4, 1000 * S, 300); /* ends at 1299 s (300 s less the margin) */
  uint32_t ttl = 300;
  assert_false (dns_setlife_decide (s, AF_INET, A4, 1020 * S, &ttl)); /* 279 s left of 300 */
  assert_int_equal (ttl, 279);
  ttl = 5; /* a shorter TTL than the element's life is handed out as it came */
  assert_false (dns_setlife_decide (s, AF_INET, A4, 1020 * S, &ttl));
  assert_int_equal (ttl, 5);
  ttl = 300; /* less than half of clamp(300) left: written again */
  assert_true (dns_setlife_decide (s, AF_INET, A4, 1150 * S, &ttl));
  assert_int_equal (ttl, 300);
  ttl = 3600; /* a longer TTL than half the element's rest: written (the element gets the later end) */
  assert_true (dns_setlife_decide (s, AF_INET, A4, 1020 * S, &ttl));
  ttl = 300; /* expired: written */
  assert_true (dns_setlife_decide (s, AF_INET, A4, 1300 * S, &ttl));
  /* another address, another family with the same last byte: unknown */
  ttl = 300;
  assert_true (dns_setlife_decide (s, AF_INET, B4, 1020 * S, &ttl));
  assert_true (dns_setlife_decide (s, AF_INET6, A6, 1020 * S, &ttl));
  free (s);
}

/* the floor: a TTL of 5 s made an element of 60 s; the next answer's 5 s fits in it */
static void
floor_raised_element_serves_short_ttls (void **state)
{
  (void) state;
  struct dns_setlife *s = calloc (1, sizeof *s);
  dns_setlife_note (s, AF_INET6, A6, 10 * S, 5);
  uint32_t ttl = 5;
  assert_false (dns_setlife_decide (s, AF_INET6, A6, 20 * S, &ttl)); /* 49 s left >= 30 */
  assert_int_equal (ttl, 5);
  assert_true (dns_setlife_decide (s, AF_INET6, A6, 45 * S, &ttl)); /* 24 s left < 30 */
  free (s);
}

/* a full table forgets the entry that ends first: that address is written again, never skipped */
static void
full_table_forgets_the_first_to_end (void **state)
{
  (void) state;
  struct dns_setlife *s = calloc (1, sizeof *s);
  unsigned char a[4] = { 198, 51, 100, 0 };
  for (unsigned i = 0; i < DNS_SETLIFE_MAX; i++)
    {
      a[2] = (unsigned char) (i >> 8), a[3] = (unsigned char) i;
      dns_setlife_note (s, AF_INET, a, (100 + i) * S, 300);
    }
  dns_setlife_note (s, AF_INET, A4, 1000 * S, 300);
  uint32_t ttl = 300;
  a[2] = 0, a[3] = 0; /* noted first, ends first: gone */
  assert_true (dns_setlife_decide (s, AF_INET, a, 1001 * S, &ttl));
  a[3] = 1;
  ttl = 1;
  assert_false (dns_setlife_decide (s, AF_INET, a, 101 * S, &ttl));
  assert_false (dns_setlife_decide (s, AF_INET, A4, 1001 * S, &ttl));
  free (s);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (unknown_address_is_written),
    cmocka_unit_test (living_element_is_not_written_and_caps_the_ttl),
    cmocka_unit_test (floor_raised_element_serves_short_ttls),
    cmocka_unit_test (full_table_forgets_the_first_to_end),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
