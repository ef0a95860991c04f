/* cli.h - one file per verb; each parses its own options (runc's names) and calls one runtime
 * function. Verbs return the process exit status; errors are printed once, here. */
#ifndef ASBX_CLI_H
#define ASBX_CLI_H

#include "core/error.h"
#include "runtime/container.h"

typedef int (*cli_verb_fn) (struct asbx_global *g, int argc, char **argv);

int cli_create (struct asbx_global *g, int argc, char **argv);
int cli_start (struct asbx_global *g, int argc, char **argv);
int cli_run (struct asbx_global *g, int argc, char **argv);
int cli_exec (struct asbx_global *g, int argc, char **argv);
int cli_sandbox (struct asbx_global *g, int argc, char **argv);
int cli_state (struct asbx_global *g, int argc, char **argv);
int cli_kill (struct asbx_global *g, int argc, char **argv);
int cli_delete (struct asbx_global *g, int argc, char **argv);
int cli_list (struct asbx_global *g, int argc, char **argv);
int cli_spec (struct asbx_global *g, int argc, char **argv);
int cli_features (struct asbx_global *g, int argc, char **argv);
int cli_update (struct asbx_global *g, int argc, char **argv);
int cli_pause (struct asbx_global *g, int argc, char **argv);
int cli_resume (struct asbx_global *g, int argc, char **argv);
int cli_ps (struct asbx_global *g, int argc, char **argv);
int cli_events (struct asbx_global *g, int argc, char **argv);
int cli_audit (struct asbx_global *g, int argc, char **argv);
int cli_approvals (struct asbx_global *g, int argc, char **argv);
int cli_approve (struct asbx_global *g, int argc, char **argv);
int cli_deny (struct asbx_global *g, int argc, char **argv);
int cli_policy (struct asbx_global *g, int argc, char **argv);
int cli_checkpoint (struct asbx_global *g, int argc, char **argv);
int cli_restore (struct asbx_global *g, int argc, char **argv);
int cli_workspace (struct asbx_global *g, int argc, char **argv);
/* `workspace` subcommands (src/cli/workspace.c dispatches; argv[0] is the subcommand) */
int cli_workspace_diff (struct asbx_global *g, int argc, char **argv);
int cli_workspace_apply (struct asbx_global *g, int argc, char **argv);
int cli_workspace_export (struct asbx_global *g, int argc, char **argv);
int cli_setup (struct asbx_global *g, int argc, char **argv);

/* Print *err once (log + stderr), free it, return 1 (or the error's status). */
int cli_fail (asbx_err_t *err);
/* Print a usage error for `verb` and return 1 (runc exits 1 on usage errors too). */
int cli_usage (const char *verb, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* Parse a non-negative int option value; -1 with a usage error printed. */
int cli_parse_int (const char *verb, const char *opt, const char *s, int *out);

/* Shared by create and run: the options both take. Returns the index of the first positional
 * argument, or -1 after printing a usage error. */
struct asbx_create_opts;
int cli_parse_create_opts (const char *verb, int argc, char **argv, struct asbx_create_opts *o, int *detach, int *keep);

#endif
