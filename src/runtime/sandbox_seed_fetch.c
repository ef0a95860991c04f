/* sandbox_seed_fetch.c - a seed URL cloned in a throwaway sandbox under the policy; see the header. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/doc.h"
#include "policy/policy.h"
#include "runtime/sandbox.h"
#include "runtime/sandbox_seed.h"
#include "runtime/sandbox_seed_fetch.h"
#include "runtime/sandbox_ws.h"
#include "runtime/workspace_layout.h"

/* Run inside the seed sandbox by /bin/sh: $1 the URL, $2 the revision, $3 the URL's scheme (named
 * at once: inside g, $1... are g's own). Every
 * git call gets the hostile-remote options (the header); the clone goes into the empty
 * /workspace (the lower) without a checkout, REV is resolved as the local seed resolves it
 * (as given, then as origin's branch), then checked out detached. Exit 3: REV is no commit. */
static const char fetch_script[] =
    "set -eu\n"
    "url=$1 rev=$2 scheme=$3\n"
    "export HOME=/tmp/.seed-home LC_ALL=C GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null "
    "GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false SSH_ASKPASS=/bin/false GIT_PROTOCOL_FROM_USER=0\n"
    "unset GIT_DIR GIT_WORK_TREE GIT_SSH GIT_SSH_COMMAND GIT_PROXY_COMMAND 2>/dev/null || :\n"
    "mkdir -p \"$HOME\" /tmp/.seed-hooks /tmp/.seed-template\n"
    "g() { git -c core.hooksPath=/tmp/.seed-hooks -c core.fsmonitor=false -c protocol.allow=never "
    "-c \"protocol.$scheme.allow=always\" -c submodule.recurse=false -c transfer.fsckObjects=true "
    "-c credential.helper= -c http.followRedirects=false -c advice.detachedHead=false \"$@\"; }\n"
    "g clone --quiet --no-checkout --no-recurse-submodules --template=/tmp/.seed-template -- \"$url\" /workspace\n"
    "cd /workspace\n"
    /* transfer.fsckObjects checks what the smart protocols send; the dumb HTTP walker checks
     * nothing: every object is checked once more, whatever the transport was */
    "g fsck --no-progress --no-dangling\n"
    "sha=$(g rev-parse --verify --quiet --end-of-options \"$rev^{commit}\") || "
    "sha=$(g rev-parse --verify --quiet --end-of-options \"refs/remotes/origin/$rev^{commit}\") || "
    "{ echo \"agentsbx seed: revision \\`$rev': not a commit of the repository\" >&2; exit 3; }\n"
    "g checkout --quiet --detach \"$sha\" --\n";

/* where the policy came from, for messages: its source lines ("ceiling: profile agent ...") */
static char *
policy_source (const struct policy_plan *p)
{
  size_t n = 0;
  for (size_t i = 0; i < p->sources_len; i++)
    n += strlen (p->sources[i]) + 2;
  char *s = xmalloc0 (n + 1);
  for (size_t i = 0; i < p->sources_len; i++)
    {
      if (i)
        strcat (s, "; ");
      strcat (s, p->sources[i]);
    }
  return s;
}

static const char *
domain_match (char **list, size_t n, const char *host)
{
  for (size_t i = 0; i < n; i++)
    if (pval_domain_covers (list[i], host))
      return list[i];
  return NULL;
}

int
sandbox_seed_fetch_check (const struct asbx_global *g, const char *url, const struct seed_url *u, asbx_err_t *err)
{
  struct policy_inputs pin = sandbox_policy_inputs (g);
  struct policy_plan *plan = policy_resolve (&pin, err);
  cleanup_free char *src = NULL;
  const char *rule;
  int ret = -1;

  if (!plan)
    return asbx_error_wrap (err, "--seed-git `%s`", url);
  src = policy_source (plan);
  if (!plan->active || plan->net_mode == POLICY_NET_NONE)
    asbx_error (err, 0,
                "--seed-git `%s`: the policy has no network (network.mode none; %s): a URL is fetched under the "
                "policy's network; use a policy whose network.allowedDomains lists `%s`, or clone on the host and "
                "seed from that clone",
                url, src, u->host);
  else if (plan->ws_mode == POLICY_WS_REVIEW)
    asbx_error (err, 0,
                "--seed-git `%s`: the policy sets filesystem.workspace.mode review (%s): the seed sandbox writes the "
                "clone into the workspace directly; --seed-git implies review for the run itself, so leave the mode "
                "out of the policy",
                url, src);
  else if (plan->net_mode == POLICY_NET_FILTERED
           && (rule = domain_match (plan->denied_domains, plan->denied_domains_len, u->host)) != NULL)
    asbx_error (err, 0, "--seed-git `%s`: host `%s` is denied by the policy's network.deniedDomains `%s` (%s)", url,
                u->host, rule, src);
  else if (plan->net_mode == POLICY_NET_FILTERED
           && !domain_match (plan->allowed_domains, plan->allowed_domains_len, u->host))
    asbx_error (err, 0,
                "--seed-git `%s`: host `%s` is not in the policy's network.allowedDomains (%s): the clone is fetched "
                "under the policy's egress, which would refuse it",
                url, u->host, src);
  else
    {
      bool port_ok = plan->net_mode != POLICY_NET_FILTERED || plan->ports_len == 0;
      for (size_t i = 0; !port_ok && i < plan->ports_len; i++)
        port_ok = plan->ports[i] == u->port;
      if (!port_ok)
        asbx_error (err, 0,
                    "--seed-git `%s`: port %u is not in the policy's network.ports (%s): the clone is fetched under "
                    "the policy's egress, which would refuse it",
                    url, u->port, src);
      else
        ret = 0;
    }
  policy_plan_free (plan);
  return ret;
}

/* the commit id the clone's .git/HEAD holds (detached: the id itself), read through fds */
static char *
read_head (int lfd, const char *where, asbx_err_t *err)
{
  cleanup_close int gfd = openat (lfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_close int hfd = gfd < 0 ? -1 : openat (gfd, "HEAD", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  char buf[80];
  struct stat st;

  if (hfd < 0 || fstat (hfd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      asbx_error (err, errno ? errno : EINVAL, "--seed-git: `%s/.git/HEAD`: expected a regular file", where);
      return NULL;
    }
  ssize_t n = read (hfd, buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  buf[strcspn (buf, "\n")] = '\0';
  if (!workspace_seed_is_commit_id (buf))
    {
      asbx_error (err, EINVAL, "--seed-git: `%s/.git/HEAD` holds `%.80s`, not a detached commit id", where, buf);
      return NULL;
    }
  return xstrdup (buf);
}

int
sandbox_seed_fetch (const struct asbx_global *g, const char *id, int dfd, const char *where, const char *url,
                    const struct seed_url *u, const char *rev, struct sandbox_seed *s, asbx_err_t *err)
{
  cleanup_free char *sid = xasprintf ("%s-seed", id);
  cleanup_free char *parent = xstrdup (s->dir), *name = NULL, *tmp = NULL;
  cleanup_close int pfd = -1, tfd = -1;
  char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) fetch_script,
                   (char *) "seed",    (char *) url,  (char *) (rev ? rev : "HEAD"),
                   u->scheme,          NULL };
  int status = -1, ret = -1;
  asbx_err_t e = NULL;

  /* The clone's directory: a sibling of the workspaces directory, not inside it. Every
   * container hides the workspaces directory wherever a bind shows it (policy_mounts.c
   * apply_hidden: the agent must not reach meta.json), the seed sandbox's /workspace bind too;
   * a sibling lies on the same file system, so that renameat moves the clone into <id>/lower. */
  char *slash = strrchr (parent, '/');
  if (!slash || !slash[1])
    return asbx_error (err, EINVAL, "--seed-git: workspaces directory `%s`: expected an absolute path", s->dir);
  name = xasprintf (".%s-seed-%s", slash + 1, id);
  *slash = '\0';
  tmp = xasprintf ("%s/%s", *parent ? parent : "", name);
  pfd = open (*parent ? parent : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (pfd < 0)
    return asbx_error (err, errno, "--seed-git: open `%s`", *parent ? parent : "/");
  /* private while git writes it (0700, the caller's: the seed sandbox runs as its owner) */
  if (mkdirat (pfd, name, 0700) < 0)
    return asbx_error (err, errno, "--seed-git: create `%s`%s", tmp,
                       errno == EEXIST ? " (left by an interrupted seed of that id: remove it)" : "");
  tfd = openat (pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (tfd < 0 || fstat (tfd, &s->lower_st) < 0)
    {
      asbx_error (err, errno, "--seed-git: open `%s`", tmp);
      goto out;
    }
  s->lower = xstrdup (tmp);
  struct asbx_sandbox_opts o = {
    .workspace = tmp,
    .id = sid,
    .seed_fetch = s,
    .argv = argv,
    .argc = ASBX_ARRAY_SIZE (argv) - 1,
    .summary = ASBX_SANDBOX_SUMMARY_NONE,
    .quiet = true,
  };
  log_info ("sandbox %s: fetching %s in the seed sandbox %s", id, url, sid);
  if (asbx_sandbox_run (g, &o, &status, err) < 0)
    {
      asbx_error_wrap (err, "--seed-git `%s`: the seed sandbox `%s`", url, sid);
      goto out;
    }
  if (status != 0)
    {
      asbx_error (err, 0,
                  "--seed-git `%s%s%s`: the clone in the seed sandbox `%s` failed (exit %d: %s; git's message is "
                  "above, the sandbox's audit log is %s.jsonl)",
                  url, rev ? "@" : "", rev ? rev : "", sid, status,
                  status == 3 ? "no such revision" : "the fetch or the checkout failed", sid);
      goto out;
    }
  s->sha = read_head (tfd, tmp, err);
  if (!s->sha)
    goto out;
  if (fchmod (tfd, 0755) < 0 || renameat (pfd, name, dfd, "lower") < 0)
    {
      asbx_error (err, errno, "--seed-git: move the clone `%s` to `%s/lower`", tmp, where);
      goto out;
    }
  free (s->lower);
  s->lower = xasprintf ("%s/lower", where);
  ret = 0;
out:
  if (ret < 0 && ws_remove_tree (pfd, name, tmp, &e) < 0)
    {
      asbx_error_wrap (err, "(removing `%s` failed too: %s)", tmp, e->msg);
      asbx_error_free (&e);
    }
  return ret;
}
