/* execfail.h - failed execve(2) calls inside one process, for limits.failedExecs (issue 14 §5).
 *
 * The kernel reports successful execs only (the proc connector's EXEC); a failed execve returns
 * to its caller and leaves nothing. Where the seccomp supervisor sees every execve (the execve
 * notification of monitor/execrec.h, answered CONTINUE), an attempt that no exec event follows
 * before the same thread's next attempt, or its exit, failed.
 *
 * Ordering without a race: the supervisor thread stamps each attempt with CLOCK_MONOTONIC while
 * the caller still waits for the answer, i.e. after the syscall's entry and before any exec it
 * leads to; the connector stamps its events with the same clock (ktime_get_ns) and queues them
 * before the exec'd image runs. The monitor takes the attempts stamped before a horizon H, then
 * drains the connector (every event before H is queued by then), and decides in time order up
 * to H; later items wait for the next round.
 *
 * The rule (documented in docs/policy.md §2.5): the attempts of one thread between two successes
 * form runs of the same command (basename of the filename, and the argv): a PATH search (execvp,
 * python's subprocess, env) tries the same command in each directory. A run that ends in an exec
 * counts 0; one that ends otherwise (another command, the thread's exit, a filename tried twice,
 * more than EXECFAIL_RUN_MAX directories) counts 1, and so does one still open
 * EXECFAIL_RUN_AGE_NS after its first attempt (counted then, once: a thread that stays alive
 * cannot defer the count; execfail_timeout_ms tells the monitor's loop when to look). The
 * filename hashes are of the lexically cleaned path (monitor/execrec.c), so `//usr/bin/x` is
 * `/usr/bin/x` tried again. A process that exits non-zero counts 1 unless
 * its execve failures were counted already (no double count for `command not found`). */
#ifndef ASBX_MONITOR_EXECFAIL_H
#define ASBX_MONITOR_EXECFAIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* distinct filenames of one run before it counts as a failure anyway */
#define EXECFAIL_RUN_MAX 64

/* age (ns, CLOCK_MONOTONIC, from its first attempt) at which an open run counts as a failure:
 * a PATH search ends in microseconds to milliseconds */
#define EXECFAIL_RUN_AGE_NS 1000000000ull

/* Supervisor side: thread `tid` of process `tgid` calls execve with the command hash `cmd`
 * (basename and argv) and filename hash `file`. Stamps and queues it, wakes the monitor (the
 * fd of execfail_fd). Call before answering the notification. Thread-safe, never blocks on the
 * monitor; past 65536 queued attempts the excess is counted as failures (fail closed). */
void execfail_attempt (pid_t tid, pid_t tgid, uint64_t cmd, uint64_t file);

/* 64-bit FNV-1a of n bytes, continued from h (start with EXECFAIL_HASH0) */
#define EXECFAIL_HASH0 0xcbf29ce484222325ull
uint64_t execfail_hash (uint64_t h, const void *p, size_t n);

/* Monitor side: the eventfd readable while attempts are queued (created on first use; -1 when
 * it could not be: attempts are then only settled with the connector's events). */
int execfail_fd (void);

/* Monitor side: a connector event of a member, in the order drained. exit_code: the wait status
 * (process exits only); counted: a non-zero exit counts (false for the init and for processes
 * the monitor's own kill ended). ts_ns: the event's stamp. */
void execfail_note_exec (pid_t tgid, uint64_t ts_ns);
void execfail_note_exit (pid_t tid, pid_t tgid, uint64_t ts_ns, int exit_code, bool counted);

/* Monitor side: take the attempts stamped so far, call drain(data) (which must read the
 * connector and call execfail_note_*), then decide every item stamped before that (the rest
 * waits for the next call); returns the failures found. */
uint64_t execfail_settle (void (*drain) (void *), void *data);

/* Monitor side: the poll(2) timeout (ms) until the next execfail_settle has work without any
 * fd waking the loop: an open run reaching EXECFAIL_RUN_AGE_NS, or items stamped after the
 * last horizon (10 ms at most then). -1: nothing pending. O(open runs), no /proc access. */
int execfail_timeout_ms (void);

#endif
