/* rootless_cgroup.c - a non-root caller's container cgroup, below an admin-delegated subtree.
 *
 * Mechanism: cgroups(7) "Cgroups version 1 ... delegation" and cgroup-v2.rst "Delegation": an
 * unprivileged process may create cgroups below a directory it owns, write the limit files of
 * the cgroups it created (the kernel gives their files to the creator's fsuid), and move its own
 * processes in by writing cgroup.procs (v1: write access to the target's cgroup.procs and the
 * same uid as the moved task; v2: write access to cgroup.procs of the common ancestor of the
 * source and target cgroups). The admin makes the directory in each hierarchy it delegates and
 * chowns it to the user (contrib/delegate-cgroup.sh); the host config names it.
 * Threat model: the host config is the admin's; the directory must be the caller's own and not
 * writable by others (a world-writable parent would let another user plant a cgroup, or a
 * symlink-free but foreign subtree, where our limits are written). Every open is the fd walk of
 * cgroup_open_in_hier (O_NOFOLLOW per component from the checked mount fd). A hierarchy where
 * the directory does not exist is not delegated: the container stays in the caller's cgroup
 * there, and a limit needing that controller is refused by rootless_check.
 * Without one (no host config key, or the directory exists in no hierarchy), a systemd user
 * manager the caller reaches gives it a transient scope with Delegate=yes instead
 * (linux/cgroup_systemd.h cgroup_systemd_user_prepare). */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "linux/cgroup_internal.h"
#include "linux/cgroup_systemd.h"
#include "runtime/rootless_cgroup.h"

#define FIELD "host config rootless.cgroupParent"

/* %u, %U and %% expanded; NULL with *err for another % or an unknown user */
static char *
expand (const char *tmpl, asbx_err_t *err)
{
  struct passwd pw, *res = NULL;
  char pwbuf[4096];
  size_t cap = strlen (tmpl) * 8 + 64, n = 0;
  cleanup_free char *out = xmalloc0 (cap);

  for (const char *p = tmpl; *p; p++)
    {
      char num[24];
      const char *add = NULL;
      if (*p != '%')
        {
          out[n++] = *p;
          continue;
        }
      if (p[1] == '%')
        add = "%";
      else if (p[1] == 'U')
        {
          snprintf (num, sizeof num, "%u", (unsigned) geteuid ());
          add = num;
        }
      else if (p[1] == 'u')
        {
          if (getpwuid_r (geteuid (), &pw, pwbuf, sizeof pwbuf, &res) != 0 || res == NULL)
            {
              asbx_error (err, EINVAL, "%s `%s`: %%u: uid %u has no passwd entry", FIELD, tmpl, (unsigned) geteuid ());
              return NULL;
            }
          add = pw.pw_name;
        }
      else
        {
          asbx_error (err, EINVAL, "%s `%s`: unknown specifier `%%%c` (expected %%u, %%U or %%%%)", FIELD, tmpl,
                      p[1] ? p[1] : ' ');
          return NULL;
        }
      if (n + strlen (add) + 1 >= cap)
        {
          asbx_error (err, EINVAL, "%s `%s`: too long", FIELD, tmpl);
          return NULL;
        }
      memcpy (out + n, add, strlen (add) + 1);
      n += strlen (add);
      p++;
    }
  return steal_ptr (&out);
}

/* an absolute path of plain components: no "..", "." or empty ones, no ';' ':' or control
 * characters (they would break the per-hierarchy list), not the root */
static int
check_path (const char *p, const char *what, asbx_err_t *err)
{
  if (p[0] != '/' || p[1] == '\0')
    return asbx_error (err, EINVAL, "%s `%s`: expected an absolute path below the hierarchy root", what, p);
  for (const char *c = p; *c; c++)
    if ((unsigned char) *c < ' ' || *c == 0x7f || *c == ';' || *c == ':')
      return asbx_error (err, EINVAL, "%s `%s`: contains a control character, ';' or ':'", what, p);
  for (const char *c = p; c; c = strchr (c + 1, '/'))
    if (c[1] == '/' || c[1] == '\0' || (c[1] == '.' && (c[2] == '/' || c[2] == '\0'))
        || (c[1] == '.' && c[2] == '.' && (c[3] == '/' || c[3] == '\0')))
      return asbx_error (err, EINVAL, "%s `%s`: empty, \".\" or \"..\" component", what, p);
  return 0;
}

/* The delegated directory in hierarchy h: 1 when it is the caller's, 0 when it does not exist
 * there, -1 with *err when it exists but is not delegated to the caller */
static int
delegated_in (const struct cgroup_hier *h, const char *parent, asbx_err_t *err)
{
  static const char *const v2_files[] = { "cgroup.procs", "cgroup.subtree_control" };
  cleanup_close int fd = -1;
  asbx_err_t e = NULL;
  struct stat st;
  uid_t me = geteuid ();
  const char *mnt = h->mountpoint;

  if (cgroup_open_in_hier (h, parent, false, NULL, &fd, &e) < 0)
    {
      if (e->errnum == ENOENT)
        {
          asbx_error_free (&e);
          return 0;
        }
      asbx_error_move (err, &e);
      return asbx_error_wrap (err, "%s", FIELD);
    }
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "%s: stat %s%s", FIELD, mnt, parent);
  if (st.st_uid != me)
    return asbx_error (err, EPERM,
                       "%s: %s%s is owned by uid %u, not by you (uid %u): not delegated to you (the admin runs "
                       "contrib/delegate-cgroup.sh USER, or chown it)",
                       FIELD, mnt, parent, (unsigned) st.st_uid, (unsigned) me);
  if (st.st_mode & S_IWOTH)
    return asbx_error (err, EPERM, "%s: %s%s is writable by every user (mode %04o): refused (chmod o-w it)", FIELD, mnt,
                       parent, (unsigned) (st.st_mode & 07777));
  for (size_t i = 0; h->version == 2 && i < ASBX_ARRAY_SIZE (v2_files); i++)
    if (fstatat (fd, v2_files[i], &st, 0) < 0 || st.st_uid != me)
      return asbx_error (err, EPERM, "%s: %s%s/%s is not yours (uid %u): not delegated to you (chown it too)", FIELD,
                         mnt, parent, v2_files[i], (unsigned) me);
  return 1;
}

/* Nothing admin-delegated: the caller's systemd user manager, on a pure cgroup v2 host (a user
 * manager is delegated only cgroup2 controllers: Debian's user@.service has Delegate=pids memory
 * cpu; on v1/hybrid hosts it cannot hold v1 limits). NULL, *err unset, when there is none. */
static char *
user_manager (const char *id, struct cgroup_systemd_unit *unit, asbx_err_t *err)
{
  const struct cgroup_layout_info *info;
  asbx_err_t e = NULL;

  if (access ("/run/systemd/system", F_OK) != 0 || (info = cgroup_layout_get (&e)) == NULL
      || info->layout != CGROUP_LAYOUT_UNIFIED)
    {
      asbx_error_free (&e);
      return NULL;
    }
  return cgroup_systemd_user_prepare (id, unit, err);
}

char *
rootless_cgroup_path (const char *parent_tmpl, const char *cgroups_path, const char *id,
                      struct cgroup_systemd_unit *unit, asbx_err_t *err)
{
  cleanup_free char *parent = NULL, *leaf = NULL, *list = NULL;
  const struct cgroup_layout_info *info;

  if (parent_tmpl == NULL)
    return user_manager (id, unit, err);
  if ((parent = expand (parent_tmpl, err)) == NULL || check_path (parent, FIELD, err) < 0)
    return NULL;
  if (cgroups_path && cgroups_path[0])
    {
      leaf = cgroups_path[0] == '/' ? xstrdup (cgroups_path) : xasprintf ("/%s", cgroups_path);
      if (check_path (leaf, "linux.cgroupsPath (below the delegated cgroup)", err) < 0)
        return NULL;
    }
  else
    leaf = xasprintf ("/%s", id);
  if ((info = cgroup_layout_get (err)) == NULL)
    return NULL;
  list = xstrdup ("");
  for (size_t i = 0; i < info->n; i++)
    {
      int r = delegated_in (&info->h[i], parent, err);
      if (r < 0)
        return NULL;
      if (r == 0)
        continue;
      char *l = xasprintf ("%s%s%s:%s%s", list, list[0] ? ";" : "", info->h[i].key, parent, leaf);
      free (list);
      list = l;
    }
  return list[0] ? steal_ptr (&list) : user_manager (id, unit, err);
}

bool
rootless_cgroup_has (const char *path, const char *controller)
{
  asbx_err_t e = NULL;
  const struct cgroup_layout_info *info = path ? cgroup_layout_get (&e) : NULL;
  const struct cgroup_hier *h = info ? cgroup_ctl_hier (info, controller) : NULL;

  asbx_error_free (&e);
  return h && cgroup_path_covers (path, h);
}

void
rootless_cgroup_narrow (const char *path, struct oci_resources *r)
{
  r->devices = NULL;
  r->devices_len = 0;
  if (!rootless_cgroup_has (path, "memory"))
    r->memory = NULL;
  if (!rootless_cgroup_has (path, "pids"))
    r->has_pids = false;
  if (!rootless_cgroup_has (path, "cpu"))
    r->cpu = NULL;
}
