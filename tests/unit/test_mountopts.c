/* test_mountopts.c - the OCI mount option table: options[] -> attrs, propagation, data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>

#include <cmocka.h>

#include "linux/mountopts.h"

static struct mount_opts
parse_ok (char **opts, size_t n)
{
  struct mount_opts o;
  asbx_err_t err = NULL;
  assert_int_equal (mount_opts_parse (opts, n, &o, &err), 0);
  assert_null (err);
  return o;
}

#define PARSE(...)                                                                                                     \
  ({                                                                                                                   \
    char *_v[] = { __VA_ARGS__ };                                                                                      \
    parse_ok (_v, ASBX_N (_v));                                                                                        \
  })
#define ASBX_N(a) (sizeof (a) / sizeof ((a)[0]))

static void
test_runc_default_dev (void **state)
{
  struct mount_opts o = PARSE ("nosuid", "strictatime", "mode=755", "size=65536k");
  assert_int_equal (o.attr_set, MOUNT_ATTR_NOSUID | MOUNT_ATTR_STRICTATIME);
  assert_int_equal (o.attr_clr, MOUNT_ATTR__ATIME);
  assert_string_equal (o.data, "mode=755,size=65536k");
  assert_false (o.bind);
  assert_int_equal (o.propagation, 0);
  mount_opts_free (&o);
}

static void
test_devpts_data (void **state)
{
  struct mount_opts o = PARSE ("nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5");
  assert_int_equal (o.attr_set, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
  assert_int_equal (o.attr_clr, 0);
  assert_string_equal (o.data, "newinstance,ptmxmode=0666,mode=0620,gid=5");
  mount_opts_free (&o);
}

static void
test_last_wins (void **state)
{
  struct mount_opts o = PARSE ("ro", "nodev", "rw", "dev", "noexec");
  assert_int_equal (o.attr_set, MOUNT_ATTR_NOEXEC);
  assert_int_equal (o.attr_clr, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV);
  assert_null (o.data);
  mount_opts_free (&o);

  o = PARSE ("noatime", "relatime");
  assert_int_equal (o.attr_set, MOUNT_ATTR_RELATIME);
  assert_int_equal (o.attr_clr, MOUNT_ATTR__ATIME);
  mount_opts_free (&o);

  o = PARSE ("strictatime", "nostrictatime", "nodiratime");
  assert_int_equal (o.attr_set, MOUNT_ATTR_RELATIME | MOUNT_ATTR_NODIRATIME);
  mount_opts_free (&o);
}

static void
test_bind_and_propagation (void **state)
{
  struct mount_opts o = PARSE ("rbind", "ro", "rprivate");
  assert_true (o.bind);
  assert_true (o.recursive);
  assert_int_equal (o.attr_set, MOUNT_ATTR_RDONLY);
  assert_int_equal (o.propagation, MS_PRIVATE);
  assert_true (o.propagation_recursive);
  mount_opts_free (&o);

  o = PARSE ("bind", "shared", "slave");
  assert_true (o.bind);
  assert_false (o.recursive);
  assert_int_equal (o.propagation, MS_SLAVE);
  assert_false (o.propagation_recursive);
  mount_opts_free (&o);

  o = PARSE ("runbindable");
  assert_int_equal (o.propagation, MS_UNBINDABLE);
  assert_true (o.propagation_recursive);
  mount_opts_free (&o);
}

static void
test_recursive_attrs (void **state)
{
  struct mount_opts o = PARSE ("rbind", "rro", "rnosuid", "rdev", "rnoatime", "rnosymfollow", "nosuid");
  assert_int_equal (o.rattr_set, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOATIME | MOUNT_ATTR_NOSYMFOLLOW);
  assert_int_equal (o.rattr_clr, MOUNT_ATTR_NODEV | MOUNT_ATTR__ATIME);
  assert_int_equal (o.attr_set, MOUNT_ATTR_NOSUID);
  assert_int_equal (o.attr_clr, 0);
  mount_opts_free (&o);

  o = PARSE ("rro", "rrw", "rstrictatime");
  assert_int_equal (o.rattr_set, MOUNT_ATTR_STRICTATIME);
  assert_int_equal (o.rattr_clr, MOUNT_ATTR_RDONLY | MOUNT_ATTR__ATIME);
  mount_opts_free (&o);
}

static void
test_sb_and_specials (void **state)
{
  struct mount_opts o = PARSE ("sync", "dirsync", "mand", "nomand", "remount", "idmap", "tmpcopyup");
  assert_int_equal (o.sb_set, MOUNTOPTS_SB_SYNC | MOUNTOPTS_SB_DIRSYNC);
  assert_true (o.remount);
  assert_true (o.idmap);
  assert_false (o.ridmap);
  assert_true (o.tmpcopyup);
  assert_null (o.data);
  mount_opts_free (&o);

  o = PARSE ("sync", "async", "ridmap", "nosymfollow", "symfollow");
  assert_int_equal (o.sb_set, 0);
  assert_true (o.ridmap);
  assert_int_equal (o.attr_clr, MOUNT_ATTR_NOSYMFOLLOW);
  mount_opts_free (&o);
}

static void
test_empty_and_errors (void **state)
{
  struct mount_opts o;
  asbx_err_t err = NULL;
  char *bad[] = { "ro", "" };

  assert_int_equal (mount_opts_parse (NULL, 0, &o, &err), 0);
  assert_int_equal (o.attr_set | o.attr_clr | o.rattr_set | o.rattr_clr, 0);
  assert_null (o.data);

  assert_int_equal (mount_opts_parse (bad, 2, &o, &err), -1);
  assert_non_null (err);
  assert_non_null (strstr (err->msg, "options[1]"));
  asbx_error_free (&err);
}

static void
test_known_list_sorted_and_complete (void **state)
{
  const char *const *known = mount_opts_names ();
  size_t n = 0;
  for (; known[n]; n++)
    {
      struct mount_opts o;
      asbx_err_t err = NULL;
      char *v[] = { (char *) known[n] };
      if (n > 0)
        assert_true (strcmp (known[n - 1], known[n]) < 0);
      assert_int_equal (mount_opts_parse (v, 1, &o, &err), 0);
      /* every listed option is recognised, so none ends up as fs data but the filesystem
       * parameters named for `features` (acl, noacl), which are passed on as themselves */
      if (strcmp (known[n], "acl") == 0 || strcmp (known[n], "noacl") == 0)
        assert_string_equal (o.data, known[n]);
      else
        assert_null (o.data);
      mount_opts_free (&o);
    }
  assert_true (n >= 50);
  assert_ptr_equal (mount_opts_names (), known); /* built once */
}

/* lazytime is a superblock flag, the last of lazytime/nolazytime wins; silent/loud change nothing */
static void
test_lazytime_silent (void **state)
{
  struct mount_opts o;
  asbx_err_t err = NULL;
  char *on[] = { "nolazytime", "lazytime", "silent" }, *off[] = { "lazytime", "nolazytime", "loud" };
  (void) state;
  assert_int_equal (mount_opts_parse (on, 3, &o, &err), 0);
  assert_int_equal (o.sb_set, MOUNTOPTS_SB_LAZYTIME);
  assert_null (o.data);
  mount_opts_free (&o);
  assert_int_equal (mount_opts_parse (off, 3, &o, &err), 0);
  assert_int_equal (o.sb_set, 0);
  assert_null (o.data);
  mount_opts_free (&o);
}

/* the `features` list is the table less tmpcopyup, plus "defaults" */
static void
test_feature_names (void **state)
{
  const char *const *known = mount_opts_names (), *const *feat = mount_opts_feature_names ();
  size_t nk = 0, nf = 0;
  bool defaults = false, tmpcopyup = false;
  for (; known[nk]; nk++)
    ;
  for (; feat[nf]; nf++)
    {
      if (nf > 0)
        assert_true (strcmp (feat[nf - 1], feat[nf]) < 0);
      defaults |= strcmp (feat[nf], "defaults") == 0;
      tmpcopyup |= strcmp (feat[nf], "tmpcopyup") == 0;
    }
  assert_true (defaults);
  assert_false (tmpcopyup);
  assert_int_equal (nf, nk);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_runc_default_dev), cmocka_unit_test (test_devpts_data),
    cmocka_unit_test (test_last_wins),        cmocka_unit_test (test_bind_and_propagation),
    cmocka_unit_test (test_recursive_attrs),  cmocka_unit_test (test_sb_and_specials),
    cmocka_unit_test (test_empty_and_errors), cmocka_unit_test (test_known_list_sorted_and_complete),
    cmocka_unit_test (test_feature_names),    cmocka_unit_test (test_lazytime_silent),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
