/* cgroup_layout.c - which cgroup hierarchies this host has, where they are mounted, where we are
 * in each, and how linux.cgroupsPath maps onto them.
 *
 * Sources: proc(5) (/proc/self/mountinfo, /proc/cgroups, /proc/self/cgroup), cgroups(7).
 * Threat model: cgroupsPath comes from config.json; it must never name a directory outside the
 * hierarchy (".." components are refused outright, not normalised) and it must not be able to
 * smuggle in a second entry of our per-hierarchy list format (';' and ':' in relative paths).
 * The layout is read once per process; a host whose mounts change between create and delete is
 * not supported (the created mask indexes hierarchies sorted by key, which keeps it stable across
 * processes otherwise). */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

char **
cgroup_parse_proc_cgroups (const char *text, asbx_err_t *err)
{
  cleanup_free char *copy = xstrdup (text);
  char **v = xmalloc0 (sizeof (char *));
  size_t n = 0;
  char *save = NULL;

  for (char *line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char name[64];
      unsigned hier, num, enabled;
      if (line[0] == '#')
        continue;
      if (sscanf (line, "%63s %u %u %u", name, &hier, &num, &enabled) != 4)
        {
          asbx_strv_free (v);
          asbx_error (err, EINVAL, "/proc/cgroups: malformed line `%s`", line);
          return NULL;
        }
      if (!enabled)
        continue;
      v = xrealloc (v, (n + 2) * sizeof (char *));
      v[n++] = xstrdup (name);
      v[n] = NULL;
    }
  return v;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo (proc(5)). In place. */
static void
unescape_octal (char *s)
{
  char *w = s;
  for (char *r = s; *r;)
    {
      if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7')
        {
          *w++ = (char) (((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
          r += 4;
        }
      else
        *w++ = *r++;
    }
  *w = '\0';
}

static int
cmp_str (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static bool
strv_contains (char *const *v, const char *s)
{
  for (; v && *v; v++)
    if (strcmp (*v, s) == 0)
      return true;
  return false;
}

/* Sorted, comma-joined list of the words of `list` (comma-separated) that are controllers or
 * name=...; NULL when none (e.g. a v1 mount with no controller cannot happen, but be safe). */
static char *
v1_key (const char *list, char *const *controllers, bool only_known, bool *cpuset)
{
  cleanup_free char *copy = xstrdup (list);
  char *words[64], *save = NULL, *out;
  size_t n = 0, len = 1;

  for (char *w = strtok_r (copy, ",", &save); w && n < 64; w = strtok_r (NULL, ",", &save))
    if (strncmp (w, "name=", 5) == 0 || !only_known || strv_contains (controllers, w))
      words[n++] = w;
  if (n == 0)
    return NULL;
  qsort (words, n, sizeof words[0], cmp_str);
  for (size_t i = 0; i < n; i++)
    len += strlen (words[i]) + 1;
  out = xmalloc0 (len);
  for (size_t i = 0; i < n; i++)
    {
      if (i)
        strcat (out, ",");
      strcat (out, words[i]);
      if (cpuset && strcmp (words[i], "cpuset") == 0)
        *cpuset = true;
    }
  return out;
}

static int
cmp_hier (const void *a, const void *b)
{
  return strcmp (((const struct cgroup_hier *) a)->key, ((const struct cgroup_hier *) b)->key);
}

/* Add one mount; duplicates of a known key keep the first mount of the hierarchy root. */
static int
add_hier (struct cgroup_layout_info *info, struct cgroup_hier *nh, asbx_err_t *err)
{
  for (size_t i = 0; i < info->n; i++)
    if (strcmp (info->h[i].key, nh->key) == 0)
      {
        struct cgroup_hier *h = &info->h[i];
        if (strcmp (h->mount_root, "/") != 0 && strcmp (nh->mount_root, "/") == 0)
          {
            struct cgroup_hier tmp = *h;
            *h = *nh;
            *nh = tmp;
          }
        free (nh->key), free (nh->mountpoint), free (nh->mount_root);
        return 0;
      }
  if (info->n == CGROUP_MAX_HIERARCHIES)
    {
      free (nh->key), free (nh->mountpoint), free (nh->mount_root);
      return asbx_error (err, E2BIG, "more than %d cgroup hierarchies mounted", CGROUP_MAX_HIERARCHIES);
    }
  info->h[info->n++] = *nh;
  return 0;
}

/* One mountinfo line; 0 (also for non-cgroup lines) / -1. */
static int
parse_mount_line (char *line, char *const *controllers, struct cgroup_layout_info *info, asbx_err_t *err)
{
  char *f[6], *save = NULL, *fstype, *superopts, *sep;
  struct cgroup_hier nh = { 0 };
  size_t i;

  sep = strstr (line, " - ");
  if (sep == NULL)
    return asbx_error (err, EINVAL, "mountinfo: malformed line `%s`", line);
  *sep = '\0';
  fstype = strtok_r (sep + 3, " ", &save);
  (void) strtok_r (NULL, " ", &save); /* source */
  superopts = strtok_r (NULL, " ", &save);
  if (fstype == NULL || superopts == NULL)
    return asbx_error (err, EINVAL, "mountinfo: malformed line after ` - `");
  if (strcmp (fstype, "cgroup") != 0 && strcmp (fstype, "cgroup2") != 0)
    return 0;
  save = NULL;
  for (i = 0; i < 5 && (f[i] = strtok_r (i ? NULL : line, " ", &save)); i++)
    ;
  if (i < 5)
    return asbx_error (err, EINVAL, "mountinfo: malformed cgroup line");
  nh.version = fstype[6] == '2' ? 2 : 1;
  if (nh.version == 2)
    nh.key = xstrdup ("");
  else if ((nh.key = v1_key (superopts, controllers, true, &nh.cpuset)) == NULL)
    {
      log_debug ("cgroup v1 mount without controllers or name= at %s: ignored", f[4]);
      return 0;
    }
  unescape_octal (f[3]);
  unescape_octal (f[4]);
  nh.mount_root = xstrdup (f[3]);
  nh.mountpoint = xstrdup (f[4]);
  return add_hier (info, &nh, err);
}

int
cgroup_parse_mountinfo (const char *text, char *const *controllers, struct cgroup_layout_info *info, asbx_err_t *err)
{
  cleanup_free char *copy = xstrdup (text);
  char *save = NULL;
  bool v1_ctrl = false, v2 = false;

  memset (info, 0, sizeof (*info));
  for (char *line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    if (parse_mount_line (line, controllers, info, err) < 0)
      {
        cgroup_layout_info_clear (info);
        return -1;
      }
  if (info->n == 0)
    return asbx_error (err, ENOENT, "no cgroup filesystem is mounted (checked /proc/self/mountinfo)");
  qsort (info->h, info->n, sizeof info->h[0], cmp_hier);
  for (size_t i = 0; i < info->n; i++)
    {
      if (info->h[i].version == 2)
        v2 = true;
      else if (strncmp (info->h[i].key, "name=", 5) != 0)
        v1_ctrl = true;
    }
  info->layout = !v1_ctrl ? CGROUP_LAYOUT_UNIFIED : v2 ? CGROUP_LAYOUT_HYBRID : CGROUP_LAYOUT_LEGACY;
  return 0;
}

int
cgroup_parse_self (const char *text, struct cgroup_layout_info *info, asbx_err_t *err)
{
  cleanup_free char *copy = xstrdup (text);
  char *save = NULL;

  for (char *line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      /* "ID:CONTROLLERS:PATH"; the path may itself contain ':' */
      char *c1 = strchr (line, ':'), *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      cleanup_free char *key = NULL;
      if (c2 == NULL || c2[1] != '/')
        return asbx_error (err, EINVAL, "/proc/self/cgroup: malformed line `%s`", line);
      *c2 = '\0';
      key = c1[1] ? v1_key (c1 + 1, NULL, false, NULL) : xstrdup ("");
      for (size_t i = 0; key && i < info->n; i++)
        if (strcmp (info->h[i].key, key) == 0 && info->h[i].own == NULL)
          info->h[i].own = xstrdup (c2 + 1);
    }
  return 0;
}

void
cgroup_layout_info_clear (struct cgroup_layout_info *info)
{
  for (size_t i = 0; i < info->n; i++)
    free (info->h[i].key), free (info->h[i].mountpoint), free (info->h[i].mount_root), free (info->h[i].own);
  memset (info, 0, sizeof (*info));
}

static struct cgroup_layout_info host_layout;
static bool host_layout_ok;

const struct cgroup_layout_info *
cgroup_layout_get (asbx_err_t *err)
{
  cleanup_free char *cg = NULL, *mi = NULL, *self = NULL;
  cleanup_strv char **ctrl = NULL;

  if (host_layout_ok)
    return &host_layout;
  if (read_file_at (AT_FDCWD, "/proc/cgroups", 1 << 20, &cg, NULL, err) < 0
      || read_file_at (AT_FDCWD, "/proc/self/mountinfo", 16 << 20, &mi, NULL, err) < 0
      || read_file_at (AT_FDCWD, "/proc/self/cgroup", 1 << 20, &self, NULL, err) < 0)
    {
      asbx_error_wrap (err, "detect cgroup layout");
      return NULL;
    }
  ctrl = cgroup_parse_proc_cgroups (cg, err);
  if (ctrl == NULL || cgroup_parse_mountinfo (mi, ctrl, &host_layout, err) < 0)
    return NULL;
  if (cgroup_parse_self (self, &host_layout, err) < 0)
    {
      cgroup_layout_info_clear (&host_layout);
      return NULL;
    }
  host_layout_ok = true;
  return &host_layout;
}

int
cgroup_layout_detect (enum cgroup_layout *out, asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);
  if (info == NULL)
    return -1;
  *out = info->layout;
  return 0;
}

int
cgroup_open_hier_root (const struct cgroup_hier *h, asbx_err_t *err)
{
  struct statfs sfs;
  cleanup_close int fd = open (h->mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    return asbx_error (err, errno, "open cgroup mount `%s`", h->mountpoint);
  if (fstatfs (fd, &sfs) < 0)
    return asbx_error (err, errno, "fstatfs `%s`", h->mountpoint);
  if (sfs.f_type != (h->version == 2 ? CGROUP2_SUPER_MAGIC : CGROUP_SUPER_MAGIC))
    return asbx_error (err, EXDEV, "`%s` is not a cgroup%s filesystem", h->mountpoint, h->version == 2 ? "2" : "");
  return steal_fd (&fd);
}
