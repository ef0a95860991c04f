/* features.c - `features`: what this build accepts (runtime-spec features.md); the document is
 * built by runtime/features.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "runtime/features.h"

int
cli_features (struct asbx_global *g, int argc, char **argv)
{
  asbx_err_t err = NULL;

  (void) g;
  if (argc == 2 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    {
      printf ("usage: agentsbx features\n\nShow the enabled features (runtime-spec features.md) as JSON.\n");
      return 0;
    }
  if (argc > 1)
    return cli_usage ("features", "takes no arguments");
  char *json = runtime_features_json (&err);
  if (!json)
    return cli_fail (&err);
  printf ("%s\n", json);
  free (json);
  return 0;
}
