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

static bool
same_at (int rootfd, const char *at, const struct stat *want)
{
  cleanup_close int fd = ps_openat2 (rootfd, at, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                     RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  struct stat st;
  return fd >= 0 && fstat (fd, &st) == 0 && st.st_dev == want->st_dev && st.st_ino == want->st_ino;
}

char **
policy_carve_aliases (int rootfd, const struct mountinfo_entry *mi, size_t nmi, const char *path, size_t *n)
{
  cleanup_close int fd = ps_openat2 (rootfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                     RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  const struct mountinfo_entry *own;
  struct mountinfo_view *v = NULL;
  cleanup_free char *place = NULL;
  char **out = NULL;
  struct stat want;
  size_t nv;
  uint64_t id;

  *n = 0;
  if (fd < 0 || fstat (fd, &want) < 0 || mountinfo_mount_id (fd, &id) < 0)
    return NULL;
  own = mountinfo_find (mi, nmi, id);
  place = own ? mountinfo_place (own, path) : NULL;
  if (!place)
    return NULL;
  nv = mountinfo_views (mi, nmi, own, place, &v);
  for (size_t i = 0; i < nv; i++)
    {
      bool dup = !v[i].whole || strcmp (v[i].at, path) == 0;
      for (size_t k = 0; k < *n && !dup; k++)
        dup = strcmp (out[k], v[i].at) == 0;
      if (dup || !same_at (rootfd, v[i].at, &want))
        continue;
      out = xrealloc (out, (*n + 1) * sizeof (*out));
      out[(*n)++] = xstrdup (v[i].at);
    }
  mountinfo_views_free (v, nv);
  return out;
}
