/* policy_homes.c - the home directories of a container's rootfs, for the `~/x` policy rules
 * (issue 13 §3: a credential of a service user whose home is outside /home, e.g.
 * /var/lib/postgresql/.pgpass, must be hidden as well as those under /home).
 *
 * Threat model: the rootfs (its /etc/passwd, its symlinks) is the container's. A home is only
 * ever a place to put a deny mount on, so a hostile passwd line can at most hide more; every
 * path is resolved beneath the rootfs fd and never outside it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/policy_homes.h"

struct homes
{
  struct policy_home *v;
  size_t n;
  int flags;
  struct stat *ids; /* the directory each v[i] resolved to, for dedup */
  struct stat root; /* /root's identity (st_ino 0 when missing) */
};

static bool
same_dir (const struct stat *a, const struct stat *b)
{
  return a->st_ino != 0 && a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* ASCII case folded: on a case-insensitive home (ext4 casefold, FUSE, CIFS, vfat) `.SSH` is
 * what a `~/.ssh` deny must hide, so a home holding it is one that may hold the denied name
 * (outside attack 13). On a case-sensitive one this only makes a few more lookups. */
static int
cmp_name (const void *a, const void *b)
{
  return strcasecmp (*(char *const *) a, *(char *const *) b);
}

/* the entries of the directory `fd` (O_PATH, the home as resolved) into h, sorted; on any
 * failure h->names stays NULL (every lookup is then made) */
static void
read_names (struct policy_home *h, int fd)
{
  cleanup_close int dfd = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_closedir DIR *d = dfd >= 0 ? fdopendir (dfd) : NULL;
  struct dirent *de;
  char **v = NULL;
  size_t n = 0;

  if (!d)
    return;
  dfd = -1; /* owned by d */
  while ((errno = 0, de = readdir (d)))
    {
      if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
        continue;
      if ((n & (n - 1)) == 0)
        v = xrealloc (v, (n ? 2 * n : 1) * sizeof (*v));
      v[n++] = xstrdup (de->d_name);
    }
  if (errno)
    {
      for (size_t i = 0; i < n; i++)
        free (v[i]);
      free (v);
      return;
    }
  if (n)
    qsort (v, n, sizeof (*v), cmp_name);
  h->names = v ? v : xmalloc0 (sizeof (*v)); /* read, and empty: non-NULL */
  h->n_names = n;
}

bool
policy_home_may_hold (const struct policy_home *h, const char *rel)
{
  size_t len = strcspn (rel, "/");
  if (!h->names || len == 0 || len >= NAME_MAX + 1 || (rel[0] == '.' && (len == 1 || (len == 2 && rel[1] == '.'))))
    return true;
  char name[NAME_MAX + 1];
  memcpy (name, rel, len);
  name[len] = '\0';
  const char *key = name;
  return bsearch (&key, h->names, h->n_names, sizeof (*h->names), cmp_name) != NULL;
}

/* add `path` when it resolves (in the root) to a directory not seen yet */
static void
homes_add (struct homes *h, int rootfd, const char *path, bool from_passwd)
{
  struct stat st;
  cleanup_close int fd = ps_openat2 (rootfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                                     RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd < 0 || fstat (fd, &st) < 0 || same_dir (&h->root, &st))
    return;
  for (size_t i = 0; i < h->n; i++)
    if (same_dir (&h->ids[i], &st))
      return;
  h->v = xrealloc (h->v, (h->n + 1) * sizeof (*h->v));
  h->ids = xrealloc (h->ids, (h->n + 1) * sizeof (*h->ids));
  h->v[h->n] = (struct policy_home){ .path = xstrdup (path), .from_passwd = from_passwd };
  if (h->flags & POLICY_HOMES_ENTRIES)
    read_names (&h->v[h->n], fd);
  h->ids[h->n++] = st;
}

static int
add_dir_entries (struct homes *h, int rootfd, const char *home_dir, asbx_err_t *err)
{
  cleanup_close int dfd = ps_openat2 (rootfd, home_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                                      RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  cleanup_closedir DIR *d = NULL;
  struct dirent *de;

  if (dfd < 0)
    return errno == ENOENT || errno == ENOTDIR ? 0 : asbx_error (err, errno, "open `%s`", home_dir);
  d = fdopendir (dfd);
  if (!d)
    return asbx_error (err, errno, "read `%s`", home_dir);
  dfd = -1; /* owned by d */
  while ((errno = 0, de = readdir (d)))
    {
      if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
        continue;
      cleanup_free char *path = xasprintf ("%s/%s", home_dir, de->d_name);
      homes_add (h, rootfd, path, false);
    }
  return errno ? asbx_error (err, errno, "read `%s`", home_dir) : 0;
}

/* the 6th field of each passwd(5) line; lines that are not passwd entries are ignored */
static int
add_passwd (struct homes *h, int rootfd, asbx_err_t *err)
{
  /* O_NONBLOCK: a FIFO planted as /etc/passwd must not hang create (it is not read) */
  cleanup_close int fd = ps_openat2 (rootfd, "/etc/passwd", O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0,
                                     RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  cleanup_free char *text = NULL;
  size_t len = 0;
  struct stat st;

  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR ? 0 : asbx_error (err, errno, "open /etc/passwd in the rootfs");
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "stat /etc/passwd in the rootfs");
  if (!S_ISREG (st.st_mode))
    return 0; /* no passwd database: no homes from it */
  if (read_all_fd (fd, 16 << 20, &text, &len) < 0)
    return asbx_error (err, errno, "read /etc/passwd in the rootfs");
  for (char *line = text, *next; line && *line; line = next)
    {
      char *field = line;
      next = strchr (line, '\n');
      if (next)
        *next++ = '\0';
      for (int i = 0; i < 5 && field; i++)
        field = strchr (field, ':') ? strchr (field, ':') + 1 : NULL;
      if (!field || field[0] != '/')
        continue;
      char *end = strchr (field, ':');
      if (end)
        *end = '\0';
      homes_add (h, rootfd, field, true);
    }
  return 0;
}

int
policy_homes_list (int rootfd, const char *home_dir, int flags, struct policy_home **out, asbx_err_t *err)
{
  struct homes h = { .flags = flags };
  cleanup_close int root = ps_openat2 (rootfd, "/root", O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                                       RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (root < 0 || fstat (root, &h.root) < 0)
    h.root.st_ino = 0;
  if (add_dir_entries (&h, rootfd, home_dir, err) < 0 || add_passwd (&h, rootfd, err) < 0)
    {
      policy_homes_free (h.v, h.n);
      free (h.ids);
      return -1;
    }
  free (h.ids);
  *out = h.v;
  return (int) h.n;
}

void
policy_homes_free (struct policy_home *v, size_t n)
{
  for (size_t i = 0; v && i < n; i++)
    {
      for (size_t j = 0; j < v[i].n_names; j++)
        free (v[i].names[j]);
      free (v[i].names);
      free (v[i].path);
    }
  free (v);
}
