/* rootfs.c - the container's filesystem view, in order (runc 1.1 prepareRoot/mountToRootfs/
 * createDevices/pivotRoot/finalizeRootfs, runtime-spec config.md "Mounts", config-linux.md).
 *
 * Orchestrator only: option parsing is mountopts.c, fd path resolution pathsafe.c, the mount
 * syscalls mount.c (new mount API, reasons there), devices devices.c, cgroup rootfs_cgroup.c.
 * Threat model: the rootfs and every mount destination are attacker-controlled; destinations
 * are resolved with openat2(RESOLVE_IN_ROOT) from the rootfs mount's fd and mounts are attached
 * to those fds. Bind sources are host paths chosen by the bundle author (trusted, as in runc).
 * Ordering: "/" is made rprivate/rslave first so nothing we do propagates to the host; the rootfs
 * is bind-mounted onto itself (pivot_root needs a mount point); spec mounts in order (a later
 * mount may land inside an earlier one, e.g. /dev/pts in /dev); devices after the /dev tmpfs;
 * shared/slave/unbindable rootfsPropagation is applied by finalize, after pivot_root (which
 * refuses a shared new root: EINVAL), as runc does.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/devices.h"
#include "linux/mount.h"
#include "linux/mountopts.h"
#include "linux/overlay.h"
#include "linux/pathsafe.h"
#include "linux/rootfs.h"
#include "linux/rootfs_cgroup.h"

static bool
streq (const char *a, const char *b)
{
  return a && b && strcmp (a, b) == 0;
}

static bool
has_new_ns (const struct oci_spec *spec, const char *type)
{
  const struct oci_linux *l = spec->linux_;
  for (size_t i = 0; l && i < l->namespaces_len; i++)
    if (streq (l->namespaces[i].type, type) && l->namespaces[i].path == NULL)
      return true;
  return false;
}

/* the destination of a new proc/sysfs must be a real directory (runc: "must be mounted on
 * ordinary directory"): a symlink there is refused rather than followed */
static int
open_dir_dest_nofollow (int rootfd, const char *dest, asbx_err_t *err)
{
  struct stat st;
  int fd = ps_openat2 (rootfd, dest, O_PATH | O_NOFOLLOW, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);

  if (fd < 0 && errno == ENOENT)
    return ps_mkdir_p (rootfd, dest, 0755, err);
  if (fd < 0)
    return asbx_error (err, errno, "open destination");
  if (fstat (fd, &st) < 0 || !S_ISDIR (st.st_mode))
    {
      close (fd);
      return asbx_error (err, ENOTDIR, "destination must be a directory, not a symlink or file");
    }
  return fd;
}

/* the source P prepared for this spec mount (kind NONE: none) */
static struct linux_mount_src
prepared_src (const struct linux_rootfs_opts *opts, const struct oci_mount *m)
{
  size_t i = (size_t) (m - opts->spec->mounts);
  if (opts->srcs && i < opts->spec->mounts_len)
    return opts->srcs[i];
  return (struct linux_mount_src){ .fd = -1, .kind = LINUX_MOUNT_SRC_NONE };
}

/* the mount to attach for one spec entry (detached), and whether its root is a directory */
static int
make_mount (const struct linux_rootfs_opts *opts, const struct oci_mount *m, const struct mount_opts *o, bool bind,
            const char *source, uint64_t top_set, bool *is_dir, asbx_err_t *err)
{
  const char *type = m->type;
  struct stat st;
  int mfd;

  *is_dir = true;
  if (bind)
    {
      cleanup_free char *src = NULL;
      const struct linux_mount_src ps = prepared_src (opts, m);
      if (source == NULL)
        return asbx_error (err, EINVAL, "bind mount without a source");
      src = source[0] == '/' ? xstrdup (source) : xasprintf ("%s/%s", opts->bundle, source);
      if (ps.kind == LINUX_MOUNT_SRC_IDMAP)
        {
          /* idmapped: P cloned and idmapped it in the host's namespaces (linux/idmap.c) */
          mfd = fcntl (ps.fd, F_DUPFD_CLOEXEC, 3);
          if (mfd < 0)
            return asbx_error (err, errno, "dup the idmapped mount of `%s`", src);
        }
      else if (ps.kind == LINUX_MOUNT_SRC_BIND && source == m->source)
        {
          mfd = fcntl (ps.fd, F_DUPFD_CLOEXEC, 3); /* opened by the runtime, as host root */
          if (mfd < 0)
            return asbx_error (err, errno, "bind `%s`: dup the runtime's clone", src);
        }
      else
        mfd = mnt_clone (AT_FDCWD, src, o->recursive, err);
      if (mfd < 0)
        return -1;
      if (fstat (mfd, &st) < 0)
        {
          close (mfd);
          return asbx_error (err, errno, "stat bind source");
        }
      *is_dir = S_ISDIR (st.st_mode);
      return mfd;
    }
  return mnt_new_fs (type, m->source, o->data, o->sb_set, top_set, err);
}

static int
dest_fd_for (int rootfd, const char *dest, const char *type, bool is_dir, asbx_err_t *err)
{
  if (streq (type, "proc") || streq (type, "sysfs"))
    return open_dir_dest_nofollow (rootfd, dest, err);
  if (is_dir)
    return ps_mkdir_p (rootfd, dest, 0755, err);
  return ps_create_file (rootfd, dest, 0644, err);
}

/* In a user namespace the flags a bind source carries (nosuid, nodev, noexec, ro, the atime
 * mode) are locked: clearing them fails with EPERM. runc keeps them (statfs of the source);
 * so do we: never clear a flag the clone already has. */
static void
keep_locked (int mfd, uint64_t *set, uint64_t *clr)
{
  int64_t cur = mnt_current_attrs (mfd);

  if (cur < 0)
    return;
  *clr &= ~(uint64_t) cur;
  if ((*clr & MOUNT_ATTR__ATIME) && (cur & MOUNT_ATTR__ATIME))
    {
      *clr &= ~(uint64_t) MOUNT_ATTR__ATIME;
      *set &= ~(uint64_t) MOUNT_ATTR__ATIME;
    }
}

/* remount: change the mount already at the destination */
static int
remount (int rootfd, const char *dest, const struct mount_opts *o, asbx_err_t *err)
{
  cleanup_close int fd = ps_open_in_root (rootfd, dest, O_PATH, err);

  if (fd < 0)
    return -1;
  if ((o->data || o->sb_set) && mnt_reconfigure (fd, o->data, o->sb_set, err) < 0)
    return -1;
  if (mnt_setattr (fd, false, o->attr_set, o->attr_clr, 0, err) < 0)
    return -1;
  return mnt_setattr (fd, true, o->rattr_set, o->rattr_clr, 0, err);
}

/* A tmpfs without mode= gets the mode of the directory it is mounted on (runc does this), not
 * tmpfs's default 1777: a 0700 mount point stays 0700. Nothing when the destination is missing
 * (ps_mkdir_p creates it 0755 then, and tmpfs keeps its default, as runc). */
static void
tmpfs_keep_mode (int rootfd, const char *dest, struct mount_opts *o)
{
  cleanup_close int fd = -1;
  struct stat st;
  char *data;

  if (o->data && (strncmp (o->data, "mode=", 5) == 0 || strstr (o->data, ",mode=")))
    return;
  fd = ps_openat2 (rootfd, dest, O_PATH | O_DIRECTORY, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd < 0 || fstat (fd, &st) < 0 || !S_ISDIR (st.st_mode))
    return;
  data = o->data ? xasprintf ("%s,mode=%o", o->data, (unsigned) (st.st_mode & 07777))
                 : xasprintf ("mode=%o", (unsigned) (st.st_mode & 07777));
  free (o->data);
  o->data = data;
}

static int
mount_one (const struct linux_rootfs_opts *opts, int rootfd, const struct oci_mount *m, asbx_err_t *err)
{
  struct mount_opts o;
  cleanup_free char *dest = NULL;
  cleanup_close int mfd = -1;
  cleanup_close int dfd = -1;
  bool bind, is_dir;
  const char *source = m->source;
  uint64_t top_set, top_clr;
  int r = -1;

  if (m->destination == NULL || *m->destination == '\0')
    return asbx_error (err, EINVAL, "destination is required");
  if (mount_opts_parse (m->options, m->options_len, &o, err) < 0)
    return -1;
  /* runc takes a relative destination as rooted, with a warning (runtime-spec: it MUST be
   * absolute); so do we, so that configs runc accepts keep working */
  if (m->destination[0] != '/')
    log_warning ("mounts: destination `%s` is not absolute: taken as `/%s` (as runc)", m->destination, m->destination);
  dest = ps_clean (m->destination);
  bind = o.bind || streq (m->type, "bind");
  /* the review workspace: the bind of the workspace becomes a new overlay filesystem, its
   * attributes (nosuid, nodev, ro...) set by fsmount like any new filesystem's */
  if (prepared_src (opts, m).kind == LINUX_MOUNT_SRC_OVERLAY)
    bind = false;
  if (!bind && streq (m->type, "tmpfs"))
    tmpfs_keep_mode (rootfd, dest, &o);
  if (!bind && streq (m->type, "sysfs") && opts->userns && !has_new_ns (opts->spec, "network"))
    {
      /* a user namespace that does not own the network namespace may not mount sysfs (runc
       * falls back the same way): bind the host's /sys recursively, with the requested flags */
      log_debug ("sysfs in a user namespace without a new network namespace: rbind /sys");
      bind = o.recursive = true;
      source = "/sys";
    }
  top_set = o.attr_set;
  top_clr = o.attr_clr;
  /* a read-only /dev is made read-only by finalize, after the devices are created in it */
  if (strcmp (dest, "/dev") == 0)
    top_set &= ~(uint64_t) MOUNT_ATTR_RDONLY;
  if (o.tmpcopyup)
    r = asbx_error (err, ENOTSUP, "option tmpcopyup is not supported");
  else if ((o.idmap || o.ridmap || m->uid_mappings_len || m->gid_mappings_len)
           && prepared_src (opts, m).kind != LINUX_MOUNT_SRC_IDMAP)
    r = asbx_error (err, EINVAL, "idmapped mount not prepared by the runtime (linux/idmap.c)");
  else if (o.remount)
    r = remount (rootfd, dest, &o, err);
  else if (!bind && m->type == NULL)
    r = asbx_error (err, EINVAL, "type is required unless the options contain bind or rbind");
  else if (!bind && streq (m->type, "cgroup"))
    {
      dfd = ps_mkdir_p (rootfd, dest, 0755, err);
      r = dfd < 0 ? -1
                  : rootfs_mount_cgroup (dfd, o.attr_set | o.rattr_set, opts->new_cgroupns, opts->cgroup_path, err);
    }
  else if (prepared_src (opts, m).kind == LINUX_MOUNT_SRC_OVERLAY)
    {
      /* the review workspace: a new overlay filesystem over the mount point (linux/overlay.h) */
      if ((dfd = ps_mkdir_p (rootfd, dest, 0755, err)) >= 0
          && (mfd = linux_overlay_mount (prepared_src (opts, m).ovl, dfd, top_set, err)) >= 0
          && mnt_attach (mfd, dfd, err) == 0)
        r = mnt_setattr (mfd, o.propagation_recursive, 0, 0, o.propagation, err);
    }
  else if ((mfd = make_mount (opts, m, &o, bind, source, top_set, &is_dir, err)) >= 0
           && (dfd = dest_fd_for (rootfd, dest, m->type, is_dir, err)) >= 0 && mnt_attach (mfd, dfd, err) == 0)
    {
      /* attrs on the attached mount: for binds the top set (fsmount already applied it to new
       * filesystems), then the recursive set, then propagation */
      if (bind && opts->userns)
        keep_locked (mfd, &top_set, &top_clr);
      if ((!bind || mnt_setattr (mfd, false, top_set, top_clr, 0, err) == 0)
          && mnt_setattr (mfd, true, o.rattr_set, o.rattr_clr, 0, err) == 0
          && mnt_setattr (mfd, o.propagation_recursive, 0, 0, o.propagation, err) == 0)
        r = 0;
    }
  mount_opts_free (&o);
  return r;
}

/* rootfsPropagation -> (flag for "/" before we start, flag for the rootfs mount at the end) */
static int
root_propagation (const struct oci_spec *spec, unsigned long *root_flag, unsigned long *final, asbx_err_t *err)
{
  const char *p = spec->linux_ ? spec->linux_->rootfs_propagation : NULL;

  /* default: rslave, as runc (host mounts and unmounts still reach the container's binds, as
   * engines expect for volumes; nothing propagates back). shared and slave start from rslave so
   * that nothing we mount propagates back to the host's peers. */
  *root_flag = MS_SLAVE | MS_REC;
  *final = 0;
  if (p == NULL || *p == '\0')
    return 0;
  if (streq (p, "private") || streq (p, "rprivate"))
    *root_flag = MS_PRIVATE | MS_REC;
  else if (streq (p, "slave") || streq (p, "rslave"))
    *root_flag = MS_SLAVE | MS_REC, *final = MS_SLAVE;
  else if (streq (p, "shared") || streq (p, "rshared"))
    *root_flag = MS_SLAVE | MS_REC, *final = MS_SHARED;
  else if (streq (p, "unbindable") || streq (p, "runbindable"))
    *final = MS_UNBINDABLE;
  else
    return asbx_error (err, EINVAL, "linux.rootfsPropagation: unknown value `%s`", p);
  return 0;
}

/* runc skips device creation when /dev itself is a bind mount (the host's /dev is used) */
static bool
dev_is_bind (const struct oci_spec *spec, bool *devpts)
{
  bool bind = false;

  *devpts = false;
  for (size_t i = 0; i < spec->mounts_len; i++)
    {
      const struct oci_mount *m = &spec->mounts[i];
      cleanup_free char *d = m->destination ? ps_clean (m->destination) : NULL;
      bool b = streq (m->type, "bind");
      for (size_t j = 0; j < m->options_len; j++)
        b |= streq (m->options[j], "bind") || streq (m->options[j], "rbind");
      if (d && strcmp (d, "/dev") == 0)
        bind = b;
      if (d && strcmp (d, "/dev/pts") == 0 && streq (m->type, "devpts"))
        *devpts = true;
    }
  return bind;
}

struct linux_mount_src *
linux_mount_srcs_new (size_t n)
{
  struct linux_mount_src *srcs = xmalloc (n * sizeof (*srcs));
  for (size_t i = 0; i < n; i++)
    srcs[i] = (struct linux_mount_src){ .fd = -1, .kind = LINUX_MOUNT_SRC_NONE };
  return srcs;
}

void
linux_mount_srcs_free (struct linux_mount_src *srcs, size_t n)
{
  for (size_t i = 0; srcs && i < n; i++)
    if (srcs[i].fd >= 0)
      close (srcs[i].fd);
  free (srcs);
}

void
linux_rootfs_open_bind_sources (const struct oci_spec *spec, const char *bundle, struct linux_mount_src **srcs)
{
  if (spec->mounts_len == 0)
    return;
  if (*srcs == NULL)
    *srcs = linux_mount_srcs_new (spec->mounts_len);
  for (size_t i = 0; i < spec->mounts_len; i++)
    {
      const struct oci_mount *m = &spec->mounts[i];
      struct mount_opts o;
      cleanup_free char *src = NULL;

      if ((*srcs)[i].kind != LINUX_MOUNT_SRC_NONE || m->source == NULL
          || mount_opts_parse (m->options, m->options_len, &o, NULL) < 0)
        continue;
      if ((o.bind || streq (m->type, "bind")) && !o.remount && !o.idmap && !o.ridmap)
        {
          src = m->source[0] == '/' ? xstrdup (m->source) : xasprintf ("%s/%s", bundle, m->source);
          int fd = mnt_clone (AT_FDCWD, src, o.recursive, NULL);
          if (fd >= 0)
            (*srcs)[i] = (struct linux_mount_src){ .fd = fd, .kind = LINUX_MOUNT_SRC_BIND };
        }
      mount_opts_free (&o);
    }
}

void
linux_rootfs_close_bind_sources (struct linux_mount_src *srcs, size_t n)
{
  for (size_t i = 0; srcs && i < n; i++)
    if (srcs[i].kind == LINUX_MOUNT_SRC_BIND)
      {
        close (srcs[i].fd);
        srcs[i] = (struct linux_mount_src){ .fd = -1, .kind = LINUX_MOUNT_SRC_NONE };
      }
}

/* the spec mounts and the devices below *rootfd; hands *rootfd over to *rootfd_out */
static int
mount_all (const struct linux_rootfs_opts *opts, const struct oci_spec *spec, int *rootfd, int *rootfd_out,
           asbx_err_t *err)
{
  bool devpts;
  for (size_t i = 0; i < spec->mounts_len; i++)
    if (mount_one (opts, *rootfd, &spec->mounts[i], err) < 0)
      return asbx_error_wrap (err, "mounts[%zu] (%s)", i,
                              spec->mounts[i].destination ? spec->mounts[i].destination : "");

  if (!dev_is_bind (spec, &devpts))
    {
      if (linux_devices_create (*rootfd, spec, opts->userns, err) < 0
          || linux_devices_symlinks (*rootfd, devpts, err) < 0)
        return -1;
    }
  *rootfd_out = steal_fd (rootfd);
  return 0;
}

int
linux_rootfs_prepare (const struct linux_rootfs_opts *opts, int *rootfd_out, asbx_err_t *err)
{
  const struct oci_spec *spec = opts->spec;
  unsigned long root_flag, final;
  cleanup_close int rootfd = -1;

  if (root_propagation (spec, &root_flag, &final, err) < 0)
    return -1;
  if (opts->host_mntns)
    {
      /* the runtime's namespace: no propagation change, no self-bind (chroot needs none) */
      rootfd = open (opts->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (rootfd < 0)
        return asbx_error (err, errno, "rootfs: open %s", opts->rootfs);
      return mount_all (opts, spec, &rootfd, rootfd_out, err);
    }
  if (mount (NULL, "/", NULL, root_flag, NULL) < 0)
    return asbx_error (err, errno, "make / %s", root_flag & MS_SLAVE ? "rslave" : "rprivate");

  /* the rootfs becomes a mount point of its own (pivot_root requires one) */
  rootfd = mnt_clone (AT_FDCWD, opts->rootfs, true, err);
  if (rootfd < 0)
    return asbx_error_wrap (err, "rootfs");
  if (move_mount (rootfd, "", AT_FDCWD, opts->rootfs, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return asbx_error (err, errno, "rootfs: bind %s onto itself", opts->rootfs);
  /* a policy's read-only root covers every submount of the rootfs tree, not just its top; the
   * spec's own mounts made below stay as the spec says */
  /* The top mount stays writable until finalize (root.readonly, as runc), so the spec's mount
   * targets can still be created in it (e.g. Podman's /run/.containerenv); its submounts are
   * read-only from here on. */
  if (opts->readonly_recursive
      && (mnt_setattr (rootfd, true, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, err) < 0
          || mnt_setattr (rootfd, false, 0, MOUNT_ATTR_RDONLY, 0, err) < 0))
    return asbx_error_wrap (err, "rootfs: make the tree read-only");
  return mount_all (opts, spec, &rootfd, rootfd_out, err);
}

int
linux_rootfs_chroot (int rootfd, asbx_err_t *err)
{
  if (fchdir (rootfd) < 0)
    return asbx_error (err, errno, "chdir to the rootfs");
  if (chroot (".") < 0)
    return asbx_error (err, errno, "chroot");
  if (chdir ("/") < 0)
    return asbx_error (err, errno, "chdir /");
  return 0;
}

/* mountinfo's octal escapes (\040 for a space) undone in place */
static void
unescape_mountinfo (char *s)
{
  char *o = s;
  for (char *i = s; *i; i++)
    if (i[0] == '\\' && i[1] >= '0' && i[1] <= '3' && i[2] >= '0' && i[2] <= '7' && i[3] >= '0' && i[3] <= '7')
      {
        *o++ = (char) ((i[1] - '0') << 6 | (i[2] - '0') << 3 | (i[3] - '0'));
        i += 3;
      }
    else
      *o++ = *i;
  *o = '\0';
}

static int
longer_first (const void *a, const void *b)
{
  size_t la = strlen (*(char *const *) a), lb = strlen (*(char *const *) b);
  return la < lb ? 1 : la > lb ? -1 : 0;
}

int
linux_rootfs_host_cleanup (const char *rootfs, asbx_err_t *err)
{
  cleanup_free char *text = NULL;
  char **points = NULL, *save = NULL;
  size_t n = 0, rl = strlen (rootfs);
  int ret = 0;

  if (read_file_at (AT_FDCWD, "/proc/self/mountinfo", 16 << 20, &text, NULL, err) < 0)
    return -1;
  for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char *f = line;
      for (int k = 0; k < 4 && f; k++) /* id parent major:minor root -> mount point */
        f = strchr (f, ' ') ? strchr (f, ' ') + 1 : NULL;
      if (!f)
        continue;
      f[strcspn (f, " ")] = '\0';
      unescape_mountinfo (f);
      if (strncmp (f, rootfs, rl) == 0 && f[rl] == '/')
        {
          points = xrealloc (points, sizeof (char *) * (n + 1));
          points[n++] = f;
        }
    }
  if (n)
    qsort (points, n, sizeof (char *), longer_first);
  for (size_t i = 0; i < n; i++)
    if (umount2 (points[i], MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT && ret == 0)
      ret = asbx_error (err, errno, "detach `%s` (mounted by the container in the host's mount namespace)", points[i]);
  free (points);
  return ret;
}

int
linux_rootfs_pivot (int rootfd, bool no_pivot, asbx_err_t *err)
{
  if (fchdir (rootfd) < 0)
    return asbx_error (err, errno, "chdir to the rootfs");
  if (no_pivot)
    {
      /* --no-pivot (ramfs roots): move the rootfs over / and chroot; weaker, the old root stays
       * reachable for a process with CAP_SYS_CHROOT */
      if (mount (".", "/", NULL, MS_MOVE, NULL) < 0)
        return asbx_error (err, errno, "move the rootfs onto /");
      if (chroot (".") < 0)
        return asbx_error (err, errno, "chroot");
    }
  else
    {
      /* pivot_root(".", "."): the old root ends up mounted on top of the new one, at ".".
       * No rslave step before the detach (runc has one): prepare already made "/" rslave or
       * rprivate in this namespace, so the unmount cannot propagate to the host; and
       * mount(".", MS_SLAVE|MS_REC) would resolve "." to the NEW root (mount(2) does not
       * follow the mount stacked on the cwd) and strip the container's own `shared` mounts. */
      if (syscall (SYS_pivot_root, ".", ".") < 0)
        return asbx_error (err, errno, "pivot_root");
      if (umount2 (".", MNT_DETACH) < 0)
        return asbx_error (err, errno, "detach the old root");
    }
  if (chdir ("/") < 0)
    return asbx_error (err, errno, "chdir /");
  return 0;
}

/* a masked path: directory -> read-only empty tmpfs; anything else -> the container's /dev/null */
/* the object a masked or read-only path names (pathsafe.h ps_open_cover_target): the fd, -2 when
 * it is really missing (config-linux.md: a missing path is not an error), else -1 with *err */
static int
open_cover_target (int rootfd, const char *path, asbx_err_t *err)
{
  int fd = ps_open_cover_target (rootfd, path);
  if (fd >= 0)
    return fd;
  if (errno == ENOENT || errno == ENOTDIR)
    return -2;
  if (errno == ELOOP)
    return asbx_error (err, ELOOP,
                       "`%s` is missing through a symlink (dangling, or swapped during setup): not "
                       "masked, refused",
                       path);
  if (errno == EAGAIN)
    return asbx_error (err, EAGAIN, "`%s` kept changing during setup: refused", path);
  return asbx_error (err, errno, "open");
}

static int
mask_path (int rootfd, const char *path, asbx_err_t *err)
{
  cleanup_close int fd = open_cover_target (rootfd, path, err);
  cleanup_close int mfd = -1;
  struct stat st;

  if (fd == -2)
    return 0; /* config-linux.md: a missing path is not an error */
  if (fd < 0)
    return -1;
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "open");
  if (S_ISDIR (st.st_mode))
    mfd = mnt_new_fs ("tmpfs", "tmpfs", "size=0,mode=755", 0, MOUNT_ATTR_RDONLY, err);
  else
    {
      cleanup_close int null = ps_open_in_root (rootfd, "/dev/null", O_PATH, err);
      struct stat ns;
      if (null < 0 || fstat (null, &ns) < 0)
        return asbx_error_wrap (err, "open /dev/null");
      if (!S_ISCHR (ns.st_mode) || ns.st_rdev != makedev (1, 3))
        return asbx_error (err, EPERM, "/dev/null is not the null device");
      mfd = mnt_clone (null, "", false, err);
    }
  if (mfd < 0)
    return -1;
  return mnt_attach (mfd, fd, err);
}

static int
readonly_path (int rootfd, const char *path, asbx_err_t *err)
{
  cleanup_close int fd = open_cover_target (rootfd, path, err);
  cleanup_close int mfd = -1;

  if (fd == -2)
    return 0;
  if (fd < 0)
    return -1;
  mfd = mnt_clone (fd, "", true, err);
  if (mfd < 0 || mnt_attach (mfd, fd, err) < 0)
    return -1;
  return mnt_setattr (mfd, true, MOUNT_ATTR_RDONLY, 0, 0, err);
}

static bool
dev_readonly (const struct oci_spec *spec)
{
  bool ro = false;
  for (size_t i = 0; i < spec->mounts_len; i++)
    {
      cleanup_free char *d = spec->mounts[i].destination ? ps_clean (spec->mounts[i].destination) : NULL;
      if (d == NULL || strcmp (d, "/dev") != 0)
        continue;
      ro = false;
      for (size_t j = 0; j < spec->mounts[i].options_len; j++)
        if (streq (spec->mounts[i].options[j], "ro"))
          ro = true;
        else if (streq (spec->mounts[i].options[j], "rw"))
          ro = false;
    }
  return ro;
}

int
linux_rootfs_finalize (const struct oci_spec *spec, asbx_err_t *err)
{
  const struct oci_linux *l = spec->linux_;
  cleanup_close int rootfd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

  unsigned long root_flag, final;

  if (rootfd < 0)
    return asbx_error (err, errno, "open /");
  if (root_propagation (spec, &root_flag, &final, err) < 0)
    return -1;
  if (final && mnt_setattr (rootfd, false, 0, 0, final, err) < 0)
    return asbx_error_wrap (err, "linux.rootfsPropagation");
  for (size_t i = 0; l && i < l->masked_paths_len; i++)
    if (mask_path (rootfd, l->masked_paths[i], err) < 0)
      return asbx_error_wrap (err, "linux.maskedPaths[%zu] (%s)", i, l->masked_paths[i]);
  for (size_t i = 0; l && i < l->readonly_paths_len; i++)
    if (readonly_path (rootfd, l->readonly_paths[i], err) < 0)
      return asbx_error_wrap (err, "linux.readonlyPaths[%zu] (%s)", i, l->readonly_paths[i]);
  if (dev_readonly (spec))
    {
      cleanup_close int dev = ps_open_in_root (rootfd, "/dev", O_PATH | O_DIRECTORY, err);
      if (dev < 0 || mnt_setattr (dev, false, MOUNT_ATTR_RDONLY, 0, 0, err) < 0)
        return asbx_error_wrap (err, "remount /dev read-only");
    }
  /* root.readonly: only the top mount, other flags untouched (mount_setattr changes only the
   * bits given, which is what runc's statfs + MS_REMOUNT|MS_BIND|MS_RDONLY achieves) */
  if (spec->root && spec->root->readonly && mnt_setattr (rootfd, false, MOUNT_ATTR_RDONLY, 0, 0, err) < 0)
    return asbx_error_wrap (err, "root.readonly");
  return 0;
}
