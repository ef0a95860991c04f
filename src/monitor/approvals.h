/* approvals.h - the approval broker of `approvals.network: ask` (POLICY.md §5), run by the
 * monitor inside the DNS stub (monitor/dnsstub.c): an unlisted name holds its DNS answer while
 * a question goes to whoever is connected to <state dir>/<id>/approvals.sock.
 *
 * Protocol: one JSON object per line, both ways.
 *   broker -> client: a question  {"id":N,"kind":"network","host":"…","port":P|null,"pid":P|null,"exe":"…"|null}
 *                     a reply     {"id":N,"ok":true} | {"id":N,"ok":false,"error":"…"}
 *                     end of list {"listed":COUNT}
 *   client -> broker: an answer   {"id":N,"decision":"allow-once"|"allow-always"|"deny"}
 *                     a listing   {"list":true}  (the pending questions, then {"listed":COUNT})
 * `port` is null for DNS questions (a query has none); `pid` (host pid namespace) and `exe` name the
 * process holding the querying socket, found by the stub within a budget (monitor/querier.h;
 * null when it is gone or the budget is spent).
 * A client gets every pending question when it connects and every new one as it is asked.
 * Timing: each question is decided by `approvals.timeoutSeconds` at the latest, with
 * `approvals.onTimeout`; 0 = at once (in the monitor's next loop turn). With no approver
 * connected nothing else happens: the timeout decides, a headless agent never hangs.
 * One question per host while it is pending (the A and AAAA lookups and retries of one name
 * share it). Every question and every decision is one `approval` audit record.
 * Threat model: the socket is 0600 root in the state dir (the container cannot reach it: other
 * mount namespace); a client's bytes are parsed with bounds, lines over 4 KiB drop the client. */
#ifndef ASBX_MONITOR_APPROVALS_H
#define ASBX_MONITOR_APPROVALS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/plan.h"

enum approval_decision
{
  APPROVAL_DENY = 0,
  APPROVAL_ALLOW_ONCE,
  APPROVAL_ALLOW_ALWAYS,
};

/* Called once per question with its decision (from approvals_dispatch, never from ask). */
typedef void (*approvals_decided_fn) (void *data, uint64_t qid, const char *host, enum approval_decision d);

struct approvals;

/* Bind <state_dirfd>/approvals.sock (replacing a stale one) and set up the broker. audit_fd and
 * state_dirfd stay the caller's. NULL with *err ("approvals: bind approvals.sock: ..."). */
struct approvals *approvals_new (const char *id, int state_dirfd, const struct policy_plan *plan, int audit_fd,
                                 approvals_decided_fn fn, void *data, asbx_err_t *err);

/* One fd to poll for POLLIN (an epoll set over the listener, clients and the timer). */
int approvals_fd (const struct approvals *a);

/* Accept, read answers, fire timeouts. Never blocks. */
void approvals_dispatch (struct approvals *a);

/* Put a question (or join the pending one for the same host); port/pid < 0 and exe NULL are
 * sent as null. Returns its id (> 0), or 0 when the table is full (the caller refuses). */
uint64_t approvals_ask (struct approvals *a, const char *host, int port, pid_t pid, const char *exe);

/* Remove the socket and free everything. */
void approvals_free (struct approvals *a);

/* "allow-once" / "allow-always" / "deny" */
const char *approvals_decision_name (enum approval_decision d);

#endif
