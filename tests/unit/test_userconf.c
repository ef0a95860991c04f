/* test_userconf.c - the per-user config (policy/userconf.h, issue 17) through policy_resolve,
 * without root: what it may narrow (a denyRead added, a limit lowered, network narrowed, a
 * defaultProfile that the host config's allows), what is refused naming the file, the JSON path
 * and what was expected (a limit raised, a wider network mode, a degrade, a grant outside the
 * policy in force, a defaultProfile wider than the host config's, the host config's own keys,
 * unknown keys, a file others can write), and what it does not touch (an explicit --profile, a
 * plain OCI container). Files are written to a fresh directory owned by the caller. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/plan.h"
#include "policy/policy.h"

static char dir[] = "/tmp/asbx-test-userconf-XXXXXX";

static char *
put (const char *name, const char *text)
{
  char *p = xasprintf ("%s/%s", dir, name);
  FILE *f = fopen (p, "w");
  assert_non_null (f);
  fputs (text, f);
  fclose (f);
  chmod (p, 0644);
  return p;
}

/* policy_resolve with host config `sys` (NULL: none), user config `user` (NULL: none), quick
 * mode's default profile, and `profile` as --profile (NULL: none). *err set on failure. */
static struct policy_plan *
resolve (const char *sys, const char *user, const char *profile, bool sandbox, asbx_err_t *err)
{
  cleanup_free char *sp = put ("sys.json", sys ? sys : "{}");
  cleanup_free char *up = user ? put ("config.json", user) : xstrdup ("");
  struct policy_inputs in = {
    .profile_flag = profile,
    .config_path = sp,
    .profiles_dir = "/nonexistent-profiles-dir",
    .audit_dir_flag = "/tmp/audit",
    .sandbox_default_profile = sandbox ? "agent" : NULL,
    .user_config = up,
  };
  return policy_resolve (&in, err);
}

static bool
has_mask (const struct policy_plan *p, const char *path)
{
  for (size_t i = 0; i < p->mounts_len; i++)
    if (p->mounts[i].kind == POLICY_MOUNT_MASK && strcmp (p->mounts[i].path, path) == 0)
      return true;
  return false;
}

/* the error of resolving (must fail), as a heap string */
static char *
refused (const char *sys, const char *user, const char *profile)
{
  asbx_err_t err = NULL;
  struct policy_plan *p = resolve (sys, user, profile, true, &err);
  if (p)
    policy_plan_free (p);
  assert_null (p);
  assert_non_null (err);
  char *m = xstrdup (err->msg);
  asbx_error_free (&err);
  return m;
}

static void
assert_contains (const char *hay, const char *needle)
{
  if (!strstr (hay, needle))
    fail_msg ("`%s` not in:\n%s", needle, hay);
}

static void
test_restrict_narrows (void **state)
{
  asbx_err_t err = NULL;
  struct policy_plan *p = resolve (NULL,
                                   "{\"restrict\": {\"filesystem\": {\"denyRead\": [\"/srv/secret\"]},"
                                   " \"limits\": {\"pids\": 64, \"wallClockSeconds\": 60},"
                                   " \"network\": {\"mode\": \"none\"}}}",
                                   NULL, true, &err);
  assert_null (err);
  assert_non_null (p);
  assert_true (p->active);
  assert_true (has_mask (p, "/srv/secret"));
  assert_true (has_mask (p, "/etc/shadow")); /* agent's own denies kept (union) */
  assert_int_equal (p->pids, 64);
  assert_int_equal (p->wall_clock_seconds, 60);
  assert_int_equal (p->memory_bytes, 2147483648u); /* not set by the user: agent's */
  assert_int_equal (p->net_mode, POLICY_NET_NONE);
  bool src = false;
  for (size_t i = 0; i < p->sources_len; i++)
    src = src || (strstr (p->sources[i], "user config: ") && strstr (p->sources[i], "(restrict)"));
  assert_true (src);
  policy_plan_free (p);
}

static void
test_restrict_widening_refused (void **state)
{
  cleanup_free char *m = refused (
      NULL,
      "{\"restrict\": {\"limits\": {\"memoryBytes\": \"8GiB\"}, \"network\": {\"mode\": \"open\"},"
      " \"filesystem\": {\"allowWrite\": [\"/\"]}, \"degrade\": [\"landlock\"],"
      " \"capabilities\": {\"allow\": [\"CAP_SYS_ADMIN\"]}}}",
      NULL);
  cleanup_free char *file = xasprintf ("%s/config.json: ", dir);
  const char *fields[] = { "restrict.limits.memoryBytes: 8589934592 is not allowed by the policy in force "
                           "(profile \"agent\") (at most 2147483648)",
                           "restrict.network.mode: \"open\" is not allowed",
                           "restrict.filesystem.allowWrite: \"/\" is not allowed",
                           "restrict.degrade: \"landlock\" is not allowed",
                           "restrict.capabilities.allow: \"CAP_SYS_ADMIN\" is not allowed" };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    {
      cleanup_free char *line = xasprintf ("%s%s", file, fields[i]);
      assert_contains (m, line);
    }
  assert_contains (m, "a user config may only narrow");
}

static void
test_restrict_bad_document (void **state)
{
  cleanup_free char *m = refused (NULL, "{\"restrict\": {\"filesystem\": {\"denyRead\": [\"rel\"]}}}", NULL);
  cleanup_free char *want = xasprintf ("%s/config.json: restrict: filesystem.denyRead[0]", dir);
  assert_contains (m, want);
  free (m);
  m = refused (NULL, "{\"restrict\": [1]}", NULL);
  assert_contains (m, "restrict: expected an object");
}

static void
test_default_profile (void **state)
{
  asbx_err_t err = NULL;
  /* no defaultProfile in the host config: the user's is the ceiling (the built-in `agent`
   * sandbox default bounds nothing, as a --profile would not be bounded) */
  struct policy_plan *p = resolve (NULL, "{\"defaultProfile\": \"rootless\"}", NULL, true, &err);
  assert_null (err);
  /* rootless is agent's filtered network; what tells it from agent is its degrade list */
  assert_int_equal (p->net_mode, POLICY_NET_FILTERED);
  assert_true (p->degrade_len >= 1);
  assert_string_equal (p->degrade[0], "cgroup");
  policy_plan_free (p);
  /* narrower than the host config's: accepted, and it is what runs */
  p = resolve ("{\"defaultProfile\": \"agent\"}", "{\"defaultProfile\": \"locked\"}", NULL, true, &err);
  assert_null (err);
  assert_non_null (p);
  assert_int_equal (p->net_mode, POLICY_NET_NONE);
  policy_plan_free (p);
  /* wider than the host config's: refused naming the file, the key and the fields */
  cleanup_free char *m = refused ("{\"defaultProfile\": \"locked\"}", "{\"defaultProfile\": \"build\"}", NULL);
  cleanup_free char *want = xasprintf ("%s/config.json: defaultProfile \"build\": network.mode", dir);
  assert_contains (m, want);
  assert_contains (m, "must narrow the host config's");
  free (m);
  /* degrade is a widening too: `rootless` under a host config defaulting to `agent` */
  m = refused ("{\"defaultProfile\": \"agent\"}", "{\"defaultProfile\": \"rootless\"}", NULL);
  assert_contains (m, "defaultProfile \"rootless\": degrade: \"cgroup\"");
  free (m);
  m = refused (NULL, "{\"defaultProfile\": \"../x\"}", NULL);
  assert_contains (m, "defaultProfile: invalid profile name");
}

static void
test_flag_wins_restrict_stays (void **state)
{
  asbx_err_t err = NULL;
  struct policy_plan *p = resolve (NULL, "{\"defaultProfile\": \"locked\", \"restrict\": {\"limits\": {\"pids\": 10}}}",
                                   "build", true, &err);
  assert_null (err);
  assert_int_equal (p->net_mode, POLICY_NET_FILTERED); /* build, not locked */
  assert_int_equal (p->pids, 10);
  policy_plan_free (p);
}

static void
test_plain_oci_untouched (void **state)
{
  asbx_err_t err = NULL;
  struct policy_plan *p = resolve (NULL, "{\"restrict\": {\"filesystem\": {\"denyRead\": [\"/srv\"]}}}", NULL, false,
                                   &err);
  assert_null (err);
  assert_false (p->active);
  policy_plan_free (p);
}

/* issue 19: a user config names its own secrets directory (absolute), never the upstream CAs, and
 * its restrict document cannot add a credential the policy in force lacks */
static void
test_egress_keys (void **state)
{
  asbx_err_t err = NULL;
  struct policy_plan *p = resolve (NULL, "{\"secretsDir\": \"/srv/me/secrets\"}", NULL, true, &err);
  assert_null (err);
  assert_non_null (p);
  policy_plan_free (p);
  cleanup_free char *rel = refused (NULL, "{\"secretsDir\": \"secrets\"}", NULL);
  assert_contains (rel, "config.json: secretsDir: expected an absolute path");
  cleanup_free char *ca = refused (NULL, "{\"upstreamCaFile\": \"/tmp/ca.pem\"}", NULL);
  assert_contains (ca, "config.json: upstreamCaFile: not accepted in a user config");
  cleanup_free char *cred = refused (NULL,
                                     "{\"restrict\": {\"network\": {\"mode\": \"filtered\", \"ports\": [443], "
                                     "\"credentials\": [{\"host\": \"a.example\", \"header\": \"X-Key\", "
                                     "\"value\": \"${secret:k}\"}]}}}",
                                     NULL);
  assert_contains (cred, "config.json: restrict.network.credentials: \"a.example (X-Key: ${secret:k})\" is not "
                         "allowed by the policy in force");
}

static void
test_system_and_unknown_keys_refused (void **state)
{
  const char *keys[] = { "onWiden", "auditDir", "auditSyslog", "enableKernelAudit" };
  const char *vals[] = { "\"clamp\"", "\"/tmp/x\"", "true", "true" };
  for (size_t i = 0; i < 4; i++)
    {
      cleanup_free char *text = xasprintf ("{\"%s\": %s}", keys[i], vals[i]);
      cleanup_free char *m = refused (NULL, text, NULL);
      cleanup_free char *want = xasprintf ("%s/config.json: %s: not accepted in a user config", dir, keys[i]);
      assert_contains (m, want);
    }
  cleanup_free char *m = refused (NULL, "{\"defaultProfle\": \"locked\"}", NULL);
  assert_contains (m, "defaultProfle: unknown key (a user config accepts defaultProfile, restrict and secretsDir)");
}

static void
test_file_others_can_write_refused (void **state)
{
  cleanup_free char *p = put ("config.json", "{\"restrict\": {}}");
  cleanup_free char *sys = put ("sys.json", "{}");
  struct policy_inputs in = { .config_path = sys, .sandbox_default_profile = "agent", .user_config = p };
  asbx_err_t err = NULL;
  struct policy_plan *plan;
  for (int mode = 0; mode < 2; mode++)
    {
      chmod (p, mode ? 0646 : 0664);
      plan = policy_resolve (&in, &err);
      assert_null (plan);
      assert_contains (err->msg, "neither its group nor others can write");
      assert_contains (err->msg, p);
      asbx_error_free (&err);
    }
  if (geteuid () == 0)
    {
      chmod (p, 0644);
      assert_int_equal (chown (p, 65534, 65534), 0);
      plan = policy_resolve (&in, &err);
      assert_null (plan);
      assert_contains (err->msg, "is owned by uid 65534");
      asbx_error_free (&err);
    }
  /* a named file that does not exist is an error; "" is none */
  in.user_config = "/nonexistent-user-config.json";
  assert_null (policy_resolve (&in, &err));
  asbx_error_free (&err);
  unlink (p);
}

static int
setup (void **state)
{
  return mkdtemp (dir) ? 0 : -1;
}

static int
teardown (void **state)
{
  cleanup_free char *cmd = xasprintf ("rm -rf '%s'", dir);
  return system (cmd) == 0 ? 0 : -1;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_restrict_narrows),
    cmocka_unit_test (test_restrict_widening_refused),
    cmocka_unit_test (test_restrict_bad_document),
    cmocka_unit_test (test_default_profile),
    cmocka_unit_test (test_flag_wins_restrict_stays),
    cmocka_unit_test (test_plain_oci_untouched),
    cmocka_unit_test (test_system_and_unknown_keys_refused),
    cmocka_unit_test (test_egress_keys),
    cmocka_unit_test (test_file_others_can_write_refused),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
