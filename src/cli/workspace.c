/* workspace.c - `agentsbx workspace SUBCOMMAND ...`: the review workspaces (issue 18; man page
 * docs/man/agentsbx-workspace.8.md). One table of subcommands; each parses its own arguments and
 * calls one runtime/ function (runtime/workspace_cmds.h). `diff` and `apply` live in
 * workspace_diff.c, `export` in workspace_export.c, registered in the same table. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "runtime/workspace_cmds.h"

typedef int (*ws_sub_fn) (struct asbx_global *g, int argc, char **argv);

static int
ws_list (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = { { "json", no_argument, 0, 'j' }, { 0, 0, 0, 0 } };
  asbx_err_t err = NULL;
  bool json = false;
  int c;

  optind = 1;
  while ((c = getopt_long (argc, argv, "+j", opts, NULL)) != -1)
    if (c == 'j')
      json = true;
    else
      return cli_usage ("workspace list", "unknown option `%s`", argv[optind - 1]);
  if (optind != argc)
    return cli_usage ("workspace list", "unexpected argument `%s` (usage: workspace list [--json])", argv[optind]);
  if (asbx_workspace_list (g, json, &err) < 0)
    return cli_fail (&err);
  return 0;
}

static int
ws_discard (struct asbx_global *g, int argc, char **argv)
{
  asbx_err_t err = NULL;
  if (argc != 2)
    return cli_usage ("workspace discard", "expected one ID (usage: workspace discard ID)");
  if (asbx_workspace_discard (g, argv[1], &err) < 0)
    return cli_fail (&err);
  return 0;
}

static int
ws_snapshot (struct asbx_global *g, int argc, char **argv)
{
  asbx_err_t err = NULL;
  char *name = NULL;
  if (argc != 2 && argc != 3)
    return cli_usage ("workspace snapshot", "expected ID [NAME] (usage: workspace snapshot ID [NAME])");
  if (asbx_workspace_snapshot (g, argv[1], argc == 3 ? argv[2] : NULL, &name, &err) < 0)
    return cli_fail (&err);
  printf ("%s\n", name);
  free (name);
  return 0;
}

static int
ws_rollback (struct asbx_global *g, int argc, char **argv)
{
  asbx_err_t err = NULL;
  if (argc != 3)
    return cli_usage ("workspace rollback", "expected ID NAME (usage: workspace rollback ID NAME)");
  if (asbx_workspace_rollback (g, argv[1], argv[2], &err) < 0)
    return cli_fail (&err);
  return 0;
}

static const struct
{
  const char *name;
  ws_sub_fn fn;
  const char *usage;
} subs[] = {
  { "list", ws_list, "list [--json]            the review workspaces: id, state, snapshots, changed entries" },
  { "diff", cli_workspace_diff, "diff ID [--json] [--from SNAP] [--to SNAP] [PATH...]  what the agent changed" },
  { "apply", cli_workspace_apply,
    "apply ID [--skip-refused] [--dry-run] [--running] [PATH...]  write the changes to the host workspace" },
  { "export", cli_workspace_export,
    "export ID --oci DIR [--tag T] [--base LAYOUT[:TAG]] [--path P]  the changes as an OCI image layer" },
  { "discard", ws_discard, "discard ID               remove the workspace's changes and snapshots (nothing is left)" },
  { "snapshot", ws_snapshot, "snapshot ID [NAME]       copy the changes so far (the container frozen while it runs)" },
  { "rollback", ws_rollback, "rollback ID NAME         replace the changes by snapshot NAME (container stopped)" },
};

static void
usage (FILE *f)
{
  fprintf (f, "usage: agentsbx workspace SUBCOMMAND [ARGS]\n\n");
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    fprintf (f, "  %s\n", subs[i].usage);
}

int
cli_workspace (struct asbx_global *g, int argc, char **argv)
{
  if (argc < 2)
    {
      usage (stderr);
      return 1;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "help") == 0)
    {
      usage (stdout);
      return 0;
    }
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    if (strcmp (subs[i].name, argv[1]) == 0)
      return subs[i].fn (g, argc - 1, argv + 1);
  return cli_usage ("workspace", "unknown subcommand `%s` (see agentsbx workspace --help)", argv[1]);
}
