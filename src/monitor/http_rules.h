/* http_rules.h - the per-host request rules of the TLS interception (network.http[], issue 19;
 * plan.h struct policy_http_host): does one parsed request pass EVERY entry of its host. Pure
 * (no syscalls, no allocation). */
#ifndef ASBX_MONITOR_HTTP_RULES_H
#define ASBX_MONITOR_HTTP_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "policy/plan.h"

/* The request method (NUL-terminated) and request target t[0..tn) (origin-form, as sent, query
 * included: what the `paths` patterns are matched against, fnmatch(3) without FNM_PATHNAME) of a
 * request to `host` (lower case, no port) whose body is body_len bytes (Content-Length, 0 when it
 * has none or is chunked: the relay enforces the cap on a chunked body as it passes, with
 * *max_body).
 * Each network.http entry of `host` must allow the request: one of its allow[] items matches the
 * method (exactly, case-sensitive as RFC 9110 §9.1 says; none listed = any) and the target (none
 * listed = any), and its maxBodyBytes (if any) is not below body_len. A target with a dot-segment
 * ("/./", "/../", a final "/." or "/..") or an encoded one ("%2e", "%2f", "%5c", a backslash) is
 * refused whatever the patterns: a server resolving it would reach a path the pattern did not see.
 * A host with no entry passes (it is intercepted for its credentials only).
 * Returns 0 = allowed: rule[0..rulelen) is "allow[N]" (N the index of the first matching item of
 * each entry, joined by '+' when the host has several entries; "any" for a host without
 * entries), *max_body the smallest maxBodyBytes of the entries (0 = none); -1 = refused: rule is
 * the reason ("method not allowed: DELETE", "path not allowed", "body too large: 12 > 10 bytes",
 * "ambiguous path"). */
int http_rules_check (const struct policy_plan *plan, const char *host, const char *method, const char *t, size_t tn,
                      uint64_t body_len, uint64_t *max_body, char *rule, size_t rulelen);

/* Whether `host` (lower case) is intercepted: it has a network.credentials or network.http entry. */
bool http_rules_intercepted (const struct policy_plan *plan, const char *host);

#endif
