/* cgroup_stats.c - container statistics in runc's `events --stats` JSON shape.
 *
 * Field names and omissions follow runc 1.1 (libcontainer/cgroups/stats.go converted by
 * events.go/types: zero "omitempty" members are left out, e.g. "throttling":{} when never
 * throttled), so tools written for runc parse ours. Sources of the numbers:
 * v1 cpuacct.usage / usage_percpu / usage_percpu_sys / usage_percpu_user / cpuacct.stat (ticks),
 * cpu.stat, cpuset.*, memory.{usage,max_usage,limit,failcnt}_in_bytes and the memsw/kmem/
 * kmem.tcp variants, memory.stat, pids.current/max, blkio.throttle.*, hugetlb.*;
 * v2 cpu.stat (usec), memory.current/max/stat, memory.swap.current/max, pids, io.stat,
 * hugetlb.<size>.current/max/events (cgroup-v2.rst). Missing files are left out, never errors:
 * statistics are best effort, as in runc. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <fcntl.h>
#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

#define S(g, s) yajl_gen_string (g, (const unsigned char *) (s), strlen (s))
#define U(g, v) yajl_gen_number (g, buf_u64 (v), strlen (buf_u64 (v)))

static const char *
buf_u64 (uint64_t v)
{
  static char b[32];
  snprintf (b, sizeof b, "%" PRIu64, v);
  return b;
}

/* one number from a file; false when missing */
static bool
rd_u64 (const struct cgroup_dir *d, const char *file, uint64_t *v)
{
  asbx_err_t e = NULL;
  if (d->fd < 0 || cgroup_dir_read_u64 (d, file, v, &e) < 0)
    {
      asbx_error_free (&e);
      return false;
    }
  return true;
}

static char *
rd (const struct cgroup_dir *d, const char *file)
{
  asbx_err_t e = NULL;
  char *s = NULL;
  if (d->fd < 0 || cgroup_dir_read (d, file, &s, &e) < 0)
    {
      asbx_error_free (&e);
      return NULL;
    }
  return s;
}

/* "key value" lines: the value of key, or false */
static bool
kv (const char *text, const char *key, uint64_t *v)
{
  size_t kl = strlen (key);
  for (const char *p = text; p && *p; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL)
    if (strncmp (p, key, kl) == 0 && p[kl] == ' ')
      {
        *v = strtoull (p + kl + 1, NULL, 10);
        return true;
      }
  return false;
}

/* v2 "max" is unlimited; runc reports it as the largest page-aligned int64 on v1 and as
 * math.MaxUint64 on v2. We print what the kernel gives (v1) and UINT64_MAX for "max" (v2). */
static void
gen_u64_list (yajl_gen g, const char *key, const char *text)
{
  char *end;
  S (g, key);
  yajl_gen_array_open (g);
  for (const char *p = text; p && *p;)
    {
      uint64_t v = strtoull (p, &end, 10);
      if (end == p)
        break;
      U (g, v);
      p = end + strspn (end, " \n");
    }
  yajl_gen_array_close (g);
}

static void
gen_cpu (yajl_gen g, const struct cgroup_dir *cpu, const struct cgroup_dir *acct)
{
  cleanup_free char *stat = rd (cpu, "cpu.stat");
  uint64_t v;

  S (g, "cpu");
  yajl_gen_map_open (g);
  S (g, "usage");
  yajl_gen_map_open (g);
  if (acct->version == 2)
    {
      uint64_t u = 0, sy = 0, us = 0;
      kv (stat, "usage_usec", &u);
      kv (stat, "system_usec", &sy);
      kv (stat, "user_usec", &us);
      S (g, "total"), U (g, u * 1000), S (g, "kernel"), U (g, sy * 1000), S (g, "user"), U (g, us * 1000);
    }
  else if (acct->fd >= 0)
    {
      cleanup_free char *pc = rd (acct, "cpuacct.usage_percpu");
      cleanup_free char *pk = rd (acct, "cpuacct.usage_percpu_sys");
      cleanup_free char *pu = rd (acct, "cpuacct.usage_percpu_user");
      cleanup_free char *cs = rd (acct, "cpuacct.stat");
      uint64_t tick = 1000000000ull / (uint64_t) sysconf (_SC_CLK_TCK), k = 0, u = 0;
      if (rd_u64 (acct, "cpuacct.usage", &v))
        S (g, "total"), U (g, v);
      if (pc)
        gen_u64_list (g, "percpu", pc);
      if (pk)
        gen_u64_list (g, "percpu_kernel", pk);
      if (pu)
        gen_u64_list (g, "percpu_user", pu);
      kv (cs, "system", &k);
      kv (cs, "user", &u);
      S (g, "kernel"), U (g, k * tick), S (g, "user"), U (g, u * tick);
    }
  yajl_gen_map_close (g);
  S (g, "throttling");
  yajl_gen_map_open (g);
  if (stat && kv (stat, "nr_periods", &v) && v)
    S (g, "periods"), U (g, v);
  if (stat && kv (stat, "nr_throttled", &v) && v)
    S (g, "throttled_periods"), U (g, v);
  if (stat && (kv (stat, "throttled_time", &v) || (kv (stat, "throttled_usec", &v) && (v *= 1000, true))) && v)
    S (g, "throttled_time"), U (g, v);
  yajl_gen_map_close (g);
  yajl_gen_map_close (g);
}

/* "0-2,4" -> [0,1,2,4] */
static void
gen_list_ranges (yajl_gen g, const char *key, const char *text)
{
  S (g, key);
  yajl_gen_array_open (g);
  for (const char *p = text; p && *p && *p != '\n';)
    {
      char *end;
      uint64_t a = strtoull (p, &end, 10), b = a;
      if (end == p)
        break;
      if (*end == '-')
        b = strtoull (end + 1, &end, 10);
      for (uint64_t i = a; i <= b && i - a < 65536; i++)
        U (g, i);
      p = *end == ',' ? end + 1 : end;
    }
  yajl_gen_array_close (g);
}

static void
gen_cpuset (yajl_gen g, const struct cgroup_dir *d)
{
  static const char *const flags[][2] = {
    { "cpu_exclusive", "cpuset.cpu_exclusive" },           { "mem_hardwall", "cpuset.mem_hardwall" },
    { "mem_exclusive", "cpuset.mem_exclusive" },           { "memory_migrate", "cpuset.memory_migrate" },
    { "memory_spread_page", "cpuset.memory_spread_page" }, { "memory_spread_slab", "cpuset.memory_spread_slab" },
    { "memory_pressure", "cpuset.memory_pressure" },       { "sched_load_balance", "cpuset.sched_load_balance" },
  };
  cleanup_free char *cpus = rd (d, d->version == 2 ? "cpuset.cpus.effective" : "cpuset.cpus");
  cleanup_free char *mems = rd (d, d->version == 2 ? "cpuset.mems.effective" : "cpuset.mems");
  cleanup_free char *rl = rd (d, "cpuset.sched_relax_domain_level");
  uint64_t v;

  if (d->fd < 0)
    return;
  S (g, "cpuset");
  yajl_gen_map_open (g);
  gen_list_ranges (g, "cpus", cpus);
  if (d->version == 1)
    S (g, "cpu_exclusive"), U (g, rd_u64 (d, flags[0][1], &v) ? v : 0);
  gen_list_ranges (g, "mems", mems);
  for (size_t i = 1; d->version == 1 && i < ASBX_ARRAY_SIZE (flags); i++)
    S (g, flags[i][0]), U (g, rd_u64 (d, flags[i][1], &v) ? v : 0);
  if (rl)
    S (g, "sched_relax_domain_level"), yajl_gen_integer (g, strtoll (rl, NULL, 10));
  yajl_gen_map_close (g);
}

/* {"limit":..,"usage":..,"max":..,"failcnt":..} from a v1 prefix ("memory", "memory.memsw") */
static void
gen_mem_entry (yajl_gen g, const char *key, const struct cgroup_dir *d, const char *prefix)
{
  char f[96];
  uint64_t v;

  S (g, key);
  yajl_gen_map_open (g);
  snprintf (f, sizeof f, "%s.limit_in_bytes", prefix);
  S (g, "limit"), U (g, rd_u64 (d, f, &v) ? v : 0);
  snprintf (f, sizeof f, "%s.usage_in_bytes", prefix);
  if (rd_u64 (d, f, &v) && v)
    S (g, "usage"), U (g, v);
  snprintf (f, sizeof f, "%s.max_usage_in_bytes", prefix);
  if (rd_u64 (d, f, &v) && v)
    S (g, "max"), U (g, v);
  snprintf (f, sizeof f, "%s.failcnt", prefix);
  S (g, "failcnt"), U (g, rd_u64 (d, f, &v) ? v : 0);
  yajl_gen_map_close (g);
}

static void
gen_raw (yajl_gen g, const char *text)
{
  cleanup_free char *copy = xstrdup (text);
  char *save = NULL;
  S (g, "raw");
  yajl_gen_map_open (g);
  for (char *l = copy ? strtok_r (copy, "\n", &save) : NULL; l; l = strtok_r (NULL, "\n", &save))
    {
      char *sp = strchr (l, ' ');
      if (!sp)
        continue;
      *sp = '\0';
      S (g, l), U (g, strtoull (sp + 1, NULL, 10));
    }
  yajl_gen_map_close (g);
}

static void
gen_memory (yajl_gen g, const struct cgroup_dir *d)
{
  cleanup_free char *stat = rd (d, "memory.stat");
  uint64_t v;

  S (g, "memory");
  yajl_gen_map_open (g);
  if (d->version == 1)
    {
      gen_mem_entry (g, "usage", d, "memory");
      gen_mem_entry (g, "swap", d, "memory.memsw");
      gen_mem_entry (g, "kernel", d, "memory.kmem");
      gen_mem_entry (g, "kernelTCP", d, "memory.kmem.tcp");
    }
  else if (d->fd >= 0)
    {
      S (g, "usage");
      yajl_gen_map_open (g);
      S (g, "limit"), U (g, rd_u64 (d, "memory.max", &v) ? v : 0);
      if (rd_u64 (d, "memory.current", &v) && v)
        S (g, "usage"), U (g, v);
      if (rd_u64 (d, "memory.peak", &v) && v)
        S (g, "max"), U (g, v);
      S (g, "failcnt"), U (g, 0);
      yajl_gen_map_close (g);
      S (g, "swap");
      yajl_gen_map_open (g);
      S (g, "limit"), U (g, rd_u64 (d, "memory.swap.max", &v) ? v : 0);
      if (rd_u64 (d, "memory.swap.current", &v) && v)
        S (g, "usage"), U (g, v);
      S (g, "failcnt"), U (g, 0);
      yajl_gen_map_close (g);
    }
  if (stat)
    gen_raw (g, stat);
  yajl_gen_map_close (g);
}

static void
gen_pids (yajl_gen g, const struct cgroup_dir *d)
{
  uint64_t v;
  S (g, "pids");
  yajl_gen_map_open (g);
  if (rd_u64 (d, "pids.current", &v))
    S (g, "current"), U (g, v);
  if (rd_u64 (d, "pids.max", &v) && v != UINT64_MAX)
    S (g, "limit"), U (g, v);
  yajl_gen_map_close (g);
}

/* v1 blkio "MAJ:MIN Op N" lines -> runc's [{"major","minor","op","value"}] lists */
static void
gen_blkio_list (yajl_gen g, const char *key, const char *text)
{
  cleanup_free char *copy = xstrdup (text);
  char *save = NULL;
  bool open = false;
  for (char *l = copy ? strtok_r (copy, "\n", &save) : NULL; l; l = strtok_r (NULL, "\n", &save))
    {
      unsigned ma, mi;
      char op[32];
      uint64_t v;
      if (sscanf (l, "%u:%u %31s %" SCNu64, &ma, &mi, op, &v) != 4)
        continue;
      if (!open)
        S (g, key), yajl_gen_array_open (g), open = true;
      yajl_gen_map_open (g);
      S (g, "major"), U (g, ma), S (g, "minor"), U (g, mi), S (g, "op"), S (g, op), S (g, "value"), U (g, v);
      yajl_gen_map_close (g);
    }
  if (open)
    yajl_gen_array_close (g);
}

static void
gen_blkio (yajl_gen g, const struct cgroup_dir *d)
{
  S (g, "blkio");
  yajl_gen_map_open (g);
  if (d->version == 1)
    {
      cleanup_free char *b = rd (d, "blkio.throttle.io_service_bytes_recursive");
      cleanup_free char *s = rd (d, "blkio.throttle.io_serviced_recursive");
      gen_blkio_list (g, "io_service_bytes_recursive", b);
      gen_blkio_list (g, "io_serviced_recursive", s);
    }
  yajl_gen_map_close (g);
}

static void
gen_hugetlb (yajl_gen g, const struct cgroup_dir *d)
{
  cleanup_closedir DIR *dir = NULL;
  struct dirent *de;
  int fd;

  S (g, "hugetlb");
  yajl_gen_map_open (g);
  fd = d->fd >= 0 ? openat (d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (fd >= 0 && (dir = fdopendir (fd)) == NULL)
    close (fd);
  while (dir && (de = readdir (dir)) != NULL)
    {
      const char *suffix = d->version == 2 ? ".max" : ".limit_in_bytes";
      size_t nl = strlen (de->d_name), sl = strlen (suffix);
      char size[32], f[96];
      uint64_t v;
      if (strncmp (de->d_name, "hugetlb.", 8) != 0 || nl <= 8 + sl || strcmp (de->d_name + nl - sl, suffix) != 0
          || strstr (de->d_name, ".rsvd.") || nl - 8 - sl >= sizeof size)
        continue;
      memcpy (size, de->d_name + 8, nl - 8 - sl);
      size[nl - 8 - sl] = '\0';
      S (g, size);
      yajl_gen_map_open (g);
      snprintf (f, sizeof f, "hugetlb.%s.%s", size, d->version == 2 ? "current" : "usage_in_bytes");
      if (rd_u64 (d, f, &v) && v)
        S (g, "usage"), U (g, v);
      if (d->version == 1)
        {
          snprintf (f, sizeof f, "hugetlb.%s.max_usage_in_bytes", size);
          if (rd_u64 (d, f, &v) && v)
            S (g, "max"), U (g, v);
        }
      snprintf (f, sizeof f, "hugetlb.%s.%s", size, d->version == 2 ? "events" : "failcnt");
      v = 0;
      if (d->version == 2)
        {
          cleanup_free char *ev = rd (d, f);
          kv (ev, "max", &v);
        }
      else
        rd_u64 (d, f, &v);
      S (g, "failcnt"), U (g, v);
      yajl_gen_map_close (g);
    }
  yajl_gen_map_close (g);
}

static void
open_opt (const char *path, const char *ctl, struct cgroup_dir *d)
{
  asbx_err_t e = NULL;
  if (cgroup_ctl_open (path, ctl, d, &e) != 0)
    d->fd = -1;
  asbx_error_free (&e);
}

char *
cgroup_stats_json (const char *path, const char *id, asbx_err_t *err)
{
  struct cgroup_dir cpu = CGROUP_DIR_INIT, acct = CGROUP_DIR_INIT, cpuset = CGROUP_DIR_INIT, mem = CGROUP_DIR_INIT,
                    pids = CGROUP_DIR_INIT, blk = CGROUP_DIR_INIT, huge = CGROUP_DIR_INIT;
  yajl_gen g = json_gen_new (0);
  char *out;

  if (cgroup_layout_get (err) == NULL)
    {
      yajl_gen_free (g);
      return NULL;
    }
  open_opt (path, "cpu", &cpu), open_opt (path, "cpuacct", &acct), open_opt (path, "cpuset", &cpuset);
  open_opt (path, "memory", &mem), open_opt (path, "pids", &pids), open_opt (path, "blkio", &blk);
  open_opt (path, "hugetlb", &huge);
  yajl_gen_map_open (g);
  S (g, "type"), S (g, "stats"), S (g, "id"), S (g, id), S (g, "data");
  yajl_gen_map_open (g);
  gen_cpu (g, &cpu, &acct);
  gen_cpuset (g, &cpuset);
  gen_memory (g, &mem);
  gen_pids (g, &pids);
  gen_blkio (g, &blk);
  gen_hugetlb (g, &huge);
  S (g, "intel_rdt"), yajl_gen_map_open (g), yajl_gen_map_close (g);
  S (g, "network_interfaces"), yajl_gen_null (g);
  yajl_gen_map_close (g);
  yajl_gen_map_close (g);
  out = json_gen_finish (g, false, NULL);
  cgroup_dir_clear (&cpu), cgroup_dir_clear (&acct), cgroup_dir_clear (&cpuset), cgroup_dir_clear (&mem);
  cgroup_dir_clear (&pids), cgroup_dir_clear (&blk), cgroup_dir_clear (&huge);
  return out;
}
