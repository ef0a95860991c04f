/* tty.h - the foreground terminal proxy: `run`/`exec` with process.terminal and no
 * --console-socket (runc's behaviour). The runtime makes a socketpair, hands one end to the
 * container side as its console socket, receives the pty master on the other, and copies
 * stdin -> master and master -> stdout until the process exits. */
#ifndef ASBX_RUNTIME_TTY_H
#define ASBX_RUNTIME_TTY_H

#include <sys/types.h>

#include "core/error.h"

/* A connected AF_UNIX stream socketpair, both ends close-on-exec: *keep stays with the
 * runtime (asbx_tty_recv_master reads from it), *give is passed where a --console-socket
 * connection would go. 0 / -1 with *err. */
int asbx_tty_socketpair (int *keep, int *give, asbx_err_t *err);

/* Receive the pty master the container side sent over `sock` with SCM_RIGHTS (unix(7)). Blocks
 * until it arrives; EOF before a descriptor (the container side failed) is an error. Returns
 * the master fd (close-on-exec, owned by the caller) / -1 with *err. */
int asbx_tty_recv_master (int sock, asbx_err_t *err);

/* Proxy the terminal until `pid` (our child) exits and return its exit code as runc does (the
 * status, or 128 + signal). If stdin is a terminal it is put in raw mode (cfmakeraw(3)) and
 * restored before returning, and its size is copied to the pty now and on every SIGWINCH
 * (TIOCGWINSZ/TIOCSWINSZ, ioctl_tty(2)); SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 are
 * forwarded to `pid` (the signal proxy). Output still buffered in the pty when the process exits
 * is copied out before returning. Takes ownership of `master` (closed on return). */
int asbx_tty_proxy_wait (int master, pid_t pid);

#endif
