/* policy.c - `agentsbx policy check FILE...` and `agentsbx policy explain` (POLICY.md §1-§3):
 * validate policy documents, and show the effective policy of a runtime class (+ a bundle's
 * annotations). `policy groups` and `policy profiles` list the two built-in tables (the build
 * makes docs/policy-builtins.md from them). Options here; the work in runtime/policy_cmds.c. All
 * are read-only: no container, no kernel state is touched. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "runtime/policy_cmds.h"

static int
policy_usage (FILE *f)
{
  fprintf (f, "usage: agentsbx policy check [--profiles-dir DIR] [--quiet] FILE...\n"
              "       agentsbx policy explain [--profile NAME | --policy FILE] [--bundle DIR] [--config FILE]\n"
              "                               [--profiles-dir DIR] [--sandbox] [--json]\n"
              "       agentsbx policy groups [--markdown]\n"
              "       agentsbx policy profiles [--markdown]\n\n"
              "check     validate policy documents (unknown keys, values, extends); print each expanded\n"
              "explain   the effective policy (ceiling from --profile/--policy/the host config, request from\n"
              "          the bundle's io.agentsbx.* annotations) and the plan: mounts, Landlock rules, syscall\n"
              "          groups, capabilities, network, limits, approvals, audit\n"
              "groups    the syscall groups of syscalls.deny, one a line: NAME and what it refuses\n"
              "profiles  the built-in profiles, one a line: NAME and its description\n");
  return f == stdout ? 0 : 1;
}

static int
policy_check_verb (int argc, char **argv)
{
  static const struct option opts[] = { { "profiles-dir", required_argument, 0, 'd' },
                                        { "quiet", no_argument, 0, 'q' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  const char *dir = NULL;
  bool quiet = false;
  int c, status = 0;
  while ((c = getopt_long (argc, argv, "qh", opts, NULL)) != -1)
    switch (c)
      {
      case 'd': dir = optarg; break;
      case 'q': quiet = true; break;
      case 'h': return policy_usage (stdout);
      default: return cli_usage ("policy check", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind >= argc)
    return cli_usage ("policy check", "expected at least one FILE");
  for (int i = optind; i < argc; i++)
    {
      asbx_err_t err = NULL;
      cleanup_free char *out = runtime_policy_check_file (argv[i], dir, &err);
      if (out == NULL)
        {
          status = cli_fail (&err);
          continue;
        }
      if (quiet)
        printf ("%s: ok\n", argv[i]);
      else
        printf ("%s: ok\n%s\n", argv[i], out);
    }
  return status;
}

static int
policy_explain_verb (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "profile", required_argument, 0, 'p' },
    { "policy", required_argument, 0, 'f' },
    { "bundle", required_argument, 0, 'b' },
    { "config", required_argument, 0, 'c' },
    { "profiles-dir", required_argument, 0, 'd' },
    { "sandbox", no_argument, 0, 's' },
    { "json", no_argument, 0, 'j' },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  struct runtime_policy_query q = { .profile_flag = g->profile,
                                    .policy_flag = g->policy_file,
                                    .config_path = g->config_path,
                                    .audit_dir_flag = g->audit_dir };
  asbx_err_t err = NULL;
  int c;

  while ((c = getopt_long (argc, argv, "+b:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'p': q.profile_flag = optarg; break;
      case 'f': q.policy_flag = optarg; break;
      case 'b': q.bundle = optarg; break;
      case 'c': q.config_path = optarg; break;
      case 'd': q.profiles_dir = optarg; break;
      case 's': q.sandbox_default_profile = "agent"; break;
      case 'j': q.json = true; break;
      case 'h': return policy_usage (stdout);
      default: return cli_usage ("policy explain", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind < argc)
    return cli_usage ("policy explain", "unexpected argument `%s`", argv[optind]);
  if (runtime_policy_explain (&q, stdout, &err) < 0)
    return cli_fail (&err);
  return 0;
}

/* `policy groups` / `policy profiles` [--markdown]: the built-in table `what`, one line per entry
 * (NAME, spaces, its text), or with --markdown as the tables of docs/policy-builtins.md. */
static int
policy_list_verb (const char *what, int argc, char **argv)
{
  static const struct option opts[] = { { "markdown", no_argument, 0, 'm' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  bool md = false;
  int c;
  while ((c = getopt_long (argc, argv, "h", opts, NULL)) != -1)
    switch (c)
      {
      case 'm': md = true; break;
      case 'h': return policy_usage (stdout);
      default: return cli_usage (what, "unknown option `%s`", argv[optind - 1]);
      }
  if (optind < argc)
    return cli_usage (what, "unexpected argument `%s`", argv[optind]);
  runtime_policy_list (strcmp (what, "policy groups") == 0 ? RUNTIME_POLICY_GROUPS : RUNTIME_POLICY_PROFILES, md,
                       stdout);
  return 0;
}

int
cli_policy (struct asbx_global *g, int argc, char **argv)
{
  if (argc < 2)
    return policy_usage (stderr);
  optind = 0; /* full getopt re-initialisation for the subcommand (permutes options) */
  if (strcmp (argv[1], "check") == 0)
    return policy_check_verb (argc - 1, argv + 1);
  if (strcmp (argv[1], "explain") == 0)
    return policy_explain_verb (g, argc - 1, argv + 1);
  if (strcmp (argv[1], "groups") == 0)
    return policy_list_verb ("policy groups", argc - 1, argv + 1);
  if (strcmp (argv[1], "profiles") == 0)
    return policy_list_verb ("policy profiles", argc - 1, argv + 1);
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "help") == 0)
    return policy_usage (stdout);
  return cli_usage ("policy", "unknown subcommand `%s` (check, explain, groups, profiles)", argv[1]);
}
