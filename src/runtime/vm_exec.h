/* vm_exec.h - `exec` into a container of the vm tier's detached lifecycle (issue 22): the
 * process runs in the guest, applied there by the guest's agentsbx exactly as `agentsbx exec`
 * applies one on a host (the container's namespaces, its agent policy: Landlock, seccomp, the
 * unix-socket supervisor, limits), with its stdio relayed to the host's caller.
 *
 *     exec (C, host)        supervisor (S, host)             guest /init (G)
 *     connect exec.sock --> session sid = next
 *     OPEN argv ----------> OPEN (sid) -- asbx.exec -->    fork `agentsbx exec --detach
 *                                                             --pid-file F ARGV` on pipes
 *     <- STARTED ---------- <- STARTED (pid in the guest) - F read: the process (G reaps it)
 *     STDIN / SIGNAL -----> ------------------------------>  its stdin pipe / kill(pid, N)
 *     <- STDOUT / STDERR -- <------------------------------  its pipes
 *     <- EXIT status ------ <------------------------------  reaped, the pipes drained
 *     (C gone) -----------> CLOSE ------------------------>  SIGKILL the process
 *
 * One virtio-serial port (asbx.exec) carries every session, framed (struct vm_exec_frame); the
 * caller's unix connection carries its own session with the same frames (sid 0 there). No side
 * ever blocks on another: every fd is non-blocking, and a side whose outgoing buffer is over
 * VM_EXEC_BUF_HIGH stops reading what would fill it (backpressure, so one session that does not
 * drain its output stalls the others' output, never the supervisor's wall clock or signals).
 *
 * Not built: a terminal (process.terminal, -t, --console-socket), --preserve-fds, --cgroup, exec
 * before `start` (the guest serves exec once the container's process runs). The audit log's
 * exec records are the guest's (its own audit log), not the host's. */
#ifndef ASBX_RUNTIME_VM_EXEC_H
#define ASBX_RUNTIME_VM_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "runtime/exec.h"

/* the state-dir socket S listens on for `exec` (bound as start.sock is: through /proc/self/fd) */
#define VM_EXEC_SOCK "exec.sock"
#define VM_EXEC_PORT "asbx.exec"
#define VM_EXEC_MAX_PAYLOAD (64u << 10)
#define VM_EXEC_BUF_HIGH (1u << 20)
#define VM_EXEC_MAX_SESSIONS 64

enum vm_exec_type
{
  VX_OPEN = 1, /* C->G: NUL-terminated strings, the guest exec's options and command */
  VX_STDIN,    /* C->G: bytes for the process's stdin; an empty one is EOF */
  VX_SIGNAL,   /* C->G: uint32 signal number */
  VX_CLOSE,    /* S->G: the caller is gone: SIGKILL the process, forget the session */
  VX_STARTED,  /* G->C: int32 the process's pid in the guest */
  VX_STDOUT,   /* G->C: bytes */
  VX_STDERR,   /* G->C: bytes */
  VX_EXIT,     /* G->C: int32 status (the exit code, 128+N for signal N): the session's end */
};

/* on the wire in the host's byte order (host and guest are one architecture) */
struct vm_exec_frame
{
  uint32_t sid;
  uint8_t type;
  uint8_t pad[3];
  uint32_t len; /* payload bytes after the header, <= VM_EXEC_MAX_PAYLOAD */
};

/* A growable byte buffer of outgoing frames, or of incoming bytes not yet a whole frame. */
struct vm_exec_buf
{
  char *data;
  size_t len, cap;
};

/* Append one frame to `b` (payload `len` bytes at `p`, copied). */
void vm_exec_buf_frame (struct vm_exec_buf *b, uint32_t sid, uint8_t type, const void *p, size_t len);

/* Write as much of `b` to non-blocking `fd` as it takes. 0 (some or all left: EAGAIN), -1 with
 * errno on another error (EPIPE: the peer is gone). */
int vm_exec_buf_flush (struct vm_exec_buf *b, int fd);

/* Read what non-blocking `fd` has into `b`. 1 read something, 0 nothing now (EAGAIN), -1 EOF or
 * error (errno; 0 at EOF). At most VM_EXEC_BUF_HIGH more than one frame is ever held. */
int vm_exec_buf_fill (struct vm_exec_buf *b, int fd);

/* The next whole frame at the head of `b`: 1 with *f and *payload (pointing into b, valid until
 * vm_exec_buf_consume), 0 when none is whole yet, -1 (EPROTO) when the header is impossible. */
int vm_exec_buf_next (const struct vm_exec_buf *b, struct vm_exec_frame *f, const char **payload);

/* Drop the first frame (its header and f->len bytes). */
void vm_exec_buf_consume (struct vm_exec_buf *b, const struct vm_exec_frame *f);

void vm_exec_buf_free (struct vm_exec_buf *b);

/* ---- S: the supervisor's relay (vm_exec_host.c) ---- */

struct vm_exec_relay;

/* A relay between `listen_fd` (exec.sock, owned) and `port_fd` (S's end of asbx.exec, owned; made
 * non-blocking here). Never fails (heap). */
struct vm_exec_relay *vm_exec_relay_new (int listen_fd, int port_fd);

/* Fill up to `max` pollfds for the relay's fds; returns how many. */
size_t vm_exec_relay_pollfds (struct vm_exec_relay *r, struct pollfd *p, size_t max);

/* Act on the `n` pollfds vm_exec_relay_pollfds filled (their revents). */
void vm_exec_relay_handle (struct vm_exec_relay *r, const struct pollfd *p, size_t n);

/* Close every fd and free. NULL: nothing. */
void vm_exec_relay_free (struct vm_exec_relay *r);

/* ---- G: the guest's sessions (vm_exec_guest.c) ---- */

struct vm_exec_guest;

/* The guest's sessions on port fd `port` (owned), running `agentsbx exec` of container `id`
 * with the global options `gargv` (NULL-terminated, borrowed for the guest's life). */
struct vm_exec_guest *vm_exec_guest_new (int port, const char *id, const char *const *gargv);

/* Pollfds of the sessions (pipes, pidfds) and the port; returns how many (<= max). */
size_t vm_exec_guest_pollfds (struct vm_exec_guest *x, struct pollfd *p, size_t max);

/* Act on them. */
void vm_exec_guest_handle (struct vm_exec_guest *x, const struct pollfd *p, size_t n);

/* A child the init reaped that is not the container's process (pid, wait status): the session
 * whose process or `agentsbx exec` it was takes it; true when one did. */
bool vm_exec_guest_reaped (struct vm_exec_guest *x, pid_t pid, int status);

/* ---- C: the host's exec (vm_exec_client.c) ---- */

/* `agentsbx exec` into vm-tier container `o->id` whose state dir is `*dirfd` (locked by the
 * caller; closed here, *dirfd = -1, once connected: the lock is not held while the process
 * runs). The container must be running (the guest serves exec after start). Without o->detach
 * relays stdio and signals until the process ends, *exit_status its status; with it, forks the
 * relay (o->pid_file gets its pid, which exits with the process's status) and returns once the
 * process runs (*exit_status 0). 0 / -1 with *err: EINVAL for what is not built (vm_exec.h),
 * ECONNREFUSED when the supervisor is gone, the guest's message when its exec failed. */
int vm_exec_client (const struct asbx_exec_opts *o, int *dirfd, int *exit_status, asbx_err_t *err);

#endif
