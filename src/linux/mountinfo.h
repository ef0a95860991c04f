/* mountinfo.h - the mount table of the calling process's mount namespace, parsed. */
#ifndef ASBX_LINUX_MOUNTINFO_H
#define ASBX_LINUX_MOUNTINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct mountinfo_entry
{
  uint64_t id;       /* field 1, the mount id statx(2) STATX_MNT_ID reports */
  unsigned maj, min; /* field 3, the filesystem's device */
  char *root;        /* field 4, the directory of the filesystem the mount shows, unescaped, heap */
  char *point;       /* field 5, where it is mounted, unescaped, heap */
};

/* Reads /proc/self/mountinfo into *out (heap array of *n entries, in the file's order; free with
 * mountinfo_free). Lines that do not parse are skipped. Returns 0, or -1 with *err (errno of
 * fopen). Source: proc_pid_mountinfo(5). */
int mountinfo_read (struct mountinfo_entry **out, size_t *n, asbx_err_t *err);

/* frees the array and its strings; NULL is fine */
void mountinfo_free (struct mountinfo_entry *m, size_t n);

/* the mount id of fd (statx(2) STATX_MNT_ID, matching mountinfo's field 1). Returns 0, or -1
 * with errno (ENOSYS when the kernel does not report it). */
int mountinfo_mount_id (int fd, uint64_t *id);

/* The entry with mount id `id`, or NULL. */
const struct mountinfo_entry *mountinfo_find (const struct mountinfo_entry *mi, size_t n, uint64_t id);

/* Where `path`, a path on the mount `own` (as mountinfo names paths: own->point is at or above
 * it), lies within its filesystem: own->root plus the part of path below own->point. Heap;
 * NULL when path is not at or below own->point. */
char *mountinfo_place (const struct mountinfo_entry *own, const char *path);

/* One other mount of the same filesystem that shows a directory's `place` (mountinfo_place) or a
 * part of it. whole: the mount's root is at or above place, so it shows place itself at `at`
 * (the mount's point plus the part of place below its root); else the mount's root lies below
 * place and it shows that part, `sub` (place-relative, no leading '/', a pointer into
 * mount->root) at `at` (a copy of mount->point). */
struct mountinfo_view
{
  const struct mountinfo_entry *mount;
  bool whole;
  char *at;        /* heap */
  const char *sub; /* !whole only */
};

/* Every mount of mi other than `own` with own's device that shows `place` or a part below it,
 * in mi's order, into *out (heap array, mountinfo_views_free). Path strings only: a caller that
 * acts on a view first checks, through an fd, that it shows the same inode (the mount table can
 * change, and a device number alone does not prove the same directory). Returns the count. */
size_t mountinfo_views (const struct mountinfo_entry *mi, size_t n, const struct mountinfo_entry *own,
                        const char *place, struct mountinfo_view **out);

/* frees the array and its strings; NULL is fine */
void mountinfo_views_free (struct mountinfo_view *v, size_t n);

/* mountinfo's octal escapes (\040 for a space) decoded in place */
void mountinfo_unescape (char *s);

#endif
