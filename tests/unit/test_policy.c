/* test_policy.c - the policy compiler, without root: golden files (policy in -> plan out, or the
 * exact error) for every case directory under tests/unit/data/policy/cases, the built-in
 * profiles, and the value grammar (sizes, durations, domains, CIDRs, paths, covers relations).
 *
 * A case directory holds the inputs of policy_resolve as files:
 *   ceiling.json (--policy), ceiling.profile (--profile), request.json (annotation
 *   io.agentsbx.policy), request.profile (annotation io.agentsbx.profile), config.json (host
 *   config; default: an empty one), sandbox (sandbox default profile "agent"), audit-dir
 * and the expected output: plan.json (the pretty plan without its "digest" and "effective" keys:
 * what the case decides, so that a change to a built-in profile's text or to the effective
 * document's form touches only the goldens whose plan it changes) or error.txt (the error
 * message). One case (merge-narrow) holds full-plan.json instead: the whole output, effective
 * policy and digest included; and every case checks that the digest is the SHA-256 of its
 * effective policy. Paths under the data directory are written "$DATA" in expected files.
 * Regenerate with POLICY_GOLDEN_UPDATE=1 tests/unit/test_policy (then review the diff). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/doc.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "policy/profiles.h"
#include "core/sha256.h"
#include "policy/syscall_groups.h"

#define DATA TEST_DATA_DIR "/policy"

static char *
slurp (const char *path)
{
  char *s = NULL;
  size_t len;
  if (read_file_at (AT_FDCWD, path, 1 << 20, &s, &len, NULL) < 0)
    return NULL;
  return s;
}

static char *
first_line (const char *path)
{
  char *s = slurp (path);
  if (s)
    s[strcspn (s, "\n")] = '\0';
  return s;
}

/* replace every occurrence of the data dir with "$DATA" */
static char *
scrub (const char *s)
{
  const char *needle = DATA;
  size_t n = strlen (needle);
  char *out = xmalloc (strlen (s) + 1), *o = out;
  while (*s)
    {
      if (strncmp (s, needle, n) == 0)
        {
          memcpy (o, "$DATA", 5);
          o += 5;
          s += n;
        }
      else
        *o++ = *s++;
    }
  *o = '\0';
  return out;
}

static void
write_text (const char *path, const char *text)
{
  FILE *f = fopen (path, "w");
  assert_non_null (f);
  fputs (text, f);
  fclose (f);
}

static int failures;

/* The pretty plan `j` without its "digest" line and its last key, "effective" (in place). Returns
 * false when either is missing. */
static bool
plan_only (char *j)
{
  char *d = strstr (j, "\n  \"digest\": \"");
  char *e = strstr (j, ",\n  \"effective\": ");
  if (d == NULL || e == NULL || e < d)
    return false;
  char *d_end = strchr (d + 1, '\n');
  memmove (d, d_end, strlen (d_end) + 1);
  e -= d_end - d;
  strcpy (e, "\n}\n");
  return true;
}

static void
run_case (const char *name)
{
  cleanup_free char *dir = xasprintf ("%s/cases/%s", DATA, name);
  cleanup_free char *p_ceil = xasprintf ("%s/ceiling.json", dir), *p_cfg = xasprintf ("%s/config.json", dir);
  cleanup_free char *req_json = NULL, *req_profile = NULL, *ceil_profile = NULL, *audit = NULL, *sandbox = NULL;
  cleanup_free char *tmp = NULL, *actual = NULL, *expect_path = NULL, *expected = NULL, *out = NULL;
  char *keys[2], *values[2];
  struct oci_map ann = { keys, values, 0 };
  struct policy_inputs in = { 0 };
  asbx_err_t err = NULL;

  tmp = xasprintf ("%s/request.json", dir);
  req_json = slurp (tmp);
  free (tmp);
  tmp = xasprintf ("%s/request.profile", dir);
  req_profile = first_line (tmp);
  free (tmp);
  tmp = xasprintf ("%s/ceiling.profile", dir);
  ceil_profile = first_line (tmp);
  free (tmp);
  tmp = xasprintf ("%s/audit-dir", dir);
  audit = first_line (tmp);
  free (tmp);
  tmp = xasprintf ("%s/sandbox", dir);
  sandbox = first_line (tmp);
  if (req_json)
    {
      keys[ann.len] = (char *) "io.agentsbx.policy";
      values[ann.len++] = req_json;
    }
  if (req_profile)
    {
      keys[ann.len] = (char *) "io.agentsbx.profile";
      values[ann.len++] = req_profile;
    }
  in.annotations = &ann;
  in.profile_flag = ceil_profile;
  in.policy_flag = access (p_ceil, F_OK) == 0 ? p_ceil : NULL;
  in.config_path = access (p_cfg, F_OK) == 0 ? p_cfg : DATA "/empty-config.json";
  in.profiles_dir = DATA "/profiles";
  in.audit_dir_flag = audit;
  in.sandbox_default_profile = sandbox ? "agent" : NULL;

  struct policy_plan *p = policy_resolve (&in, &err);
  if (p)
    {
      cleanup_free char *j = policy_plan_to_json (p, true);
      cleanup_free char *full = xasprintf ("%s/full-plan.json", dir);
      char hex[65];
      if (p->active)
        {
          sha256_hex (p->effective_json, strlen (p->effective_json), hex);
          cleanup_free char *digest = xasprintf ("sha256:%s", hex);
          if (strcmp (p->digest, digest) != 0)
            {
              failures++;
              print_error ("case %s: digest %s is not the SHA-256 of the effective policy\n", name, p->digest);
            }
        }
      if (access (full, F_OK) == 0)
        expect_path = steal_ptr (&full);
      else
        {
          if (p->active && !plan_only (j))
            {
              failures++;
              print_error ("case %s: no digest/effective in the plan\n", name);
            }
          expect_path = xasprintf ("%s/plan.json", dir);
        }
      actual = scrub (j);
      policy_plan_free (p);
    }
  else
    {
      cleanup_free char *m = xasprintf ("%s\n", err->msg);
      actual = scrub (m);
      expect_path = xasprintf ("%s/error.txt", dir);
      asbx_error_free (&err);
    }
  if (getenv ("POLICY_GOLDEN_UPDATE"))
    {
      cleanup_free char *other = xasprintf ("%s/%s", dir, p ? "error.txt" : "plan.json");
      unlink (other);
      write_text (expect_path, actual);
      return;
    }
  expected = slurp (expect_path);
  if (expected == NULL || strcmp (expected, actual) != 0)
    {
      failures++;
      print_error ("case %s: %s differs (or is missing); actual:\n%s\n", name, expect_path, actual);
    }
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* issue 19: the effective policy saved at create (for exec) keeps network.credentials and
 * network.http: compiled again, the same plan */
static void
test_egress_saved_roundtrip (void **state)
{
  struct policy_inputs in = { .policy_flag = DATA "/cases/field-egress/ceiling.json",
                              .config_path = DATA "/empty-config.json",
                              .profiles_dir = DATA "/profiles" };
  asbx_err_t err = NULL;
  struct policy_plan *p = policy_resolve (&in, &err);
  assert_non_null (p);
  struct policy_plan *q = policy_resolve_saved (p->effective_json, "saved", &err);
  assert_non_null (q);
  assert_string_equal (p->effective_json, q->effective_json);
  assert_int_equal (q->credentials_len, 1);
  assert_string_equal (q->credentials[0].host, "api.example.com");
  assert_string_equal (q->credentials[0].value, "Bearer ${secret:api-token}");
  assert_int_equal (q->http_hosts_len, 1);
  assert_int_equal (q->http_hosts[0].allow_len, 2);
  assert_int_equal (q->http_hosts[0].max_body_bytes, 1048576);
  policy_plan_free (p);
  policy_plan_free (q);
  (void) state;
}

static void
test_golden (void **state)
{
  cleanup_closedir DIR *d = opendir (DATA "/cases");
  struct dirent *e;
  char *names[512];
  size_t n = 0;
  assert_non_null (d);
  while ((e = readdir (d)) && n < 512)
    if (e->d_name[0] != '.')
      names[n++] = xstrdup (e->d_name);
  qsort (names, n, sizeof (char *), cmp_str);
  failures = 0;
  for (size_t i = 0; i < n; i++)
    {
      run_case (names[i]);
      free (names[i]);
    }
  print_message ("golden cases: %zu, failures: %d\n", n, failures);
  assert_true (n > 0);
  assert_int_equal (failures, 0);
}

/* profiles_data.c must be exactly contrib/profiles/NAME.json, one entry per JSON file there (a
 * profile added or removed without the generated file being rebuilt fails here) */
static void
test_builtins_match_json (void **state)
{
  cleanup_closedir DIR *d = opendir (TOP_SRCDIR "/contrib/profiles");
  struct dirent *e;
  size_t files = 0, n = 0;
  assert_non_null (d);
  while ((e = readdir (d)))
    {
      size_t l = strlen (e->d_name);
      if (e->d_name[0] != '.' && l > 5 && strcmp (e->d_name + l - 5, ".json") == 0)
        {
          cleanup_free char *name = xstrdup (e->d_name);
          name[l - 5] = '\0';
          if (policy_builtin_profile (name) == NULL)
            fail_msg ("contrib/profiles/%s is not built in (src/policy/profiles_data.c not regenerated?)", e->d_name);
          files++;
        }
    }
  for (const struct policy_builtin *b = policy_builtins; b->name; b++, n++)
    {
      cleanup_free char *path = xasprintf ("%s/contrib/profiles/%s.json", TOP_SRCDIR, b->name);
      cleanup_free char *text = slurp (path);
      assert_non_null (text);
      assert_string_equal (text, b->json);
      assert_int_equal (strlen (text), b->len);
      assert_ptr_equal (policy_builtin_profile (b->name), b->json);
    }
  assert_true (n > 0);
  assert_int_equal (n, files);
  assert_null (policy_builtin_profile ("nope"));
}

/* every built-in profile passes `policy check` */
static void
test_builtins_check (void **state)
{
  for (const struct policy_builtin *b = policy_builtins; b->name; b++)
    {
      asbx_err_t err = NULL;
      const char *j = policy_builtin_profile (b->name);
      cleanup_free char *source = xasprintf ("profile %s", b->name);
      cleanup_free char *out = policy_check (j, strlen (j), source, DATA "/no-such-dir", &err);
      if (err)
        fail_msg ("%s", err->msg);
      assert_non_null (out);
    }
}

/* The copies of the syscall-group list name exactly the groups of POLICY_SYSCALL_GROUPS, in its
 * order: `names` (n entries, heap strings, freed here) as read from `what` */
static void
expect_group_names (const char *what, char **names, size_t n)
{
  size_t i;
  for (i = 0; i < n && i < policy_syscall_groups_len; i++)
    if (strcmp (names[i], policy_syscall_groups[i].name) != 0)
      fail_msg ("%s: group %zu is \"%s\", src/policy/syscall_groups.h has \"%s\"", what, i, names[i],
                policy_syscall_groups[i].name);
  if (n != policy_syscall_groups_len)
    fail_msg ("%s lists %zu syscall groups, src/policy/syscall_groups.h %zu (first difference at %zu: %s)", what, n,
              policy_syscall_groups_len, i, i < n ? names[i] : policy_syscall_groups[i].name);
  for (i = 0; i < n; i++)
    free (names[i]);
}

/* The enum at `path` of the parsed schema `tree` is exactly the first n entries of `want`, in order. */
static void
expect_schema_enum (yajl_val tree, const char *const *path, const char *const *want, size_t n)
{
  yajl_val e = yajl_tree_get (tree, (const char **) path, yajl_t_array);
  if (e == NULL)
    fail_msg ("docs/policy.schema.json: no enum at %s.%s", path[1], path[3] ? path[3] : "");
  assert_int_equal (YAJL_GET_ARRAY (e)->len, n);
  for (size_t i = 0; i < n; i++)
    assert_string_equal (YAJL_GET_STRING (YAJL_GET_ARRAY (e)->values[i]), want[i]);
}

static size_t
strv_len (const char *const *v)
{
  size_t n = 0;
  while (v[n])
    n++;
  return n;
}

/* the build's docs/policy.schema.json (made from docs/policy.schema.json.in by docs/gen-schema):
 * each enum is the C table the parser uses */
static void
test_groups_schema (void **state)
{
  cleanup_free char *text = slurp (TOP_BUILDDIR "/docs/policy.schema.json");
  const char *path[] = { "properties", "syscalls", "properties", "deny", "items", "enum", NULL };
  char errbuf[256] = "";
  char *names[64];
  size_t n = 0;
  if (text == NULL)
    fail_msg ("docs/policy.schema.json not built (make)");
  assert_null (strstr (text, "\"@"));
  yajl_val tree = yajl_tree_parse (text, errbuf, sizeof (errbuf));
  if (tree == NULL)
    fail_msg ("docs/policy.schema.json: %s", errbuf);
  yajl_val e = yajl_tree_get (tree, path, yajl_t_array);
  assert_non_null (e);
  for (size_t i = 0; i < YAJL_GET_ARRAY (e)->len && n < 64; i++)
    names[n++] = xstrdup (YAJL_GET_STRING (YAJL_GET_ARRAY (e)->values[i]));
  expect_group_names ("docs/policy.schema.json syscalls.deny enum", names, n);

  const char *caps[] = { "properties", "capabilities", "properties", "allow", "items", "enum", NULL };
  const char *events[] = { "properties", "audit", "properties", "events", "items", "enum", NULL };
  const char *on_full[] = { "properties", "audit", "properties", "onFull", "enum", NULL };
  const char *mode[] = { "properties", "network", "properties", "mode", "enum", NULL };
  const char *appr[] = { "properties", "approvals", "properties", "network", "enum", NULL };
  const char *timeout[] = { "properties", "approvals", "properties", "onTimeout", "enum", NULL };
  const char *degrade[] = { "properties", "degrade", "items", "enum", NULL };
  expect_schema_enum (tree, caps, pdoc_caps, strv_len (pdoc_caps));
  expect_schema_enum (tree, events, pdoc_audit_names, 8);
  expect_schema_enum (tree, on_full, policy_on_full_names, strv_len (policy_on_full_names));
  expect_schema_enum (tree, mode, policy_net_mode_names, strv_len (policy_net_mode_names));
  expect_schema_enum (tree, appr, policy_approval_names, strv_len (policy_approval_names));
  expect_schema_enum (tree, timeout, policy_on_timeout_names, strv_len (policy_on_timeout_names));
  expect_schema_enum (tree, degrade, pdoc_degrade_names, strv_len (pdoc_degrade_names));
  yajl_tree_free (tree);
}

/* the first column ("| `NAME` |") of the table after `heading` in the build's
 * docs/policy-builtins.md: `names` gets up to `max` heap strings, returns how many */
static size_t
builtins_md_names (const char *heading, char **names, size_t max)
{
  cleanup_free char *md = slurp (TOP_BUILDDIR "/docs/policy-builtins.md");
  size_t n = 0;
  if (md == NULL)
    fail_msg ("docs/policy-builtins.md not built (make)");
  const char *p = strstr (md, heading);
  assert_non_null (p);
  p = strstr (p, "\n|---");
  assert_non_null (p);
  for (p = strchr (p + 1, '\n'); p && strncmp (p, "\n| `", 4) == 0 && n < max; p = strchr (p + 1, '\n'))
    names[n++] = xasprintf ("%.*s", (int) strcspn (p + 4, "`"), p + 4);
  return n;
}

/* docs/policy-builtins.md (generated) lists every syscall group and every built-in profile */
static void
test_builtins_md (void **state)
{
  char *names[64];
  size_t n = builtins_md_names ("\n## Syscall groups", names, 64);
  expect_group_names ("docs/policy-builtins.md syscall groups", names, n);
  n = builtins_md_names ("\n## Profiles", names, 64);
  size_t i = 0;
  for (; i < n && policy_builtin_name (i); i++)
    assert_string_equal (names[i], policy_builtin_name (i));
  assert_int_equal (i, n);
  assert_null (policy_builtin_name (i));
  for (i = 0; i < n; i++)
    free (names[i]);
}

static void
test_sizes_durations (void **state)
{
  uint64_t v;
  char *why = NULL;
  assert_int_equal (pval_size ("2GiB", &v, &why), 0);
  assert_int_equal (v, 2ull << 30);
  assert_int_equal (pval_size ("512MiB", &v, &why), 0);
  assert_int_equal (v, 512ull << 20);
  assert_int_equal (pval_size ("100KB", &v, &why), 0);
  assert_int_equal (v, 100000);
  assert_int_equal (pval_size ("4096", &v, &why), 0);
  assert_int_equal (v, 4096);
  assert_int_equal (pval_size ("2gib", &v, &why), -1);
  assert_string_equal (why, "unknown unit \"gib\" in a size");
  free (why);
  assert_int_equal (pval_size ("GiB", &v, &why), -1);
  free (why);
  assert_int_equal (pval_size ("99999999999TiB", &v, &why), -1);
  assert_string_equal (why, "size out of range");
  free (why);
  assert_int_equal (pval_duration ("90s", &v, &why), 0);
  assert_int_equal (v, 90);
  assert_int_equal (pval_duration ("30m", &v, &why), 0);
  assert_int_equal (v, 1800);
  assert_int_equal (pval_duration ("2h", &v, &why), 0);
  assert_int_equal (v, 7200);
  assert_int_equal (pval_duration ("1d", &v, &why), 0);
  assert_int_equal (v, 86400);
  assert_int_equal (pval_duration ("1.5h", &v, &why), -1);
  free (why);
  /* fuzz_policy regression: fits in uint64 after *60 but not in the signed range of the output */
  assert_int_equal (pval_duration ("157777777777777777m", &v, &why), -1);
  assert_string_equal (why, "duration out of range");
  free (why);
  assert_int_equal (pval_duration ("9223372036854775807", &v, &why), 0);
  assert_int_equal (pval_size ("9223372036854775808B", &v, &why), -1);
  free (why);
}

static void
test_domains (void **state)
{
  char *n = NULL, *why = NULL;
  assert_int_equal (pval_domain ("PyPI.org.", &n, &why), 0);
  assert_string_equal (n, "pypi.org");
  free (n);
  assert_int_equal (pval_domain ("*", &n, &why), -1);
  free (why);
  assert_int_equal (pval_domain ("com", &n, &why), -1);
  free (why);
  assert_int_equal (pval_domain ("*.com", &n, &why), -1);
  free (why);
  assert_int_equal (pval_domain ("a.*.com", &n, &why), -1);
  free (why);
  assert_true (pval_domain_covers ("*.github.com", "api.github.com"));
  assert_true (pval_domain_covers ("*.github.com", "a.b.github.com"));
  assert_true (pval_domain_covers ("*.github.com", "*.api.github.com"));
  assert_true (pval_domain_covers ("*.github.com", "*.github.com"));
  assert_false (pval_domain_covers ("*.github.com", "github.com"));
  assert_false (pval_domain_covers ("*.github.com", "evilgithub.com"));
  assert_false (pval_domain_covers ("github.com", "*.github.com"));
}

static void
test_cidrs (void **state)
{
  char *n = NULL, *why = NULL;
  assert_int_equal (pval_cidr ("10.0.0.0/8", &n, &why), 0);
  assert_string_equal (n, "10.0.0.0/8");
  free (n);
  assert_int_equal (pval_cidr ("10.0.0.1:443", &n, &why), 0);
  assert_string_equal (n, "10.0.0.1/32:443");
  free (n);
  assert_int_equal (pval_cidr ("[2001:DB8::]/32:443", &n, &why), 0);
  assert_string_equal (n, "[2001:db8::]/32:443");
  free (n);
  assert_int_equal (pval_cidr ("2001:db8::/32", &n, &why), 0);
  assert_string_equal (n, "2001:db8::/32");
  free (n);
  assert_int_equal (pval_cidr ("10.0.0.1/8", &n, &why), -1);
  assert_string_equal (why, "host bits set after the /8 prefix");
  free (why);
  assert_int_equal (pval_cidr ("0.0.0.0/0", &n, &why), -1);
  free (why);
  assert_int_equal (pval_cidr ("10.0.0.0/8:0", &n, &why), -1);
  free (why);
  assert_true (pval_cidr_covers ("10.0.0.0/8", "10.1.0.0/16:443"));
  assert_false (pval_cidr_covers ("10.0.0.0/8:443", "10.1.0.0/16"));
  assert_true (pval_cidr_covers ("10.0.0.0/8:443", "10.1.0.0/16:443"));
  assert_false (pval_cidr_covers ("10.0.0.0/16", "10.0.0.0/8"));
  assert_false (pval_cidr_covers ("10.0.0.0/8", "2001:db8::/32"));
}

static void
test_paths (void **state)
{
  struct pdoc_path p = { 0 };
  char *why = NULL;
  assert_int_equal (pval_path ("?//workspace/./.git/hooks/", &p, false, &why), 0);
  assert_string_equal (p.path, "/workspace/.git/hooks");
  assert_true (p.optional);
  free (p.path);
  assert_int_equal (pval_path ("/usr/**", &p, false, &why), 0);
  assert_string_equal (p.path, "/usr");
  free (p.path);
  assert_int_equal (pval_path ("~/.ssh", &p, true, &why), 0);
  assert_string_equal (p.path, ".ssh");
  assert_true (p.each_home);
  free (p.path);
  assert_int_equal (pval_path ("~/.ssh", &p, false, &why), -1);
  free (why);
  assert_int_equal (pval_path ("/a/../b", &p, false, &why), -1);
  free (why);
  assert_int_equal (pval_path ("/a/*/b", &p, false, &why), -1);
  free (why);
  assert_int_equal (pval_path ("/a/b?", &p, false, &why), -1);
  free (why);
  assert_int_equal (pval_path ("a/b", &p, false, &why), -1);
  free (why);
  assert_true (pval_path_covers ("/", "/etc"));
  assert_true (pval_path_covers ("/work", "/work"));
  assert_true (pval_path_covers ("/work", "/work/x"));
  assert_false (pval_path_covers ("/work", "/workspace"));
}

static void
test_sha256 (void **state)
{
  char hex[65];
  sha256_hex ("abc", 3, hex);
  assert_string_equal (hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  sha256_hex ("", 0, hex);
  assert_string_equal (hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  sha256_hex (m, strlen (m), hex);
  assert_string_equal (hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_golden),
    cmocka_unit_test (test_egress_saved_roundtrip),
    cmocka_unit_test (test_builtins_match_json),
    cmocka_unit_test (test_builtins_check),
    cmocka_unit_test (test_groups_schema),
    cmocka_unit_test (test_builtins_md),
    cmocka_unit_test (test_sizes_durations),
    cmocka_unit_test (test_domains),
    cmocka_unit_test (test_cidrs),
    cmocka_unit_test (test_paths),
    cmocka_unit_test (test_sha256),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
