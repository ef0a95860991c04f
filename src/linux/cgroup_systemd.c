/* cgroup_systemd.c - the systemd cgroup driver, its pure half: linux.cgroupsPath
 * "slice:prefix:name" -> unit name and cgroup path (systemd.slice(5), systemd.unit(5)), the
 * unit properties for linux.resources (systemd.resource-control(5)) and the resolve step that
 * hands the caller its pending unit. The D-Bus half (start, set properties, stop) is
 * cgroup_systemd_dbus.c.
 * Threat model: cgroupsPath is untrusted: slice, prefix and name are checked (no '/', no
 * control characters, slice syntax of systemd.slice(5)) before they reach systemd or a path;
 * systemd checks unit names again.
 * Ordering: resolve (parse, no side effect; the unit goes back to the caller, no static
 * state) -> enter (cgroup_systemd_start) -> apply resources -> ... -> delete (cgroup_systemd_stop). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"
#include "linux/cgroup_systemd.h"

void
cgroup_systemd_unit_clear (struct cgroup_systemd_unit *u)
{
  free (u->slice);
  free (u->unit);
  free (u->path);
  u->slice = u->unit = u->path = NULL;
}

static bool
has_bad_chars (const char *s)
{
  for (; *s; s++)
    if ((unsigned char) *s <= ' ' || *s == 0x7f || *s == '/' || *s == '\\')
      return true;
  return false;
}

char *
cgroup_systemd_expand_slice (const char *slice, asbx_err_t *err)
{
  size_t len = strlen (slice), blen;
  cleanup_free char *base = NULL;
  char *out;

  if (!cgroup_has_suffix (slice, ".slice") || has_bad_chars (slice) || len == strlen (".slice"))
    {
      asbx_error (err, EINVAL, "invalid slice name `%s` (expected NAME.slice)", slice);
      return NULL;
    }
  if (strcmp (slice, "-.slice") == 0)
    return xstrdup (""); /* the root slice */
  blen = len - strlen (".slice");
  base = xmalloc0 (blen + 1);
  memcpy (base, slice, blen);
  if (base[0] == '-' || base[blen - 1] == '-' || strstr (base, "--"))
    {
      asbx_error (err, EINVAL, "invalid slice name `%s` (a '-' starts, ends or doubles a level)", slice);
      return NULL;
    }
  /* every '-' closes one level: "a-b-c" -> /a.slice/a-b.slice/a-b-c.slice */
  out = xmalloc0 (blen * (blen + 8) + 1);
  for (size_t i = 0; i <= blen; i++)
    if (base[i] == '-' || base[i] == '\0')
      {
        size_t o = strlen (out);
        out[o] = '/';
        memcpy (out + o + 1, base, i);
        strcpy (out + o + 1 + i, ".slice");
      }
  return out;
}

int
cgroup_systemd_parse (const char *cgroups_path, const char *id, struct cgroup_systemd_unit *out, asbx_err_t *err)
{
  cleanup_free char *copy = NULL, *slice_path = NULL;
  const char *slice = "", *prefix = CGROUP_SYSTEMD_DEFAULT_PREFIX, *name = id;
  struct cgroup_systemd_unit u = { NULL, NULL, NULL };

  if (cgroups_path && cgroups_path[0])
    {
      char *c1, *c2;
      copy = xstrdup (cgroups_path);
      c1 = strchr (copy, ':');
      c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      if (c2 == NULL || strchr (c2 + 1, ':'))
        return asbx_error (err, EINVAL,
                           "linux.cgroupsPath: expected \"slice:prefix:name\" for the systemd cgroup driver, got `%s`",
                           cgroups_path);
      *c1 = *c2 = '\0';
      slice = copy;
      prefix = c1 + 1;
      name = c2 + 1;
    }
  if (name == NULL || name[0] == '\0' || has_bad_chars (name) || has_bad_chars (prefix))
    return asbx_error (err, EINVAL, "linux.cgroupsPath: `%s`: invalid systemd unit prefix or name",
                       cgroups_path ? cgroups_path : "");
  u.slice = xstrdup (slice[0] ? slice : CGROUP_SYSTEMD_DEFAULT_SLICE);
  if (cgroup_has_suffix (name, ".slice"))
    {
      /* a slice unit: its cgroup is given by its own name (systemd.slice(5)); runc joins the
       * parent's path here, which systemd would not honour */
      u.unit = xstrdup (name);
      u.path = cgroup_systemd_expand_slice (name, err);
    }
  else
    {
      u.unit = prefix[0] ? xasprintf ("%s-%s.scope", prefix, name) : xasprintf ("%s.scope", name);
      slice_path = cgroup_systemd_expand_slice (u.slice, err);
      if (slice_path)
        u.path = xasprintf ("%s/%s", slice_path, u.unit);
    }
  if (u.path == NULL || u.path[0] == '\0')
    {
      if (u.path)
        asbx_error (err, EINVAL, "`%s` names the root cgroup", u.unit);
      cgroup_systemd_unit_clear (&u);
      return asbx_error_wrap (err, "linux.cgroupsPath `%s`", cgroups_path ? cgroups_path : "");
    }
  *out = u;
  return 0;
}

/* ---- resource properties (pure) ---- */

/* "0-3,7" -> little-endian bitmask as systemd's AllowedCPUs/AllowedMemoryNodes "ay" wants
 * (bit i = byte i/8, bit i%8; systemd cpu_set_to_dbus()). */
static int
cpulist_to_mask (const char *list, const char *field, uint8_t **bytes, size_t *n, asbx_err_t *err)
{
  cleanup_free char *copy = xstrdup (list);
  /* 8192 bits: more CPUs than any machine this runs on; the result is trimmed to the last set */
  cleanup_free uint8_t *mask = xmalloc0 (1024);
  size_t len = 0;
  char *save = NULL;

  for (char *t = strtok_r (copy, ",", &save); t; t = strtok_r (NULL, ",", &save))
    {
      char *dash = strchr (t, '-');
      uint64_t lo, hi;
      if (dash)
        *dash = '\0';
      if (parse_u64 (t, &lo) < 0 || (dash ? parse_u64 (dash + 1, &hi) : (hi = lo, 0)) < 0 || hi < lo || hi >= 8192)
        return asbx_error (err, EINVAL, "linux.resources.cpu.%s: invalid list `%s`", field, list);
      if (hi / 8 + 1 > len)
        len = hi / 8 + 1;
      for (uint64_t i = lo; i <= hi; i++)
        mask[i / 8] |= (uint8_t) (1u << (i % 8));
    }
  *bytes = steal_ptr (&mask);
  *n = len;
  return 0;
}

static void
prop_t (struct cgroup_sd_prop *v, size_t *n, const char *name, uint64_t val)
{
  v[(*n)++] = (struct cgroup_sd_prop){ .name = name, .type = 't', .u = val };
}

/* -1 (the spec's "unlimited") -> systemd's infinity */
static uint64_t
limit_of (int64_t v)
{
  return v < 0 ? UINT64_MAX : (uint64_t) v;
}

static int
cpu_props (const struct oci_cpu *c, bool v2, struct cgroup_sd_prop *v, size_t *n, asbx_err_t *err)
{
  if (c->has_shares && c->shares != 0)
    prop_t (v, n, v2 ? "CPUWeight" : "CPUShares", v2 ? cgroup_shares_to_weight (c->shares) : c->shares);
  if ((c->has_quota && c->quota != 0) || (c->has_period && c->period != 0))
    {
      uint64_t period = c->has_period && c->period ? c->period : 100000, per_sec = UINT64_MAX;
      if (c->has_quota && c->quota > 0)
        {
          /* systemd keeps the quota in percent of a CPU: round up to 10 ms per second so the
           * kernel value is never below what the config asked (runc does the same) */
          per_sec = (uint64_t) c->quota * 1000000u / period;
          if (per_sec % 10000)
            per_sec = (per_sec / 10000 + 1) * 10000;
        }
      prop_t (v, n, "CPUQuotaPerSecUSec", per_sec);
      if (c->has_period && c->period)
        prop_t (v, n, "CPUQuotaPeriodUSec", c->period);
    }
  if (v2 && c->cpus && c->cpus[0])
    {
      v[*n] = (struct cgroup_sd_prop){ .name = "AllowedCPUs", .type = 'y' };
      if (cpulist_to_mask (c->cpus, "cpus", &v[*n].bytes, &v[*n].nbytes, err) < 0)
        return -1;
      (*n)++;
    }
  if (v2 && c->mems && c->mems[0])
    {
      v[*n] = (struct cgroup_sd_prop){ .name = "AllowedMemoryNodes", .type = 'y' };
      if (cpulist_to_mask (c->mems, "mems", &v[*n].bytes, &v[*n].nbytes, err) < 0)
        return -1;
      (*n)++;
    }
  return 0;
}

int
cgroup_systemd_resource_props (const struct oci_resources *res, bool v2, struct cgroup_sd_prop **out, size_t *n,
                               asbx_err_t *err)
{
  struct cgroup_sd_prop *v = xmalloc0 (sizeof *v * 16);
  size_t k = 0;

  if (res && res->memory)
    {
      const struct oci_memory *m = res->memory;
      int64_t swap = 0;
      if (m->has_limit && m->limit != 0)
        prop_t (v, &k, v2 ? "MemoryMax" : "MemoryLimit", limit_of (m->limit));
      if (v2 && m->has_reservation && m->reservation != 0)
        prop_t (v, &k, "MemoryLow", limit_of (m->reservation));
      /* an invalid swap is reported by the file code with its own message: no property then */
      if (v2 && m->has_swap && m->swap != 0
          && cgroup_swap_to_v2 (m->swap, m->has_limit ? m->limit : 0, &swap, NULL) == 0 && swap != 0)
        prop_t (v, &k, "MemorySwapMax", limit_of (swap));
    }
  if (res && res->cpu && cpu_props (res->cpu, v2, v, &k, err) < 0)
    {
      cgroup_sd_props_free (v, k);
      return -1;
    }
  if (res && res->has_pids && res->pids_limit != 0)
    prop_t (v, &k, "TasksMax", limit_of (res->pids_limit));
  *out = v;
  *n = k;
  return 0;
}

void
cgroup_sd_props_free (struct cgroup_sd_prop *p, size_t n)
{
  for (size_t i = 0; p && i < n; i++)
    free (p[i].bytes);
  free (p);
}

/* ---- the pending unit (resolve -> enter -> apply resources), held by the caller ---- */

bool
cgroup_systemd_is_pending (const struct cgroup_systemd_unit *unit, const char *path)
{
  return unit && path && unit->path && strcmp (path, unit->path) == 0;
}

char *
cgroup_systemd_prepare (const char *cgroups_path, const char *id, bool systemd_running,
                        struct cgroup_systemd_unit *unit, asbx_err_t *err)
{
  struct cgroup_systemd_unit u = { NULL, NULL, NULL };

  if (!systemd_running)
    {
      asbx_error (err, ENOTSUP, "systemd cgroup driver requested but systemd is not running (no /run/systemd/system)");
      return NULL;
    }
#ifndef HAVE_LIBSYSTEMD
  (void) u;
  (void) unit;
  (void) cgroups_path;
  (void) id;
  asbx_error (err, ENOTSUP,
              "systemd cgroup driver requested but agentsbx was built without libsystemd "
              "(apt-get install -y libsystemd-dev, then rebuild)");
  return NULL;
#else
  if (cgroup_systemd_parse (cgroups_path, id, &u, err) < 0 || u.path == NULL)
    return NULL;
  cgroup_systemd_unit_clear (unit);
  *unit = u;
  return xstrdup (u.path);
#endif
}
