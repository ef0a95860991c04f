/* policy_carve_alias.c - where else the container's tree shows a denied path (see the header).
 * Why: the carve (policy_carve.c) takes read rights away along a denied path's ancestors, but
 * Landlock walks the ancestors of the name used to open a file; through a bind mount that shows
 * the same directory elsewhere the walk meets other ancestors (/srv, /) that keep full read
 * rights, so a credential created or replaced after start was readable at the alias (outside
 * retest of 2026-12-01, 8 setups in quick and OCI mode). Each alias is carved like the path. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/policy_carve_alias.h"
#include "runtime/policy_noexec.h"

static bool
same_at (int rootfd, const char *at, const struct stat *want)
{
  cleanup_close int fd = ps_openat2 (rootfd, at, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                     RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  struct stat st;
  return fd >= 0 && fstat (fd, &st) == 0 && st.st_dev == want->st_dev && st.st_ino == want->st_ino;
}

/* a + b, where b is "" or starts with '/' ("/" + "/x" is "/x") */
static char *
join (const char *a, const char *b)
{
  if (!*b)
    return xstrdup (a);
  return xasprintf ("%s%s", strcmp (a, "/") ? a : "", b);
}

char **
policy_carve_aliases (int rootfd, const struct mountinfo_entry *mi, size_t nmi, const char *path, size_t *n)
{
  cleanup_close int fd = ps_openat2 (rootfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                     RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  const struct mountinfo_entry *own = NULL;
  cleanup_free char *place = NULL;
  char **out = NULL;
  struct stat want;
  uint64_t id;

  *n = 0;
  if (fd < 0 || fstat (fd, &want) < 0 || mountinfo_mount_id (fd, &id) < 0)
    return NULL;
  for (size_t i = 0; i < nmi; i++)
    if (mi[i].id == id)
      own = &mi[i];
  if (!own || !policy_path_within (own->point, path))
    return NULL;
  place = join (own->root, path + (strcmp (own->point, "/") ? strlen (own->point) : 0));
  for (size_t i = 0; i < nmi; i++)
    {
      const struct mountinfo_entry *e = &mi[i];
      if (e == own || e->maj != own->maj || e->min != own->min || !policy_path_within (e->root, place))
        continue;
      char *at = join (e->point, place + (strcmp (e->root, "/") ? strlen (e->root) : 0));
      bool dup = strcmp (at, path) == 0;
      for (size_t k = 0; k < *n && !dup; k++)
        dup = strcmp (out[k], at) == 0;
      if (dup || !same_at (rootfd, at, &want))
        {
          free (at);
          continue;
        }
      out = xrealloc (out, (*n + 1) * sizeof (*out));
      out[(*n)++] = at;
    }
  return out;
}
