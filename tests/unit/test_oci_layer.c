/* test_oci_layer.c - the layer writer (runtime/oci_export_layer.c) and the layer reader
 * (runtime/oci_unpack.c) against each other and against the spec's rules, on real directories:
 * an "upper" in overlayfs' xattr encoding (user.overlay.whiteout / user.overlay.opaque, as an
 * overlay mounted with userxattr writes it) is exported, and the layer is applied onto a
 * "lower" rootfs; the result must be the merged view. Then the reader's refusals: a blob whose
 * bytes differ from its digest, a layer changed between the writer and the reader. No root
 * (skipped with the reason when /tmp has no user xattrs). */
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/oci_export.h"
#include "runtime/oci_image.h"
#include "runtime/oci_unpack.h"

static char top[64];

static void
put (const char *rel, const char *data)
{
  char p[256];
  snprintf (p, sizeof p, "%s/%s", top, rel);
  FILE *f = fopen (p, "w");
  assert_non_null (f);
  fputs (data, f);
  assert_int_equal (fclose (f), 0);
}

static void
dir (const char *rel)
{
  char p[256];
  snprintf (p, sizeof p, "%s/%s", top, rel);
  assert_int_equal (mkdir (p, 0755), 0);
}

static char *
slurp (const char *rel)
{
  static char buf[256];
  char p[256];
  snprintf (p, sizeof p, "%s/%s", top, rel);
  FILE *f = fopen (p, "r");
  if (!f)
    return NULL;
  size_t n = fread (buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  (void) fclose (f);
  return buf;
}

static bool
exists (const char *rel)
{
  char p[256];
  struct stat st;
  snprintf (p, sizeof p, "%s/%s", top, rel);
  return lstat (p, &st) == 0;
}

static int
open_dir (const char *rel)
{
  char p[256];
  snprintf (p, sizeof p, "%s/%s", top, rel);
  int fd = open (p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true (fd >= 0);
  return fd;
}

static int
setup (void **state)
{
  (void) state;
  snprintf (top, sizeof top, "/tmp/asbx-layer-XXXXXX");
  assert_non_null (mkdtemp (top));
  char p[256];
  snprintf (p, sizeof p, "%s", top);
  if (setxattr (p, "user.asbx-probe", "1", 1, 0) < 0)
    {
      fprintf (stderr, "SKIP: %s has no user xattrs (%s)\n", top, strerror (errno));
      rmdir (top);
      exit (77);
    }
  /* the lower (what the image had) */
  dir ("root");
  put ("root/a", "old a\n");
  put ("root/c", "c goes\n");
  dir ("root/b");
  put ("root/b/x", "x goes with the opaque dir\n");
  dir ("root/keep");
  put ("root/keep/k", "untouched\n");
  /* the upper (what the run changed), overlayfs' xattr form */
  dir ("upper");
  put ("upper/a", "new a\n");
  put ("upper/c", "");
  snprintf (p, sizeof p, "%s/upper/c", top);
  assert_int_equal (setxattr (p, "user.overlay.whiteout", "y", 1, 0), 0);
  dir ("upper/b");
  snprintf (p, sizeof p, "%s/upper/b", top);
  assert_int_equal (setxattr (p, "user.overlay.opaque", "y", 1, 0), 0);
  put ("upper/b/y", "y stays\n");
  char l1[256], l2[256];
  snprintf (l1, sizeof l1, "%s/upper/h1", top);
  snprintf (l2, sizeof l2, "%s/upper/h2", top);
  put ("upper/h1", "linked\n");
  assert_int_equal (link (l1, l2), 0);
  snprintf (p, sizeof p, "%s/upper/abs", top);
  assert_int_equal (symlink ("/etc/passwd", p), 0);
  return 0;
}

static int
teardown (void **state)
{
  (void) state;
  char cmd[128];
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", top);
  return system (cmd) == 0 ? 0 : -1;
}

/* export upper/ into blob, fill the descriptor */
static int
export_layer (struct oci_descriptor *d, struct oci_layer_out *lo)
{
  char p[256];
  asbx_err_t err = NULL;
  snprintf (p, sizeof p, "%s/blob", top);
  int bfd = open (p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true (bfd >= 0);
  int ufd = open_dir ("upper");
  if (oci_layer_from_upper (ufd, "user", "", bfd, lo, &err) < 0)
    fail_msg ("%s", err->msg);
  close (ufd);
  memset (d, 0, sizeof *d);
  d->media_type = (char *) OCI_MT_LAYER_GZIP;
  snprintf (d->hex, sizeof d->hex, "%s", lo->digest_hex);
  d->digest = d->hex; /* for messages only */
  d->size = lo->size;
  return bfd;
}

static void
test_round_trip (void **state)
{
  (void) state;
  struct oci_descriptor d;
  struct oci_layer_out lo;
  struct oci_unpack_stats st = { 0 };
  asbx_err_t err = NULL;
  int bfd = export_layer (&d, &lo);

  assert_int_equal (lo.whiteouts, 1);
  assert_int_equal (lo.opaque, 1);
  assert_int_equal (oci_blob_verify (bfd, &d, &err), 0);
  int rfd = open_dir ("root");
  if (oci_unpack_layer (rfd, bfd, &d, &st, &err) < 0)
    fail_msg ("%s", err->msg);
  close (rfd);
  close (bfd);
  assert_string_equal (slurp ("root/a"), "new a\n");
  assert_false (exists ("root/c"));
  assert_false (exists ("root/b/x"));
  assert_string_equal (slurp ("root/b/y"), "y stays\n");
  assert_string_equal (slurp ("root/keep/k"), "untouched\n");
  char buf[64] = "", p[256];
  snprintf (p, sizeof p, "%s/root/abs", top);
  assert_true (readlink (p, buf, sizeof buf - 1) > 0);
  assert_string_equal (buf, "/etc/passwd"); /* stored, not followed */
  struct stat s1, s2;
  snprintf (p, sizeof p, "%s/root/h1", top);
  assert_int_equal (stat (p, &s1), 0);
  snprintf (p, sizeof p, "%s/root/h2", top);
  assert_int_equal (stat (p, &s2), 0);
  assert_true (s1.st_ino == s2.st_ino);
  /* the same tree, the same bytes */
  struct oci_descriptor d2;
  struct oci_layer_out lo2;
  int b2 = export_layer (&d2, &lo2);
  close (b2);
  assert_string_equal (lo.digest_hex, lo2.digest_hex);
  assert_string_equal (lo.diff_id_hex, lo2.diff_id_hex);
}

static void
test_changed_blob_refused (void **state)
{
  (void) state;
  struct oci_descriptor d;
  struct oci_layer_out lo;
  struct oci_unpack_stats st = { 0 };
  asbx_err_t err = NULL;
  int bfd = export_layer (&d, &lo);
  /* one byte of the gzip trailer (its CRC): libarchive may or may not notice, the hash does */
  unsigned char c;
  assert_int_equal (pread (bfd, &c, 1, d.size - 6), 1);
  c ^= 0xff;
  assert_int_equal (pwrite (bfd, &c, 1, d.size - 6), 1);
  assert_int_equal (oci_blob_verify (bfd, &d, &err), -1);
  assert_non_null (strstr (err->msg, "digest mismatch"));
  asbx_error_free (&err);
  dir ("root2");
  int rfd = open_dir ("root2");
  assert_int_equal (oci_unpack_layer (rfd, bfd, &d, &st, &err), -1);
  asbx_error_free (&err);
  close (rfd);
  close (bfd);
}

static void
test_wh_name_refused (void **state)
{
  (void) state;
  struct oci_layer_out lo;
  asbx_err_t err = NULL;
  put ("upper/.wh.passwd", "an agent's file\n");
  int ufd = open_dir ("upper");
  char p[256];
  snprintf (p, sizeof p, "%s/blob3", top);
  int bfd = open (p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_int_equal (oci_layer_from_upper (ufd, "user", "workspace", bfd, &lo, &err), -1);
  assert_non_null (strstr (err->msg, ".wh.passwd"));
  asbx_error_free (&err);
  close (bfd);
  close (ufd);
  snprintf (p, sizeof p, "%s/upper/.wh.passwd", top);
  unlink (p);
}

/* oci_remove_at on a tree deeper than the fd limit (outside attack 14: the recursive walk held
 * one fd per level, failed with EMFILE and left a VM's run directory behind): the tree is gone,
 * files at every level too, with the soft limit lowered to 64 for the call. */
static void
test_remove_deeper_than_fd_limit (void **state)
{
  (void) state;
  char base[80];
  snprintf (base, sizeof base, "%s/deep", top);
  assert_int_equal (mkdir (base, 0755), 0);
  int fd = open (base, O_RDONLY | O_DIRECTORY);
  assert_true (fd >= 0);
  for (int i = 0; i < 300; i++)
    {
      assert_int_equal (mkdirat (fd, "d", 0755), 0);
      int f = openat (fd, "f", O_WRONLY | O_CREAT, 0644);
      assert_true (f >= 0);
      close (f);
      int next = openat (fd, "d", O_RDONLY | O_DIRECTORY);
      assert_true (next >= 0);
      close (fd);
      fd = next;
    }
  close (fd);
  struct rlimit old, low = { 64, 64 };
  assert_int_equal (getrlimit (RLIMIT_NOFILE, &old), 0);
  low.rlim_max = old.rlim_max;
  assert_int_equal (setrlimit (RLIMIT_NOFILE, &low), 0);
  int topfd = open (top, O_RDONLY | O_DIRECTORY);
  int r = oci_remove_at (topfd, "deep");
  int e = errno;
  close (topfd);
  assert_int_equal (setrlimit (RLIMIT_NOFILE, &old), 0);
  errno = e;
  assert_int_equal (r, 0);
  struct stat st;
  assert_int_equal (lstat (base, &st), -1);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_round_trip),
    cmocka_unit_test (test_changed_blob_refused),
    cmocka_unit_test (test_wh_name_refused),
    cmocka_unit_test (test_remove_deeper_than_fd_limit),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
