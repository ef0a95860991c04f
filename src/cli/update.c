/* update.c - `agentsbx update [options] ID`: change a container's resource limits (runc's
 * flags; --resources FILE / -r - takes a linux.resources JSON object, flags override it).
 * Memory values take runc's suffixes (k, m, g, t; base 1024; "-1" = unlimited). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"
#include "runtime/container_cgroup.h"

enum
{
  O_RES = 300,
  O_MEM,
  O_SWAP,
  O_RESV,
  O_KMEM,
  O_KTCP,
  O_SHARES,
  O_QUOTA,
  O_PERIOD,
  O_BURST,
  O_RTRUN,
  O_RTPER,
  O_CPUS,
  O_MEMS,
  O_PIDS,
  O_BLKIO,
  O_L3,
  O_MBW,
};

static const struct option opts[] = {
  { "resources", required_argument, 0, 'r' },
  { "memory", required_argument, 0, O_MEM },
  { "memory-swap", required_argument, 0, O_SWAP },
  { "memory-reservation", required_argument, 0, O_RESV },
  { "kernel-memory", required_argument, 0, O_KMEM },
  { "kernel-memory-tcp", required_argument, 0, O_KTCP },
  { "cpu-share", required_argument, 0, O_SHARES }, /* runc 1.1's spelling */
  { "cpu-shares", required_argument, 0, O_SHARES },
  { "cpu-quota", required_argument, 0, O_QUOTA },
  { "cpu-period", required_argument, 0, O_PERIOD },
  { "cpu-burst", required_argument, 0, O_BURST },
  { "cpu-rt-runtime", required_argument, 0, O_RTRUN },
  { "cpu-rt-period", required_argument, 0, O_RTPER },
  { "cpuset-cpus", required_argument, 0, O_CPUS },
  { "cpuset-mems", required_argument, 0, O_MEMS },
  { "pids-limit", required_argument, 0, O_PIDS },
  { "blkio-weight", required_argument, 0, O_BLKIO },
  { "l3-cache-schema", required_argument, 0, O_L3 },
  { "mem-bw-schema", required_argument, 0, O_MBW },
  { "help", no_argument, 0, 'h' },
  { 0, 0, 0, 0 },
};

static const char *
opt_name (int c)
{
  for (const struct option *o = opts; o->name; o++)
    if (o->val == c)
      return o->name;
  return "?";
}

/* "64m" -> 67108864; "-1" -> -1. */
static int
parse_bytes (const char *s, int64_t *out)
{
  char *end;
  long long v;
  int64_t mul = 1;

  errno = 0;
  v = strtoll (s, &end, 10);
  if (end == s || errno)
    return -1;
  if (v == -1 && *end == '\0')
    return *out = -1, 0;
  switch (tolower ((unsigned char) *end))
    {
    case '\0': break;
    case 'k': mul = 1ll << 10; break;
    case 'm': mul = 1ll << 20; break;
    case 'g': mul = 1ll << 30; break;
    case 't': mul = 1ll << 40; break;
    default: return -1;
    }
  if (*end && end[1] && !(tolower ((unsigned char) end[1]) == 'b' && end[2] == '\0'))
    return -1;
  if (v < 0 || v > INT64_MAX / mul)
    return -1;
  *out = v * mul;
  return 0;
}

static int
parse_num (const char *s, int64_t min, int64_t *out)
{
  char *end;
  long long v;
  errno = 0;
  v = strtoll (s, &end, 10);
  if (end == s || *end || errno || v < min)
    return -1;
  *out = v;
  return 0;
}

static struct oci_resources *
load_resources (const char *file, asbx_err_t *err)
{
  cleanup_free char *buf = NULL;
  size_t len = 0;

  if (strcmp (file, "-") == 0)
    {
      if (read_all_fd (STDIN_FILENO, 16 << 20, &buf, &len) < 0)
        return asbx_error (err, errno, "read resources from stdin"), NULL;
    }
  else if (read_file_at (AT_FDCWD, file, 16 << 20, &buf, &len, err) < 0)
    return NULL;
  return asbx_resources_parse (buf, len, strcmp (file, "-") == 0 ? "stdin" : file, err);
}

/* Apply one flag to r. -1 = bad value. */
static int
set_flag (struct oci_resources *r, int c, const char *v)
{
  struct oci_memory *m = r->memory ? r->memory : (r->memory = xmalloc0 (sizeof *m));
  struct oci_cpu *cpu = r->cpu ? r->cpu : (r->cpu = xmalloc0 (sizeof *cpu));
  int64_t x = 0;

  if (v == NULL) /* every flag is required_argument: never, but parse_* must not see NULL */
    return -1;
  switch (c)
    {
    case O_MEM: return parse_bytes (v, &x) < 0 ? -1 : (m->has_limit = true, m->limit = x, 0);
    case O_SWAP: return parse_bytes (v, &x) < 0 ? -1 : (m->has_swap = true, m->swap = x, 0);
    case O_RESV: return parse_bytes (v, &x) < 0 ? -1 : (m->has_reservation = true, m->reservation = x, 0);
    case O_KMEM: return parse_bytes (v, &x) < 0 ? -1 : (m->has_kernel = true, m->kernel = x, 0);
    case O_KTCP: return parse_bytes (v, &x) < 0 ? -1 : (m->has_kernel_tcp = true, m->kernel_tcp = x, 0);
    case O_SHARES: return parse_num (v, 0, &x) < 0 ? -1 : (cpu->has_shares = true, cpu->shares = (uint64_t) x, 0);
    case O_QUOTA: return parse_num (v, -1, &x) < 0 ? -1 : (cpu->has_quota = true, cpu->quota = x, 0);
    case O_PERIOD: return parse_num (v, 0, &x) < 0 ? -1 : (cpu->has_period = true, cpu->period = (uint64_t) x, 0);
    case O_BURST: return parse_num (v, 0, &x) < 0 ? -1 : (cpu->has_burst = true, cpu->burst = (uint64_t) x, 0);
    case O_RTRUN:
      return parse_num (v, -1, &x) < 0 ? -1 : (cpu->has_realtime_runtime = true, cpu->realtime_runtime = x, 0);
    case O_RTPER:
      return parse_num (v, 0, &x) < 0 ? -1 : (cpu->has_realtime_period = true, cpu->realtime_period = (uint64_t) x, 0);
    case O_CPUS:
      free (cpu->cpus);
      cpu->cpus = xstrdup (v);
      return 0;
    case O_MEMS:
      free (cpu->mems);
      cpu->mems = xstrdup (v);
      return 0;
    case O_PIDS: return parse_num (v, -1, &x) < 0 ? -1 : (r->has_pids = true, r->pids_limit = x, 0);
    case O_BLKIO:
      if (parse_num (v, 0, &x) < 0 || x > 1000)
        return -1;
      if (!r->block_io)
        r->block_io = xmalloc0 (sizeof *r->block_io);
      r->block_io->has_weight = true;
      r->block_io->weight = (uint16_t) x;
      return 0;
    }
  return -1;
}

int
cli_update (struct asbx_global *g, int argc, char **argv)
{
  struct oci_resources *r = NULL;
  asbx_err_t err = NULL;
  const char *file = NULL;
  struct
  {
    int c;
    const char *v;
  } flags[32];
  size_t nflags = 0;
  int c, ret;

  while ((c = getopt_long_only (argc, argv, "+hr:", opts, NULL)) != -1)
    {
      if (c == 'h')
        {
          printf ("usage: agentsbx update [options] CONTAINER_ID\n");
          return 0;
        }
      if (c == '?')
        return cli_usage ("update", "unknown option `%s`", argv[optind - 1]);
      if (c == 'r')
        file = optarg;
      else if (c == O_L3 || c == O_MBW)
        return cli_usage ("update", "--%s: Intel RDT is not supported",
                          c == O_L3 ? "l3-cache-schema" : "mem-bw-schema");
      else if (nflags < ASBX_ARRAY_SIZE (flags))
        flags[nflags].c = c, flags[nflags++].v = optarg;
    }
  if (optind != argc - 1)
    return cli_usage ("update", "expected exactly one argument: the container id");
  if (file)
    {
      r = load_resources (file, &err);
      if (r == NULL)
        return cli_fail (&err);
    }
  else
    r = xmalloc0 (sizeof *r);
  for (size_t i = 0; i < nflags; i++)
    if (set_flag (r, flags[i].c, flags[i].v) < 0)
      {
        oci_resources_free (r);
        return cli_usage ("update", "invalid value `%s` for --%s", flags[i].v, opt_name (flags[i].c));
      }
  ret = asbx_container_update (g, argv[optind], r, &err) < 0 ? cli_fail (&err) : 0;
  oci_resources_free (r);
  return ret;
}
