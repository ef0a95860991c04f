/* test_workspace_seed.c - `--seed-git` (runtime/workspace_seed.h) against the real git binary:
 * a repository with two commits, a branch and a tag is made here; each seed is judged by what
 * the clone holds on disk (the checked-out file, .git/HEAD) and by what must not have run (a
 * hook planted through the caller's global config and GIT_TEMPLATE_DIR). Needs git (skipped
 * with the reason when absent); no root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/oci_unpack.h"
#include "runtime/workspace_seed.h"

static char top[64];
static char repo[128], first[41], second[41];

static void
sh (const char *fmt, ...)
{
  char cmd[2048];
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (cmd, sizeof cmd, fmt, ap);
  va_end (ap);
  assert_int_equal (system (cmd), 0);
}

static void
read_to (const char *path, char *buf, size_t size)
{
  FILE *f = fopen (path, "r");
  assert_non_null (f);
  size_t n = fread (buf, 1, size - 1, f);
  buf[n] = '\0';
  buf[strcspn (buf, "\n")] = '\0';
  (void) fclose (f);
}

static int
setup (void **state)
{
  (void) state;
  if (system ("git --version >/dev/null 2>&1") != 0)
    {
      fprintf (stderr, "SKIP: git not installed (apt-get install -y git)\n");
      exit (77);
    }
  snprintf (top, sizeof top, "/tmp/asbx-seed-XXXXXX");
  assert_non_null (mkdtemp (top));
  snprintf (repo, sizeof repo, "%s/src repo", top); /* a space: never word-split */
  const char *g = "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main";
  sh ("mkdir '%s' && cd '%s' && %s init -q && echo one > f && %s add f && %s commit -qm one && "
      "git rev-parse HEAD > ../first && git tag v1 && git checkout -qb feature && echo feat > f && "
      "%s commit -qam feat && git checkout -q main && echo two > f && %s commit -qam two && "
      "git rev-parse HEAD > ../second",
      repo, repo, g, g, g, g, g);
  char p[256];
  snprintf (p, sizeof p, "%s/first", top);
  read_to (p, first, sizeof first);
  snprintf (p, sizeof p, "%s/second", top);
  read_to (p, second, sizeof second);
  /* a hook that writes a marker, offered through every door git has: the caller's global
   * config (core.hooksPath) and a template directory */
  sh ("mkdir -p %s/hooks %s/tmpl/hooks %s/home && printf '#!/bin/sh\\ntouch %s/HOOK-RAN\\n' > %s/hooks/post-checkout "
      "&& "
      "chmod +x %s/hooks/post-checkout && cp %s/hooks/post-checkout %s/tmpl/hooks/ && "
      "printf '[core]\\n\\thooksPath = %s/hooks\\n' > %s/home/.gitconfig",
      top, top, top, top, top, top, top, top, top, top);
  setenv ("HOME", "/nonexistent", 1);
  setenv ("GIT_TEMPLATE_DIR", top, 1);
  char t[128];
  snprintf (t, sizeof t, "%s/tmpl", top);
  setenv ("GIT_TEMPLATE_DIR", t, 1);
  snprintf (t, sizeof t, "%s/home/.gitconfig", top);
  setenv ("GIT_CONFIG_GLOBAL", t, 1);
  return 0;
}

static int
teardown (void **state)
{
  (void) state;
  sh ("rm -rf '%s'", top);
  return 0;
}

/* a fresh workspace directory; returns its fd */
static int
new_layout (const char *name)
{
  char p[256];
  snprintf (p, sizeof p, "%s/%s", top, name);
  assert_int_equal (mkdir (p, 0700), 0);
  int fd = open (p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  return fd;
}

static void
check_clone (const char *name, const char *want_sha, const char *want_f)
{
  char p[256], buf[128];
  snprintf (p, sizeof p, "%s/%s/lower/f", top, name);
  read_to (p, buf, sizeof buf);
  assert_string_equal (buf, want_f);
  snprintf (p, sizeof p, "%s/%s/lower/.git/HEAD", top, name);
  read_to (p, buf, sizeof buf);
  assert_string_equal (buf, want_sha); /* detached at the commit */
  snprintf (p, sizeof p, "%s/HOOK-RAN", top);
  assert_int_equal (access (p, F_OK), -1);
}

static void
seed_ok (const char *name, const char *rev, const char *want_sha, const char *want_f)
{
  asbx_err_t err = NULL;
  char *sha = NULL;
  int fd = new_layout (name);
  int rc = workspace_seed_git (fd, repo, rev, &sha, &err);
  if (rc < 0)
    fail_msg ("%s", err->msg);
  assert_string_equal (sha, want_sha);
  check_clone (name, want_sha, want_f);
  free (sha);
  close (fd);
}

static void
test_head_default (void **state)
{
  (void) state;
  seed_ok ("head", NULL, second, "two");
}

static void
test_tag_branch_and_commit (void **state)
{
  (void) state;
  seed_ok ("tag", "v1", first, "one");
  seed_ok ("commit", first, first, "one");
  char abbrev[8];
  snprintf (abbrev, sizeof abbrev, "%.7s", first);
  seed_ok ("abbrev", abbrev, first, "one");
  /* "feature" is not the source's HEAD: a branch only as origin/feature in the clone */
  char p[300], fsha[41];
  snprintf (p, sizeof p, "cd '%s' && git rev-parse feature > ../feature", repo);
  sh ("%s", p);
  snprintf (p, sizeof p, "%s/feature", top);
  read_to (p, fsha, sizeof fsha);
  seed_ok ("branch", "feature", fsha, "feat");
}

static void
test_file_url (void **state)
{
  (void) state;
  char url[200];
  asbx_err_t err = NULL;
  char *sha = NULL;
  snprintf (url, sizeof url, "file://%s", repo);
  int fd = new_layout ("url");
  if (workspace_seed_git (fd, url, "main", &sha, &err) < 0)
    fail_msg ("%s", err->msg);
  assert_string_equal (sha, second);
  check_clone ("url", second, "two");
  free (sha);
  close (fd);
}

static void
test_refusals (void **state)
{
  (void) state;
  static const char *const net[] = { "https://example.com/r.git", "ssh://h/r", "git@github.com:o/r.git",
                                     "ext::sh -c touch% /tmp/x", "host:path" };
  asbx_err_t err = NULL;
  char *sha = NULL, p[256];
  int fd = new_layout ("refused");

  /* never cloned on the host: a URL is the seed sandbox's (sandbox_seed_fetch.h), the others refused */
  static const char *const why[] = { "not cloned on the host", "scheme `ssh` refused", "no keys", "remote helper",
                                     "no keys" };
  for (size_t i = 0; i < sizeof net / sizeof net[0]; i++)
    {
      assert_int_equal (workspace_seed_git (fd, net[i], NULL, &sha, &err), -1);
      if (!strstr (err->msg, why[i]))
        fail_msg ("%s: %s", net[i], err->msg);
      asbx_error_free (&err);
    }
  /* an unknown revision: an error naming it, and no partial clone left */
  assert_int_equal (workspace_seed_git (fd, repo, "no-such-rev", &sha, &err), -1);
  assert_non_null (strstr (err->msg, "no-such-rev"));
  asbx_error_free (&err);
  snprintf (p, sizeof p, "%s/refused/lower", top);
  assert_int_equal (access (p, F_OK), -1);
  /* an option as the revision */
  assert_int_equal (workspace_seed_git (fd, repo, "--upload-pack=touch", &sha, &err), -1);
  asbx_error_free (&err);
  /* not a repository */
  snprintf (p, sizeof p, "%s/home", top);
  assert_int_equal (workspace_seed_git (fd, p, NULL, &sha, &err), -1);
  assert_non_null (strstr (err->msg, "git clone"));
  asbx_error_free (&err);
  close (fd);
}

static void
test_parse (void **state)
{
  (void) state;
  char *r = NULL, *v = NULL;
  asbx_err_t err = NULL;
  char arg[300];
  snprintf (arg, sizeof arg, "%s@feature/x", repo);
  assert_int_equal (workspace_seed_parse (arg, &r, &v, &err), 0);
  assert_string_equal (r, repo);
  assert_string_equal (v, "feature/x");
  free (r), free (v);
  assert_int_equal (workspace_seed_parse (repo, &r, &v, &err), 0);
  assert_string_equal (r, repo);
  assert_null (v);
  free (r);
  assert_int_equal (workspace_seed_parse ("git@github.com:o/r.git", &r, &v, &err), 0);
  assert_string_equal (r, "git@github.com:o/r.git"); /* whole: refused as a network URL */
  assert_null (v);
  free (r);
  assert_int_equal (workspace_seed_parse ("x@", &r, &v, &err), -1);
  asbx_error_free (&err);
  /* a URL: REV after the path's last '@'; a user before the path keeps it whole (refused) */
  assert_int_equal (workspace_seed_parse ("https://h.test/r.git@v1", &r, &v, &err), 0);
  assert_string_equal (r, "https://h.test/r.git");
  assert_string_equal (v, "v1");
  free (r), free (v);
  assert_int_equal (workspace_seed_parse ("https://u@h.test/r.git", &r, &v, &err), 0);
  assert_string_equal (r, "https://u@h.test/r.git");
  assert_null (v);
  free (r);
}

static void
test_url (void **state)
{
  (void) state;
  static const struct
  {
    const char *url, *scheme, *host;
    unsigned port;
  } ok[] = {
    { "https://Git.Example.test/o/r.git", "https", "git.example.test", 443 },
    { "http://seed.test:8080/r", "http", "seed.test", 8080 },
    { "git://seed.test/r.git", "git", "seed.test", 9418 },
  };
  static const struct
  {
    const char *url, *why;
  } bad[] = {
    { "ssh://h.test/r", "no keys" },
    { "git+ssh://h.test/r", "scheme `git+ssh` refused" },
    { "h.test:r.git", "no keys" },
    { "https://u:p@h.test/r", "user or password" },
    { "https://10.0.0.1/r", "address literal" },
    { "https://[::1]/r", "expected a host name" },
    { "https://h.test:0/r", "port" },
    { "https://h.test:99999/r", "port" },
    { "https://h.test", "HOST[:PORT]/PATH" },
    { "https:///r", "no host" },
    { "ext::sh -c id", "remote helper" },
    { "ftp://h.test/r", "scheme `ftp` refused" },
  };
  asbx_err_t err = NULL;
  struct seed_url u;

  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    {
      if (workspace_seed_url (ok[i].url, &u, &err) != 1)
        fail_msg ("%s: %s", ok[i].url, err ? err->msg : "taken as local");
      assert_string_equal (u.scheme, ok[i].scheme);
      assert_string_equal (u.host, ok[i].host);
      assert_int_equal (u.port, ok[i].port);
      workspace_seed_url_free (&u);
    }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      assert_int_equal (workspace_seed_url (bad[i].url, &u, &err), -1);
      if (!strstr (err->msg, bad[i].why) || !strstr (err->msg, bad[i].url))
        fail_msg ("%s: %s", bad[i].url, err->msg);
      assert_null (u.host);
      asbx_error_free (&err);
    }
  assert_int_equal (workspace_seed_url ("/srv/repo", &u, &err), 0);
  assert_int_equal (workspace_seed_url ("file:///srv/repo", &u, &err), 0);
  assert_int_equal (workspace_seed_url ("./h:x", &u, &err), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_head_default), cmocka_unit_test (test_tag_branch_and_commit),
    cmocka_unit_test (test_file_url),     cmocka_unit_test (test_refusals),
    cmocka_unit_test (test_parse),        cmocka_unit_test (test_url),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
