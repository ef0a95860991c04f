/* vm_ovl.c - an engine's overlayfs rootfs rebuilt for QEMU's jail (vm_ovl.h for the design).
 *
 * Sources: Documentation/filesystems/overlayfs.rst (layers, "upperdir ... in use" with index=off
 * is a warning, not an error), Documentation/filesystems/idmappings.rst, proc(5) mountinfo. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/vm_ovl.h"

#define OVL_MAGIC 0x794c7630
#define OVL_MAX_LAYERS 128

void
vm_ovl_free (struct vm_ovl *o)
{
  for (size_t i = 0; i < o->n; i++)
    if (o->layers[i] >= 0)
      close (o->layers[i]);
  free (o->layers);
  *o = (struct vm_ovl){ 0 };
}

/* mountinfo's octal escapes (\040 for a space...) undone in place */
static void
unescape (char *s)
{
  char *w = s;
  for (char *r = s; *r; r++)
    if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7')
      {
        *w++ = (char) (((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
        r += 3;
      }
    else
      *w++ = *r;
  *w = '\0';
}

/* the super options of mount `id` (heap), or NULL */
static char *
super_options (uint64_t id, asbx_err_t *err)
{
  cleanup_free char *text = NULL;
  if (read_file_at (AT_FDCWD, "/proc/self/mountinfo", 16u << 20, &text, NULL, err) < 0)
    return NULL;
  char *save = NULL;
  for (char *l = strtok_r (text, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      unsigned long long mid;
      char *sep = strstr (l, " - ");
      if (sscanf (l, "%llu", &mid) != 1 || mid != id || !sep)
        continue;
      /* " - overlay SOURCE OPTIONS" */
      char *opts = strrchr (sep + 3, ' ');
      return opts ? xstrdup (opts + 1) : NULL;
    }
  asbx_error (err, ENOENT, "isolation vm: mount %llu not in /proc/self/mountinfo", (unsigned long long) id);
  return NULL;
}

static int
add_layer (struct vm_ovl *o, const char *path, int userns, asbx_err_t *err)
{
  if (o->n == OVL_MAX_LAYERS)
    return asbx_error (err, E2BIG, "isolation vm: more than %d overlay layers", OVL_MAX_LAYERS);
  /* the kernel's record of a mount made by root (the engine): its paths are root's own */
  int t = (int) open_tree (AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (t < 0)
    return asbx_error (err, errno, "isolation vm: open the overlay layer %s", path);
  struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY, .userns_fd = (uint64_t) userns };
  if (mount_setattr (t, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
    {
      int e = errno;
      close (t);
      return asbx_error (err, e, "isolation vm: an idmapped clone of the overlay layer %s", path);
    }
  o->layers = xrealloc (o->layers, (o->n + 1) * sizeof (int));
  o->layers[o->n++] = t;
  return 0;
}

int
vm_ovl_layers (int fd, const char *path, int userns, struct vm_ovl *o, asbx_err_t *err)
{
  struct statfs sf;
  struct statx sx;
  *o = (struct vm_ovl){ 0 };
  if (fstatfs (fd, &sf) < 0)
    return asbx_error (err, errno, "isolation vm: statfs %s", path);
  if (sf.f_type != OVL_MAGIC)
    return 0;
  if (statx (fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 || !(sx.stx_mask & STATX_MNT_ID))
    return asbx_error (err, errno ? errno : ENOTSUP, "isolation vm: the mount id of %s", path);
  if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) || !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
    return 0; /* a directory inside an overlay: its layers would be the whole mount's */
  cleanup_free char *opts = super_options (sx.stx_mnt_id, err);
  if (!opts)
    return -1;
  char *upper = NULL, *lower = NULL, *save = NULL;
  for (char *kv = strtok_r (opts, ",", &save); kv; kv = strtok_r (NULL, ",", &save))
    if (strncmp (kv, "upperdir=", 9) == 0)
      upper = kv + 9;
    else if (strncmp (kv, "lowerdir=", 9) == 0)
      lower = kv + 9;
    else if (strncmp (kv, "lowerdir+=", 10) == 0 || strncmp (kv, "datadir+=", 9) == 0)
      return asbx_error (err, ENOTSUP, "isolation vm: %s: overlay layers given as %.*s are not read yet", path,
                         (int) strcspn (kv, "="), kv);
  if (!lower)
    return asbx_error (err, EINVAL, "isolation vm: %s: an overlay without lowerdir in its record", path);
  if (strstr (lower, "::"))
    return asbx_error (err, ENOTSUP, "isolation vm: %s: data-only overlay layers are not read yet", path);
  /* the engine's own upper layer on top, read-only for us: the container's layer as it is */
  if (upper)
    {
      unescape (upper);
      if (add_layer (o, upper, userns, err) < 0)
        goto fail;
    }
  char *lsave = NULL;
  for (char *l = strtok_r (lower, ":", &lsave); l; l = strtok_r (NULL, ":", &lsave))
    {
      unescape (l);
      if (l[0] != '/')
        {
          asbx_error (err, ENOTSUP, "isolation vm: %s: a relative overlay layer path (%s) is not read yet", path, l);
          goto fail;
        }
      if (add_layer (o, l, userns, err) < 0)
        goto fail;
    }
  return 1;
fail:
  vm_ovl_free (o);
  return -1;
}

int
vm_ovl_mount (struct vm_ovl *o, const char *scratch, const char *at, const char *rundir, uid_t uid, gid_t gid,
              unsigned long flags, asbx_err_t *err)
{
  cleanup_free char *upper = xasprintf ("%s/ovl-upper", rundir), *work = xasprintf ("%s/ovl-work", rundir);
  cleanup_free char *opts = xstrdup ("lowerdir=");
  int ret = -1;
  size_t attached = 0;

  if (mkdir (upper, 0755) < 0 || mkdir (work, 0700) < 0 || chown (upper, uid, gid) < 0)
    return asbx_error (err, errno, "isolation vm: the overlay's upper layer in %s", rundir);
  for (size_t i = 0; i < o->n; i++, attached++)
    {
      cleanup_free char *p = xasprintf ("%s/%zu", scratch, i);
      if (mkdir (p, 0700) < 0 || move_mount (o->layers[i], "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        {
          asbx_error (err, errno, "isolation vm: attach overlay layer %zu", i);
          goto out;
        }
      char *n = xasprintf ("%s%s%s", opts, i ? ":" : "", p);
      free (opts);
      opts = n;
    }
  {
    /* index=off: the engine's mount uses the same upper (overlayfs then only warns) */
    char *n = xasprintf ("%s,upperdir=%s,workdir=%s,index=off,xino=off", opts, upper, work);
    free (opts);
    opts = n;
  }
  if (mount ("overlay", at, "overlay", flags, opts) < 0)
    {
      asbx_error (err, errno, "isolation vm: mount the overlay for QEMU at %s", at);
      goto out;
    }
  ret = 0;
out:
  for (size_t i = 0; i < attached; i++)
    {
      cleanup_free char *p = xasprintf ("%s/%zu", scratch, i);
      if (umount2 (p, MNT_DETACH) < 0 || rmdir (p) < 0)
        ret = ret < 0 ? ret : asbx_error (err, errno, "isolation vm: detach overlay layer %zu", i);
    }
  vm_ovl_free (o);
  return ret;
}
