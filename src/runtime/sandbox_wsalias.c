/* sandbox_wsalias.c - where else the host shows quick mode's workspace (see the header).
 *
 * Threat model: quick mode judges the workspace (sandbox_ws.c: no home, no system directory, no
 * credential path) and hides its host path in the read-only view (sandbox.c) by path strings. A
 * bind mount defeats both: after `mount --bind ~ /srv/x`, `--workspace /srv/x` is the home under
 * another name, and after `mount --bind /srv/ws /opt/ws` the host view shows the workspace,
 * without the masks of /workspace/..., at /opt/ws (outside tester, 2026-12-01). Mounts are
 * compared by what they show - device and root within the filesystem, from mountinfo - so every
 * name of the same directory is found, whatever the path strings say. The caller is the user
 * who made the mounts; this guards against a mistake, and against an agent that earlier asked
 * its user to "just bind" a directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/mountinfo.h"
#include "runtime/sandbox_wsalias.h"

static void
push (char ***v, size_t *n, char *s)
{
  for (size_t i = 0; i < *n; i++)
    if (strcmp ((*v)[i], s) == 0)
      {
        free (s);
        return;
      }
  *v = xrealloc (*v, (*n + 1) * sizeof (**v));
  (*v)[(*n)++] = s;
}

int
sandbox_ws_aliases (const char *ws, struct sandbox_ws_aliases *out, asbx_err_t *err)
{
  struct mountinfo_entry *m = NULL;
  struct mountinfo_view *v = NULL;
  const struct mountinfo_entry *own;
  cleanup_close int fd = -1;
  cleanup_free char *place = NULL;
  size_t n = 0, nv;
  uint64_t id;

  memset (out, 0, sizeof *out);
  fd = open (ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "sandbox: workspace `%s`", ws);
  if (mountinfo_mount_id (fd, &id) < 0)
    return asbx_error (err, errno, "sandbox: workspace `%s`: statx (mount id)", ws);
  if (mountinfo_read (&m, &n, err) < 0)
    return asbx_error_wrap (err, "sandbox: workspace `%s`", ws);
  own = mountinfo_find (m, n, id);
  /* the workspace's directory within its filesystem */
  place = own ? mountinfo_place (own, ws) : NULL;
  if (!place)
    {
      mountinfo_free (m, n);
      return asbx_error (err, EIO, "sandbox: workspace `%s`: its mount (id %llu) is not in /proc/self/mountinfo", ws,
                         (unsigned long long) id);
    }
  nv = mountinfo_views (m, n, own, place, &v);
  for (size_t i = 0; i < nv; i++)
    if (!v[i].whole)
      push (&out->part, &out->n_part, xstrdup (v[i].at));
    else if (strcmp (v[i].at, ws) != 0)
      push (&out->whole, &out->n_whole, xstrdup (v[i].at));
  mountinfo_views_free (v, nv);
  mountinfo_free (m, n);
  return 0;
}

void
sandbox_ws_aliases_free (struct sandbox_ws_aliases *a)
{
  for (size_t i = 0; i < a->n_whole; i++)
    free (a->whole[i]);
  for (size_t i = 0; i < a->n_part; i++)
    free (a->part[i]);
  free (a->whole);
  free (a->part);
  memset (a, 0, sizeof *a);
}
