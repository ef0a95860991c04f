/* userdirs.c - the state root and audit directory of a non-root caller (issue 17).
 *
 * A non-root caller cannot write /run/agentsbx or /var/log/agentsbx, and must not share them with
 * other users anyway: its sandboxes live in a directory only it owns. The fallback under /tmp is
 * a name another local user can take first (a directory it owns, a symlink to one, a directory
 * of ours made group-writable before we came): the directory is opened with O_NOFOLLOW and its
 * owner and mode checked on the fd, and anything but ours-and-0700 is refused, never repaired
 * (chmod/chown of a foreign directory would not make its prior contents ours). /tmp is sticky,
 * so once the directory is ours nobody else can rename or replace it. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/rootless.h"
#include "runtime/userdirs.h"

/* path must be a directory owned by uid, mode 0700 (no group/other bits): made if missing */
static int
own_private_dir (const char *path, const char *what, asbx_err_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;
  uid_t uid = geteuid ();

  if (mkdir (path, 0700) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "create %s `%s`", what, path);
  fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (
        err, errno, "open %s `%s`%s", what, path,
        errno == ELOOP || errno == ENOTDIR ? ": not a directory (a symlink or file made by someone else?)" : "");
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "stat %s `%s`", what, path);
  if (st.st_uid != uid || (st.st_mode & 077))
    return asbx_error (err, 0,
                       "%s `%s` is owned by uid %u with mode %04o: expected a directory of uid %u with mode 0700 "
                       "(another user may have created it first); remove it, or set XDG_RUNTIME_DIR to a "
                       "private directory of yours, or pass --root DIR",
                       what, path, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777), (unsigned) uid);
  return 0;
}

bool
asbx_uses_user_dirs (void)
{
  const char *xdg = getenv ("XDG_RUNTIME_DIR");
  return geteuid () != 0 || (rootless_caller () && xdg && *xdg);
}

char *
asbx_user_state_root (asbx_err_t *err)
{
  const char *xdg = getenv ("XDG_RUNTIME_DIR");
  cleanup_free char *dir = NULL;

  if (xdg && *xdg)
    {
      if (xdg[0] != '/')
        {
          asbx_error (err, 0, "XDG_RUNTIME_DIR `%s`: expected an absolute path", xdg);
          return NULL;
        }
      dir = xasprintf ("%s/agentsbx", xdg);
    }
  else
    dir = xasprintf ("/tmp/agentsbx-%u", (unsigned) geteuid ());
  if (own_private_dir (
          dir, xdg && *xdg ? "state root ($XDG_RUNTIME_DIR/agentsbx)" : "state root (XDG_RUNTIME_DIR unset)", err)
      < 0)
    return NULL;
  return steal_ptr (&dir);
}

char *
asbx_user_audit_dir (asbx_err_t *err)
{
  const char *xdg = getenv ("XDG_STATE_HOME"), *home = getenv ("HOME");
  struct passwd *pw;

  if (xdg && xdg[0] == '/')
    return xasprintf ("%s/agentsbx", xdg);
  if (!home || home[0] != '/')
    {
      pw = getpwuid (geteuid ());
      home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
  if (!home)
    {
      asbx_error (err, 0,
                  "audit directory: neither XDG_STATE_HOME nor HOME is set, and uid %u has no home in passwd; "
                  "pass --audit-dir DIR",
                  (unsigned) geteuid ());
      return NULL;
    }
  return xasprintf ("%s/.local/state/agentsbx", home);
}
