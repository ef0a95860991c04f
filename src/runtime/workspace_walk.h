/* workspace_walk.h - the changes of a review workspace (issue 18): an overlayfs upper layer
 * compared with its lower layer, or two uppers of the same lower (snapshots) compared with each
 * other, as a list of changes (added, modified, mode, deleted, renamed).
 *
 * A "view" is what the overlay shows: the upper layer on top of the lower one. In the upper,
 * a whiteout (a character device 0:0, or a zero-size regular file carrying the xattr
 * `<ns>.overlay.whiteout`) hides the lower name, and a directory with `<ns>.overlay.opaque` = "y"
 * hides the whole lower directory below it. Source: the kernel's
 * Documentation/filesystems/overlayfs.rst ("whiteouts and opaque directories", "userxattr").
 *
 * Everything is read through directory fds, one component at a time with O_NOFOLLOW
 * (fstatat AT_SYMLINK_NOFOLLOW, openat O_NOFOLLOW), so no symlink in either tree is ever
 * followed and the walk never leaves the trees it was given, whatever the agent put there.
 */
#ifndef ASBX_RUNTIME_WORKSPACE_WALK_H
#define ASBX_RUNTIME_WORKSPACE_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

enum ws_op
{
  WS_ADDED,    /* absent in the old view, present in the new */
  WS_MODIFIED, /* present in both, content or file type differs */
  WS_MODE,     /* present in both, same content, only the permission bits differ */
  WS_DELETED,  /* present in the old view, absent in the new */
  WS_RENAMED,  /* a deleted regular file's content equals an added one's: `old_path` -> `path` */
};

struct ws_change
{
  enum ws_op op;
  char *path;     /* relative to the workspace root, no leading '/', components joined by '/' */
  char *old_path; /* WS_RENAMED: the deleted path; else NULL */
  /* the new side (WS_DELETED: the old side's, so a deletion still says what it removes) */
  mode_t mode;     /* st_mode: type and permission bits */
  uint64_t size;   /* st_size (regular files, symlinks: the target's length) */
  char sha256[65]; /* regular file: content; symlink: the target string; else "" */
  char *target;    /* symlink target, NULL for other types */
  nlink_t nlink;   /* st_nlink in the new side's layer (apply refuses > 1 for non-directories) */
  dev_t rdev;      /* device nodes */
  bool new_up;     /* the new side's entry is in its upper (else in the lower) */
  bool old_up;     /* the old side's entry is in its upper */
  bool opaque;     /* a directory of the upper marked opaque */
  bool in_opaque;  /* below an opaque directory of the new side's upper */
  bool origin;     /* the upper entry carries <ns>.overlay.origin: it was copied up from a lower
                      entry (so "added" means the lower entry vanished while the run went on) */
  /* the old side, when it has the path (WS_MODIFIED, WS_MODE, WS_DELETED, WS_RENAMED) */
  bool has_old;
  mode_t old_mode;
  uint64_t old_size;
  char old_sha256[65];
  int64_t old_ctime_ns; /* st_ctim of the old side's entry (the host's, when old = lower) */
  dev_t old_dev;
  ino_t old_ino;
  /* WS_DELETED entries that are the source of a rename stay in the list at their place (the
   * order is the order of application, see ws_walk) with `renamed` set; printers skip them */
  bool renamed;
};

struct ws_changes
{
  struct ws_change *v;
  size_t n, cap;
};

/* One side of the comparison: `upper` (an overlay upperdir, or -1 for "no upper": the bare
 * lower) over `lower` (the lower dir, or -1 for "nothing"). The fds are borrowed. */
struct ws_view
{
  int upper;
  int lower;
};

/* Compare view `old` with view `new` (both over the same lower) and append the changes to *out.
 * `xattr_ns` is "trusted" or "user" (meta.json "xattr"): which namespace the overlay's whiteout,
 * opaque and origin xattrs are in.
 * Order: names sorted bytewise within a directory, parents before their children for
 * additions, children before their parents for deletions, a deletion before an addition of the
 * same name (a type change directory <-> non-directory is a deletion and an addition): applying
 * the list in order turns the old view into the new one. Renames are found last (ws_find_renames).
 * Returns 0, or -1 with *err naming the relative path and the failing call (errno of openat,
 * fstatat, read, readlinkat, fgetxattr). *out keeps what was found so far (free it with
 * ws_changes_free). */
int ws_walk (const struct ws_view *old, const struct ws_view *new, const char *xattr_ns, struct ws_changes *out,
             asbx_err_t *err);

/* Pair deleted and added regular files with equal sha256 (first come, one to one) into
 * WS_RENAMED entries (at the added entry's place; the deletion is kept and marked `renamed`). */
void ws_find_renames (struct ws_changes *c);

void ws_changes_free (struct ws_changes *c);

/* "added", "modified", "mode", "deleted", "renamed" */
const char *ws_op_name (enum ws_op op);
/* "file", "dir", "symlink", "char", "block", "fifo", "socket" for st_mode's type */
const char *ws_type_name (mode_t mode);

/* Does `path` equal `prefix` or lie below it ("a/b" is below "a", not below "a/")?
 * `prefix` is a cleaned relative path (ws_clean_rel). */
bool ws_path_under (const char *path, const char *prefix);

/* Clean a user-given workspace path into the walker's form: leading "/" and "./" dropped,
 * "//" and "/." collapsed, trailing '/' dropped. ".." anywhere is refused (NULL, errno EINVAL);
 * the empty result (the root) is "". Heap string. */
char *ws_clean_rel (const char *path);

/* sha256 of everything readable from fd (from its current offset), lowercase hex into out.
 * 0 / -1 with errno (read; ELIBACC: OpenSSL could not be loaded, see core/openssl_dl.h). */
int ws_sha256_fd (int fd, char out[65]);

#endif
