/* cgroup_internal.h - shared by cgroup*.c and the unit tests; not a public interface.
 *
 * The parsers take text (the contents of /proc/self/mountinfo, /proc/cgroups, /proc/self/cgroup)
 * so they are testable with fixture strings; cgroup_layout.c feeds them the real files. */
#ifndef ASBX_LINUX_CGROUP_INTERNAL_H
#define ASBX_LINUX_CGROUP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "linux/cgroup.h"

/* At most this many hierarchies: one bit each in the created mask. */
#define CGROUP_MAX_HIERARCHIES 32

struct cgroup_hier
{
  /* Identity used to match /proc/self/cgroup lines and to sort: "" for cgroup2, else the v1
   * controllers and name= of the hierarchy, sorted and comma-joined ("cpu,cpuacct",
   * "name=systemd"). Hierarchies are kept sorted by key, so bit i of a created mask means the
   * same hierarchy in a later process (as long as the host's mounts do not change). */
  char *key;
  int version;      /* 1 or 2 */
  char *mountpoint; /* unescaped */
  char *mount_root; /* path inside the hierarchy that is mounted there ("/" normally) */
  char *own;        /* our own cgroup in this hierarchy (/proc/self/cgroup), NULL if not listed */
  bool cpuset;      /* v1 hierarchy carrying the cpuset controller */
};

struct cgroup_layout_info
{
  enum cgroup_layout layout;
  struct cgroup_hier h[CGROUP_MAX_HIERARCHIES];
  size_t n;
};

/* /proc/cgroups text -> NULL-terminated vector of enabled controller names (heap). */
char **cgroup_parse_proc_cgroups (const char *text, asbx_err_t *err);

/* /proc/self/mountinfo text + known controllers -> info->h/n (sorted by key) and info->layout.
 * Duplicate mounts of one hierarchy keep the first mount whose root is "/" (else the first).
 * -1 with *err when no cgroup filesystem is mounted or the text is malformed. */
int cgroup_parse_mountinfo (const char *text, char *const *controllers, struct cgroup_layout_info *info,
                            asbx_err_t *err);

/* /proc/self/cgroup text -> info->h[i].own for every hierarchy listed. 0 / -1. */
int cgroup_parse_self (const char *text, struct cgroup_layout_info *info, asbx_err_t *err);

void cgroup_layout_info_clear (struct cgroup_layout_info *info);

/* The host's layout, detected once (thread-unsafe cache, like the rest of the runtime). */
const struct cgroup_layout_info *cgroup_layout_get (asbx_err_t *err);

/* cgroup_resolve_path() against an explicit layout (tests). `systemd_running` replaces the
 * check for /run/systemd/system. The result is either one absolute path used in every hierarchy
 * ("/agentsbx/ID"), or - when a relative cgroupsPath meets a process whose own cgroup differs
 * between hierarchies (hybrid hosts often) - the list "KEY:/path;KEY:/path;..." with one entry
 * per hierarchy (KEY as in struct cgroup_hier). */
char *cgroup_resolve_path_in (const struct cgroup_layout_info *info, const char *cgroups_path, const char *id,
                              bool systemd, bool systemd_running, asbx_err_t *err);

/* The path of resolved path `path` in hierarchy h (heap, absolute inside the hierarchy) or NULL
 * with *err (a list without an entry for h). */
char *cgroup_path_in_hier (const char *path, const struct cgroup_hier *h, asbx_err_t *err);

/* Open the hierarchy's mountpoint (O_PATH|O_DIRECTORY) checked with fstatfs to be a cgroup or
 * cgroup2 filesystem. fd / -1 with *err. */
int cgroup_open_hier_root (const struct cgroup_hier *h, asbx_err_t *err);

/* v1: make a cpuset directory usable: copy cpuset.cpus and cpuset.mems from the parent when
 * empty (otherwise cgroup.procs fails with ENOSPC). dirfds may be O_PATH. 0 / -1. */
int cgroup_v1_cpuset_fill (int parentfd, int dirfd, const char *name, asbx_err_t *err);

/* v2: write "1" to cgroup.kill (kernel >= 5.14). 0, 1 when the file is missing, -1 with *err. */
int cgroup_v2_kill (int dirfd, asbx_err_t *err);

#endif
