/* vm_runrec.h - root's record of who owns the run directory <root>/vm/<id> (outside attack 15:
 * a SIGKILLed foreground `run` left QEMU's cgroup and <root>/vm/<id>, `delete --force` removed
 * neither, and the next run of that id was refused). The record, <root>/vm/<id>.run, lies beside
 * the run directory in root's 0700 <root>/vm, never in the directory itself (QEMU's uid owns
 * that: a record there could be forged to make root signal another process or remove another
 * cgroup). Its lines: "runner PID START" (the `run`, `sandbox` or supervisor process that made
 * the directory; QEMU dies with it: PR_SET_PDEATHSIG) and, once QEMU runs, "qemu PID START
 * MASK CGROUP" (vm_cgroup_record). Internal to runtime/vm*.c and delete. */
#ifndef ASBX_RUNTIME_VM_RUNREC_H
#define ASBX_RUNTIME_VM_RUNREC_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"

/* Claim <state_root>/vm/<id> for this process: the record made with O_EXCL. A record whose
 * runner is gone (pid and start time) is a stale run's: reaped first (vm_runrec_reap_stale),
 * then claimed. 0, or -1 with *err: EBUSY naming the live runner's pid, or the errno of the
 * record's creation. <state_root>/vm must exist. */
int vm_runrec_claim (const char *state_root, const char *id, asbx_err_t *err);

/* Append QEMU's line (pid, its start time, `cgroup` as vm_cgroup_record gives it or NULL).
 * Best effort: a failure is a warning (the run goes on; only a stale cleanup would miss it). */
void vm_runrec_qemu (const char *state_root, const char *id, pid_t qemu, const char *cgroup);

/* Remove the record (the run's own end, after its directory). */
void vm_runrec_release (const char *state_root, const char *id);

/* true when the id's record names a runner that is alive and not this process: its run
 * directory is not ours to remove (a second create or run of the same id that failed). */
bool vm_runrec_live_other (const char *state_root, const char *id);

/* SIGKILL QEMU `pid` if it is still the process started at `start` (asbx_pid_start_time; a
 * pidfd pins it before the check) and wait up to 10 s for it to end (a warning after). */
void vm_runrec_kill_qemu (pid_t pid, unsigned long long start);

/* When the record's runner is gone: SIGKILL its QEMU if that still runs (pidfd, start time
 * checked), remove QEMU's cgroup, the run directory and the record; true when it did. A live
 * runner's run is left alone (false), as is an id with no record. */
bool vm_runrec_reap_stale (const char *state_root, const char *id);

#endif
