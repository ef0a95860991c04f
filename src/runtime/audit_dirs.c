/* audit_dirs.c - the registry of audit directories in use (see the header).
 * Threat model: the agent never reaches a state root (hidden in every container); the caller is
 * who registers. The file is appended under flock(2), so concurrent creates do not interleave
 * lines; a reader that races a writer sees whole lines or misses the newest (it then hides the
 * others, as before the registry). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/policy.h"
#include "runtime/audit_dirs.h"
#include "runtime/rootless.h"
#include "runtime/rootless_oci.h"

#define REGISTRY "@audit-dirs" /* "@": never a container id (runtime/state.h) */

static void
push_unique (char ***v, size_t *n, const char *s)
{
  for (size_t i = 0; i < *n; i++)
    if (strcmp ((*v)[i], s) == 0)
      return;
  *v = xrealloc (*v, (*n + 2) * sizeof (**v));
  (*v)[(*n)++] = xstrdup (s);
  (*v)[*n] = NULL;
}

/* entry names, as it is now, a directory of `owner`: no symlink in its path (a stale entry in a
 * world-writable parent replaced by a link to /usr/lib had made every later sandbox hide it:
 * outside tester), and not someone else's directory made there since. The lstat comes first:
 * most entries (every user's HOME/.local/state/agentsbx) do not exist, and realpath(3) costs a
 * readlink per component (1,262 readlink calls per sandbox on a host with 51 registry entries) */
static bool
entry_owned (const char *entry, uid_t owner)
{
  char real[PATH_MAX];
  struct stat st;
  return entry[0] == '/' && lstat (entry, &st) == 0 && S_ISDIR (st.st_mode) && st.st_uid == owner
         && realpath (entry, real) != NULL && strcmp (real, entry) == 0;
}

/* Each entry is a mount in every later container. A registry of the caller's own state roots
 * keeps its newest REGISTRY_MAX entries; what root reads of users' registries is capped at
 * USER_REGISTRY_MAX a file and USERS_MAX in all (a user's 100,500-line registry, then 32 files
 * of 64, made root's sandboxes slow or fail at ENOSPC from move_mount: outside retests). */
#define REGISTRY_MAX 1024
#define USER_REGISTRY_MAX 16
#define USERS_MAX 256

/* the lines of <root>/@audit-dirs that name a directory of the file's owner (at most max of
 * them), appended to *v; the count taken is returned. A file writable by group or others, or
 * not a regular file, is ignored. */
static size_t
read_registry (const char *root, char ***v, size_t *n, size_t max)
{
  size_t taken = 0;
  cleanup_free char *path = xasprintf ("%s/" REGISTRY, root);
  int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_free char *line = NULL;
  size_t cap = 0;
  struct stat st;
  FILE *f;

  if (fd < 0)
    return 0;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || (st.st_mode & (S_IWGRP | S_IWOTH)) || !(f = fdopen (fd, "re")))
    {
      close (fd);
      return 0;
    }
  while (getline (&line, &cap, f) > 0 && taken < max)
    {
      line[strcspn (line, "\n")] = '\0';
      if (entry_owned (line, st.st_uid))
        push_unique (v, n, line), taken++;
    }
  (void) fclose (f); /* read-only: nothing to flush */
  return taken;
}

/* Host root only: every user's audit logs - the default one (HOME/.local/state/agentsbx, a
 * directory of that user) and what each user's own state roots registered - since root's
 * sandboxes keep CAP_DAC_OVERRIDE and read a user's 0700 directories (outside tester). */
/* The users' default audit directories, from one walk of the user database per process: a
 * sandbox lists the audit directories twice (its workspace checks, then create), and the walk
 * (getpwent(3) through NSS: nsswitch.conf, libnss_systemd's userdb queries) is the costly part.
 * Who owns each directory is still checked at every call (entry_owned). */
struct user_home
{
  uid_t uid;
  char *dir; /* HOME/.local/state/agentsbx */
};

static const struct user_home *
user_homes (size_t *len)
{
  static struct user_home *homes;
  static size_t n, cap;
  static bool walked;
  struct passwd *pw;

  if (!walked)
    {
      setpwent ();
      while ((pw = getpwent ()) != NULL)
        if (pw->pw_uid != 0 && pw->pw_dir && pw->pw_dir[0] == '/')
          {
            if (n == cap)
              homes = xrealloc (homes, (cap = cap ? 2 * cap : 32) * sizeof *homes);
            homes[n].uid = pw->pw_uid;
            homes[n++].dir = xasprintf ("%s/.local/state/agentsbx", strcmp (pw->pw_dir, "/") ? pw->pw_dir : "");
          }
      endpwent ();
      walked = true;
    }
  *len = n;
  return homes;
}

static void
add_users (char ***v, size_t *n)
{
  static const char *const roots[] = { "/run/user", "/tmp" };
  size_t nh;
  const struct user_home *homes = user_homes (&nh);

  for (size_t i = 0; i < nh; i++)
    if (entry_owned (homes[i].dir, homes[i].uid))
      push_unique (v, n, homes[i].dir);
  size_t total = 0;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (roots); i++)
    {
      cleanup_closedir DIR *d = opendir (roots[i]);
      struct dirent *de;
      while (d && (de = readdir (d)) != NULL && total < USERS_MAX)
        {
          /* only a user's own state root: /run/user/UID/agentsbx or /tmp/agentsbx-UID, the
           * directory owned by that UID (no one else can make more of them) */
          const char *num = i == 0 ? de->d_name : strncmp (de->d_name, "agentsbx-", 9) == 0 ? de->d_name + 9 : NULL;
          char *end = NULL;
          unsigned long uid = num && *num >= '0' && *num <= '9' ? strtoul (num, &end, 10) : 0;
          if (!end || *end || uid == 0)
            continue;
          cleanup_free char *sr = i == 0 ? xasprintf ("%s/%s/agentsbx", roots[i], de->d_name)
                                         : xasprintf ("%s/%s", roots[i], de->d_name);
          struct stat st;
          if (lstat (sr, &st) < 0 || !S_ISDIR (st.st_mode) || st.st_uid != (uid_t) uid)
            continue;
          total += read_registry (sr, v, n,
                                  USER_REGISTRY_MAX < USERS_MAX - total ? USER_REGISTRY_MAX : USERS_MAX - total);
        }
    }
}

char **
audit_dirs_list (const char *state_root)
{
  char **v = xmalloc0 (sizeof (*v));
  size_t n = 0;

  if (state_root)
    read_registry (state_root, &v, &n, REGISTRY_MAX);
  read_registry (POLICY_DEFAULT_STATE_ROOT, &v, &n, REGISTRY_MAX);
  if (!rootless_caller ())
    add_users (&v, &n);
  return v;
}

void
audit_dirs_free (char **v)
{
  for (size_t i = 0; v && v[i]; i++)
    free (v[i]);
  free (v);
}

/* <root>/@audit-dirs gets dir, and loses the entries whose directory is gone (so the file does
 * not grow with every short-lived --audit-dir: each create reads it), under its flock */
static int
append_once (const char *root, const char *dir, asbx_err_t *err)
{
  cleanup_free char *path = xasprintf ("%s/" REGISTRY, root);
  cleanup_free char *have = NULL, *keep = xstrdup ("");
  cleanup_close int fd = open (path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool present = false, pruned = false;

  if (fd < 0)
    return asbx_error (err, errno, "audit: register `%s` in `%s`", dir, path);
  if (flock (fd, LOCK_EX) < 0)
    return asbx_error (err, errno, "audit: lock `%s`", path);
  if (read_all_fd (fd, 1 << 20, &have, NULL) < 0)
    return asbx_error (err, errno, "audit: read `%s`", path);
  for (char *save = NULL, *l = strtok_r (have, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      struct stat st;
      if (strcmp (l, dir) == 0)
        present = true;
      else if (l[0] != '/' || stat (l, &st) < 0)
        {
          pruned = true;
          continue;
        }
      char *k = xasprintf ("%s%s\n", keep, l);
      free (keep);
      keep = k;
    }
  if (present && !pruned)
    return 0;
  if (!present)
    {
      char *k = xasprintf ("%s%s\n", keep, dir);
      free (keep);
      keep = k;
    }
  /* the newest REGISTRY_MAX entries, as read_registry takes at most that many */
  size_t lines = 0;
  for (const char *p = keep; *p; p++)
    lines += *p == '\n';
  char *from = keep;
  while (lines > REGISTRY_MAX && (from = strchr (from, '\n')) != NULL)
    from++, lines--;
  if (from != keep)
    memmove (keep, from, strlen (from) + 1);
  /* O_APPEND: after the truncate every write lands at the (new) end */
  if (ftruncate (fd, 0) < 0 || write_all (fd, keep, strlen (keep)) < 0)
    return asbx_error (err, errno, "audit: write `%s`", path);
  return 0;
}

/* the uid an unmapped owner shows as (proc(5) /proc/sys/kernel/overflowuid, 65534 by default) */
static uid_t
overflow_uid (void)
{
  char buf[32];
  cleanup_close int fd = open ("/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read (fd, buf, sizeof buf - 1);
  if (n <= 0)
    return 65534;
  buf[n] = '\0';
  return (uid_t) strtoul (buf, NULL, 10);
}

int
audit_dir_check_path (const char *dir, asbx_err_t *err)
{
  char real[PATH_MAX], probe[PATH_MAX];
  const char *use = realpath (dir, real) ? real : dir;
  size_t len = strlen (use);

  if (use[0] != '/' || len >= sizeof probe)
    return asbx_error (err, EINVAL, "audit directory `%s`: expected an absolute path", dir);
  /* every existing directory from / down to it */
  for (size_t i = 1; i <= len; i++)
    {
      struct stat st;
      if (use[i] != '/' && use[i] != '\0')
        continue;
      memcpy (probe, use, i);
      probe[i] = '\0';
      if (lstat (probe, &st) < 0)
        break; /* not made yet: the monitor makes the rest, 0700 and ours */
      bool others = (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX);
      /* in a user namespace (rootless Podman) host root's directories show as the overflow uid */
      bool unmapped_root = rootless_in_userns () && st.st_uid == overflow_uid ();
      if (S_ISLNK (st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid () && !unmapped_root) || others)
        return asbx_error (err, 0,
                           "audit directory `%s`: `%s` is %s: another user could rename the audit directory "
                           "away and show its logs to a later sandbox; use a directory whose parents only root "
                           "or you can change",
                           dir, probe,
                           S_ISLNK (st.st_mode) ? "a symlink"
                           : others             ? "writable by group or others (and not sticky)"
                                                : "owned by another user");
    }
  return 0;
}

int
audit_dirs_register (const char *state_root, const char *audit_dir, const char *default_dir, asbx_err_t *err)
{
  char real[PATH_MAX], dreal[PATH_MAX];
  const char *root = state_root ? state_root : POLICY_DEFAULT_STATE_ROOT;

  if (strchr (audit_dir, '\n'))
    return asbx_error (err, EINVAL, "audit: directory `%s`: a newline in the path", audit_dir);
  if (audit_dir[0] != '/')
    return asbx_error (err, EINVAL, "audit: directory `%s`: expected an absolute path", audit_dir);
  /* not made yet (the monitor makes it): the path as given, which is what it will be */
  if (realpath (audit_dir, real) == NULL)
    snprintf (real, sizeof real, "%s", audit_dir);
  if (default_dir && realpath (default_dir, dreal) == NULL)
    snprintf (dreal, sizeof dreal, "%s", default_dir);
  if (default_dir && strcmp (real, dreal) == 0)
    return 0;
  if (append_once (root, real, err) < 0)
    return -1;
  if (!rootless_caller () && strcmp (root, POLICY_DEFAULT_STATE_ROOT) != 0)
    {
      struct stat st;
      if (stat (POLICY_DEFAULT_STATE_ROOT, &st) == 0 && S_ISDIR (st.st_mode))
        return append_once (POLICY_DEFAULT_STATE_ROOT, real, err);
    }
  return 0;
}
