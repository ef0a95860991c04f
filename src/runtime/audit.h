/* audit.h - the agent policy's audit log (POLICY.md §6): JSON lines, one file per container,
 * `<audit dir>/<id>.jsonl`, append-only, kept after `delete` (a later container with the same id
 * appends after its own `created` record).
 *
 * Every record is one object on one line: {"ts":"2025-01-02T03:04:05.123456Z","container":ID,
 * "event":KIND, ...fields of the kind}. KIND is one of the audit.events names (lifecycle, policy,
 * exec, network, dns, denial, limit, approval). A record is built in memory and written with ONE
 * write(2) on an O_APPEND fd, so concurrent writers (monitor, guard, CLI) never interleave and a
 * crash loses whole records only, never leaves half a line.
 *
 * Usage:
 *   struct audit_rec *r = audit_rec_new (id, "lifecycle");
 *   audit_rec_str (r, "state", "exited");
 *   audit_rec_int (r, "exitCode", 137);
 *   if (audit_rec_write (r, fd, &err) < 0) ...   (always frees r)
 */
#ifndef ASBX_RUNTIME_AUDIT_H
#define ASBX_RUNTIME_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define AUDIT_DEFAULT_DIR "/var/log/agentsbx"

struct audit_rec;

/* Open (create 0600) `<dir>/<id>.jsonl` for appending; `dir` (NULL = AUDIT_DEFAULT_DIR) is created
 * with its missing parents, mode 0700. The file is opened O_WRONLY|O_APPEND|O_CLOEXEC|O_NOFOLLOW:
 * a symlink planted in the audit dir is refused (ELOOP). `id` must already be a valid container id
 * (asbx_id_validate: no '/'). Returns the fd (caller owns) or -1 with *err naming the path. */
int audit_open (const char *dir, const char *id, asbx_err_t *err);

/* The audit directory of this host, resolved as every command resolves it (issue 6):
 * `flag` (the global --audit-dir) when given, else the host config's `auditDir` (config_path,
 * NULL = /etc/agentsbx/config.json, an absent default file = no host config), else
 * AUDIT_DEFAULT_DIR. The host config is read and validated by the policy loader
 * (policy_resolve), the same code that gives the monitor its plan->audit_dir at create, so
 * `audit`, `sandbox` and the monitor cannot disagree. Returns a heap string (caller frees) or
 * NULL with *err (the host config's own error: unreadable file, unknown key, relative auditDir). */
char *audit_dir_resolve (const char *flag, const char *config_path, asbx_err_t *err);

/* The path `<dir>/<id>.jsonl` (heap, caller frees); dir NULL = AUDIT_DEFAULT_DIR. */
char *audit_path (const char *dir, const char *id);

/* Start a record: fills ts (CLOCK_REALTIME now, RFC 3339 UTC, microseconds), container, event.
 * Never fails (allocation failure aborts, as xmalloc does). */
struct audit_rec *audit_rec_new (const char *container, const char *event);

/* Add fields, in order. Keys are ASCII literals; values may be any bytes: invalid UTF-8 is
 * replaced by U+FFFD, control characters are escaped, so the line stays one valid JSON object.
 * audit_rec_str with val NULL writes null. audit_rec_strv writes an array of n strings. */
void audit_rec_str (struct audit_rec *r, const char *key, const char *val);
void audit_rec_int (struct audit_rec *r, const char *key, int64_t val);
void audit_rec_bool (struct audit_rec *r, const char *key, int val);
void audit_rec_strv (struct audit_rec *r, const char *key, char *const *v, size_t n);

/* The finished line (with its '\n') for tests and for writers other than audit_rec_write.
 * Closes the object; further audit_rec_* calls on r are ignored. Pointer valid until r is freed. */
const char *audit_rec_line (struct audit_rec *r, size_t *len);

/* Write the record with one write(2) and free r (also on failure). A short write (disk full)
 * is EIO: nothing is retried, so no record is ever split. 0 / -1 with *err. */
int audit_rec_write (struct audit_rec *r, int fd, asbx_err_t *err);

void audit_rec_free (struct audit_rec *r);

/* RFC 3339 UTC timestamp with microseconds ("2025-01-02T03:04:05.123456Z") into buf (>= 32). */
void audit_timestamp (char *buf, size_t len);

#endif
