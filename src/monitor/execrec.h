/* execrec.h - argv and filename of execve(2)/execveat(2) as the caller passed them, for the
 * exec audit records (issue 14 §4: a process rewrites its own argv area - perl's `$0`,
 * prctl, a write to its stack - before the monitor reads /proc/PID/cmdline, and the record
 * shows what it chose).
 *
 * With the exec audit event or limits.failedExecs on (under every network.mode: under open the
 * filter holds nothing else), the unix-socket filter (linux/unixsock.h) also turns execve and
 * execveat into seccomp user notifications; each is also handed to monitor/execfail.h. The
 * supervisor thread (monitor/unixsock.c) hands each one here: one bounded read of the caller's
 * memory (process_vm_readv), a stash keyed by thread-group id, and the answer
 * SECCOMP_USER_NOTIF_FLAG_CONTINUE. The monitor's exec event (the proc connector's EXEC, which
 * comes after the syscall was let through) then takes the stash instead of reading /proc. */
#ifndef ASBX_MONITOR_EXECREC_H
#define ASBX_MONITOR_EXECREC_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "monitor/audit.h"

/* one execve as its caller passed it, capped like the exec record itself */
struct execrec
{
  char path[AUDIT_ARGV_BYTES + 1]; /* the filename argument ("" for execveat AT_EMPTY_PATH) */
  char text[AUDIT_ARGV_BYTES + 1]; /* the argv strings, each NUL-terminated, back to back */
  size_t len;                      /* bytes used in text */
  size_t argc;                     /* strings in text */
  bool truncated;                  /* more arguments or bytes than kept, or unreadable memory */
  bool ambiguous;                  /* another thread of the process called execve meanwhile */
};

/* true when `req` is an execve or execveat notification (native ABI) */
bool execrec_is_exec (const struct seccomp_notif *req);

/* Handle an exec notification read from notify fd `nfd`: copy the filename and argv out of
 * the caller, stash them under its thread-group id, then answer CONTINUE (see execrec.c for
 * why that is acceptable here). Never fails: a caller whose memory cannot be read is let
 * through with what could be read, marked truncated. Called from the supervisor thread only. */
void execrec_handle (int nfd, const struct seccomp_notif *req);

/* Monitor side: take (and remove) the stash of process `tgid`. true and *out filled when there
 * was one. Thread-safe. */
bool execrec_take (pid_t tgid, struct execrec *out);

/* Monitor side: drop the stash of a process that exited (a failed execve leaves one). */
void execrec_forget (pid_t tgid);

#endif
