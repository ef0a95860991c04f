/* policy_cmds.h - `agentsbx policy check` and `agentsbx policy explain` (POLICY.md §1-§3): the
 * read-only policy commands, for the CLI (cli/policy.c), which parses options and prints errors. */
#ifndef ASBX_RUNTIME_POLICY_CMDS_H
#define ASBX_RUNTIME_POLICY_CMDS_H

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"

/* Validate the policy document in file `path` (at most 1 MiB) as `policy check` does: parse,
 * validate, apply extends (built-in and site profiles from profiles_dir, NULL = the default
 * directory). Returns the canonical JSON of the expanded document (heap, caller frees), or NULL
 * with *err: the read's errno, or EINVAL naming `path` and the JSON path of the bad value. */
char *runtime_policy_check_file (const char *path, const char *profiles_dir, asbx_err_t *err);

/* What `policy explain` resolves: the ceiling and request sources, as policy/policy.h's
 * policy_inputs (NULL = that source's default), plus the bundle whose config.json annotations
 * are the request (NULL = none) and the output form. */
struct runtime_policy_query
{
  const char *profile_flag;            /* --profile NAME (ceiling) */
  const char *policy_flag;             /* --policy FILE (ceiling) */
  const char *config_path;             /* --config FILE, NULL = /etc/agentsbx/config.json */
  const char *profiles_dir;            /* --profiles-dir DIR, NULL = /etc/agentsbx/profiles */
  const char *audit_dir_flag;          /* global --audit-dir */
  const char *sandbox_default_profile; /* `--sandbox`: the ceiling when none is given ("agent") */
  const char *bundle;                  /* --bundle DIR: its config.json's io.agentsbx.* annotations */
  bool json;                           /* the plan as JSON (policy_plan_to_json) instead of the report */
};

/* Resolve the effective policy (policy_resolve) and write it to `out`: the plan as pretty JSON
 * when q->json, else the report (sources, digest, effective policy, mounts, Landlock rules,
 * syscall groups, capabilities, network with the very nftables text the runtime loads, limits,
 * approvals, audit). Returns 0, or -1 with *err: the bundle's config.json does not parse, the
 * policy does not resolve (policy_resolve's errors), or its nftables ruleset cannot be built; in
 * the last case the report up to the ruleset has been written. Nothing else is touched. */
int runtime_policy_explain (const struct runtime_policy_query *q, FILE *out, asbx_err_t *err);

/* The built-in tables `agentsbx policy groups` and `policy profiles` list. */
enum runtime_policy_table
{
  RUNTIME_POLICY_GROUPS,   /* the syscall groups of policy/syscall_groups.h: name, what it refuses */
  RUNTIME_POLICY_PROFILES, /* the built-in profiles (contrib/profiles/NAME.json): name, description */
};

/* Write table `t` to `out`: one line per entry (the name, spaces, its text), or with `markdown`
 * the table the build puts in docs/policy-builtins.md (for the groups with every member, its
 * argument condition and errno). Reads nothing but the tables compiled in; no error. */
void runtime_policy_list (enum runtime_policy_table t, bool markdown, FILE *out);

#endif
