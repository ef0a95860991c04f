/* cgroup_sub.c - `exec --cgroup [CONTROLLER:]PATH`: place an exec'd process in an existing
 * sub-cgroup of the container's cgroup (runc's exec --cgroup, issue 15).
 *
 * Each spec is "PATH" (every hierarchy) or "CONTROLLERS:PATH" (the v1 hierarchy carrying those
 * controllers, e.g. "cpu,cpuacct:sub" or "memory:sub"; on cgroup v2 the controller part must
 * be empty, as runc). PATH is relative to the container's cgroup: a leading '/' is dropped, "."
 * and empty components are ignored, ".." is refused (the process never leaves the container's
 * cgroup). Hierarchies no spec names get the container's own cgroup. The sub-cgroup must exist
 * (created by whoever manages it: the engine, a hook, the container itself with a writable
 * cgroupfs); nothing is created here. Paths are walked with O_NOFOLLOW per component from the
 * container's cgroup directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/pathlex.h"
#include "core/util.h"
#include "linux/cgroup.h"
#include "linux/cgroup_internal.h"

static char *
dup_n (const char *s, size_t n)
{
  char *d = xmalloc0 (n + 1);
  memcpy (d, s, n);
  return d;
}

/* does the v1 hierarchy key ("cpu,cpuacct") carry every controller of `ctrls` ("cpu" or "cpu,cpuacct")? */
static bool
key_has (const char *key, const char *ctrls)
{
  cleanup_free char *copy = xstrdup (ctrls);
  char *save = NULL;
  for (char *c = strtok_r (copy, ",", &save); c; c = strtok_r (NULL, ",", &save))
    {
      size_t n = strlen (c);
      const char *k = key;
      bool found = false;
      while (*k && !found)
        {
          found = strncmp (k, c, n) == 0 && (k[n] == ',' || k[n] == '\0');
          k = strchr (k, ',') ? strchr (k, ',') + 1 : k + strlen (k);
        }
      if (!found)
        return false;
    }
  return true;
}

/* the sub path spec for hierarchy h (heap, "" = the container's cgroup itself) */
static int
sub_for (const struct cgroup_hier *h, char *const *specs, size_t n, char **out, asbx_err_t *err)
{
  const char *generic = NULL, *mine = NULL;
  for (size_t i = 0; i < n; i++)
    {
      const char *colon = strchr (specs[i], ':');
      if (!colon)
        generic = specs[i];
      else if (colon == specs[i])
        generic = colon + 1;
      else
        {
          cleanup_free char *ctrls = dup_n (specs[i], (size_t) (colon - specs[i]));
          if (h->version == 1 && key_has (h->key, ctrls))
            mine = colon + 1;
        }
    }
  const char *p = mine ? mine : generic ? generic : "";
  *out = asbx_path_lexical (p, false);
  if (*out == NULL)
    return asbx_error (err, EINVAL, "exec --cgroup `%s`: `..` would leave the container's cgroup", p);
  return 0;
}

/* every spec well-formed: a known controller (some v1 hierarchy carries it), none on pure v2 */
static int
specs_check (const struct cgroup_layout_info *info, char *const *specs, size_t n, asbx_err_t *err)
{
  for (size_t i = 0; i < n; i++)
    {
      const char *colon = strchr (specs[i], ':');
      cleanup_free char *norm = asbx_path_lexical (colon ? colon + 1 : specs[i], false);
      if (norm == NULL)
        return asbx_error (err, EINVAL, "exec --cgroup `%s`: `..` would leave the container's cgroup", specs[i]);
      if (!colon || colon == specs[i])
        continue;
      cleanup_free char *ctrls = dup_n (specs[i], (size_t) (colon - specs[i]));
      bool known = false;
      for (size_t k = 0; k < info->n && !known; k++)
        known = info->h[k].version == 1 && key_has (info->h[k].key, ctrls);
      if (!known)
        return asbx_error (err, EINVAL,
                           "exec --cgroup `%s`: no cgroup v1 hierarchy carries `%s` on this host (on cgroup v2 give "
                           "the path without a controller)",
                           specs[i], ctrls);
    }
  return 0;
}

int
cgroup_join_sub (const char *path, char *const *specs, size_t n, pid_t pid, asbx_err_t *err)
{
  const struct cgroup_layout_info *info = cgroup_layout_get (err);
  if (info == NULL || specs_check (info, specs, n, err) < 0)
    return -1;
  for (size_t i = 0; i < info->n; i++)
    {
      const struct cgroup_hier *h = &info->h[i];
      cleanup_free char *sub = NULL;
      cleanup_close int fd = -1;
      if (sub_for (h, specs, n, &sub, err) < 0)
        return -1;
      cleanup_free char *full = *sub ? xasprintf ("%s/%s", path, sub) : xstrdup (path);
      if (cgroup_open_in_hier (h, full, false, NULL, &fd, err) < 0)
        return asbx_error_wrap (err, "exec --cgroup: sub-cgroup `%s` of the container's cgroup", sub);
      char buf[32];
      int len = snprintf (buf, sizeof buf, "%d", (int) pid);
      cleanup_close int procs = openat (fd, "cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (procs < 0 || write_all (procs, buf, (size_t) len) < 0)
        return asbx_error (err, errno, "exec --cgroup: move pid %d into `%s` (%s)", (int) pid, full, h->mountpoint);
    }
  return 0;
}
