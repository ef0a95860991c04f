/* cgroup_ctl.c - find and open the directory of the container's cgroup that carries one
 * controller, and read/write its files with messages that name the config field and the file.
 *
 * Mechanism: on v1 each controller lives in its own hierarchy (or a co-mounted one such as
 * "cpu,cpuacct"); on cgroup2 all controllers share one tree but a controller's files appear in
 * a cgroup only once every ancestor lists it in cgroup.subtree_control (cgroup-v2.rst "Enabling
 * and Disabling"). Hybrid hosts mix both: a controller not bound to v1 may be on the cgroup2
 * mount (this machine: hugetlb), so the lookup is per controller, never per host.
 * Threat model: the cgroup path is untrusted (validated by cgroup.c); every open goes through
 * cgroup_open_in_hier()'s fd walk. File names come from our tables or from `unified` keys, which
 * cgroup_unified.c checks to be plain names.
 * Ordering: subtree_control is written top-down, before the leaf's files are opened. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

void
cgroup_dir_clear (struct cgroup_dir *d)
{
  if (d->fd >= 0)
    close (d->fd);
  d->fd = -1;
  free (d->where);
  d->where = NULL;
}

/* The name a v1 controller has on cgroup2 (cgroup-v2.rst "Controllers"). */
static const char *
v2_name (const char *controller)
{
  if (strcmp (controller, "blkio") == 0)
    return "io";
  if (strcmp (controller, "cpuacct") == 0)
    return "cpu";
  return controller;
}

/* Whether a space/comma separated list contains word. */
static bool
has_word (const char *list, const char *word, const char *seps)
{
  size_t wl = strlen (word);
  for (const char *p = list; p && *p;)
    {
      size_t n = strcspn (p, seps);
      if (n == wl && strncmp (p, word, wl) == 0)
        return true;
      p += n;
      p += strspn (p, seps);
    }
  return false;
}

/* cgroup.controllers of the cgroup2 mount root (cached per hierarchy pointer). */
static bool
v2_root_has (const struct cgroup_hier *h, const char *ctl)
{
  static const struct cgroup_hier *cached_h;
  static char *cached;
  asbx_err_t e = NULL;

  if (cached_h != h)
    {
      cleanup_close int root = cgroup_open_hier_root (h, &e);
      free (cached);
      cached = NULL;
      if (root < 0 || read_file_at (root, "cgroup.controllers", 4096, &cached, NULL, &e) < 0)
        {
          asbx_error_free (&e);
          return false;
        }
      cached_h = h;
    }
  return has_word (cached, ctl, " \n");
}

const struct cgroup_hier *
cgroup_ctl_hier (const struct cgroup_layout_info *info, const char *controller)
{
  const struct cgroup_hier *v2 = NULL;

  for (size_t i = 0; i < info->n; i++)
    if (info->h[i].version == 2)
      v2 = &info->h[i];
  /* "cgroup2": the cgroup2 hierarchy itself (core files, device programs, unified cgroup.*) */
  if (strcmp (controller, "cgroup2") == 0)
    return v2;
  for (size_t i = 0; i < info->n; i++)
    {
      if (info->h[i].version == 2)
        v2 = &info->h[i];
      else if (has_word (info->h[i].key, controller, ","))
        return &info->h[i];
    }
  if (v2 && v2_root_has (v2, v2_name (controller)))
    return v2;
  /* freezing is a core cgroup2 feature (cgroup.freeze), not a listed controller */
  if (v2 && strcmp (controller, "freezer") == 0)
    return v2;
  return NULL;
}

/* Write "+ctl" into dirfd's cgroup.subtree_control unless it is already listed. */
static int
v2_enable_in (int dirfd, const char *ctl, const char *where, asbx_err_t *err)
{
  cleanup_free char *cur = NULL;
  cleanup_free char *plus = xasprintf ("+%s", ctl);

  if (read_file_at (dirfd, "cgroup.subtree_control", 4096, &cur, NULL, err) < 0)
    return asbx_error_wrap (err, "cgroup2 `%s`", where);
  if (has_word (cur, ctl, " \n"))
    return 0;
  if (write_file_at (dirfd, "cgroup.subtree_control", plus, strlen (plus), err) < 0)
    return asbx_error_wrap (err, "enable the %s controller in cgroup2 `%s`", ctl, where);
  log_debug ("cgroup2: enabled %s in %s", ctl, where);
  return 0;
}

/* Enable ctl in the root and every ancestor of the leaf (not in the leaf itself). */
static int
v2_enable_path (const struct cgroup_hier *h, const char *path, const char *ctl, asbx_err_t *err)
{
  cleanup_free char *p = cgroup_path_in_hier (path, h, err);
  cleanup_free char *copy = NULL, *where = NULL;
  cleanup_close int cur = -1;
  size_t rl;
  char *save = NULL, *c, *next;

  if (p == NULL)
    return -1;
  rl = strcmp (h->mount_root, "/") == 0 ? 0 : strlen (h->mount_root);
  if (strncmp (p, h->mount_root, rl) != 0)
    return asbx_error (err, ENOENT, "cgroup `%s` is outside the cgroup2 mount `%s`", p, h->mountpoint);
  copy = xstrdup (p + rl);
  where = xstrdup (h->mountpoint);
  cur = cgroup_open_hier_root (h, err);
  if (cur < 0)
    return -1;
  for (c = strtok_r (copy, "/", &save); c; c = next)
    {
      char *w;
      int fd;
      next = strtok_r (NULL, "/", &save);
      if (next == NULL)
        break; /* the leaf: its own subtree_control is not ours to change */
      if (v2_enable_in (cur, ctl, where, err) < 0)
        return -1;
      fd = openat (cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        return asbx_error (err, errno, "open cgroup2 `%s/%s`", where, c);
      close (cur);
      cur = fd;
      w = xasprintf ("%s/%s", where, c);
      free (where);
      where = w;
    }
  return v2_enable_in (cur, ctl, where, err);
}

int
cgroup_ctl_open (const char *path, const char *controller, struct cgroup_dir *d, asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);
  const struct cgroup_hier *h;
  cleanup_free char *p = NULL;
  int fd = -1;

  if (info == NULL)
    return -1;
  h = cgroup_ctl_hier (info, controller);
  if (h == NULL)
    return 1;
  /* freezer (cgroup.freeze), devices (BPF) and "cgroup2" are core on v2: nothing to enable */
  if (h->version == 2 && strcmp (controller, "freezer") != 0 && strcmp (controller, "devices") != 0
      && strcmp (controller, "cgroup2") != 0 && v2_enable_path (h, path, v2_name (controller), err) < 0)
    return -1;
  if (cgroup_open_in_hier (h, path, false, NULL, &fd, err) < 0)
    return -1;
  p = cgroup_path_in_hier (path, h, err);
  if (p == NULL)
    {
      close (fd);
      return -1;
    }
  d->fd = fd;
  d->version = h->version;
  d->where = xasprintf ("%s%s", h->mountpoint, p + (strcmp (h->mount_root, "/") == 0 ? 0 : strlen (h->mount_root)));
  return 0;
}

int
cgroup_dir_write (const struct cgroup_dir *d, const char *field, const char *file, const char *value, asbx_err_t *err)
{
  cleanup_close int fd = openat (d->fd, file, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);

  if (fd < 0)
    {
      if (errno == ENOENT)
        return asbx_error (err, ENOTSUP, "linux.resources.%s: not supported by this kernel (no %s/%s)", field, d->where,
                           file);
      return asbx_error (err, errno, "linux.resources.%s: open %s/%s", field, d->where, file);
    }
  if (write_all (fd, value, strlen (value)) < 0)
    return asbx_error (err, errno, "linux.resources.%s: write `%s` to %s/%s", field, value, d->where, file);
  log_debug ("cgroup: %s/%s <- %s", d->where, file, value);
  return 0;
}

int
cgroup_dir_writef (const struct cgroup_dir *d, const char *field, const char *file, asbx_err_t *err, const char *fmt,
                   ...)
{
  cleanup_free char *v = NULL;
  va_list ap;
  int r;

  va_start (ap, fmt);
  r = vasprintf (&v, fmt, ap);
  va_end (ap);
  if (r < 0)
    return asbx_error (err, ENOMEM, "vasprintf");
  return cgroup_dir_write (d, field, file, v, err);
}

int
cgroup_dir_read (const struct cgroup_dir *d, const char *file, char **out, asbx_err_t *err)
{
  if (read_file_at (d->fd, file, 1 << 20, out, NULL, err) < 0)
    return asbx_error_wrap (err, "cgroup `%s`", d->where);
  return 0;
}

int
cgroup_dir_read_u64 (const struct cgroup_dir *d, const char *file, uint64_t *out, asbx_err_t *err)
{
  cleanup_free char *s = NULL;

  if (cgroup_dir_read (d, file, &s, err) < 0)
    return -1;
  s[strcspn (s, " \n")] = '\0';
  if (strcmp (s, "max") == 0)
    {
      *out = UINT64_MAX;
      return 0;
    }
  if (parse_u64 (s, out) < 0)
    return asbx_error (err, EINVAL, "cgroup `%s/%s`: not a number: `%s`", d->where, file, s);
  return 0;
}

bool
cgroup_dir_has (const struct cgroup_dir *d, const char *file)
{
  return faccessat (d->fd, file, F_OK, 0) == 0;
}
