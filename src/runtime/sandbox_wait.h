/* sandbox_wait.h - quick mode's wait for its container, forwarding signals (see sandbox.h). */
#ifndef ASBX_RUNTIME_SANDBOX_WAIT_H
#define ASBX_RUNTIME_SANDBOX_WAIT_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "runtime/container.h"

/* The stop timeout in seconds: AGENTSBX_STOP_TIMEOUT (0-86400; set by `sandbox --stop-timeout`),
 * else 10. */
long stop_timeout_s (void);

/* The signals the sandbox forwards to its container (and SIGCHLD, to wake the wait). */
void forwarded_signals (sigset_t *set);

/* Wait for the init `pid` (the caller's child) of container `id`, forwarding the signals of
 * forwarded_signals() (which the caller has blocked); the first stop signal (SIGTERM, SIGINT,
 * SIGHUP, SIGQUIT) starts the stop timeout (AGENTSBX_STOP_TIMEOUT seconds, default 10), after
 * which every process of the container is SIGKILLed (kill --all). *stop_sig: that signal or 0;
 * *forced: the timeout struck. Returns the init's wait status, or -1 (errno of waitpid). */
int sandbox_wait (const struct asbx_global *g, const char *id, pid_t pid, int *stop_sig, bool *forced);

#endif
