/* setup.c - `agentsbx setup docker|podman|containerd [--profile P]... [--dry-run] [--undo]
 * [--config FILE] [--runtime-path PATH] [--wrapper-dir DIR]`: wire agentsbx into an engine's
 * configuration (runtime/setup.h). No runc equivalent. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/util.h"
#include "runtime/setup.h"

int
cli_setup (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "profile", required_argument, 0, 'p' },
    { "dry-run", no_argument, 0, 'n' },
    { "undo", no_argument, 0, 'u' },
    { "config", required_argument, 0, 'c' },
    { "runtime-path", required_argument, 0, 'r' },
    { "wrapper-dir", required_argument, 0, 'w' },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  struct asbx_setup_opts o = { 0 };
  asbx_err_t err = NULL;
  int c;

  (void) g;
  while ((c = getopt_long (argc, argv, "p:nuc:r:w:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'p':
        o.profiles = xrealloc (o.profiles, (o.nprofiles + 1) * sizeof *o.profiles);
        o.profiles[o.nprofiles++] = optarg;
        break;
      case 'n': o.dry_run = true; break;
      case 'u': o.undo = true; break;
      case 'c': o.config = optarg; break;
      case 'r': o.binary = optarg; break;
      case 'w': o.wrapper_dir = optarg; break;
      case 'h':
        printf ("usage: agentsbx setup docker|podman|containerd [--profile NAME]... [--dry-run] [--undo]\n"
                "                      [--config FILE] [--runtime-path PATH] [--wrapper-dir DIR]\n\n"
                "Add the runtime `agentsbx` (and `agentsbx-NAME` with the ceiling --profile=NAME per\n"
                "--profile) to the engine's configuration, or remove them with --undo; idempotent, with\n"
                "a backup (FILE.agentsbx-backup), no other key touched. --dry-run prints the file that\n"
                "would be written. Prints the command that makes the engine read it.\n");
        free (o.profiles);
        return 0;
      default: free (o.profiles); return cli_usage ("setup", "unknown option `%s`", argv[optind - 1]);
      }
  int rc = 0;
  if (optind != argc - 1)
    rc = cli_usage ("setup", "expected one engine: docker, podman or containerd");
  else if (strcmp (argv[optind], "docker") == 0)
    o.engine = ASBX_SETUP_DOCKER;
  else if (strcmp (argv[optind], "podman") == 0)
    o.engine = ASBX_SETUP_PODMAN;
  else if (strcmp (argv[optind], "containerd") == 0)
    o.engine = ASBX_SETUP_CONTAINERD;
  else
    rc = cli_usage ("setup", "engine `%s`: expected docker, podman or containerd", argv[optind]);
  if (rc == 0 && o.undo && o.nprofiles)
    rc = cli_usage ("setup", "--undo removes every agentsbx entry: it takes no --profile");
  if (rc == 0 && asbx_setup (&o, &err) < 0)
    rc = cli_fail (&err);
  free (o.profiles);
  return rc;
}
