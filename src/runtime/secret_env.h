/* secret_env.h - secrets from the runtime's own environment (issue 19; docs/policy.md
 * "Credentials and HTTP rules"). Under Docker, containerd or CRI-O the engine starts the runtime,
 * and an operator passes a secret as an environment variable of the engine (and so of the
 * runtime) rather than as a file of secretsDir: AGENTSBX_SECRET_<NAME>=VALUE is the secret NAME
 * of `${secret:NAME}` (NAME verbatim, case kept: [A-Za-z0-9_.-]+, not "." or "..").
 *
 * Such a value must never reach the container. The runtime's environment block is what
 * /proc/PID/environ shows for the runtime and for every process forked from it until that
 * process calls execve - the init waiting between create and start, the child of `exec` that
 * joins the container - and unsetenv(3) does not change it (it only drops a pointer of
 * `environ`). So the runtime moves the variables out before its self-protection re-exec
 * (runtime/selfexe.c): their records go into a sealed memfd (F_SEAL_SEAL|SHRINK|GROW|WRITE,
 * "NAME=VALUE\0" each; monitor/secret_tpl.h reads it), `environ` loses them, and the re-executed
 * runtime is started with an environment that never held them, plus AGENTSBX_SECRETS_FD=<fd of
 * the memfd>. The re-executed runtime takes that fd (close-on-exec from then on), the create
 * path hands it to the monitor (which keeps it open for the container's life) and closes it in
 * the init's process tree at once (runtime/spawn.h close_fds). The runtime itself never reads
 * a value except to see that a NAME is there (a buffer wiped at once), so no copy is in the
 * memory the init inherits.
 *
 * Only the verbs that create a container (create, run, sandbox) keep the memfd; every other verb
 * drops the variables from `environ` (its hooks, `ps`'s and criu's children do not get them)
 * and makes no memfd. An environment secret cannot be rotated: it is the value the runtime was
 * started with. */
#ifndef ASBX_RUNTIME_SECRET_ENV_H
#define ASBX_RUNTIME_SECRET_ENV_H

#include <stdbool.h>

#define SECRET_ENV_FD_VAR "AGENTSBX_SECRETS_FD"

/* Whether `environ` holds an AGENTSBX_SECRET_* variable. */
bool secret_env_present (void);

/* Before the re-exec: remove every AGENTSBX_SECRET_* (and any AGENTSBX_SECRETS_FD) from
 * `environ`; when `keep` and there were secrets of valid names, first copy their records into a
 * new sealed memfd (NOT close-on-exec) and set AGENTSBX_SECRETS_FD to its number, for the
 * re-executed image. A variable whose NAME is not a valid secret name is dropped (no policy can
 * name it). 0, or -1 with errno (memfd_create, write, sealing: the caller must not exec with
 * the variables still there). */
int secret_env_stash (bool keep);

/* In the re-executed runtime: take the memfd named by AGENTSBX_SECRETS_FD when it is one (a
 * memfd with the seals above), make it close-on-exec, and unset the variable (and any
 * AGENTSBX_SECRET_* left, defensively). Anything else in the variable is ignored. */
void secret_env_adopt (void);

/* The memfd of environment secrets, or -1 when the runtime was started without any (or the verb
 * does not create a container). Owned by this module: never close it. */
int secret_env_fd (void);

#endif
