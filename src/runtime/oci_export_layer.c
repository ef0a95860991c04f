/* oci_export_layer.c - an overlayfs upper directory as one OCI layer (oci_export.h).
 *
 * overlayfs (Documentation/filesystems/overlayfs.rst) and image-spec layer.md describe the same
 * changeset in two encodings: a whiteout is a 0:0 character device (or, with `userxattr` and
 * since 6.7 in general, a zero-size file carrying <ns>.overlay.whiteout) in the upper and a
 * `.wh.NAME` entry in a layer; an opaque directory is <ns>.overlay.opaque = "y" in the upper and
 * a `.wh..wh..opq` entry in a layer. With redirect_dir=off and metacopy=off (REVIEW.md's mount
 * options) every other upper entry is a full copy, so it maps to a plain tar entry.
 *
 * The tar is written twice by libarchive: once through gzip into the blob (its sha256 is the
 * descriptor's digest) and once uncompressed into a hash only (the config's diff_id), with the
 * data read once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/libarchive_dl.h"
#include "core/util.h"
#include "runtime/oci_export.h"
#include "runtime/oci_image.h"
#include "runtime/workspace_diff.h"

struct sink
{
  struct oci_hash hash;
  int fd; /* -1: hash only */
  int errnum;
};

static la_ssize_t
sink_write (struct archive *a, void *p, const void *buf, size_t n)
{
  struct sink *s = p;
  oci_hash_update (&s->hash, buf, n);
  if (s->fd >= 0 && write_all (s->fd, buf, n) < 0)
    {
      s->errnum = errno;
      archive_set_error (a, errno, "write the layer blob");
      return -1;
    }
  return (la_ssize_t) n;
}

struct walk
{
  struct archive *gz, *plain;
  struct sink gz_sink, plain_sink;
  const char *ns;
  struct oci_layer_out *out;
  void *links; /* tsearch tree of struct link: the first path of each multiply-linked inode */
};

struct link
{
  dev_t dev;
  ino_t ino;
  char *path;
};

static int
cmp_link (const void *a, const void *b)
{
  const struct link *x = a, *y = b;
  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  return x->ino < y->ino ? -1 : x->ino > y->ino ? 1 : 0;
}

static void
free_link (void *p)
{
  struct link *l = p;
  free (l->path);
  free (l);
}

/* both archives get the entry; then the data, if any, is written to both */
static int
put_header (struct walk *w, struct archive_entry *e, const char *path, asbx_err_t *err)
{
  if (archive_write_header (w->gz, e) != ARCHIVE_OK)
    return ws_error_path (err, archive_errno (w->gz), "layer: entry `%s`: %s", path, archive_error_string (w->gz));
  if (archive_write_header (w->plain, e) != ARCHIVE_OK)
    return ws_error_path (err, archive_errno (w->plain), "layer: entry `%s`: %s", path,
                          archive_error_string (w->plain));
  return 0;
}

static int
put_data (struct walk *w, const void *buf, size_t n, const char *path, asbx_err_t *err)
{
  if (archive_write_data (w->gz, buf, n) != (la_ssize_t) n)
    return ws_error_path (err, archive_errno (w->gz), "layer: entry `%s`: %s", path, archive_error_string (w->gz));
  if (archive_write_data (w->plain, buf, n) != (la_ssize_t) n)
    return ws_error_path (err, archive_errno (w->plain), "layer: entry `%s`: %s", path,
                          archive_error_string (w->plain));
  return 0;
}

static struct archive_entry *
entry_for (const char *path, const struct stat *st)
{
  struct archive_entry *e = archive_entry_new ();
  if (!e)
    abort ();
  archive_entry_set_pathname (e, path);
  archive_entry_set_mode (e, st->st_mode);
  archive_entry_set_uid (e, st->st_uid);
  archive_entry_set_gid (e, st->st_gid);
  archive_entry_set_mtime (e, st->st_mtim.tv_sec, 0);
  return e;
}

/* an empty regular file named `name` below dir: a whiteout or the opaque marker */
static int
put_marker (struct walk *w, const char *dir, const char *name, asbx_err_t *err)
{
  cleanup_free char *path = *dir ? xasprintf ("%s/%s", dir, name) : xstrdup (name);
  struct stat st = { .st_mode = S_IFREG | 0644 };
  struct archive_entry *e = entry_for (path, &st);
  archive_entry_set_size (e, 0);
  int ret = put_header (w, e, path, err);
  archive_entry_free (e);
  return ret;
}

static bool
has_xattr (int fd, const char *ns, const char *suffix, const char *want)
{
  char name[64], val[8];
  snprintf (name, sizeof name, "%s.overlay.%s", ns, suffix);
  ssize_t n = fgetxattr (fd, name, val, sizeof val);
  if (n < 0)
    return false;
  return !want || ((size_t) n == strlen (want) && memcmp (val, want, (size_t) n) == 0);
}

static int
put_file (struct walk *w, int fd, const char *path, const struct stat *st, asbx_err_t *err)
{
  char buf[1 << 16];
  ssize_t n;
  int64_t left = st->st_size;
  struct archive_entry *e = entry_for (path, st);

  archive_entry_set_size (e, st->st_size);
  int ret = put_header (w, e, path, err);
  archive_entry_free (e);
  while (ret == 0 && left > 0 && (n = read (fd, buf, sizeof buf)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return ws_error_path (err, errno, "layer: read `%s`", path);
      if (n > left) /* grew since the stat: the header said st_size */
        n = (ssize_t) left;
      ret = put_data (w, buf, (size_t) n, path, err);
      left -= n;
    }
  if (ret == 0 && left > 0)
    return ws_error_path (err, 0, "layer: `%s` shrank while it was read (%lld bytes missing)", path, (long long) left);
  return ret;
}

static int
cmp_name (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* the sorted entry names of the directory dfd (heap vector of heap strings, *n) */
static char **
list_dir (int dfd, size_t *n, const char *path, asbx_err_t *err)
{
  int fd = openat (dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
  char **v = NULL;
  struct dirent *de;

  *n = 0;
  if (!d)
    {
      if (fd >= 0)
        close (fd);
      ws_error_path (err, errno, "layer: read the directory `%s`", *path ? path : "/");
      return NULL;
    }
  while ((de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      v = xrealloc (v, (*n + 2) * sizeof *v);
      v[(*n)++] = xstrdup (de->d_name);
    }
  closedir (d);
  if (!v)
    v = xmalloc0 (sizeof *v);
  v[*n] = NULL;
  qsort (v, *n, sizeof *v, cmp_name);
  return v;
}

static int walk_dir (struct walk *w, int dfd, const char *rel, const char *tarpath, asbx_err_t *err);

static int
walk_entry (struct walk *w, int dfd, const char *name, const char *rel, const char *tardir, asbx_err_t *err)
{
  cleanup_free char *path = *rel ? xasprintf ("%s/%s", rel, name) : xstrdup (name);
  cleanup_free char *tpath = *tardir ? xasprintf ("%s/%s", tardir, name) : xstrdup (name);
  struct stat st;

  if (fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return ws_error_path (err, errno, "layer: stat `%s`", path);
  if (S_ISCHR (st.st_mode) && st.st_rdev == makedev (0, 0))
    {
      w->out->whiteouts++;
      cleanup_free char *wh = xasprintf (".wh.%s", name);
      return put_marker (w, tardir, wh, err);
    }
  /* a file the agent named .wh.x would be read as "delete x" by every consumer of the layer */
  if (strncmp (name, ".wh.", 4) == 0)
    return asbx_error (err, EINVAL,
                       "layer: `%s`: a name starting with `.wh.` cannot be carried by an OCI layer (it would be "
                       "read as a whiteout); rename or delete it in the workspace first",
                       path);
  if (S_ISDIR (st.st_mode))
    {
      cleanup_close int fd = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        return ws_error_path (err, errno, "layer: open the directory `%s`", path);
      struct archive_entry *e = entry_for (tpath, &st);
      int ret = put_header (w, e, tpath, err);
      archive_entry_free (e);
      if (ret < 0)
        return -1;
      w->out->dirs++;
      if (has_xattr (fd, w->ns, "opaque", "y"))
        {
          w->out->opaque++;
          if (put_marker (w, tpath, ".wh..wh..opq", err) < 0)
            return -1;
        }
      return walk_dir (w, fd, path, tpath, err);
    }
  if (S_ISLNK (st.st_mode))
    {
      char target[4096];
      ssize_t n = readlinkat (dfd, name, target, sizeof target - 1);
      if (n < 0)
        return ws_error_path (err, errno, "layer: readlink `%s`", path);
      target[n] = '\0';
      struct archive_entry *e = entry_for (tpath, &st);
      archive_entry_set_symlink (e, target);
      int ret = put_header (w, e, tpath, err);
      archive_entry_free (e);
      w->out->files++;
      return ret;
    }
  if (S_ISFIFO (st.st_mode))
    {
      struct archive_entry *e = entry_for (tpath, &st);
      int ret = put_header (w, e, tpath, err);
      archive_entry_free (e);
      w->out->files++;
      return ret;
    }
  if (!S_ISREG (st.st_mode))
    {
      w->out->skipped++; /* sockets, devices: nothing an image should carry */
      return 0;
    }
  /* O_NOFOLLOW: the name was a regular file at the fstatat; a swap to a symlink is refused */
  cleanup_close int fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  struct stat fst;
  if (fd < 0 || fstat (fd, &fst) < 0)
    return ws_error_path (err, errno, "layer: open `%s`", path);
  if (!S_ISREG (fst.st_mode) || fst.st_ino != st.st_ino)
    return ws_error_path (err, EAGAIN, "layer: `%s` changed while the upper was read", path);
  if (fst.st_size == 0 && has_xattr (fd, w->ns, "whiteout", NULL))
    {
      w->out->whiteouts++;
      cleanup_free char *wh = xasprintf (".wh.%s", name);
      return put_marker (w, tardir, wh, err);
    }
  w->out->files++;
  if (fst.st_nlink > 1)
    {
      struct link key = { fst.st_dev, fst.st_ino, NULL };
      struct link **found = tfind (&key, &w->links, cmp_link);
      if (found)
        {
          struct archive_entry *e = entry_for (tpath, &fst);
          archive_entry_set_hardlink (e, (*found)->path);
          archive_entry_set_size (e, 0);
          int ret = put_header (w, e, tpath, err);
          archive_entry_free (e);
          return ret;
        }
      struct link *l = xmalloc (sizeof *l);
      *l = (struct link){ fst.st_dev, fst.st_ino, xstrdup (tpath) };
      if (!tsearch (l, &w->links, cmp_link))
        abort ();
    }
  return put_file (w, fd, tpath, &fst, err);
}

static int
walk_dir (struct walk *w, int dfd, const char *rel, const char *tardir, asbx_err_t *err)
{
  size_t n;
  cleanup_strv char **names = list_dir (dfd, &n, rel, err);
  if (!names)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (walk_entry (w, dfd, names[i], rel, tardir, err) < 0)
      return -1;
  return 0;
}

static struct archive *
new_writer (struct sink *s, bool gzip)
{
  struct archive *a = archive_write_new ();
  if (!a)
    abort ();
  archive_write_set_format_pax_restricted (a);
  if (gzip)
    {
      archive_write_add_filter_gzip (a);
      /* no mtime in the gzip header: the same tree gives the same digest */
      archive_write_set_filter_option (a, "gzip", "timestamp", NULL);
    }
  /* no padding of the last block to 10240 bytes: the plain stream must be exactly what the
   * gzip stream decompresses to, which libarchive does not pad */
  archive_write_set_bytes_per_block (a, 0);
  archive_write_open (a, s, NULL, sink_write, NULL);
  return a;
}

int
oci_layer_from_upper (int upperfd, const char *xattr_ns, const char *prefix, int out_fd, struct oci_layer_out *out,
                      asbx_err_t *err)
{
  struct walk w = { .ns = xattr_ns, .out = out };
  int ret = -1;

  memset (out, 0, sizeof *out);
  if (libarchive_load (err) < 0)
    return -1;
  w.gz_sink.fd = out_fd;
  w.plain_sink.fd = -1;
  oci_hash_init (&w.gz_sink.hash);
  oci_hash_init (&w.plain_sink.hash);
  w.gz = new_writer (&w.gz_sink, true);
  w.plain = new_writer (&w.plain_sink, false);
  if (walk_dir (&w, upperfd, "", prefix, err) < 0)
    goto out;
  if (archive_write_close (w.gz) != ARCHIVE_OK)
    {
      asbx_error (err, w.gz_sink.errnum, "layer: %s", archive_error_string (w.gz));
      goto out;
    }
  if (archive_write_close (w.plain) != ARCHIVE_OK)
    {
      asbx_error (err, 0, "layer: %s", archive_error_string (w.plain));
      goto out;
    }
  ret = 0;
out:
  archive_write_free (w.gz);
  archive_write_free (w.plain);
  oci_hash_final (&w.gz_sink.hash, out->digest_hex);
  oci_hash_final (&w.plain_sink.hash, out->diff_id_hex);
  out->size = (int64_t) w.gz_sink.hash.bytes;
  tdestroy (w.links, free_link);
  return ret;
}
