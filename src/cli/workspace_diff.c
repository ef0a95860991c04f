/* workspace_diff.c - `agentsbx workspace diff` and `agentsbx workspace apply` (the change
 * engine: runtime/workspace_diff.h, runtime/workspace_apply.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "core/util.h"
#include "runtime/workspace_apply.h"
#include "runtime/workspace_diff.h"

/* The PATH arguments in the walker's form; NULL after a usage error */
static char **
clean_paths (const char *verb, char **argv, int n)
{
  char **v = xmalloc0 (((size_t) n + 1) * sizeof *v);
  for (int i = 0; i < n; i++)
    if (!(v[i] = ws_clean_rel (argv[i])))
      {
        cli_usage (verb, "PATH `%s`: expected a path inside the workspace (no `..`)", argv[i]);
        for (int j = 0; j < i; j++)
          free (v[j]);
        free (v);
        return NULL;
      }
  return v;
}

static void
free_paths (char **v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free (v[i]);
  free (v);
}

int
cli_workspace_diff (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, 0, 'j' },
    { "from", required_argument, 0, 'f' },
    { "to", required_argument, 0, 't' },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  struct ws_diff_opts o = { .config_path = g->config_path };
  asbx_err_t err = NULL;
  int c;
  (void) g;

  optind = 0;
  while ((c = getopt_long (argc, argv, "jf:t:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'j': o.json = true; break;
      case 'f': o.from = optarg; break;
      case 't': o.to = optarg; break;
      case 'h':
        printf ("usage: agentsbx workspace diff ID [--json] [--from SNAP] [--to SNAP] [PATH...]\n\n"
                "What a review workspace's agent changed: one line per change (added, modified, mode,\n"
                "deleted, renamed), a unified diff for text, size and sha256 for binary content.\n"
                "--json: one JSON object per change and line. --from/--to: between snapshots\n"
                "(default: the host workspace -> the current upper layer).\n");
        return 0;
      default: return cli_usage ("workspace diff", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind >= argc)
    return cli_usage ("workspace diff", "no ID given: agentsbx workspace diff ID [PATH...]");
  o.id = argv[optind++];
  o.paths_len = (size_t) (argc - optind);
  if (!(o.paths = clean_paths ("workspace diff", argv + optind, argc - optind)))
    return 1;
  int r = ws_diff (&o, stdout, &err);
  free_paths (o.paths, o.paths_len);
  return r < 0 ? cli_fail (&err) : 0;
}

int
cli_workspace_apply (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "skip-refused", no_argument, 0, 's' }, { "git-data", no_argument, 0, 'g' }, { "dry-run", no_argument, 0, 'n' },
    { "running", no_argument, 0, 'r' },      { "help", no_argument, 0, 'h' },     { 0, 0, 0, 0 },
  };
  struct ws_apply_opts o = { .audit_dir = g->audit_dir, .config_path = g->config_path };
  asbx_err_t err = NULL;
  int c;

  optind = 0;
  while ((c = getopt_long (argc, argv, "sgnrh", opts, NULL)) != -1)
    switch (c)
      {
      case 's': o.skip_refused = true; break;
      case 'g': o.git_data = true; break;
      case 'n': o.dry_run = true; break;
      case 'r': o.running = true; break;
      case 'h':
        printf ("usage: agentsbx workspace apply ID [--skip-refused] [--git-data] [--dry-run] [--running] [PATH...]\n\n"
                "Write a review workspace's changes to the host workspace, atomically per file.\n"
                "Refused (with the reason): symlinks leaving the workspace or going through a symlink,\n"
                "hard links, device nodes, fifos, sockets, setuid/setgid/sticky or world-writable modes,\n"
                "with --git-data below a .git directory anything but git's data (objects, refs, logs, HEAD...);\n"
                "without it the agent's git data is kept out (its file changes apply),\n"
                "meta.json \"protect\" paths, and conflicts (host paths changed since the run started).\n"
                "Exit 0: applied (without PATH the workspace is removed: nothing is left);\n"
                "1: something was refused and nothing was applied; 3: --skip-refused applied the rest.\n"
                "--running: allow it while the container still runs.\n");
        return 0;
      default: return cli_usage ("workspace apply", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind >= argc)
    return cli_usage ("workspace apply", "no ID given: agentsbx workspace apply ID [PATH...]");
  o.id = argv[optind++];
  o.paths_len = (size_t) (argc - optind);
  if (!(o.paths = clean_paths ("workspace apply", argv + optind, argc - optind)))
    return 1;
  int r = ws_apply (&o, stdout, &err);
  free_paths (o.paths, o.paths_len);
  return r < 0 ? cli_fail (&err) : r;
}
