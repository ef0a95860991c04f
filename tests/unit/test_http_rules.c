/* test_http_rules.c - network.http[] rules of the TLS interception (monitor/http_rules.c):
 * methods, fnmatch paths, every entry of a host must allow, body caps, dot-segments refused
 * whatever the patterns. No root needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "monitor/http_rules.h"

static char *get_post[] = { "GET", "POST" }, *get[] = { "GET" };
static char *repos[] = { "/repos/org/*" }, *any_path[] = { "/*" }, *upload[] = { "/*git-upload-pack", "/*/info/refs" };

static struct policy_http_allow api_allow[] = {
  { .methods = get, .methods_len = 1 },
  { .methods = get_post, .methods_len = 2, .paths = repos, .paths_len = 1 },
};
static struct policy_http_allow gh_allow[] = {
  { .methods = get_post, .methods_len = 2, .paths = upload, .paths_len = 2 }
};
static struct policy_http_allow narrow_allow[] = { { .paths = any_path, .paths_len = 1 } };

static struct policy_http_host hosts[] = {
  { .host = "api.test", .allow = api_allow, .allow_len = 2, .max_body_bytes = 100 },
  { .host = "git.test", .allow = gh_allow, .allow_len = 1 },
  { .host = "git.test", .allow = narrow_allow, .allow_len = 1, .max_body_bytes = 10 },
  { .host = "open.test" },
};
static struct policy_credential creds[] = { { .host = "cred.test", .header = "Authorization", .value = "x" } };
static const struct policy_plan plan = {
  .http_hosts = hosts, .http_hosts_len = 4, .credentials = creds, .credentials_len = 1
};

static int
check (const char *host, const char *method, const char *target, uint64_t body, char *rule, uint64_t *max)
{
  return http_rules_check (&plan, host, method, target, strlen (target), body, max, rule, 128);
}

static void
test_allowed (void **state)
{
  (void) state;
  char rule[128];
  uint64_t max;
  assert_int_equal (check ("api.test", "GET", "/user?x=1", 0, rule, &max), 0);
  assert_string_equal (rule, "allow[0]");
  assert_int_equal (max, 100);
  assert_int_equal (check ("api.test", "POST", "/repos/org/r/issues", 50, rule, &max), 0);
  assert_string_equal (rule, "allow[1]");
  /* two entries: both must allow; the smallest cap */
  assert_int_equal (check ("git.test", "POST", "/o/r.git/git-upload-pack", 5, rule, &max), 0);
  assert_string_equal (rule, "allow[0]+allow[0]");
  assert_int_equal (max, 10);
  assert_int_equal (check ("open.test", "DELETE", "/x", 1u << 30, rule, &max), 0);
  assert_string_equal (rule, "any");
  assert_int_equal (check ("cred.test", "PUT", "/anything", 0, rule, &max), 0);
  assert_int_equal (max, 0);
}

static void
test_refused (void **state)
{
  (void) state;
  char rule[128];
  uint64_t max;
  assert_int_equal (check ("api.test", "DELETE", "/repos/org/r", 0, rule, &max), -1);
  assert_string_equal (rule, "method not allowed: DELETE");
  assert_int_equal (check ("api.test", "get", "/", 0, rule, &max), -1); /* methods are case-sensitive */
  /* TRACE never: its answer echoes the request with the credential (outside test) */
  assert_int_equal (check ("cred.test", "TRACE", "/", 0, rule, &max), -1);
  assert_string_equal (rule, "method not allowed: TRACE (it echoes the credential)");
  assert_int_equal (check ("cred.test", "trace", "/", 0, rule, &max), -1);
  assert_int_equal (check ("cred.test", "TRACK", "/", 0, rule, &max), -1);
  /* a fragment: servers end the path there (outside retest: a push through `#/git-upload-pack`) */
  assert_int_equal (check ("git.test", "POST", "/o/r.git/git-receive-pack#/git-upload-pack", 0, rule, &max), -1);
  assert_string_equal (rule, "fragment in the request target");
  assert_int_equal (check ("api.test", "POST", "/repos/other/r", 0, rule, &max), -1);
  assert_string_equal (rule, "path not allowed");
  assert_int_equal (check ("api.test", "POST", "/repos/org/r", 101, rule, &max), -1);
  assert_string_equal (rule, "body too large: 101 > 100 bytes");
  assert_int_equal (check ("git.test", "POST", "/o/r.git/git-upload-pack", 11, rule, &max), -1);
  assert_int_equal (check ("git.test", "POST", "/o/r.git/git-receive-pack", 0, rule, &max), -1);
  /* patterns see the path, not the query (outside test: a push passed a fetch-only rule) */
  assert_int_equal (check ("git.test", "POST", "/o/r.git/git-receive-pack?x=/git-upload-pack", 0, rule, &max), -1);
  assert_string_equal (rule, "path not allowed");
  assert_int_equal (check ("git.test", "GET", "/o/r.git/settings?/info/refs", 0, rule, &max), -1);
  assert_int_equal (check ("git.test", "GET", "/o/r.git/info/refs?service=git-upload-pack", 0, rule, &max), 0);
  static const char *const traversal[] = { "/repos/org/../admin",     "/repos/org/./x", "/repos/org/..",
                                           "/repos/org/%2e%2e/admin", "/repos/org%2Fx", "/repos/org/\\..\\x" };
  for (size_t i = 0; i < sizeof traversal / sizeof traversal[0]; i++)
    {
      assert_int_equal (check ("api.test", "POST", traversal[i], 0, rule, &max), -1);
      assert_string_equal (rule, "ambiguous path");
    }
  /* "..." and names starting with dots are not dot-segments; a query may hold anything */
  assert_int_equal (check ("api.test", "POST", "/repos/org/.../.git?p=../x", 0, rule, &max), 0);
}

static void
test_intercepted (void **state)
{
  (void) state;
  assert_true (http_rules_intercepted (&plan, "api.test"));
  assert_true (http_rules_intercepted (&plan, "cred.test"));
  assert_false (http_rules_intercepted (&plan, "other.test"));
  assert_false (http_rules_intercepted (&plan, "API.test"));
}

int
main (void)
{
  const struct CMUnitTest tests[] = { cmocka_unit_test (test_allowed), cmocka_unit_test (test_refused),
                                      cmocka_unit_test (test_intercepted) };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
