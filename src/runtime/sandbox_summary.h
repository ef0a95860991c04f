/* sandbox_summary.h - the closing lines of `agentsbx sandbox` (POLICY.md §7): what the kernel
 * denied, per kind, and the limit that stopped the command, read back from the run's audit log. */
#ifndef ASBX_RUNTIME_SANDBOX_SUMMARY_H
#define ASBX_RUNTIME_SANDBOX_SUMMARY_H

#include <stdio.h>

/* Read the audit log `path` from its LAST `created` lifecycle record (a log can hold earlier
 * containers of the same id) and print to `out`, one line each, prefixed "agentsbx sandbox: ":
 * - per denial kind (fs, net, syscall, in that order) the count and the top 3 targets
 *   ("denied fs: 3 (/etc/x write_file x2, /dev/shm make_reg x1)");
 * - suppressed denials, the limit record (limit, value, used) or a non-`exited` exit reason;
 * - when the monitor reported that Landlock denials are not reported, that fact.
 * Prints nothing when there is nothing to say. Returns the number of lines printed, -1 when the
 * log cannot be read (errno). */
int sandbox_summary (const char *path, FILE *out);

#endif
