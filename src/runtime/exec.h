/* exec.h - `exec`: run a new process inside a running container (runc's exec). */
#ifndef ASBX_RUNTIME_EXEC_H
#define ASBX_RUNTIME_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "runtime/container.h"

struct asbx_exec_opts
{
  const char *id;
  const char *process_file; /* --process: a process.json replacing everything below */
  char **args;              /* the command (argv after the id) */
  size_t args_len;
  bool tty;
  const char *console_socket;
  const char *cwd;
  char **env; /* --env KEY=VALUE, appended (overriding) to the container's env */
  size_t env_len;
  const char *user; /* uid[:gid] */
  char **add_gids;  /* --additional-gids */
  size_t add_gids_len;
  char **caps; /* --cap: added to every capability set */
  size_t caps_len;
  bool no_new_privs;
  const char *apparmor;
  const char *process_label;
  bool detach;
  const char *pid_file;
  int preserve_fds;
  bool ignore_paused;
  char **cgroups; /* --cgroup [CONTROLLERS:]PATH, repeatable: sub-cgroups (linux/cgroup.h cgroup_join_sub) */
  size_t cgroups_len;
};

/* Run the process. With detach, returns once it has been exec'd (*exit_status = 0); otherwise
 * waits for it and stores its exit status (128+N for signal N). 0 / -1 with *err. */
int asbx_container_exec (const struct asbx_global *g, const struct asbx_exec_opts *o, int *exit_status,
                         asbx_err_t *err);

/* Parse runc's --user value "uid[:gid]" (decimal). 0 / -1 with *err naming the value. */
int asbx_parse_user (const char *s, uint32_t *uid, uint32_t *gid, bool *has_gid, asbx_err_t *err);

#endif
