/* workspace_refuse.h - the refusal rules of `workspace apply` (docs/policy.md "Review workspace"):
 * unsafe types and modes, protected paths, conflicts with the host. */
#ifndef ASBX_RUNTIME_WORKSPACE_REFUSE_H
#define ASBX_RUNTIME_WORKSPACE_REFUSE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "runtime/workspace_meta.h"
#include "runtime/workspace_walk.h"

/* Why change c may not be applied to the host (NULL: it may): symlinks whose target is absolute
 * or climbs out with "..", or lies in a protected path, or that passes through a symlink (of the
 * upper, `upperfd`, or of the host) on its way, or ends at a host symlink the upper keeps; hard links (nlink > 1);
 * device nodes, fifos, sockets; setuid/setgid/sticky and world-writable modes; below a ".git" directory at any depth
 * anything but git's data (the allow list in workspace_refuse.c), a .git that is not a directory, meta.json "protect"
 * paths; outside any ".git" directory an entry named HEAD, commondir, gitdir, config.worktree or .git (any case; the
 * existing top-level .git directory excepted) or a symlink whose target ends in one; below ".git" a HEAD, *_HEAD, refs/
 * file or packed-refs whose content (read from `upperfd`) is not a ref git accepts (ws_git_ref_invalid); conflicts: the
 * host path's ctime later than m->started_ns, a path that appeared or vanished since, a symlink on the host path.
 * `lowerfd` is the host workspace. *conflict is set for the conflicts (shown like a merge conflict by the caller).
 * Returns the reason, a heap string (caller frees). */
char *ws_refusal (const struct ws_change *c, const struct ws_meta *m, int upperfd, int lowerfd, bool *conflict);

/* Is `path` (a walker path, relative) below a component named exactly ".git"? */
bool ws_below_dot_git (const char *path);

/* Is `path` git's own data: below a ".git" component, or inside a directory the host workspace
 * (`lowerfd`) already holds as a repository of another name (HEAD, objects/, refs/: a bare
 * `remote.git`)? What `apply` keeps out without --git-data. */
bool ws_in_host_repository (const char *path, int lowerfd);

/* Is `name` (one path component) one of the names git takes for a repository's own files when
 * it looks at a directory: HEAD, commondir, gitdir, config.worktree, .git, in any case (setup.c
 * is_git_directory and read_gitfile)? Apply refuses such entries outside `.git` (ws_refusal), and
 * a seeded tree may not hold one (workspace_seed_check). */
bool ws_git_marker (const char *name);

/* Open the host directory holding `rel` (a walker path) from the host workspace's fd, as
 * O_RDONLY|O_DIRECTORY, beneath it and through no symlink; *base points into rel at its last
 * component. Returns the fd (caller owns) or -1 with errno (ELOOP/EXDEV: a symlink on the way). */
int ws_host_parent (int lowerfd, const char *rel, const char **base);

/* st_ctim in nanoseconds (CLOCK_REALTIME, comparable with meta.json startedNs) */
int64_t ws_ctime_ns (const struct stat *st);

/* Which of git's ref files `path` (a walker path) is below a `.git` directory: HEAD, *_HEAD and
 * every file under refs/ (WS_GIT_REF), packed-refs (WS_GIT_PACKED_REFS). */
enum ws_git_ref
{
  WS_GIT_NOT_REF,
  WS_GIT_REF,
  WS_GIT_PACKED_REFS,
};
enum ws_git_ref ws_git_ref_kind (const char *path);

/* Is buf[0..n) content apply may write for a ref file of this kind? WS_GIT_REF: exactly
 * `ref: refs/NAME\n` (NAME as git check-ref-format accepts it) or 40 or 64 lowercase hex digits
 * and a newline; WS_GIT_PACKED_REFS: lines `# ...`, `<hex> refs/NAME`, `^<hex>`, each ending in a
 * newline. NULL when it is (always for WS_GIT_NOT_REF), else the reason (heap, caller frees). */
char *ws_git_ref_invalid (enum ws_git_ref kind, const char *buf, size_t n);

/* The most bytes a ref file of this kind may hold (4 KiB; packed-refs 64 MiB) */
size_t ws_git_ref_max (enum ws_git_ref kind);

/* Read all of fd (from its offset) into a NUL-terminated heap buffer (*buf, caller frees; *len
 * bytes without the NUL). 0, or -1 with errno (EFBIG: more than max bytes). */
int ws_read_small (int fd, size_t max, char **buf, size_t *len);

#endif
