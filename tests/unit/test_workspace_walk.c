/* test_workspace_walk.c - the review workspace's change walker (runtime/workspace_walk.h) on
 * hand-made layers in a temp dir: an upper and a lower built as overlayfs would leave them
 * (whiteouts as `user.overlay.whiteout` xattr files, or char 0:0 when root; opaque dirs by
 * `user.overlay.opaque`), then the list the walker yields, op by op and field by field. Also the
 * path helpers, meta.json parsing and apply's refusal rules that need no host. Needs no root
 * (the char 0:0 whiteout case is skipped without CAP_MKNOD, saying so).
 */
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
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "core/sha256.h"
#include "runtime/workspace_apply.h"
#include "runtime/workspace_audit.h"
#include "runtime/workspace_meta.h"
#include "runtime/workspace_refuse.h"
#include "runtime/workspace_walk.h"

static char top[64];
static int upfd = -1, lofd = -1;

static void
mkpath (const char *layer, const char *rel, const char *content, mode_t mode)
{
  char p[512];
  snprintf (p, sizeof p, "%s/%s/%s", top, layer, rel);
  if (!content)
    {
      assert_int_equal (mkdir (p, mode), 0);
      assert_int_equal (chmod (p, mode), 0);
      return;
    }
  int fd = open (p, O_WRONLY | O_CREAT | O_TRUNC, mode);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, content, strlen (content)), (ssize_t) strlen (content));
  close (fd);
  assert_int_equal (chmod (p, mode), 0);
}

static void
setx (const char *layer, const char *rel, const char *name, const char *val)
{
  char p[512];
  snprintf (p, sizeof p, "%s/%s/%s", top, layer, rel);
  assert_int_equal (setxattr (p, name, val, strlen (val), 0), 0);
}

static void
whiteout_x (const char *rel)
{
  mkpath ("upper", rel, "", 0644);
  setx ("upper", rel, "user.overlay.whiteout", "");
}

static int
setup (void **state)
{
  char p[128];
  (void) state;
  snprintf (top, sizeof top, "/tmp/asbx-wswalk.XXXXXX");
  assert_non_null (mkdtemp (top));
  snprintf (p, sizeof p, "%s/upper", top);
  assert_int_equal (mkdir (p, 0755), 0);
  upfd = open (p, O_RDONLY | O_DIRECTORY);
  snprintf (p, sizeof p, "%s/lower", top);
  assert_int_equal (mkdir (p, 0755), 0);
  lofd = open (p, O_RDONLY | O_DIRECTORY);
  return 0;
}

static int
teardown (void **state)
{
  char cmd[128];
  (void) state;
  close (upfd);
  close (lofd);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", top);
  return system (cmd) == 0 ? 0 : -1;
}

static bool
xattrs_ok (void)
{
  char p[128];
  snprintf (p, sizeof p, "%s/upper", top);
  if (setxattr (p, "user.asbx-probe", "1", 1, 0) < 0)
    return false;
  removexattr (p, "user.asbx-probe");
  return true;
}

/* skip with the reason printed (cmocka's skip() takes none) */
#define skip_msg(...)                                                                                                  \
  do                                                                                                                   \
    {                                                                                                                  \
      print_message ("SKIP: " __VA_ARGS__);                                                                            \
      print_message ("\n");                                                                                            \
      skip ();                                                                                                         \
    }                                                                                                                  \
  while (0)

static const struct ws_change *
find (const struct ws_changes *c, const char *path, enum ws_op op)
{
  for (size_t i = 0; i < c->n; i++)
    if (strcmp (c->v[i].path, path) == 0 && c->v[i].op == op && !c->v[i].renamed)
      return &c->v[i];
  return NULL;
}

static size_t
index_of (const struct ws_changes *c, const char *path, enum ws_op op)
{
  for (size_t i = 0; i < c->n; i++)
    if (strcmp (c->v[i].path, path) == 0 && c->v[i].op == op)
      return i;
  fail_msg ("no %s change for %s", ws_op_name (op), path);
  return 0;
}

static void
walk (struct ws_changes *c)
{
  asbx_err_t err = NULL;
  struct ws_view o = { -1, lofd }, n = { upfd, lofd };
  int r = ws_walk (&o, &n, "user", c, &err);
  if (r < 0)
    fail_msg ("ws_walk: %s", err->msg);
  ws_find_renames (c);
}

static void
test_basic_ops (void **state)
{
  struct ws_changes c = { 0 };
  char sha[65];
  (void) state;
  mkpath ("lower", "same.txt", "same\n", 0644);
  mkpath ("upper", "same.txt", "same\n", 0644); /* a copy-up without change */
  mkpath ("lower", "mod.txt", "old\n", 0644);
  mkpath ("upper", "mod.txt", "new content\n", 0644);
  mkpath ("lower", "x.sh", "#!/bin/sh\n", 0644);
  mkpath ("upper", "x.sh", "#!/bin/sh\n", 0755);
  mkpath ("upper", "added.txt", "added\n", 0600);
  mkpath ("lower", "untouched", "u\n", 0644);
  assert_int_equal (symlinkat ("/etc/passwd", upfd, "evil"), 0);
  walk (&c);

  assert_null (find (&c, "same.txt", WS_MODIFIED));
  assert_null (find (&c, "same.txt", WS_MODE));
  assert_null (find (&c, "untouched", WS_DELETED));
  const struct ws_change *m = find (&c, "mod.txt", WS_MODIFIED);
  assert_non_null (m);
  sha256_hex ("new content\n", 12, sha);
  assert_string_equal (m->sha256, sha);
  sha256_hex ("old\n", 4, sha);
  assert_string_equal (m->old_sha256, sha);
  assert_int_equal (m->size, 12);
  assert_int_equal (m->old_size, 4);
  const struct ws_change *x = find (&c, "x.sh", WS_MODE);
  assert_non_null (x);
  assert_int_equal (x->mode & 07777, 0755);
  assert_int_equal (x->old_mode & 07777, 0644);
  const struct ws_change *a = find (&c, "added.txt", WS_ADDED);
  assert_non_null (a);
  assert_int_equal (a->mode & 07777, 0600);
  assert_true (S_ISREG (a->mode));
  /* the symlink is a change of its own; its target string is hashed, never followed */
  const struct ws_change *e = find (&c, "evil", WS_ADDED);
  assert_non_null (e);
  assert_true (S_ISLNK (e->mode));
  assert_string_equal (e->target, "/etc/passwd");
  sha256_hex ("/etc/passwd", 11, sha);
  assert_string_equal (e->sha256, sha);
  assert_int_equal (e->size, 11);
  assert_int_equal (c.n, 4);
  ws_changes_free (&c);
}

static void
test_whiteouts_and_order (void **state)
{
  struct ws_changes c = { 0 };
  (void) state;
  if (!xattrs_ok ())
    skip_msg ("the temp dir's file system has no user xattrs: the xattr whiteout form cannot be made");
  mkpath ("lower", "gone.txt", "g\n", 0644);
  whiteout_x ("gone.txt");
  mkpath ("lower", "tree", NULL, 0755);
  mkpath ("lower", "tree/a", "a\n", 0644);
  mkpath ("lower", "tree/sub", NULL, 0755);
  mkpath ("lower", "tree/sub/b", "b\n", 0644);
  whiteout_x ("tree");
  /* a whiteout with nothing below it changes nothing */
  whiteout_x ("nothing");
  walk (&c);
  assert_non_null (find (&c, "gone.txt", WS_DELETED));
  assert_null (find (&c, "nothing", WS_DELETED));
  assert_null (find (&c, "nothing", WS_ADDED));
  /* children before their parents */
  assert_true (index_of (&c, "tree/sub/b", WS_DELETED) < index_of (&c, "tree/sub", WS_DELETED));
  assert_true (index_of (&c, "tree/sub", WS_DELETED) < index_of (&c, "tree", WS_DELETED));
  assert_true (index_of (&c, "tree/a", WS_DELETED) < index_of (&c, "tree", WS_DELETED));
  assert_int_equal (c.n, 5);
  ws_changes_free (&c);
}

static void
test_chardev_whiteout (void **state)
{
  struct ws_changes c = { 0 };
  (void) state;
  mkpath ("lower", "cw", "c\n", 0644);
  if (mknodat (upfd, "cw", S_IFCHR | 0600, makedev (0, 0)) < 0)
    skip_msg ("mknod of a 0:0 whiteout needs CAP_MKNOD (not root): %s", strerror (errno));
  walk (&c);
  assert_non_null (find (&c, "cw", WS_DELETED));
  assert_int_equal (c.n, 1);
  ws_changes_free (&c);
}

static void
test_opaque_dir (void **state)
{
  struct ws_changes c = { 0 };
  (void) state;
  if (!xattrs_ok ())
    skip_msg ("the temp dir's file system has no user xattrs: opaque directories cannot be made");
  mkpath ("lower", "d", NULL, 0755);
  mkpath ("lower", "d/old1", "1\n", 0644);
  mkpath ("lower", "d/kept", "k\n", 0644);
  mkpath ("upper", "d", NULL, 0755);
  setx ("upper", "d", "user.overlay.opaque", "y");
  mkpath ("upper", "d/kept", "k2\n", 0644);
  mkpath ("upper", "d/fresh", "f\n", 0644);
  /* "x" only marks a directory holding xattr whiteouts: not opaque */
  mkpath ("lower", "e", NULL, 0755);
  mkpath ("lower", "e/stay", "s\n", 0644);
  mkpath ("upper", "e", NULL, 0755);
  setx ("upper", "e", "user.overlay.opaque", "x");
  walk (&c);
  assert_non_null (find (&c, "d/old1", WS_DELETED));
  assert_non_null (find (&c, "d/kept", WS_MODIFIED));
  assert_non_null (find (&c, "d/fresh", WS_ADDED));
  assert_null (find (&c, "e/stay", WS_DELETED));
  const struct ws_change *f = find (&c, "d/fresh", WS_ADDED);
  assert_true (f->in_opaque);
  assert_int_equal (c.n, 3);
  ws_changes_free (&c);
}

static void
test_rename_and_type_change (void **state)
{
  struct ws_changes c = { 0 };
  (void) state;
  if (!xattrs_ok ())
    skip_msg ("the temp dir's file system has no user xattrs: whiteouts cannot be made");
  mkpath ("lower", "from.txt", "moved content\n", 0644);
  whiteout_x ("from.txt");
  mkpath ("upper", "to.txt", "moved content\n", 0644);
  /* a lower dir replaced by a file: deletion of the tree first, then the addition */
  mkpath ("lower", "t", NULL, 0755);
  mkpath ("lower", "t/in", "i\n", 0644);
  mkpath ("upper", "t", "now a file\n", 0644);
  walk (&c);
  const struct ws_change *r = find (&c, "to.txt", WS_RENAMED);
  assert_non_null (r);
  assert_string_equal (r->old_path, "from.txt");
  assert_null (find (&c, "from.txt", WS_DELETED)); /* folded into the rename */
  assert_true (index_of (&c, "t/in", WS_DELETED) < index_of (&c, "t", WS_DELETED));
  assert_true (index_of (&c, "t", WS_DELETED) < index_of (&c, "t", WS_ADDED));
  ws_changes_free (&c);
}

/* --from SNAP: two uppers of one lower compared with each other */
static void
test_two_uppers (void **state)
{
  struct ws_changes c = { 0 };
  asbx_err_t err = NULL;
  char p[128], sha[65];
  (void) state;
  if (!xattrs_ok ())
    skip_msg ("the temp dir's file system has no user xattrs: whiteouts cannot be made");
  snprintf (p, sizeof p, "%s/snap", top);
  assert_int_equal (mkdir (p, 0755), 0);
  int snapfd = open (p, O_RDONLY | O_DIRECTORY);
  assert_true (snapfd >= 0);
  mkpath ("lower", "f", "v0\n", 0644);
  mkpath ("snap", "f", "v1\n", 0644);
  mkpath ("upper", "f", "v2\n", 0644);
  mkpath ("lower", "g", "g0\n", 0644);
  mkpath ("snap", "g", "", 0644);
  setx ("snap", "g", "user.overlay.whiteout", ""); /* deleted at the snapshot, */
  mkpath ("upper", "g", "g2\n", 0644);             /* made again since */
  mkpath ("snap", "s", "only in the snapshot\n", 0644);
  mkpath ("lower", "lo", "untouched\n", 0644);
  /* an opaque dir in the snapshot, the lower's dir again now */
  mkpath ("lower", "d", NULL, 0755);
  mkpath ("lower", "d/y", "y\n", 0644);
  mkpath ("snap", "d", NULL, 0755);
  setx ("snap", "d", "user.overlay.opaque", "y");
  mkpath ("snap", "d/x", "x\n", 0644);
  struct ws_view o = { snapfd, lofd }, n = { upfd, lofd };
  assert_int_equal (ws_walk (&o, &n, "user", &c, &err), 0);
  const struct ws_change *f = find (&c, "f", WS_MODIFIED);
  assert_non_null (f);
  sha256_hex ("v1\n", 3, sha);
  assert_string_equal (f->old_sha256, sha);
  assert_non_null (find (&c, "g", WS_ADDED));
  assert_non_null (find (&c, "s", WS_DELETED));
  assert_non_null (find (&c, "d/x", WS_DELETED));
  assert_non_null (find (&c, "d/y", WS_ADDED));
  assert_int_equal (c.n, 5);
  ws_changes_free (&c);
  close (snapfd);
}

static void
test_paths (void **state)
{
  char *s;
  (void) state;
  assert_string_equal ((s = ws_clean_rel ("/workspace//a/./b/")), "workspace/a/b");
  free (s);
  assert_string_equal ((s = ws_clean_rel ("./")), "");
  free (s);
  assert_null (ws_clean_rel ("a/../../etc"));
  assert_int_equal (errno, EINVAL);
  assert_true (ws_path_under ("a/b", "a"));
  assert_true (ws_path_under ("a", "a"));
  assert_false (ws_path_under ("ab", "a"));
  assert_true (ws_path_under ("anything", ""));
}

static void
test_meta_parse (void **state)
{
  struct ws_meta m;
  asbx_err_t err = NULL;
  (void) state;
  const char *good = "{\"id\":\"c1\",\"workspace\":\"/w\",\"lowerDev\":1,\"lowerIno\":2,\"startedNs\":3,"
                     "\"created\":\"2026-12-01T00:00:00Z\","
                     "\"xattr\":\"user\",\"state\":\"stopped\",\"protect\":[\"/secrets/\",\"a/b\",\"/w/c/d\"]}";
  assert_int_equal (ws_meta_parse (good, "meta.json", &m, &err), 0);
  assert_string_equal (m.workspace, "/w");
  assert_int_equal (m.started_ns, 3);
  assert_false (ws_meta_running (&m));
  assert_int_equal (m.protect_len, 3);
  assert_string_equal (m.protect[0], "secrets");
  assert_string_equal (m.protect[2], "c/d"); /* a host path inside the workspace */
  ws_meta_clear (&m);
  const char *bad = "{\"id\":\"c1\",\"workspace\":\"/w\",\"lowerDev\":1,\"lowerIno\":2,\"startedNs\":3,"
                    "\"created\":\"2026-12-01T00:00:00Z\","
                    "\"xattr\":\"other\",\"state\":\"stopped\"}";
  assert_int_equal (ws_meta_parse (bad, "meta.json", &m, &err), -1);
  assert_non_null (strstr (err->msg, "xattr"));
  asbx_error_free (&err);
  assert_int_equal (ws_meta_parse ("{\"id\":\"c1\"}", "meta.json", &m, &err), -1);
  assert_non_null (strstr (err->msg, "workspace"));
  asbx_error_free (&err);
}

static void
test_refusals (void **state)
{
  struct ws_meta m = { .started_ns = INT64_MAX };
  struct ws_change c = { .op = WS_ADDED, .mode = S_IFLNK | 0777, .nlink = 1 };
  char *protect[] = { (char *) "secrets" };
  bool conflict;
  char *why;
  (void) state;
  m.protect = protect;
  m.protect_len = 1;
#define REFUSED(p, t, md, needle)                                                                                      \
  do                                                                                                                   \
    {                                                                                                                  \
      c.path = (char *) (p);                                                                                           \
      c.target = (char *) (t);                                                                                         \
      c.mode = (md);                                                                                                   \
      why = ws_refusal (&c, &m, upfd, lofd, &conflict);                                                                \
      if ((needle) != NULL)                                                                                            \
        {                                                                                                              \
          assert_non_null (why);                                                                                       \
          assert_non_null (strstr (why, (const char *) (needle) ? (needle) : ""));                                     \
        }                                                                                                              \
      else if (why)                                                                                                    \
        fail_msg ("%s refused: %s", (const char *) (p), why);                                                          \
      free (why);                                                                                                      \
    }                                                                                                                  \
  while (0)
  REFUSED ("l1", "/etc/passwd", S_IFLNK | 0777, "leaves the workspace");
  REFUSED ("sub/l2", "../../x", S_IFLNK | 0777, "leaves the workspace");
  REFUSED ("sub/l3", "../x", S_IFLNK | 0777, NULL);
  REFUSED ("l4", "a/../../b", S_IFLNK | 0777, "leaves the workspace");
  REFUSED ("f", NULL, S_IFREG | 04755, "setuid");
  REFUSED ("f", NULL, S_IFREG | 0666, "world-writable");
  REFUSED ("p", NULL, S_IFIFO | 0644, "fifo");
  REFUSED ("dev", NULL, S_IFCHR | 0644, "device");
  REFUSED (".git/hooks/pre-commit", NULL, S_IFREG | 0755, "protected");
  REFUSED ("sub/.git/config", NULL, S_IFREG | 0644, "protected");
  /* below .git only git's data (the allow list) */
  REFUSED (".git/configx", NULL, S_IFREG | 0644, "git's data");
  REFUSED (".git/commondir", NULL, S_IFREG | 0644, "git's data");
  REFUSED ("sub/.git/modules/m/config", NULL, S_IFREG | 0644, "git's data");
  REFUSED (".git/objects/info/alternates", NULL, S_IFREG | 0644, "git's data");
  REFUSED (".git/objects/info", NULL, S_IFDIR | 0755, "git's data");
  REFUSED (".git/refs/heads/x", "../../../evil", S_IFLNK | 0777, "git's data");
  REFUSED (".git/HEAD/x", NULL, S_IFREG | 0644, "git's data");
  REFUSED (".git/objects/ab/cdef", NULL, S_IFREG | 0444, NULL);
  REFUSED (".git/objects/pack/pack-1.pack", NULL, S_IFREG | 0444, NULL);
  REFUSED (".git/refs/heads/main", NULL, S_IFREG | 0644, "cannot read it"); /* not in the upper: no ref */
  REFUSED ("sub/.git/logs/HEAD", NULL, S_IFREG | 0644, NULL);
  REFUSED (".git/index", NULL, S_IFREG | 0644, "git's data"); /* never written: `git reset` */
  REFUSED (".git/FETCH_HEAD", NULL, S_IFREG | 0644, "git's data");
  /* outside .git: git's repository markers, any case, and symlinks to them */
  REFUSED ("src/HEAD", NULL, S_IFREG | 0644, "outside `.git`");
  REFUSED ("src/head", NULL, S_IFREG | 0644, "outside `.git`");
  REFUSED ("CommonDir", NULL, S_IFREG | 0644, "outside `.git`");
  REFUSED ("a/gitdir", NULL, S_IFREG | 0644, "outside `.git`");
  REFUSED ("config.WORKTREE", NULL, S_IFREG | 0644, "outside `.git`");
  REFUSED ("sub/.git", NULL, S_IFDIR | 0755, "outside `.git`");
  REFUSED (".GIT", NULL, S_IFDIR | 0755, "outside `.git`");
  REFUSED (".git", NULL, S_IFDIR | 0755, "outside `.git`"); /* added: no host .git */
  REFUSED ("l", "x/HEAD/", S_IFLNK | 0777, "repository marker");
  REFUSED ("src/HEADS", NULL, S_IFREG | 0644, NULL);
  REFUSED (".git/COMMIT_EDITMSG", NULL, S_IFREG | 0644, NULL);
  REFUSED (".git/refs", NULL, S_IFDIR | 0755, NULL);
  REFUSED ("secrets/k", NULL, S_IFREG | 0644, "protect");
  REFUSED (".git", NULL, S_IFREG | 0644, "not a directory");
  REFUSED ("sub/.git", "../elsewhere", S_IFLNK | 0777, "not a directory");
  REFUSED ("hooks", ".git/hooks", S_IFLNK | 0777, "protected");
  REFUSED ("d/cfg", "../.git/./config", S_IFLNK | 0777, "protected");
  REFUSED ("d/s", "../secrets/x", S_IFLNK | 0777, "protect");
  REFUSED ("d/ok", "../.git/HEAD", S_IFLNK | 0777, "repository marker");
  /* symlink chains: no symlink on the way of a target, in the upper or on the host */
  assert_int_equal (mkdirat (upfd, "ch", 0755), 0);
  assert_int_equal (symlinkat ("..", upfd, "ch/up"), 0);
  assert_int_equal (symlinkat ("ch", lofd, "hostlink"), 0);
  REFUSED ("l5", "ch/up/x", S_IFLNK | 0777, "goes through the symlink `ch/up` (agent's)");
  REFUSED ("ch/l6", "up/..", S_IFLNK | 0777, "goes through the symlink `ch/up`");
  REFUSED ("l7", "ch/up/", S_IFLNK | 0777, "goes through the symlink");
  REFUSED ("l8", "hostlink/x", S_IFLNK | 0777, "goes through the symlink `hostlink` (host's)");
  REFUSED ("l9", "hostlink", S_IFLNK | 0777, "ends at the host's symlink");
  REFUSED ("l10", "ch/up", S_IFLNK | 0777, NULL); /* the last one, an upper link: checked itself */
  REFUSED ("l11", "ch/./x", S_IFLNK | 0777, NULL);
  c.nlink = 2;
  REFUSED ("hl", NULL, S_IFREG | 0644, "hard link");
  c.nlink = 1;
  /* an added path that exists on the host now is a conflict */
  mkpath ("lower", "there", "h\n", 0644);
  REFUSED ("there", NULL, S_IFREG | 0644, "appeared");
  assert_true (conflict);
#undef REFUSED
}

/* the `workspace` audit record: one JSON line, a rename's source folded into it */
static void
test_audit_record (void **state)
{
  struct ws_changes c = { 0 };
  char err[128];
  size_t len;
  (void) state;
  c.v = calloc (3, sizeof *c.v);
  c.n = c.cap = 3;
  c.v[0] = (struct ws_change){ .op = WS_ADDED, .path = strdup ("a\nb"), .mode = S_IFREG | 0644, .size = 3 };
  memset (c.v[0].sha256, 'a', 64);
  c.v[1] = (struct ws_change){ .op = WS_DELETED, .path = strdup ("old"), .mode = S_IFREG | 0644, .renamed = true };
  c.v[2] = (struct ws_change){ .op = WS_RENAMED, .path = strdup ("new"), .old_path = strdup ("old"), .mode = S_IFDIR };
  bool applied[3] = { true, true, false };
  struct audit_rec *r = workspace_audit_record ("c1", "apply", &c, applied);
  const char *line = audit_rec_line (r, &len);
  assert_int_equal (line[len - 1], '\n');
  assert_null (memchr (line, '\n', len - 1));
  yajl_val v = yajl_tree_parse (line, err, sizeof err);
  assert_non_null (v);
  const char *ev[] = { "event", NULL }, *op[] = { "op", NULL }, *paths[] = { "paths", NULL }, *n[] = { "count", NULL };
  assert_string_equal (YAJL_GET_STRING (yajl_tree_get (v, ev, yajl_t_string)), "workspace");
  assert_string_equal (YAJL_GET_STRING (yajl_tree_get (v, op, yajl_t_string)), "apply");
  assert_int_equal (YAJL_GET_INTEGER (yajl_tree_get (v, n, yajl_t_number)), 2);
  yajl_val a = yajl_tree_get (v, paths, yajl_t_array);
  assert_int_equal (YAJL_GET_ARRAY (a)->len, 2);
  const char *pp[] = { "path", NULL }, *ap[] = { "applied", NULL }, *sp[] = { "sha256", NULL },
             *opp[] = { "oldPath", NULL };
  yajl_val p0 = YAJL_GET_ARRAY (a)->values[0], p1 = YAJL_GET_ARRAY (a)->values[1];
  assert_string_equal (YAJL_GET_STRING (yajl_tree_get (p0, pp, yajl_t_string)), "a\nb");
  assert_true (YAJL_IS_TRUE (yajl_tree_get (p0, ap, yajl_t_any)));
  const char *sha0 = YAJL_GET_STRING (yajl_tree_get (p0, sp, yajl_t_string));
  assert_non_null (sha0);
  assert_int_equal (strlen (sha0 ? sha0 : ""), 64);
  assert_string_equal (YAJL_GET_STRING (yajl_tree_get (p1, opp, yajl_t_string)), "old");
  assert_true (YAJL_IS_FALSE (yajl_tree_get (p1, ap, yajl_t_any)));
  assert_true (YAJL_IS_NULL (yajl_tree_get (p1, sp, yajl_t_any)));
  yajl_tree_free (v);
  audit_rec_free (r);
  ws_changes_free (&c);
}

/* the content rule for ref files (ws_git_ref_invalid): what git's check-ref-format accepts */
static void
test_git_ref_content (void **state)
{
  static const char *const ok[] = { "ref: refs/heads/main\n", "ref: refs/remotes/origin/HEAD\n",
                                    "0123456789abcdef0123456789abcdef01234567\n",
                                    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
                                    "ref: refs/heads/feature/x-1.2\n" };
  static const char *const bad[] = { "",
                                     "ref: heads/main\n",
                                     "ref: refs/heads/main",
                                     "ref: refs/heads/main\n\n",
                                     "ref: refs/heads/../x\n",
                                     "ref: refs/heads/.x\n",
                                     "ref: refs/heads/x.lock\n",
                                     "ref: refs/heads/x.lock/y\n",
                                     "ref: refs/heads//x\n",
                                     "ref: refs/heads/x/\n",
                                     "ref: refs/heads/x.\n",
                                     "ref: refs/heads/a@{b\n",
                                     "ref: refs/heads/a b\n",
                                     "ref: refs/heads/a\x1b[2J\n",
                                     "ref: refs/heads/a:b\n",
                                     "ref: refs/\n",
                                     "0123456789ABCDEF0123456789abcdef01234567\n",
                                     "0123456789abcdef0123456789abcdef0123456\n",
                                     "gitdir: ../x\n" };
  (void) state;
  assert_int_equal (ws_git_ref_kind (".git/HEAD"), WS_GIT_REF);
  assert_int_equal (ws_git_ref_kind ("sub/.git/MERGE_HEAD"), WS_GIT_REF);
  assert_int_equal (ws_git_ref_kind (".git/refs/tags/v1"), WS_GIT_REF);
  assert_int_equal (ws_git_ref_kind (".git/packed-refs"), WS_GIT_PACKED_REFS);
  assert_int_equal (ws_git_ref_kind (".git/logs/HEAD"), WS_GIT_NOT_REF);
  assert_int_equal (ws_git_ref_kind ("src/HEAD"), WS_GIT_NOT_REF);
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    {
      char *why = ws_git_ref_invalid (WS_GIT_REF, ok[i], strlen (ok[i]));
      if (why)
        fail_msg ("%s: %s", ok[i], why);
    }
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    {
      char *why = ws_git_ref_invalid (WS_GIT_REF, bad[i], strlen (bad[i]));
      if (!why)
        fail_msg ("accepted: %s", bad[i]);
      free (why);
    }
  const char *pk = "# pack-refs with: peeled fully-peeled sorted\n"
                   "0123456789abcdef0123456789abcdef01234567 refs/tags/v1\n"
                   "^89abcdef0123456789abcdef0123456789abcdef\n";
  assert_null (ws_git_ref_invalid (WS_GIT_PACKED_REFS, pk, strlen (pk)));
  assert_null (ws_git_ref_invalid (WS_GIT_PACKED_REFS, "", 0));
  static const char *const pbad[] = { "0123456789abcdef0123456789abcdef01234567 refs/tags/v1",
                                      "0123456789abcdef0123456789abcdef01234567 tags/v1\n",
                                      "0123456789abcdef0123456789abcdef01234567 refs/tags/..\n", "[core]\n", "\n" };
  for (size_t i = 0; i < sizeof pbad / sizeof *pbad; i++)
    {
      char *why = ws_git_ref_invalid (WS_GIT_PACKED_REFS, pbad[i], strlen (pbad[i]));
      if (!why)
        fail_msg ("packed-refs accepted: %s", pbad[i]);
      free (why);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_basic_ops, setup, teardown),
    cmocka_unit_test_setup_teardown (test_whiteouts_and_order, setup, teardown),
    cmocka_unit_test_setup_teardown (test_chardev_whiteout, setup, teardown),
    cmocka_unit_test_setup_teardown (test_opaque_dir, setup, teardown),
    cmocka_unit_test_setup_teardown (test_rename_and_type_change, setup, teardown),
    cmocka_unit_test_setup_teardown (test_two_uppers, setup, teardown),
    cmocka_unit_test (test_paths),
    cmocka_unit_test (test_meta_parse),
    cmocka_unit_test (test_audit_record),
    cmocka_unit_test_setup_teardown (test_refusals, setup, teardown),
    cmocka_unit_test (test_git_ref_content),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
