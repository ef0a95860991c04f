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
 * The last line is always whole: a short write (disk full in the middle of a record) is cut back
 * off the file (ftruncate to where the record began).
 *
 * Usage:
 *   struct audit_rec *r = audit_rec_new (id, "lifecycle");
 *   audit_rec_str (r, "state", "exited");
 *   audit_rec_int (r, "exitCode", 137);
 *   if (audit_rec_write (r, fd, &err) < 0) ...   (always frees r)
 */
#ifndef ASBX_MONITOR_AUDIT_H
#define ASBX_MONITOR_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define AUDIT_DEFAULT_DIR "/var/log/agentsbx"

/* The monitor's per-container quota (issue 14 §4; docs/policy.md §2.7 "Volume"). Reserved kinds
 * (lifecycle, policy, limit) are always written and never counted against it. */
#define AUDIT_QUOTA_BYTES (32ull << 20) /* non-reserved bytes per container and monitor */
#define AUDIT_RATE_PER_SEC 100.0        /* non-reserved records per second and bucket, sustained */
#define AUDIT_BURST 500.0               /* ... and in one burst */
#define AUDIT_RESERVE_BYTES (16u << 10) /* kept preallocated past the end for reserved records */
#define AUDIT_ARGV_BYTES 1024           /* exec records: argv text kept (the rest: argvBytes) */
#define AUDIT_ARGV_ITEMS 64             /* ... and arguments kept (the rest: argc) */
#define AUDIT_STR_BYTES 1024            /* any other string value from the container */

struct audit_rec;

struct audit_sink_opts
{
  const char *container; /* for the sink's own `limit` records; must outlive the sink */
  uint64_t bytes_max;    /* AUDIT_QUOTA_BYTES */
  double rate, burst;    /* AUDIT_RATE_PER_SEC, AUDIT_BURST */
  /* called once (outside the sink's lock) when the file system cannot keep the reserve or a
   * write fails with ENOSPC/EDQUOT: the policy's audit.onFull decides (the monitor kills) */
  void (*on_full) (void *data);
  void *data;
};

/* Make fd (the monitor's audit log, opened by audit_open) the quota'd sink of this process: from
 * now on audit_rec_write to fd admits a non-reserved record only within the rate of its bucket
 * (exec; network and dns; denial; the rest - each with the whole rate and burst), the byte quota
 * (of which each bucket keeps 1/8 for itself until it used it) and while the file system keeps AUDIT_RESERVE_BYTES for
 * the reserved ones (fallocate KEEP_SIZE past the end; free space where fallocate is not supported). Refused records
 * are counted per kind (exec, dns, network, denial, approval, other; `lost` = reserved records the disk refused) and
 * reported in a `limit` record {"limit":"audit","action":"suppress"|"full", "suppressed":{...}} at most once a second
 * and before every reserved record. Thread-safe: the monitor's loop and its limits thread share it. One sink per
 * process. */
void audit_sink_setup (int fd, const struct audit_sink_opts *o);

/* Add the sink's counters to r as "suppressed": {...} (nothing without a sink). */
void audit_sink_counts (struct audit_rec *r);

/* Count n records of kind `event` ("network", ...) that were never made, as if the sink had
 * suppressed them (the kernel's NFLOG limit kept their packets from the monitor: monitor/nflog.h),
 * and report the counters as the sink does (a `limit` record at most once a second; the next
 * reserved record carries them anyway). Nothing without a sink. Thread-safe. */
void audit_sink_suppressed_add (const char *event, uint64_t n);

/* Add "key": {names[i]: v[i], ...}. */
void audit_rec_counts (struct audit_rec *r, const char *key, const char *const *names, const uint64_t *v, size_t n);

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

/* A list of objects under `key`: audit_rec_list_open (r, key), then per object
 * audit_rec_item_open (r), audit_rec_str/int/bool ... (fields of the object), audit_rec_item_close (r),
 * and audit_rec_list_close (r) (the `workspace` record's paths). */
void audit_rec_list_open (struct audit_rec *r, const char *key);
void audit_rec_item_open (struct audit_rec *r);
void audit_rec_item_close (struct audit_rec *r);
void audit_rec_list_close (struct audit_rec *r);

/* The finished line (with its '\n') for tests and for writers other than audit_rec_write.
 * Closes the object; further audit_rec_* calls on r are ignored. Pointer valid until r is freed. */
const char *audit_rec_line (struct audit_rec *r, size_t *len);

/* Write the record with one write(2) and free r (also on failure). A short write (disk full)
 * is cut back off the file and reported as ENOSPC: nothing is retried, so no record is ever
 * split. To the sink's fd (audit_sink_setup) the quota applies: a suppressed record is counted
 * and returns 0. 0 / -1 with *err. */
int audit_rec_write (struct audit_rec *r, int fd, asbx_err_t *err);

void audit_rec_free (struct audit_rec *r);

/* RFC 3339 UTC timestamp with microseconds ("2025-01-02T03:04:05.123456Z") into buf (>= 32). */
void audit_timestamp (char *buf, size_t len);

#endif
