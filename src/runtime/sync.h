/* sync.h - the typed messages between the runtime (P), the stage child (S) and the container
 * init (I) over one SOCK_SEQPACKET socketpair (message boundaries kept, EOF = peer died).
 *
 *   P (create)                    S (stage child)                 I (container init)
 *   fork S ---------------------->
 *   cgroup_enter(S)
 *   GO --------------------------> setns(paths...)
 *                                  unshare(CLONE_NEWUSER)?
 *            <-------------------- USERNS_READY
 *   write uid_map/gid_map
 *   USERNS_MAPPED --------------->
 *                                  unshare(other new ns), time offsets
 *                                  fork I ------------------------>
 *            <-------------------- PID(I)   ; S exits
 *                                                                  prepare rootfs (mounts, devices)
 *   pin masked files (policy_pin.h) <---------------------------------- PINS (value 1: more follow)
 *   PINS_DONE ------------------------------------------------------> re-check (re-apply) the pinned denies
 *            <---------------------------------------------------- CREATE_RUNTIME
 *   prestart + createRuntime hooks
 *   HOOKS_DONE(state JSON) ------------------------------------------>
 *                                                                  createContainer hooks, pivot_root,
 *                                                                  console, masks, sysctl, cwd, lookup
 *            <---------------------------------------------------- READY
 *   write state.json; exit (create)                                accept() on start.sock
 *
 * `start` later connects to start.sock: the init runs the startContainer hooks and the final
 * steps, then execs. The connection is close-on-exec, so EOF tells `start` the exec happened;
 * an error before that arrives as text on the connection.
 *
 * Any side may instead send ERROR (text = the whole error chain) and exit; P then tears
 * everything down. P never blocks without also watching for EOF on the socket. */
#ifndef ASBX_RUNTIME_SYNC_H
#define ASBX_RUNTIME_SYNC_H

#include <stdint.h>

#include "core/error.h"

enum sync_type
{
  SYNC_GO = 1,
  SYNC_USERNS_READY,
  SYNC_USERNS_MAPPED,
  SYNC_PID,
  SYNC_CREATE_RUNTIME,
  SYNC_HOOKS_DONE,
  SYNC_READY,
  SYNC_PINS,      /* I -> P before CREATE_RUNTIME: the inodes to pin (runtime/policy_pin.h) */
  SYNC_PINS_DONE, /* P -> I: pinned; I checks its denies are still mounted (policy_apply.h) */
  SYNC_ERROR,
};

struct sync_msg
{
  uint32_t type;
  int32_t value;
  char text[16384]; /* NUL-terminated: ERROR's message, HOOKS_DONE's state JSON */
};

/* Send a message; text may be NULL. 0 / -1 with *err. */
int sync_send (int fd, enum sync_type type, int32_t value, const char *text, asbx_err_t *err);

/* Receive one message. EOF -> -1 with *err "child exited unexpectedly". An ERROR message is
 * turned into *err (its text) and -1 when `expect` is not SYNC_ERROR. A message of another type
 * than `expect` is a protocol error. */
int sync_recv (int fd, enum sync_type expect, struct sync_msg *msg, asbx_err_t *err);

/* In a child: report *err to the parent and exit(1). Never returns. */
void sync_fail (int fd, asbx_err_t *err) __attribute__ ((noreturn));

#endif
