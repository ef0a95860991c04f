/* workspace_export.c - `agentsbx workspace export ID --oci DIR [--tag T] [--base LAYOUT[:TAG]]
 * [--path P]`: a review workspace's changes as an OCI image layer (runtime/oci_export.h).
 * Registered in the `workspace` verb's table (src/cli/workspace.c); argv[0] is "export". */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "runtime/oci_export.h"

int
cli_workspace_export (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "oci", required_argument, 0, 'o' },  { "tag", required_argument, 0, 't' }, { "base", required_argument, 0, 'b' },
    { "path", required_argument, 0, 'p' }, { "help", no_argument, 0, 'h' },      { 0, 0, 0, 0 },
  };
  struct oci_export_opts o = { 0 };
  struct oci_export_result r;
  asbx_err_t err = NULL;
  int c;

  optind = 0; /* GNU: re-initialise (permutes: ID may come before or after the options) */
  while ((c = getopt_long (argc, argv, "o:t:b:p:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'o': o.out = optarg; break;
      case 't': o.tag = optarg; break;
      case 'b': o.base = optarg; break;
      case 'p': o.path = optarg; break;
      case 'h':
        printf ("usage: agentsbx workspace export ID --oci DIR [--tag TAG] [--base LAYOUT[:TAG]] [--path PATH]\n\n"
                "Write the changes of review workspace ID (its upper layer) as one OCI image layer into the\n"
                "OCI image layout DIR (created when missing), with a config, a manifest and an index.json\n"
                "entry tagged TAG (default: ID). --base puts the layers of that image below it (its blobs are\n"
                "copied); --path is where the workspace was mounted in the container (default /workspace):\n"
                "the layer's entries lie below it. Prints the manifest digest.\n");
        return 0;
      default: return cli_usage ("workspace export", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind != argc - 1)
    return cli_usage ("workspace export", "expected one workspace ID (agentsbx workspace export ID --oci DIR)");
  if (!o.out)
    return cli_usage ("workspace export", "--oci DIR is required");
  o.id = argv[optind];
  o.audit_flag = g->audit_dir;
  o.config_path = g->config_path;
  if (oci_export_workspace (&o, &r, &err) < 0)
    return cli_fail (&err);
  printf ("%s\n", r.manifest_digest);
  fprintf (stderr,
           "workspace %s: %llu file(s), %llu dir(s), %llu deletion(s), %llu opaque dir(s) -> layer sha256:%s "
           "(%lld bytes)%s\n",
           o.id, (unsigned long long) r.layer.files, (unsigned long long) r.layer.dirs,
           (unsigned long long) r.layer.whiteouts, (unsigned long long) r.layer.opaque, r.layer.digest_hex,
           (long long) r.layer.size, r.layer.skipped ? "; sockets/devices skipped" : "");
  free (r.manifest_digest);
  return 0;
}
