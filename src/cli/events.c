/* events.c - `agentsbx events [--stats] [--interval DURATION] ID`: runc's container events as
 * JSON lines on stdout: "stats" (cpu, memory, pids, blkio, hugetlb) and "oom". --interval takes
 * Go-style durations as runc does ("5s", "500ms", "1m"; default 5s). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "runtime/container_cgroup.h"

/* "5s" "500ms" "1m" "2" (seconds) -> ms; -1 on error */
static int
parse_duration_ms (const char *s)
{
  char *end;
  double v = strtod (s, &end);
  double mul = 1000;

  if (end == s || v <= 0)
    return -1;
  if (strcmp (end, "ms") == 0)
    mul = 1;
  else if (strcmp (end, "s") == 0 || *end == '\0')
    mul = 1000;
  else if (strcmp (end, "m") == 0)
    mul = 60000;
  else if (strcmp (end, "h") == 0)
    mul = 3600000;
  else
    return -1;
  v *= mul;
  return v < 1 || v > 86400000 ? -1 : (int) v;
}

int
cli_events (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = { { "stats", no_argument, 0, 's' },
                                        { "interval", required_argument, 0, 'i' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  asbx_err_t err = NULL;
  bool stats = false;
  int interval = 5000, c;

  while ((c = getopt_long_only (argc, argv, "+h", opts, NULL)) != -1)
    switch (c)
      {
      case 's': stats = true; break;
      case 'i':
        interval = parse_duration_ms (optarg);
        if (interval < 0)
          return cli_usage ("events", "invalid --interval `%s`: expected a duration such as 5s or 500ms", optarg);
        break;
      case 'h': printf ("usage: agentsbx events [--stats] [--interval 5s] CONTAINER_ID\n"); return 0;
      default: return cli_usage ("events", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind != argc - 1)
    return cli_usage ("events", "expected exactly one argument: the container id");
  return asbx_container_events (g, argv[optind], stats, interval, stdout, &err) < 0 ? cli_fail (&err) : 0;
}
