/* intercept_test.h - TEST ONLY, to be dropped when eg-policy's work is merged (issue 19): a
 * stand-in for the policy fields network.credentials / network.http, the host config's
 * secretsDir / upstreamCaFile and the per-container CA (runtime/egress_ca.c), so the monitor's
 * TLS interception (monitor/tls_relay.h) can be tested end to end before the real parser and
 * CA exist. Honoured only when the runtime's environment has AGENTSBX_TEST_INTERCEPT (like
 * AGENTSBX_TEST_STOP_AT: whoever sets the runtime's environment already controls it). */
#ifndef ASBX_RUNTIME_INTERCEPT_TEST_H
#define ASBX_RUNTIME_INTERCEPT_TEST_H

#include "core/error.h"
#include "policy/plan.h"

/* $AGENTSBX_TEST_INTERCEPT names a JSON file {"credentials": [{host, header, value}], "http":
 * [{host, allow: [{methods, paths}], maxBodyBytes}], "secretsDir", "upstreamCaFile", "caCertOut"}:
 * its entries are added to the (active) plan, and a CA (EC P-256, CA:TRUE pathlen:0,
 * nameConstraints permitted DNS = the hosts) is made in memory; its certificate is written to
 * caCertOut. Unset: nothing. 0 / -1 with *err. */
int intercept_test_apply (struct policy_plan *plan, asbx_err_t *err);

/* The CA made by intercept_test_apply (PEM text, static), or NULLs. */
void intercept_test_ca (const char **cert_pem, const char **key_pem);

#endif
