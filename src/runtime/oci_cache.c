/* oci_cache.c - the cache of unpacked images, keyed by manifest digest (oci_cache.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/oci_cache.h"
#include "runtime/oci_image.h"
#include "runtime/oci_unpack.h"

#define ROOT_IMAGES_DIR "/var/lib/agentsbx/images"
#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define TMP_PREFIX ".tmp-"

/* made in every rootfs: the sandbox's mounts land on them (runtime/sandbox.c gen_mounts) */
static const char *const mount_points[] = { "proc", "dev", "sys", "tmp", "run", "workspace" };

char *
oci_cache_dir (asbx_err_t *err)
{
  const char *xdg = getenv ("XDG_DATA_HOME"), *home = getenv ("HOME");

  if (geteuid () == 0)
    return xstrdup (ROOT_IMAGES_DIR);
  if (xdg && xdg[0] == '/')
    return xasprintf ("%s/agentsbx/images", xdg);
  if (!home || home[0] != '/')
    {
      struct passwd *pw = getpwuid (geteuid ());
      home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
  if (!home)
    {
      asbx_error (err, 0, "image cache: neither XDG_DATA_HOME nor HOME is set, and uid %u has no home in passwd",
                  (unsigned) geteuid ());
      return NULL;
    }
  return xasprintf ("%s/.local/share/agentsbx/images", home);
}

/* mkdir -p; the last component must be the caller's, a real directory, writable by no one
 * else. Returns an O_PATH fd of it or -1 with *err. */
static int
open_cache_dir (const char *dir, asbx_err_t *err)
{
  cleanup_free char *buf = xstrdup (dir);
  mode_t mode = geteuid () == 0 ? 0755 : 0700; /* root's: a mapped sandbox uid must search it */
  struct stat st;

  for (char *p = buf + 1; *p; p++)
    if (*p == '/')
      {
        *p = '\0';
        if (mkdir (buf, mode) < 0 && errno != EEXIST)
          return asbx_error (err, errno, "image cache: create `%s`", buf);
        *p = '/';
      }
  if (mkdir (buf, mode) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "image cache: create `%s`", buf);
  int fd = open (dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "image cache: open `%s` (a directory, not a symlink)", dir);
  if (fstat (fd, &st) < 0 || st.st_uid != geteuid () || (st.st_mode & (S_IWGRP | S_IWOTH)))
    {
      close (fd);
      return asbx_error (err, 0,
                         "image cache `%s`: must be owned by uid %u and writable by no one else (another user could "
                         "plant a rootfs under a digest)",
                         dir, (unsigned) geteuid ());
    }
  return fd;
}

/* The second line of the `complete` marker: the entry's tree holds no group/other-writable or
 * sticky mode (oci_unpack.c CACHE_MODE_DROP). An entry marked without it was unpacked by an
 * earlier agentsbx that kept an image's 1777 /var/tmp and 0666 files, which any local user may
 * have changed since (outside tester, attack 06): refused on a hit, never used. */
#define MARKER_MODES "modes: no group or other write\n"

/* 1: a complete entry for hex; 0: none; -1: an entry that is not complete (*err) */
static int
cache_lookup (int cfd, const char *dir, const char *hex, asbx_err_t *err)
{
  cleanup_free char *marker_path = xasprintf ("%s/complete", hex), *rootfs = xasprintf ("%s/rootfs", hex);
  cleanup_free char *text = NULL, *old = xasprintf ("sha256:%s\n", hex), *want = xasprintf ("%s%s", old, MARKER_MODES);
  cleanup_close int ed = ps_openat2 (cfd, hex, O_PATH | O_DIRECTORY, 0, RESOLVE_STRICT);
  size_t len;

  if (ed < 0 && errno == ENOENT)
    return 0;
  cleanup_close int mf = ps_openat2 (cfd, marker_path, O_RDONLY | O_NOCTTY, 0, RESOLVE_STRICT);
  cleanup_close int rf = ps_openat2 (cfd, rootfs, O_PATH | O_DIRECTORY, 0, RESOLVE_STRICT);
  if (ed >= 0 && mf >= 0 && rf >= 0 && read_all_fd (mf, 256, &text, &len) == 0 && strcmp (text, old) == 0)
    return asbx_error (err, 0,
                       "image cache: `%s/%s` was unpacked by an earlier agentsbx that kept the image's group- and "
                       "other-writable modes (any local user may have changed it since): remove it to unpack the "
                       "image again",
                       dir, hex);
  if (ed < 0 || mf < 0 || rf < 0 || !text || strcmp (text, want) != 0)
    return asbx_error (err, 0,
                       "image cache: `%s/%s` is not a complete entry (no `complete` marker naming sha256:%s, or no "
                       "rootfs): it was not made by agentsbx; remove it",
                       dir, hex, hex);
  return 1;
}

/* temp dirs of unpacks whose process is gone (killed): removed */
static void
reap_temps (int cfd)
{
  int fd = openat (cfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *de;

  if (!d)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  while ((de = readdir (d)) != NULL)
    {
      /* .tmp-<64 hex>-<pid>-XXXXXX */
      if (strncmp (de->d_name, TMP_PREFIX, strlen (TMP_PREFIX)) != 0 || strlen (de->d_name) < 5 + 64 + 2)
        continue;
      long pid = strtol (de->d_name + 5 + 64 + 1, NULL, 10);
      if (pid > 0 && kill ((pid_t) pid, 0) < 0 && errno == ESRCH)
        (void) oci_remove_at (dirfd (d), de->d_name);
    }
  closedir (d);
}

static int
unpack_into (const struct oci_image *img, int rootfd, asbx_err_t *err)
{
  struct oci_unpack_stats st = { 0 };

  for (size_t i = 0; i < img->n_layers; i++)
    {
      const struct oci_descriptor *d = &img->layers[i];
      cleanup_close int bfd = oci_blob_open (img->layout_fd, d, err);
      /* verified before libarchive parses a byte of it, and hashed again while read */
      if (bfd < 0 || oci_blob_verify (bfd, d, err) < 0 || oci_unpack_layer (rootfd, bfd, d, &st, err) < 0)
        return asbx_error_wrap (err, "layer %zu of %zu", i + 1, img->n_layers);
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (mount_points); i++)
    if (mkdirat (rootfd, mount_points[i], 0755) < 0 && errno != EEXIST)
      return asbx_error (err, errno, "image rootfs: create the mount point /%s", mount_points[i]);
  if (st.devices)
    log_info ("image %s: %llu device node(s) and socket(s) skipped: the sandbox's /dev is its own",
              img->manifest.digest, (unsigned long long) st.devices);
  if (st.xattrs)
    log_info ("image %s: %llu extended attribute(s) not set (only user.* are)", img->manifest.digest,
              (unsigned long long) st.xattrs);
  if (st.setid)
    log_info ("image %s: setuid/setgid bits of %llu file(s) dropped (the cache is on the host)", img->manifest.digest,
              (unsigned long long) st.setid);
  return 0;
}

static int
cache_fill (const struct oci_image *img, int cfd, const char *dir, asbx_err_t *err)
{
  const char *hex = img->manifest.hex;
  cleanup_free char *tmp = xasprintf ("%s/" TMP_PREFIX "%s-%d-XXXXXX", dir, hex, (int) getpid ());
  cleanup_free char *marker = xasprintf ("sha256:%s\n" MARKER_MODES, hex);
  cleanup_close int tfd = -1, rootfd = -1, mf = -1;
  int ret = -1;

  reap_temps (cfd);
  if (!mkdtemp (tmp))
    return asbx_error (err, errno, "image cache: create `%s`", tmp);
  const char *tname = strrchr (tmp, '/') + 1;
  tfd = ps_openat2 (cfd, tname, O_RDONLY | O_DIRECTORY, 0, RESOLVE_STRICT);
  if (tfd < 0 || fchmod (tfd, geteuid () == 0 ? 0755 : 0700) < 0 || mkdirat (tfd, "rootfs", 0755) < 0)
    {
      asbx_error (err, errno, "image cache: create `%s/rootfs`", tmp);
      goto out;
    }
  rootfd = ps_openat2 (tfd, "rootfs", O_RDONLY | O_DIRECTORY, 0, RESOLVE_STRICT);
  if (rootfd < 0)
    {
      asbx_error (err, errno, "image cache: open `%s/rootfs`", tmp);
      goto out;
    }
  if (unpack_into (img, rootfd, err) < 0)
    goto out;
  mf = openat (tfd, "complete", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  /* on disk before the name appears: a crash after the rename must not leave a marked, empty tree */
  if (mf < 0 || write_all (mf, marker, strlen (marker)) < 0 || syncfs (tfd) < 0)
    {
      asbx_error (err, errno, "image cache: write `%s/complete`", tmp);
      goto out;
    }
  if (renameat (cfd, tname, cfd, hex) < 0)
    {
      if (errno != EEXIST && errno != ENOTEMPTY)
        {
          asbx_error (err, errno, "image cache: rename `%s` to `%s/%s`", tmp, dir, hex);
          goto out;
        }
      /* another unpack of the same image finished first: use its entry */
      if (cache_lookup (cfd, dir, hex, err) != 1)
        {
          if (!*err)
            asbx_error (err, 0, "image cache: `%s/%s` vanished", dir, hex);
          goto out;
        }
    }
  else
    tname = NULL;
  ret = 0;
out:
  if (tname && oci_remove_at (cfd, tname) < 0)
    log_warning ("image cache: remove `%s`: %s", tmp, strerror (errno));
  return ret;
}

int
oci_cache_rootfs (const char *ref, char **rootfs_out, char **digest_out, asbx_err_t *err)
{
  cleanup_free char *layout = NULL, *tag = NULL, *dir = NULL;
  cleanup_close int cfd = -1;
  struct oci_image img;
  int ret = -1, hit;

  if (oci_image_parse_ref (ref, &layout, &tag, err) < 0 || oci_image_open (layout, tag, &img, err) < 0)
    return -1;
  dir = oci_cache_dir (err);
  if (!dir || (cfd = open_cache_dir (dir, err)) < 0)
    goto out;
  hit = cache_lookup (cfd, dir, img.manifest.hex, err);
  if (hit < 0 || (hit == 0 && cache_fill (&img, cfd, dir, err) < 0))
    {
      asbx_error_wrap (err, "--image `%s`", ref);
      goto out;
    }
  *rootfs_out = xasprintf ("%s/%s/rootfs", dir, img.manifest.hex);
  if (digest_out)
    *digest_out = xstrdup (img.manifest.digest);
  ret = 0;
out:
  oci_image_free (&img);
  return ret;
}
