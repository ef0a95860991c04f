/* sandbox.c - `agentsbx sandbox [--profile P] [--policy F] [--workspace DIR] [--rootfs DIR]
 * [--image LAYOUT[:TAG]] [--seed-git REPO[@REV]] [--id ID] [--review] [--stop-timeout S] [--summary text|json|none]
 * [--quiet] -- CMD ARG...`: the quick mode (POLICY.md §7). --profile/--policy here are the same as the global flags
 * (the ceiling). --stop-timeout is handed to the runtime as AGENTSBX_STOP_TIMEOUT (the variable a user may also set),
 * so the options struct the engines' code shares stays as it is. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "runtime/sandbox.h"

int
cli_sandbox (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "profile", required_argument, 0, 'p' },
    { "policy", required_argument, 0, 'f' },
    { "workspace", required_argument, 0, 'w' },
    { "rootfs", required_argument, 0, 'r' },
    { "image", required_argument, 0, 'I' },
    { "seed-git", required_argument, 0, 'S' },
    { "id", required_argument, 0, 'i' },
    { "review", no_argument, 0, 'R' },
    { "stop-timeout", required_argument, 0, 't' },
    { "summary", required_argument, 0, 's' },
    { "quiet", no_argument, 0, 'q' },
    { "isolation", required_argument, 0, 'V' },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  struct asbx_sandbox_opts o = { 0 };
  asbx_err_t err = NULL;
  int c, status = 0;
  bool summary_given = false;
  char *end;
  long n;

  while ((c = getopt_long (argc, argv, "+p:f:w:r:I:S:i:t:s:qV:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'p': g->profile = optarg; break;
      case 'f': g->policy_file = optarg; break;
      case 'w': o.workspace = optarg; break;
      case 'r': o.rootfs = optarg; break;
      case 'I': o.image = optarg; break;
      case 'S': o.seed_git = optarg; break;
      case 'i': o.id = optarg; break;
      case 'R': o.review = true; break;
      case 't':
        errno = 0;
        n = strtol (optarg, &end, 10);
        if (errno || end == optarg || *end || n < 0 || n > 86400)
          return cli_usage ("sandbox", "--stop-timeout `%s`: expected whole seconds (0-86400)", optarg);
        setenv ("AGENTSBX_STOP_TIMEOUT", optarg, 1);
        break;
      case 's':
        if (strcmp (optarg, "text") == 0)
          o.summary = ASBX_SANDBOX_SUMMARY_TEXT;
        else if (strcmp (optarg, "json") == 0)
          o.summary = ASBX_SANDBOX_SUMMARY_JSON;
        else if (strcmp (optarg, "none") == 0)
          o.summary = ASBX_SANDBOX_SUMMARY_NONE;
        else
          return cli_usage ("sandbox", "--summary `%s`: expected text, json or none", optarg);
        summary_given = true;
        break;
      case 'q': o.quiet = true; break;
      case 'V':
        if (strcmp (optarg, "vm") == 0)
          o.isolation_vm = true;
        else if (strcmp (optarg, "container") != 0)
          return cli_usage ("sandbox", "--isolation `%s`: expected container or vm", optarg);
        break;
      case 'h':
        printf ("usage: agentsbx sandbox [--profile NAME] [--policy FILE] [--workspace DIR] [--rootfs DIR]\n"
                "                        [--image LAYOUT[:TAG]] [--seed-git REPO[@REV]] [--id ID] [--review]\n"
                "                        [--stop-timeout SECONDS] [--summary text|json|none] [--quiet]\n"
                "                        [--isolation container|vm]\n"
                "                        -- CMD [ARG...]\n\n"
                "Run one command under an agent policy (default profile: agent), in the foreground.\n"
                "The workspace (default: the current directory) is mounted at /workspace and is the\n"
                "working directory; the host's system directories are the read-only root unless --rootfs\n"
                "or --image (an OCI image layout, verified and unpacked once into a cache by digest).\n"
                "--seed-git makes the (review) workspace a clone of a local repository at REV (default HEAD).\n"
                "A workspace that is /, a system directory, /proc, /sys, /dev or a home directory is refused.\n"
                "--review: /workspace is an overlay over the workspace; the host directory is not written,\n"
                "the changes are kept under the id (see agentsbx workspace list|diff|apply|discard).\n"
                "SIGTERM/SIGINT/SIGHUP/SIGQUIT are forwarded; a container still running --stop-timeout\n"
                "seconds later (default 10, or $AGENTSBX_STOP_TIMEOUT) is killed, exit status 128+signal.\n"
                "At the end, what was denied and the limit that stopped it are printed on stderr (nothing\n"
                "when the run was clean); --summary json prints one JSON object instead, always;\n"
                "--quiet prints neither summary text nor notices (errors still).\n"
                "--isolation vm: the container runs inside a microVM with its own kernel (`agentsbx features`\n"
                "says whether this host offers it; docs/security.md \"Isolation tiers\").\n");
        return 0;
      default: return cli_usage ("sandbox", "unknown option `%s`", argv[optind - 1]);
      }
  if (o.quiet && !summary_given)
    o.summary = ASBX_SANDBOX_SUMMARY_NONE;
  o.argv = argv + optind;
  o.argc = (size_t) (argc - optind);
  if (o.argc == 0)
    return cli_usage ("sandbox", "no command given: agentsbx sandbox [options] -- CMD [ARG...]");
  if (asbx_sandbox_run (g, &o, &status, &err) < 0)
    return cli_fail (&err);
  return status;
}
