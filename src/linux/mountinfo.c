/* mountinfo.c - /proc/self/mountinfo, parsed once for the checks that compare mounts by what
 * they show (the exec-alias rule, quick mode's workspace aliases, the denied paths' masks and
 * carve at their aliases) rather than by path strings:
 * a bind mount shows a directory of a filesystem at another path, and only field 4 (the root of
 * the mount within its filesystem) with the device says which. No security syscall here; the
 * callers act on fds. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/mountinfo.h"

int
mountinfo_mount_id (int fd, uint64_t *id)
{
  struct statx stx;
  if (statx (fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
    return -1;
  if (!(stx.stx_mask & STATX_MNT_ID))
    return errno = ENOSYS, -1;
  *id = stx.stx_mnt_id;
  return 0;
}

void
mountinfo_unescape (char *s)
{
  char *w = s;
  for (; *s; s++)
    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7')
      {
        *w++ = (char) ((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
        s += 3;
      }
    else
      *w++ = *s;
  *w = '\0';
}

int
mountinfo_read (struct mountinfo_entry **out, size_t *n, asbx_err_t *err)
{
  cleanup_fclose FILE *f = fopen ("/proc/self/mountinfo", "re");
  cleanup_free char *line = NULL;
  size_t cap = 0;

  *out = NULL;
  *n = 0;
  if (!f)
    return asbx_error (err, errno, "read /proc/self/mountinfo");
  while (getline (&line, &cap, f) > 0)
    {
      /* ID PARENT MAJ:MIN ROOT POINT ...: the escapes keep blanks out of every field */
      char *save = NULL, *fld[5];
      unsigned long long id;
      unsigned maj, min;
      size_t k = 0;
      for (char *t = strtok_r (line, " \n", &save); t && k < 5; t = strtok_r (NULL, " \n", &save))
        fld[k++] = t;
      if (k < 5 || sscanf (fld[0], "%llu", &id) != 1 || sscanf (fld[2], "%u:%u", &maj, &min) != 2)
        continue;
      mountinfo_unescape (fld[3]);
      mountinfo_unescape (fld[4]);
      *out = xrealloc (*out, (*n + 1) * sizeof (**out));
      (*out)[(*n)++] = (struct mountinfo_entry){
        .id = id, .maj = maj, .min = min, .root = xstrdup (fld[3]), .point = xstrdup (fld[4])
      };
    }
  return 0;
}

void
mountinfo_free (struct mountinfo_entry *m, size_t n)
{
  for (size_t i = 0; m && i < n; i++)
    {
      free (m[i].root);
      free (m[i].point);
    }
  free (m);
}

const struct mountinfo_entry *
mountinfo_find (const struct mountinfo_entry *mi, size_t n, uint64_t id)
{
  for (size_t i = 0; i < n; i++)
    if (mi[i].id == id)
      return &mi[i];
  return NULL;
}

/* path is dir or below it */
static bool
within (const char *dir, const char *path)
{
  size_t n = strcmp (dir, "/") == 0 ? 0 : strlen (dir);
  return strncmp (path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* base + the part of path below dir (within (dir, path)); heap */
static char *
rebase (const char *base, const char *dir, const char *path)
{
  const char *rest = path + (strcmp (dir, "/") == 0 ? 0 : strlen (dir));
  if (*rest == '\0')
    return xstrdup (base);
  return xasprintf ("%s%s", strcmp (base, "/") == 0 ? "" : base, rest);
}

char *
mountinfo_place (const struct mountinfo_entry *own, const char *path)
{
  return within (own->point, path) ? rebase (own->root, own->point, path) : NULL;
}

size_t
mountinfo_views (const struct mountinfo_entry *mi, size_t n, const struct mountinfo_entry *own, const char *place,
                 struct mountinfo_view **out)
{
  size_t k = 0;
  *out = NULL;
  for (size_t i = 0; i < n; i++)
    {
      const struct mountinfo_entry *e = &mi[i];
      struct mountinfo_view v = { .mount = e };
      if (e == own || e->maj != own->maj || e->min != own->min)
        continue;
      if (within (e->root, place))
        {
          v.whole = true;
          v.at = rebase (e->point, e->root, place);
        }
      else if (within (place, e->root))
        {
          v.sub = e->root + (strcmp (place, "/") == 0 ? 1 : strlen (place) + 1);
          v.at = xstrdup (e->point);
        }
      else
        continue;
      *out = xrealloc (*out, (k + 1) * sizeof (**out));
      (*out)[k++] = v;
    }
  return k;
}

void
mountinfo_views_free (struct mountinfo_view *v, size_t n)
{
  for (size_t i = 0; v && i < n; i++)
    free (v[i].at);
  free (v);
}
