/* workspace.c - `agentsbx workspace SUBCOMMAND ...`: the review workspaces (issue 18). The
 * subcommands' handlers live in their own files (workspace_diff.c: diff, apply); this table is
 * the one dispatch. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct
{
  const char *name;
  cli_verb_fn fn;
  const char *help;
} subs[] = {
  { "diff", cli_workspace_diff, "diff ID [--json] [--from SNAP] [--to SNAP] [PATH...]: what the agent changed" },
  { "apply", cli_workspace_apply,
    "apply ID [--skip-refused] [--dry-run] [--running] [PATH...]: write the changes to the host workspace" },
};

static void
usage (FILE *f)
{
  fprintf (f, "usage: agentsbx workspace SUBCOMMAND [options] ID ...\n\nSUBCOMMANDS:\n");
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    fprintf (f, "   %-8s %s\n", subs[i].name, subs[i].help);
}

int
cli_workspace (struct asbx_global *g, int argc, char **argv)
{
  if (argc < 2 || strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
    {
      usage (argc < 2 ? stderr : stdout);
      return argc < 2 ? 1 : 0;
    }
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    if (strcmp (subs[i].name, argv[1]) == 0)
      return subs[i].fn (g, argc - 1, argv + 1);
  return cli_usage ("workspace", "unknown subcommand `%s` (see agentsbx workspace --help)", argv[1]);
}
