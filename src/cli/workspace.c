/* workspace.c - `agentsbx workspace SUBCOMMAND ...` (issue 18). MINIMAL DISPATCH of the rv-image
 * branch, so that `workspace export` can be tested before the merge: rv-mount's workspace.c
 * (list/discard/snapshot/rollback) and rv-diff's (diff/apply) own this table; the merge keeps
 * theirs and adds the `export` row below. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct
{
  const char *name;
  cli_verb_fn fn;
  const char *help;
} subs[] = {
  { "export", cli_workspace_export,
    "export ID --oci DIR [--tag TAG] [--base LAYOUT[:TAG]] [--path PATH]: the changes as an OCI image layer" },
};

int
cli_workspace (struct asbx_global *g, int argc, char **argv)
{
  if (argc < 2 || strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
    {
      FILE *f = argc < 2 ? stderr : stdout;
      fprintf (f, "usage: agentsbx workspace SUBCOMMAND [options] ID ...\n\nSUBCOMMANDS:\n");
      for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        fprintf (f, "   %-8s %s\n", subs[i].name, subs[i].help);
      return argc < 2 ? 1 : 0;
    }
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    if (strcmp (subs[i].name, argv[1]) == 0)
      return subs[i].fn (g, argc - 1, argv + 1);
  return cli_usage ("workspace", "unknown subcommand `%s` (see agentsbx workspace --help)", argv[1]);
}
