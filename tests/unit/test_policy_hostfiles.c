/* test_policy_hostfiles.c - src/runtime/policy_hostfiles.c: which user namespaces count as
 * isolating (none, joined, and mappings covering host id 0 do not), translated through this
 * process's own /proc/self/uid_map; and which capabilities a policy container loses. Run as root
 * in the initial user namespace (uid_map "0 0 4294967295"); elsewhere the translation cases skip. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "runtime/policy_hostfiles.h"
#include "runtime/policy_apply.h"
#include "spec/model.h"

static bool
initial_userns (void)
{
  FILE *f = fopen ("/proc/self/uid_map", "re");
  unsigned long long in, out, count;
  int n = f ? fscanf (f, "%llu %llu %llu", &in, &out, &count) : 0;
  if (f)
    fclose (f);
  return n == 3 && in == 0 && out == 0 && count == 4294967295ULL;
}

static struct oci_linux
ns_linux (struct oci_namespace *ns, size_t nns, struct oci_id_mapping *m, size_t nm)
{
  struct oci_linux l = { 0 };
  l.namespaces = ns;
  l.namespaces_len = nns;
  l.uid_mappings = l.gid_mappings = m;
  l.uid_mappings_len = l.gid_mappings_len = nm;
  return l;
}

static void
test_isolating (void **state)
{
  struct oci_namespace user = { .type = (char *) "user" }, net = { .type = (char *) "network" };
  struct oci_namespace joined = { .type = (char *) "user", .path = (char *) "/proc/1/ns/user" };
  struct oci_id_mapping remap = { 0, 200000, 65536 }, covers0 = { 0, 0, 65536 }, one = { 0, 23456, 1 };
  struct oci_id_mapping covers0_late = { 100, 0, 1 };
  struct oci_linux l;
  (void) state;
  if (!initial_userns ())
    skip ();
  assert_false (policy_userns_isolating (NULL));
  l = ns_linux (&net, 1, &remap, 1);
  assert_false (policy_userns_isolating (&l)); /* no user namespace */
  l = ns_linux (&joined, 1, &remap, 1);
  assert_false (policy_userns_isolating (&l)); /* joined: not ours to check */
  l = ns_linux (&user, 1, NULL, 0);
  assert_false (policy_userns_isolating (&l)); /* no mapping */
  l = ns_linux (&user, 1, &covers0, 1);
  assert_false (policy_userns_isolating (&l)); /* host root inside */
  l = ns_linux (&user, 1, &covers0_late, 1);
  assert_false (policy_userns_isolating (&l)); /* host root as container uid 100 */
  l = ns_linux (&user, 1, &remap, 1);
  assert_true (policy_userns_isolating (&l));
  l = ns_linux (&user, 1, &one, 1);
  assert_true (policy_userns_isolating (&l));
}

static char **
strv (const char *const *v, size_t n)
{
  char **out = xmalloc0 (sizeof (char *) * (n + 1));
  for (size_t i = 0; i < n; i++)
    out[i] = xstrdup (v[i]);
  return out;
}

static bool
has (char **v, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (v[i], name) == 0)
      return true;
  return false;
}

static void
narrow_and_check (const struct oci_linux *l, bool keep_chown)
{
  static const char *const caps[] = { "CAP_CHOWN", "CAP_FSETID", "CAP_SETFCAP", "CAP_MKNOD", "CAP_KILL" };
  struct oci_capabilities c = { 0 };
  struct oci_process p = { 0 };
  struct policy_plan plan = { .active = true };
  c.bounding = strv (caps, 5), c.bounding_len = 5;
  c.effective = strv (caps, 5), c.effective_len = 5;
  c.permitted = strv (caps, 5), c.permitted_len = 5;
  p.capabilities = &c;
  struct spec_narrowing n;
  policy_model_narrowing (&plan, &n);
  spec_narrow_process (&p, &n, policy_userns_isolating (l));
  char **sets[] = { c.bounding, c.effective, c.permitted };
  size_t lens[] = { c.bounding_len, c.effective_len, c.permitted_len };
  for (size_t s = 0; s < 3; s++)
    {
      assert_false (has (sets[s], lens[s], "CAP_SETFCAP"));
      assert_false (has (sets[s], lens[s], "CAP_MKNOD"));
      assert_true (has (sets[s], lens[s], "CAP_KILL"));
      assert_int_equal (has (sets[s], lens[s], "CAP_CHOWN"), keep_chown);
      assert_int_equal (has (sets[s], lens[s], "CAP_FSETID"), keep_chown);
      assert_null (sets[s][lens[s]]);
      for (size_t i = 0; i < lens[s]; i++)
        free (sets[s][i]);
      free (sets[s]);
    }
}

static void
test_narrow (void **state)
{
  struct oci_namespace user = { .type = (char *) "user" };
  struct oci_id_mapping remap = { 0, 200000, 65536 };
  struct oci_linux none = { 0 }, isolating = ns_linux (&user, 1, &remap, 1);
  (void) state;
  narrow_and_check (&none, false);
  if (initial_userns ())
    narrow_and_check (&isolating, true);
  /* an inactive plan changes nothing */
  struct oci_process p = { 0 };
  struct policy_plan off = { .active = false };
  struct spec_narrowing n;
  policy_model_narrowing (&off, &n);
  spec_narrow_process (&p, &n, false);
  policy_model_narrowing (NULL, &n);
  spec_narrow_process (&p, &n, false);
  spec_narrow_process (&p, NULL, false);
}

int
main (void)
{
  const struct CMUnitTest tests[] = { cmocka_unit_test (test_isolating), cmocka_unit_test (test_narrow) };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
