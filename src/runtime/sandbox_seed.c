/* sandbox_seed.c - the seeded review workspace of quick mode; see the header. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/policy.h"
#include "runtime/sandbox_seed.h"
#include "runtime/sandbox_seed_fetch.h"
#include "runtime/workspace_layout.h"
#include "runtime/workspace_seed.h"

static int
write_seed_meta (int dfd, const char *where, const char *id, const struct sandbox_seed *s, asbx_err_t *err)
{
  struct ws_meta m = { 0 };
  struct timespec ts;
  int ret;

  m.id = xstrdup (id);
  m.workspace = xstrdup (s->lower);
  m.lower_dev = s->lower_st.st_dev;
  m.lower_ino = s->lower_st.st_ino;
  m.created = asbx_rfc3339_now ();
  /* after the clone: its files are not host changes made during the run */
  clock_gettime (CLOCK_REALTIME, &ts);
  m.started_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
  /* the xattr namespace create will use: the clone is the caller's, so root runs without a
   * user namespace (trusted), anyone else in one (user); create's resume checks it again */
  m.xattr = xstrdup (geteuid () == 0 ? "trusted" : "user");
  m.state = xstrdup ("stopped");
  m.snapshots = xmalloc0 (sizeof (char *));
  m.protect = xmalloc0 (sizeof (char *));
  m.seed_repo = xstrdup (s->repo);
  m.seed_rev = xstrdup (s->sha);
  ret = ws_meta_write (dfd, where, &m, err);
  ws_meta_clear (&m);
  return ret;
}

int
sandbox_seed_prepare (const struct asbx_global *g, const char *arg, const char *id, struct sandbox_seed *s,
                      asbx_err_t *err)
{
  cleanup_close int rootfd = -1, dfd = -1, lk = -1, lfd = -1;
  cleanup_free char *where = NULL;
  cleanup_seed_url struct seed_url url = { 0 };
  int is_url;

  *s = (struct sandbox_seed){ 0 };
  if (workspace_seed_parse (arg, &s->repo, &s->rev, err) < 0 || (is_url = workspace_seed_url (s->repo, &url, err)) < 0)
    return -1;
  if (s->rev && (!*s->rev || s->rev[0] == '-'))
    return asbx_error (err, 0, "--seed-git: revision `%s`: expected a branch, tag or commit id", s->rev);
  /* before anything is made: a URL the policy's network would refuse fails here, naming why */
  if (is_url && sandbox_seed_fetch_check (g, s->repo, &url, err) < 0)
    return -1;
  s->dir = policy_workspaces_dir (g->config_path, err);
  if (!s->dir || (rootfd = ws_root_open (s->dir, true, err)) < 0)
    return -1;
  where = xasprintf ("%s/%s", s->dir, id);
  dfd = ws_create (rootfd, id, geteuid (), getegid (), &lk, err);
  if (dfd < 0)
    {
      if (*err && (*err)->errnum == EEXIST)
        {
          asbx_error_free (err);
          return asbx_error (err, EEXIST,
                             "sandbox --seed-git: review workspace `%s` already exists: a seeded run starts from a "
                             "fresh clone; `agentsbx workspace discard %s` removes it (or choose another --id)",
                             where, id);
        }
      return -1;
    }
  s->made = true;
  if (is_url)
    {
      if (sandbox_seed_fetch (g, id, dfd, where, s->repo, &url, s->rev, s, err) < 0)
        goto fail;
    }
  else
    {
      if (workspace_seed_git (dfd, s->repo, s->rev, &s->sha, err) < 0)
        goto fail;
      lfd = openat (dfd, "lower", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (lfd < 0 || fstat (lfd, &s->lower_st) < 0)
        {
          asbx_error (err, errno, "sandbox --seed-git: open `%s/lower`", where);
          goto fail;
        }
      s->lower = xasprintf ("%s/lower", where);
    }
  if (workspace_seed_check (dfd, s->rev, s->sha, err) < 0 || write_seed_meta (dfd, where, id, s, err) < 0)
    goto fail;
  log_info ("sandbox %s: seeded from %s at %s", id, s->repo, s->sha);
  return 0;
fail:
  {
    asbx_err_t e = NULL;
    if (ws_remove_tree (rootfd, id, where, &e) < 0)
      asbx_error_wrap (err, "(removing `%s` failed too: %s)", where, e->msg);
    asbx_error_free (&e);
    s->made = false;
  }
  return -1;
}

int
sandbox_seed_is_ours (const struct sandbox_seed *s, const struct stat *st, asbx_err_t *err)
{
  if (st->st_dev != s->lower_st.st_dev || st->st_ino != s->lower_st.st_ino)
    return asbx_error (err, 0, "sandbox --seed-git: `%s` is not the clone made for this run (replaced): refused",
                       s->lower);
  return 0;
}

void
sandbox_seed_undo (struct sandbox_seed *s, const char *id)
{
  asbx_err_t e = NULL;
  if (!s->made)
    return;
  cleanup_close int rootfd = ws_root_open (s->dir, false, &e);
  if (rootfd < 0 || ws_remove_tree (rootfd, id, id, &e) < 0)
    log_warning ("sandbox %s: remove the seeded workspace: %s", id, e->msg);
  asbx_error_free (&e);
  s->made = false;
}

void
sandbox_seed_free (struct sandbox_seed *s)
{
  free (s->dir);
  free (s->lower);
  free (s->repo);
  free (s->rev);
  free (s->sha);
  *s = (struct sandbox_seed){ 0 };
}

int
sandbox_meta_image (const struct asbx_global *g, const char *id, const char *digest, asbx_err_t *err)
{
  cleanup_free char *dir = policy_workspaces_dir (g->config_path, err);
  cleanup_free char *where = NULL;
  cleanup_close int rootfd = -1, dfd = -1, lk = -1;
  struct ws_meta m;
  int ret;

  if (!dir || (rootfd = ws_root_open (dir, false, err)) < 0 || (dfd = ws_open (rootfd, id, false, &lk, err)) < 0)
    return -1;
  where = xasprintf ("%s/%s", dir, id);
  if (ws_meta_read (dfd, where, &m, err) < 0)
    return -1;
  free (m.image);
  m.image = xstrdup (digest);
  ret = ws_meta_write (dfd, where, &m, err);
  ws_meta_clear (&m);
  return ret;
}
