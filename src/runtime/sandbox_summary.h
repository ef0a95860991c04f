/* sandbox_summary.h - the closing lines of `agentsbx sandbox` (POLICY.md §7): what the kernel
 * denied, per kind, and the limit that stopped the command, read back from the run's audit log;
 * as text for a person (only when there is something to say) or as one JSON object for tools. */
#ifndef ASBX_RUNTIME_SANDBOX_SUMMARY_H
#define ASBX_RUNTIME_SANDBOX_SUMMARY_H

#include <stdbool.h>
#include <stdio.h>

#define SANDBOX_SUM_TARGETS 64

struct sandbox_sum_target
{
  char *what; /* "TARGET ACCESS" ("/etc/x fs.write_file"), the syscall name, or the address */
  unsigned long n;
  unsigned long order; /* first-seen rank: ties keep log order */
};

struct sandbox_sum_kind
{
  const char *kind; /* "fs", "net", "syscall" */
  unsigned long total;
  struct sandbox_sum_target t[SANDBOX_SUM_TARGETS]; /* after sandbox_summary_read: by count, descending */
  size_t n;
};

struct sandbox_sum
{
  struct sandbox_sum_kind kinds[3];  /* fs, net, syscall */
  unsigned long suppressed;          /* denials the monitor counted but did not log (its cap) */
  char *limit;                       /* the first limit record's `limit`, NULL when none */
  long long limit_value, limit_used; /* -1 when the record carries none */
  char *reason;                      /* the last lifecycle `exitReason`, NULL when none */
  char *kernel;                      /* `kernelDenials` of the policy record when Landlock denials are NOT reported */
};

/* Read the audit log `path` from its LAST `created` lifecycle record (a log can hold earlier
 * containers of the same id) into *s (zeroed first; free with sandbox_summary_free). Only what
 * the monitor wrote from the kernel's reports is counted. 0, or -1 with errno when the log cannot
 * be opened (*s is then empty and needs no free). */
int sandbox_summary_read (const char *path, struct sandbox_sum *s);

/* True when the run is worth a summary: something was denied (logged or only counted), a limit
 * record was written, or the exit reason is not `exited` (and not a stop signal we forwarded:
 * `stopped`). */
bool sandbox_summary_notable (const struct sandbox_sum *s, bool stopped);

/* When sandbox_summary_notable, print to `out` one line each, prefixed "agentsbx sandbox: ":
 * - per denial kind (fs, net, syscall) the count and the top 3 targets
 *   ("denied fs: 3 (/etc/x write_file x2, /dev/shm make_reg x1)");
 * - suppressed denials; the limit record (limit, value, used) with a non-`exited` exit reason,
 *   left out when `stopped` (a signal we forwarded stopped it, not the policy);
 * - when the monitor reported that Landlock denials are not reported, that fact (the fs count
 *   may then be short).
 * Prints nothing otherwise: a clean run is silent. Container text is printed with control
 * characters as '?'. Returns the number of lines printed. */
int sandbox_summary_text (const struct sandbox_sum *s, bool stopped, FILE *out);

/* What sandbox.c knows beyond the log, for the JSON object. */
struct sandbox_sum_run
{
  const char *id;        /* container id */
  const char *audit_log; /* the log's path; NULL when unknown */
  int exit_status;       /* what `sandbox` exits with */
  int stop_signal;       /* a stop signal forwarded to the command, 0 when none */
  bool forced_kill;      /* still running --stop-timeout after it: killed */
  bool log_read;         /* false: the log could not be read, the counts are unknown (null) */
};

/* Write ONE JSON object and '\n' to `out` (always, notable or not), e.g.
 * {"id":"x","exitStatus":124,"exitReason":"wallclock","stopSignal":0,"forcedKill":false,
 *  "auditLog":"/var/log/agentsbx/x.jsonl","denials":{"fs":{"total":2,"top":[{"target":
 *  "/dev/shm fs.make_reg","count":2}]},"net":{...},"syscall":{...}},"notLogged":0,
 *  "limit":{"limit":"wallClockSeconds","value":1,"used":1},"kernelDenials":null}
 * Field meanings: docs/man/agentsbx-sandbox.8.md. `top` holds up to 10 targets by count. Strings
 * are valid UTF-8 (audit.c wrote them so; an invalid one becomes null). 0, -1 on a write error. */
int sandbox_summary_json (const struct sandbox_sum *s, const struct sandbox_sum_run *run, FILE *out);

void sandbox_summary_free (struct sandbox_sum *s);

#endif
