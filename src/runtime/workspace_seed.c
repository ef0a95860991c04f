/* workspace_seed.c - a review workspace's lower from a local git repository, and the checks of a
 * seed URL (workspace_seed.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "monitor/audit.h"
#include "runtime/oci_unpack.h"
#include "runtime/workspace_diff.h"
#include "runtime/workspace_refuse.h"
#include "runtime/workspace_seed.h"

#define GIT_OUT_MAX (64u << 10)

/* the -c options every git command here gets (workspace_seed.h) */
static const char *const git_safe[] = {
  "-c", "core.hooksPath=/dev/null",   "-c", "core.fsmonitor=false",    "-c", "protocol.allow=never",
  "-c", "protocol.file.allow=always", "-c", "submodule.recurse=false", "-c", "advice.detachedHead=false",
};

/* the schemes a seed may fetch with: git's own transports that carry no credential of ours */
static const char *const url_schemes[] = { "https", "http", "git" };

static unsigned
default_port (const char *scheme)
{
  return strcmp (scheme, "https") == 0 ? 443 : strcmp (scheme, "http") == 0 ? 80 : 9418;
}

void
workspace_seed_url_free (struct seed_url *u)
{
  free (u->scheme);
  free (u->host);
  *u = (struct seed_url){ 0 };
}

/* "scheme://host[:port]/path" with scheme one of url_schemes: *u filled, 0; else -1 with *err */
static int
parse_url (const char *repo, size_t slen, struct seed_url *u, asbx_err_t *err)
{
  const char *auth = repo + slen + 3, *end = auth + strcspn (auth, "/?#");
  const char *colon = NULL;
  bool known = false;

  for (size_t i = 0; i < ASBX_ARRAY_SIZE (url_schemes); i++)
    known = known || (strlen (url_schemes[i]) == slen && strncmp (repo, url_schemes[i], slen) == 0);
  if (!known)
    return asbx_error (err, 0,
                       "--seed-git `%s`: scheme `%.*s` refused: a URL seed is fetched with https://, http:// or "
                       "git:// only (ssh is refused: no keys reach the seed sandbox)",
                       repo, (int) slen, repo);
  if (memchr (auth, '@', (size_t) (end - auth)))
    return asbx_error (err, 0,
                       "--seed-git `%s`: a user or password in the URL is refused (it would be kept in meta.json "
                       "and the audit log, and no credential reaches the seed sandbox)",
                       repo);
  if (*end != '/' || !end[1])
    return asbx_error (err, 0, "--seed-git `%s`: expected scheme://HOST[:PORT]/PATH", repo);
  for (const char *p = auth; p < end; p++)
    if (*p == ':')
      colon = p;
  const char *hend = colon ? colon : end;
  if (hend == auth)
    return asbx_error (err, 0, "--seed-git `%s`: the URL names no host", repo);
  cleanup_free char *host = xasprintf ("%.*s", (int) (hend - auth), auth);
  bool digits_only = true;
  for (char *p = host; *p; p++)
    {
      *p = (char) (*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
      if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
        return asbx_error (err, 0,
                           "--seed-git `%s`: host `%s`: expected a host name (letters, digits, '-', '.'); an "
                           "address literal is refused: the policy's network.allowedDomains names hosts",
                           repo, host);
      digits_only = digits_only && ((*p >= '0' && *p <= '9') || *p == '.');
    }
  if (digits_only)
    return asbx_error (err, 0,
                       "--seed-git `%s`: host `%s`: an address literal is refused: the policy's "
                       "network.allowedDomains names hosts",
                       repo, host);
  unsigned port = 0;
  if (colon)
    {
      char *e = NULL;
      unsigned long v = colon + 1 < end ? strtoul (colon + 1, &e, 10) : 0;
      if (!e || e != end || v == 0 || v > 65535)
        return asbx_error (err, 0, "--seed-git `%s`: expected a port 1-65535 after the host", repo);
      port = (unsigned) v;
    }
  u->scheme = xasprintf ("%.*s", (int) slen, repo);
  u->port = port ? port : default_port (u->scheme);
  u->host = steal_ptr (&host);
  return 0;
}

int
workspace_seed_url (const char *repo, struct seed_url *u, asbx_err_t *err)
{
  const char *colon = strchr (repo, ':'), *slash = strchr (repo, '/'), *sep = strstr (repo, "://");
  struct seed_url tmp = { 0 };

  if (u)
    *u = (struct seed_url){ 0 };
  if (strncmp (repo, "file://", 7) == 0)
    {
      if (repo[7] != '/')
        return asbx_error (err, EINVAL, "--seed-git `%s`: a file:// URL needs an absolute path (file:///path)", repo);
      return 0;
    }
  /* git's own rule (connect.c url_is_local_not_ssh): a ':' before any '/' is a URL or
   * host:path, not a local file; "X::" is a remote helper (ext:: runs a command) */
  if (strstr (repo, "::") && (!sep || strstr (repo, "::") < sep))
    return asbx_error (err, 0,
                       "--seed-git `%s`: a remote helper (TRANSPORT::ADDRESS, such as ext::) is refused: only "
                       "https://, http:// and git:// URLs are fetched",
                       repo);
  if (sep && (!slash || sep < slash))
    {
      if (parse_url (repo, (size_t) (sep - repo), &tmp, err) < 0)
        return -1;
      if (u)
        *u = tmp;
      else
        workspace_seed_url_free (&tmp);
      return 1;
    }
  if (colon && (!slash || colon < slash))
    return asbx_error (err, 0,
                       "--seed-git `%s`: a host:path repository is an ssh URL, refused (no keys reach the seed "
                       "sandbox; use an https:// URL); a local path with ':' in its first component can be given "
                       "as ./%s",
                       repo, repo);
  return 0;
}

int
workspace_seed_check_repo (const char *repo, asbx_err_t *err)
{
  return workspace_seed_url (repo, NULL, err) < 0 ? -1 : 0;
}

int
workspace_seed_parse (const char *arg, char **repo, char **rev, asbx_err_t *err)
{
  struct stat st;
  const char *at = strrchr (arg, '@'), *sep = strstr (arg, "://");

  *repo = *rev = NULL;
  if (!*arg)
    return asbx_error (err, 0, "--seed-git: expected REPO[@REV]");
  /* in a URL, an '@' before the path is a user (refused by workspace_seed_url, naming the URL
   * whole); one in the path separates REV */
  bool in_auth = sep && at && at < sep + 3 + strcspn (sep + 3, "/");
  /* a repository refused as a whole (host:path has an '@' too) is kept whole, so that its
   * refusal names it */
  if (!at || in_auth || stat (arg, &st) == 0 || (!sep && workspace_seed_check_repo (arg, NULL) < 0))
    {
      *repo = xstrdup (arg);
      return 0;
    }
  if (at == arg || !at[1])
    return asbx_error (err, 0, "--seed-git `%s`: expected REPO[@REV] (REPO and REV not empty)", arg);
  *repo = xasprintf ("%.*s", (int) (at - arg), arg);
  *rev = xstrdup (at + 1);
  return 0;
}

/* Run git (argv[0] "git"), cwd `cwd_fd`, hermetic environment; stdout into *out (NUL-terminated,
 * may be NULL to drop it). On a non-zero exit the last line git wrote to stderr is in *err. */
static int
run_git (int cwd_fd, const char *what, const char *const *argv, char **out, asbx_err_t *err)
{
  int pfd[2];
  cleanup_close int efd = memfd_create ("git-stderr", MFD_CLOEXEC);
  const char *path = getenv ("PATH"), *home = getenv ("HOME");
  cleanup_free char *env_path = xasprintf ("PATH=%s", path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
  cleanup_free char *env_home = xasprintf ("HOME=%s", home && *home == '/' ? home : "/");
  char *envp[] = { env_path,
                   env_home,
                   (char *) "LC_ALL=C",
                   (char *) "GIT_CONFIG_NOSYSTEM=1",
                   (char *) "GIT_CONFIG_GLOBAL=/dev/null",
                   (char *) "GIT_TERMINAL_PROMPT=0",
                   (char *) "GIT_PROTOCOL_FROM_USER=0",
                   NULL };
  int status;

  if (efd < 0 || pipe2 (pfd, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "--seed-git: pipe");
  pid_t pid = fork ();
  if (pid < 0)
    {
      close (pfd[0]), close (pfd[1]);
      return asbx_error (err, errno, "--seed-git: fork");
    }
  if (pid == 0)
    {
      int devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC);
      if (devnull < 0 || fchdir (cwd_fd) < 0 || dup2 (devnull, 0) < 0 || dup2 (pfd[1], 1) < 0 || dup2 (efd, 2) < 0)
        _exit (127);
      signal (SIGPIPE, SIG_DFL);
      execvpe ("git", (char *const *) argv, envp);
      dprintf (2, "cannot run git: %s (install git)\n", strerror (errno));
      _exit (127);
    }
  close (pfd[1]);
  char *text = NULL;
  size_t len = 0;
  int rerr = read_all_fd (pfd[0], GIT_OUT_MAX, &text, &len) < 0 ? errno : 0;
  close (pfd[0]);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (rerr == 0 && WIFEXITED (status) && WEXITSTATUS (status) == 0)
    {
      if (out)
        *out = text;
      else
        free (text);
      return 0;
    }
  free (text);
  /* git's last message line: what failed, in its words */
  char ebuf[1024] = "";
  ssize_t n = pread (efd, ebuf, sizeof ebuf - 1, 0);
  ebuf[n > 0 ? n : 0] = '\0';
  while (n > 0 && (ebuf[n - 1] == '\n' || ebuf[n - 1] == ' '))
    ebuf[--n] = '\0';
  char *last = strrchr (ebuf, '\n');
  const char *msg = last ? last + 1 : ebuf;
  if (rerr)
    return asbx_error (err, rerr, "--seed-git: read git's output");
  if (WIFSIGNALED (status))
    return asbx_error (err, 0, "git %s: killed by signal %d", what, WTERMSIG (status));
  return asbx_error (err, 0, "git %s: exit %d%s%s", what, WEXITSTATUS (status), *msg ? ": " : "", msg);
}

/* argv = git, the safe -c options, then `args` (NULL-terminated) */
static const char **
git_argv (const char *const *args)
{
  size_t n = 0;
  while (args[n])
    n++;
  const char **v = xmalloc ((1 + ASBX_ARRAY_SIZE (git_safe) + n + 1) * sizeof *v);
  size_t k = 0;
  v[k++] = "git";
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (git_safe); i++)
    v[k++] = git_safe[i];
  for (size_t i = 0; i < n; i++)
    v[k++] = args[i];
  v[k] = NULL;
  return v;
}

bool
workspace_seed_is_commit_id (const char *s)
{
  size_t n = strspn (s, "0123456789abcdef");
  return (n == 40 || n == 64) && s[n] == '\0';
}

/* the commit `rev` names in the clone: as given, then as origin's branch */
static char *
resolve_rev (int layout_dirfd, const char *rev, asbx_err_t *err)
{
  cleanup_free char *spec = xasprintf ("%s^{commit}", rev);
  cleanup_free char *remote = xasprintf ("refs/remotes/origin/%s^{commit}", rev);
  const char *a1[] = { "-C", "lower", "rev-parse", "--verify", "--quiet", "--end-of-options", spec, NULL };
  const char *a2[] = { "-C", "lower", "rev-parse", "--verify", "--quiet", "--end-of-options", remote, NULL };
  cleanup_free const char **v1 = git_argv (a1);
  cleanup_free const char **v2 = git_argv (a2);
  char *out = NULL;
  asbx_err_t e = NULL;

  if (run_git (layout_dirfd, "rev-parse", v1, &out, &e) < 0)
    {
      asbx_error_free (&e);
      if (strncmp (rev, "refs/", 5) == 0 || run_git (layout_dirfd, "rev-parse", v2, &out, &e) < 0)
        {
          asbx_error_free (&e);
          asbx_error (err, 0, "--seed-git: revision `%s`: not a commit of the repository", rev);
          return NULL;
        }
    }
  if (!out)
    {
      asbx_error (err, 0, "--seed-git: git rev-parse `%s` printed nothing", rev);
      return NULL;
    }
  out[strcspn (out, "\n")] = '\0';
  if (!workspace_seed_is_commit_id (out))
    {
      asbx_error (err, 0, "--seed-git: git rev-parse `%s` printed `%.80s`, not a commit id", rev, out);
      free (out);
      return NULL;
    }
  return out;
}

/* the tree below parentfd/name (rel: its path for messages) holds no repository marker */
static int
seed_tree_check (int parentfd, const char *name, const char *rel, unsigned depth, asbx_err_t *err)
{
  if (depth > 512)
    return asbx_error (err, ELOOP, "--seed-git: the clone's tree is deeper than 512 directories at `%s`", rel);
  int fd = openat (parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir (fd);
  if (!d)
    {
      int e = errno;
      if (fd >= 0)
        close (fd);
      cleanup_free char *p = ws_escape (rel);
      return asbx_error (err, e, "--seed-git: open the clone's `%s`", p);
    }
  int ret = 0;
  struct dirent *de;
  while (ret == 0 && (errno = 0, de = readdir (d)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (depth == 0 && strcmp (de->d_name, ".git") == 0)
        continue; /* the clone's own repository */
      cleanup_free char *sub = *rel ? xasprintf ("%s/%s", rel, de->d_name) : xstrdup (de->d_name);
      if (ws_git_marker (de->d_name))
        {
          cleanup_free char *p = ws_escape (sub);
          ret = asbx_error (err, EPERM,
                            "--seed-git: the tree holds `%s`, named like a git repository's own file (HEAD, commondir, "
                            "gitdir, config.worktree, .git, any case) outside the top-level .git: git run there would "
                            "take the remote's directory for a repository, with its config (refused, as workspace "
                            "apply refuses it)",
                            p);
          break;
        }
      struct stat st;
      bool dir = de->d_type == DT_DIR;
      if (de->d_type == DT_UNKNOWN)
        dir = fstatat (dirfd (d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode);
      if (dir)
        ret = seed_tree_check (dirfd (d), de->d_name, sub, depth + 1, err);
    }
  if (ret == 0 && errno != 0)
    ret = asbx_error (err, errno, "--seed-git: read the clone's directory `%s`", *rel ? rel : ".");
  closedir (d);
  return ret;
}

int
workspace_seed_check (int layout_dirfd, const char *rev, const char *sha, asbx_err_t *err)
{
  size_t n = rev ? strspn (rev, "0123456789abcdef") : 0;
  if (rev && n >= 4 && n <= 64 && rev[n] == '\0' && strncmp (sha, rev, n) != 0)
    return asbx_error (err, 0,
                       "--seed-git: revision `%s` is a commit id, but the repository resolved it to %s (a ref of "
                       "that name, or no such commit): refused",
                       rev, sha);
  return seed_tree_check (layout_dirfd, "lower", "", 0, err);
}

int
workspace_seed_git (int layout_dirfd, const char *repo, const char *rev, char **sha_out, asbx_err_t *err)
{
  char real[PATH_MAX];
  struct stat st;
  const char *src = repo;
  cleanup_free const char **vc = NULL, **vo = NULL;
  cleanup_free char *sha = NULL;

  *sha_out = NULL;
  int k = workspace_seed_url (repo, NULL, err);
  if (k < 0)
    return -1;
  if (k > 0)
    return asbx_error (err, 0,
                       "--seed-git `%s`: a network URL is not cloned on the host (sandbox_seed_fetch clones it "
                       "in a seed sandbox under the policy's network)",
                       repo);
  if (rev && (!*rev || rev[0] == '-'))
    return asbx_error (err, EINVAL, "--seed-git: revision `%s`: expected a branch, tag or commit id", rev);
  if (strncmp (repo, "file://", 7) != 0)
    {
      /* a local path: its realpath, so that git sees an absolute path (never an option) */
      errno = 0;
      if (realpath (repo, real) == NULL || stat (real, &st) < 0 || !S_ISDIR (st.st_mode))
        return asbx_error (err, errno ? errno : ENOTDIR, "--seed-git: repository `%s`: not a directory", repo);
      src = real;
    }
  if (fstatat (layout_dirfd, "lower", &st, AT_SYMLINK_NOFOLLOW) == 0)
    return asbx_error (err, EEXIST, "--seed-git: the workspace already has a lower directory");
  /* --no-hardlinks: the clone shares no inode with the source (a later chmod or write there
   * must not show in the workspace); --template=: no hooks or config copied in */
  const char *clone[] = {
    "clone", "--quiet", "--no-checkout", "--no-hardlinks", "--no-recurse-submodules", "--template=", "--", src,
    "lower", NULL
  };
  vc = git_argv (clone);
  if (run_git (layout_dirfd, "clone", vc, NULL, err) < 0)
    goto fail;
  sha = resolve_rev (layout_dirfd, rev ? rev : "HEAD", err);
  if (!sha)
    goto fail;
  const char *co[] = { "-C", "lower", "checkout", "--quiet", "--detach", sha, "--", NULL };
  vo = git_argv (co);
  if (run_git (layout_dirfd, "checkout", vo, NULL, err) < 0)
    goto fail;
  *sha_out = steal_ptr (&sha);
  return 0;
fail:
  if (oci_remove_at (layout_dirfd, "lower") < 0)
    asbx_error_wrap (err, "(removing the partial clone failed too: %s)", strerror (errno));
  return asbx_error_wrap (err, "--seed-git `%s%s%s`", repo, rev ? "@" : "", rev ? rev : "");
}

int
workspace_seed_audit (const char *audit_dir, const char *id, const char *repo, const char *requested, const char *sha,
                      asbx_err_t *err)
{
  cleanup_close int fd = audit_open (audit_dir, id, err);
  if (fd < 0)
    return -1;
  struct audit_rec *r = audit_rec_new (id, "workspace");
  audit_rec_str (r, "op", "seed");
  audit_rec_str (r, "repo", repo);
  audit_rec_str (r, "requested", requested ? requested : "HEAD");
  audit_rec_str (r, "rev", sha);
  return audit_rec_write (r, fd, err);
}
