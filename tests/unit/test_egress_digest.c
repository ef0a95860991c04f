/* test_egress_digest.c - policy_egress_fields (policy/egress_digest.h): one line per egress
 * field; a change of a field changes its line and no other; per-container fields are not in it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/egress_digest.h"

static char *domains_a[] = { (char *) "pkg.test", (char *) "*.mirror.test" };
static char *domains_b[] = { (char *) "pkg.test", (char *) "*.mirror.tesT" };
static char *joined_one[] = { (char *) "pkg.test\n*.mirror.test" };
static char *sockets[] = { (char *) "/run/x.sock" };
static uint16_t ports[] = { 80, 443 };

static void
base (struct policy_plan *p)
{
  memset (p, 0, sizeof *p);
  p->active = true;
  p->net_mode = POLICY_NET_FILTERED;
  p->allowed_domains = domains_a;
  p->allowed_domains_len = 2;
  p->ports = ports;
  p->ports_len = 2;
  p->audit_events = POLICY_AUDIT_DNS;
}

/* the name of the only line that differs between a and b; NULL when none or more than one (or
 * when the texts are not both whole lines) */
static char *
only_difference (const char *a, const char *b)
{
  const char *first = NULL;
  size_t first_len = 0, n = 0;
  while (*a || *b)
    {
      const char *ea = strchr (a, '\n'), *eb = strchr (b, '\n');
      if (!ea || !eb)
        return NULL;
      if (ea - a != eb - b || memcmp (a, b, (size_t) (ea - a)) != 0)
        {
          const char *sp = memrchr (a, ' ', (size_t) (ea - a));
          if (n++ == 0 && sp)
            first = a, first_len = (size_t) (sp - a);
        }
      a = ea + 1;
      b = eb + 1;
    }
  return n == 1 && first ? strndup (first, first_len) : NULL;
}

static void
test_same_plan_same_text (void **state)
{
  (void) state;
  struct policy_plan p, q;
  base (&p);
  base (&q);
  char *a = policy_egress_fields (&p), *b = policy_egress_fields (&q);
  assert_string_equal (a, b);
  size_t lines = 0;
  for (const char *c = a; *c; c++)
    lines += *c == '\n';
  assert_int_equal (lines, 12);
  assert_non_null (strstr (a, "network.allowedDomains "));
  free (a);
  free (b);
}

static void
test_each_field_its_line (void **state)
{
  (void) state;
  struct policy_plan p, q;
  base (&p);
  char *a = policy_egress_fields (&p);
  /* the field each edit below touches, in order */
  static const char *const fields[] = { "network.mode", "network.allowedDomains", "network.ports", "approvals.network",
                                        "audit.events (network, dns)" };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    {
      base (&q);
      if (i == 0)
        q.net_mode = POLICY_NET_NONE;
      else if (i == 1)
        q.allowed_domains = domains_b; /* one letter's case */
      else if (i == 2)
        q.ports_len = 1;
      else if (i == 3)
        q.approvals_network = POLICY_APPROVAL_ASK;
      else
        q.audit_events |= POLICY_AUDIT_NETWORK;
      char *b = policy_egress_fields (&q);
      char *name = only_difference (a, b);
      assert_non_null (name);
      assert_string_equal (name, fields[i]);
      free (name);
      free (b);
    }
  free (a);
}

static void
test_list_boundaries_count (void **state)
{
  (void) state;
  struct policy_plan p, q;
  base (&p);
  base (&q);
  q.allowed_domains = joined_one; /* the same bytes, one entry instead of two */
  q.allowed_domains_len = 1;
  char *a = policy_egress_fields (&p), *b = policy_egress_fields (&q);
  char *name = only_difference (a, b);
  assert_non_null (name);
  assert_string_equal (name, "network.allowedDomains");
  free (name);
  free (a);
  free (b);
}

static void
test_per_container_fields_left_out (void **state)
{
  (void) state;
  struct policy_plan p, q;
  base (&p);
  base (&q);
  q.allow_unix_sockets = sockets; /* the seccomp connect supervisor is each container's */
  q.allow_unix_sockets_len = 1;
  q.memory_bytes = 1 << 20;
  q.audit_events |= POLICY_AUDIT_EXEC;
  char *a = policy_egress_fields (&p), *b = policy_egress_fields (&q);
  assert_string_equal (a, b);
  free (a);
  free (b);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_same_plan_same_text),
    cmocka_unit_test (test_each_field_its_line),
    cmocka_unit_test (test_list_boundaries_count),
    cmocka_unit_test (test_per_container_fields_left_out),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
