/* workspace_seed.c - a review workspace's lower from a local git repository (workspace_seed.h). */
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
#include "runtime/workspace_seed.h"

#define GIT_OUT_MAX (64u << 10)

/* the -c options every git command here gets (workspace_seed.h) */
static const char *const git_safe[] = {
  "-c", "core.hooksPath=/dev/null",   "-c", "core.fsmonitor=false",    "-c", "protocol.allow=never",
  "-c", "protocol.file.allow=always", "-c", "submodule.recurse=false", "-c", "advice.detachedHead=false",
};

int
workspace_seed_check_repo (const char *repo, asbx_err_t *err)
{
  const char *colon = strchr (repo, ':'), *slash = strchr (repo, '/');

  if (strncmp (repo, "file://", 7) == 0)
    {
      if (repo[7] != '/')
        return asbx_error (err, EINVAL, "--seed-git `%s`: a file:// URL needs an absolute path (file:///path)", repo);
      return 0;
    }
  /* git's own rule (connect.c url_is_local_not_ssh): a ':' before any '/' is a URL or
   * host:path, not a local file */
  if (strstr (repo, "://") || strstr (repo, "::"))
    return asbx_error (err, 0,
                       "--seed-git `%s`: network URLs are not supported yet (only a local path or a file:// URL; "
                       "clone it on the host first, then seed from that clone)",
                       repo);
  if (colon && (!slash || colon < slash))
    return asbx_error (err, 0,
                       "--seed-git `%s`: a host:path (ssh) repository is a network URL, not supported yet (only a "
                       "local path or a file:// URL); a local path with ':' in its first component can be given "
                       "as ./%s",
                       repo, repo);
  return 0;
}

int
workspace_seed_parse (const char *arg, char **repo, char **rev, asbx_err_t *err)
{
  struct stat st;
  const char *at = strrchr (arg, '@');

  *repo = *rev = NULL;
  if (!*arg)
    return asbx_error (err, 0, "--seed-git: expected REPO[@REV]");
  /* a network URL is kept whole, so that its refusal names it (git@host:r has an '@' too) */
  if (!at || stat (arg, &st) == 0 || workspace_seed_check_repo (arg, NULL) < 0)
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

static bool
is_full_sha (const char *s)
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
  if (!is_full_sha (out))
    {
      asbx_error (err, 0, "--seed-git: git rev-parse `%s` printed `%.80s`, not a commit id", rev, out);
      free (out);
      return NULL;
    }
  return out;
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
  if (workspace_seed_check_repo (repo, err) < 0)
    return -1;
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
