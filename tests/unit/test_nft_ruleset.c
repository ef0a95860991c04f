/* test_nft_ruleset.c - the network policy as nftables text (src/policy/nft_ruleset.c):
 * golden files in tests/unit/data/nft (UPDATE_GOLDENS=1 rewrites them), the element commands
 * of the DNS stub, canonical-form errors. As root, every golden is also checked by the kernel's
 * own parser and loaded for real into a throwaway network namespace (unshare in a child). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/nft.h"
#include "policy/nft_ruleset.h"

static uint16_t default_ports[] = { 80, 443 };

static struct policy_plan
plan_of (enum policy_net_mode mode, bool local)
{
  return (struct policy_plan){
    .active = true, .net_mode = mode, .allow_local_binding = local, .ports = default_ports, .ports_len = 2
  };
}

/* As root: load the text into a fresh network namespace (a child unshares, so nothing of ours
 * changes) and list it back; returns the child's exit status (0 = loaded). */
static int
load_in_fresh_netns (const char *text)
{
  pid_t p = fork ();
  if (p == 0)
    {
      asbx_err_t err = NULL;
      if (unshare (CLONE_NEWNET) < 0)
        _exit (2);
      if (linux_nft_load (text, &err) < 0)
        {
          fprintf (stderr, "load: %s\n", err->msg);
          _exit (1);
        }
      /* twice: the add+delete prologue replaces the table instead of failing */
      if (linux_nft_load (text, &err) < 0)
        {
          fprintf (stderr, "reload: %s\n", err->msg);
          _exit (3);
        }
      _exit (0);
    }
  int st;
  waitpid (p, &st, 0);
  return WIFEXITED (st) ? WEXITSTATUS (st) : 99;
}

static void
check_golden (const struct policy_plan *plan, const char *name)
{
  asbx_err_t err = NULL;
  cleanup_free char *text = NULL, *want = NULL, *path = xasprintf ("%s/%s.nft", NFT_DATA_DIR, name);
  size_t len;

  assert_int_equal (policy_nft_ruleset (plan, &text, &err), 0);
  assert_non_null (text);
  if (getenv ("UPDATE_GOLDENS"))
    {
      FILE *f = fopen (path, "w");
      assert_non_null (f);
      fputs (text, f);
      fclose (f);
    }
  if (read_file_at (AT_FDCWD, path, 1 << 20, &want, &len, &err) < 0)
    fail_msg ("%s", err->msg);
  if (strcmp (text, want) != 0)
    fail_msg ("%s differs from the golden:\n%s", name, text);
  if (geteuid () == 0)
    assert_int_equal (load_in_fresh_netns (text), 0);
}

static void
test_none_local (void **s)
{
  struct policy_plan p = plan_of (POLICY_NET_NONE, true);
  check_golden (&p, "none-local");
}

static void
test_none_nolocal (void **s)
{
  struct policy_plan p = plan_of (POLICY_NET_NONE, false);
  check_golden (&p, "none-nolocal");
}

static void
test_filtered_empty (void **s)
{
  struct policy_plan p = plan_of (POLICY_NET_FILTERED, true);
  check_golden (&p, "filtered-empty");
}

static void
test_filtered_cidrs (void **s)
{
  char *cidrs[] = { "10.1.0.0/16", "192.0.2.7/32:8443", "2001:db8::/32", "[2001:db8:1::5]/128:443" };
  struct policy_plan p = plan_of (POLICY_NET_FILTERED, false);
  p.allowed_cidrs = cidrs;
  p.allowed_cidrs_len = 4;
  check_golden (&p, "filtered-cidrs");
}

static void
test_filtered_log (void **s)
{
  struct policy_plan p = plan_of (POLICY_NET_FILTERED, true);
  p.audit_events |= POLICY_AUDIT_NETWORK; /* refused packets to NFLOG for `network` records */
  check_golden (&p, "filtered-log");
}

static void
test_open_and_inactive (void **s)
{
  asbx_err_t err = NULL;
  char *text = (char *) "x";
  struct policy_plan p = plan_of (POLICY_NET_OPEN, true);
  assert_int_equal (policy_nft_ruleset (&p, &text, &err), 0);
  assert_null (text);
  p.net_mode = POLICY_NET_NONE;
  p.active = false;
  assert_int_equal (policy_nft_ruleset (&p, &text, &err), 0);
  assert_null (text);
  assert_int_equal (policy_nft_ruleset (NULL, &text, &err), 0);
  assert_null (text);
}

static void
test_bad_cidr (void **s)
{
  asbx_err_t err = NULL;
  char *text = NULL;
  char *bad[] = { "10.0.0.0", "example.org/8", "10.0.0.0/33", "10.0.0.0/8:0", "10.0.0.0/8:x", "[::1/128" };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    {
      struct policy_plan p = plan_of (POLICY_NET_FILTERED, true);
      p.allowed_cidrs = &bad[i];
      p.allowed_cidrs_len = 1;
      assert_int_equal (policy_nft_ruleset (&p, &text, &err), -1);
      assert_null (text);
      assert_non_null (strstr (err->msg, "network.allowedCidrs[0]"));
      asbx_error_free (&err);
    }
}

static void
test_allow_cmd (void **s)
{
  uint16_t ports[] = { 80, 443 };
  cleanup_free char *v4 = policy_nft_allow_cmd ("192.0.2.1", ports, 2, 5);
  cleanup_free char *v6 = policy_nft_allow_cmd ("2001:db8::1", ports, 1, 999999);
  assert_string_equal (
      v4, "add element inet agentsbx allow4 { 192.0.2.1 . 80, 192.0.2.1 . 443 }\n"
          "delete element inet agentsbx allow4 { 192.0.2.1 . 80, 192.0.2.1 . 443 }\n"
          "add element inet agentsbx allow4 { 192.0.2.1 . 80 timeout 60s, 192.0.2.1 . 443 timeout 60s }\n");
  assert_string_equal (v6, "add element inet agentsbx allow6 { 2001:db8::1 . 80 }\n"
                           "delete element inet agentsbx allow6 { 2001:db8::1 . 80 }\n"
                           "add element inet agentsbx allow6 { 2001:db8::1 . 80 timeout 86400s }\n");
  /* anything but a numeric address is refused: no text of a DNS answer reaches the parser */
  assert_null (policy_nft_allow_cmd ("evil; flush ruleset", ports, 2, 60));
  assert_null (policy_nft_allow_cmd ("example.org", ports, 2, 60));
  assert_null (policy_nft_allow_cmd ("192.0.2.1", ports, 0, 60));
}

/* as root: an element command against a loaded filtered table, twice (refresh) */
static void
test_allow_cmd_loads (void **s)
{
  if (geteuid () != 0)
    skip ();
  asbx_err_t err = NULL;
  cleanup_free char *text = NULL;
  struct policy_plan p = plan_of (POLICY_NET_FILTERED, true);
  assert_int_equal (policy_nft_ruleset (&p, &text, &err), 0);
  cleanup_free char *cmd = policy_nft_allow_cmd ("192.0.2.1", default_ports, 2, 120);
  cleanup_free char *all = xasprintf ("%s%s%s", text, cmd, cmd);
  assert_int_equal (load_in_fresh_netns (all), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_none_local),      cmocka_unit_test (test_none_nolocal),
    cmocka_unit_test (test_filtered_empty),  cmocka_unit_test (test_filtered_cidrs),
    cmocka_unit_test (test_filtered_log),    cmocka_unit_test (test_open_and_inactive),
    cmocka_unit_test (test_bad_cidr),        cmocka_unit_test (test_allow_cmd),
    cmocka_unit_test (test_allow_cmd_loads),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
