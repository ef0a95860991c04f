/* audit_html.h - `agentsbx audit --html ID`: one self-contained HTML page of a container's audit
 * log, for a browser: the counts on top, the timeline of every record with its decision, and
 * filters (event kinds, decision, free text). */
#ifndef ASBX_RUNTIME_AUDIT_HTML_H
#define ASBX_RUNTIME_AUDIT_HTML_H

#include <stddef.h>
#include <stdio.h>

/* Write the page for the audit log text `log` (len bytes of JSON lines) of container `id` to
 * `out`. Every value is HTML-escaped (the log holds container-controlled text: paths, argv,
 * names); the page loads nothing (a Content-Security-Policy of default-src 'none' with inline
 * style and script only), and works without script (the filters need it). Rows carry
 * data-event and data-decision ("denied", "allowed" or ""); the filter state can be preset with
 * the URL fragment: #denied, #event=dns,network, #q=TEXT. Lines that are not JSON objects are
 * counted and skipped. 0, -1 on a write error (errno). */
int audit_html_write (const char *id, const char *log, size_t len, FILE *out);

#endif
