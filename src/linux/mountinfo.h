/* mountinfo.h - the mount table of the calling process's mount namespace, parsed. */
#ifndef ASBX_LINUX_MOUNTINFO_H
#define ASBX_LINUX_MOUNTINFO_H

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

/* mountinfo's octal escapes (\040 for a space) decoded in place */
void mountinfo_unescape (char *s);

#endif
