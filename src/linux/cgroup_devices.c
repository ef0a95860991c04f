/* cgroup_devices.c - linux.resources.devices: the effective rule list and the v1 writer.
 *
 * Source: runtime-spec config-linux.md "Allowed Device list": rules are evaluated in order and
 * a later rule overrides an earlier one for the devices it matches; type "a" = all, major/minor
 * absent = wildcard, access a subset of "rwm". Like runc (libcontainer/specconv AllowedDevices)
 * the list starts with deny-all and ends with the runtime's default allow list and an allow
 * rule for every linux.devices node, so a container always has its standard devices and may
 * mknod (opening an unlisted node stays denied).
 * v1 (cgroup-v1/devices.rst): writing "a" to devices.deny/devices.allow resets the cgroup to
 * deny-all/allow-all; other rules add or remove exceptions, so writing the list in order gives
 * the same last-rule-wins result for the rule shapes engines send. The kernel treats any rule
 * starting with "a" as the full reset, so an "a" rule with partial access is written as the
 * two rules "c *:* ACC" and "b *:* ACC" instead.
 * Threat model: a rule is what keeps a container from opening host disks (/dev/sda): malformed
 * rules are errors, never skipped. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

/* runc 1.1's AllowedDevices (configs/devices, libcontainer/specconv). */
static const struct cgroup_dev_rule default_allow[] = {
  { true, 'c', -1, -1, CGROUP_DEV_M },
  { true, 'b', -1, -1, CGROUP_DEV_M },
  { true, 'c', 1, 3, 7 },    /* /dev/null */
  { true, 'c', 1, 8, 7 },    /* /dev/random */
  { true, 'c', 1, 7, 7 },    /* /dev/full */
  { true, 'c', 5, 0, 7 },    /* /dev/tty */
  { true, 'c', 1, 5, 7 },    /* /dev/zero */
  { true, 'c', 1, 9, 7 },    /* /dev/urandom */
  { true, 'c', 5, 1, 7 },    /* /dev/console */
  { true, 'c', 136, -1, 7 }, /* /dev/pts/N */
  { true, 'c', 5, 2, 7 },    /* /dev/ptmx */
  { true, 'c', 10, 200, 7 }, /* /dev/net/tun */
};

static int
parse_access (const char *s, unsigned *out)
{
  unsigned a = 0;
  if (s == NULL)
    s = "rwm";
  for (const char *p = s; *p; p++)
    switch (*p)
      {
      case 'r': a |= CGROUP_DEV_R; break;
      case 'w': a |= CGROUP_DEV_W; break;
      case 'm': a |= CGROUP_DEV_M; break;
      default: return -1;
      }
  *out = a;
  return 0;
}

int
cgroup_dev_rules_build (const struct oci_device_cgroup *cfg, size_t ncfg, const struct oci_device *devs, size_t ndevs,
                        struct cgroup_dev_rule **out, size_t *n, asbx_err_t *err)
{
  size_t cap = 1 + ncfg + ASBX_ARRAY_SIZE (default_allow) + ndevs, k = 0;
  cleanup_free struct cgroup_dev_rule *r = xmalloc0 (cap * sizeof *r);

  r[k++] = (struct cgroup_dev_rule){ false, 'a', -1, -1, 7 };
  for (size_t i = 0; i < ncfg; i++)
    {
      const struct oci_device_cgroup *c = &cfg[i];
      struct cgroup_dev_rule x = { c->allow, 'a', -1, -1, 0 };
      if (c->type && strcmp (c->type, "a") != 0 && strcmp (c->type, "c") != 0 && strcmp (c->type, "b") != 0)
        return asbx_error (err, EINVAL, "linux.resources.devices[%zu].type: `%s` is not one of a, c, b", i, c->type);
      if (c->type)
        x.type = c->type[0];
      if (x.type != 'a')
        {
          x.major = c->has_major ? c->major : -1;
          x.minor = c->has_minor ? c->minor : -1;
          if (x.major < -1 || x.minor < -1 || x.major > UINT32_MAX || x.minor > UINT32_MAX)
            return asbx_error (err, EINVAL, "linux.resources.devices[%zu]: invalid major/minor", i);
        }
      if (parse_access (c->access, &x.access) < 0 || x.access == 0)
        return asbx_error (err, EINVAL, "linux.resources.devices[%zu].access: `%s` is not a subset of rwm", i,
                           c->access);
      r[k++] = x;
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (default_allow); i++)
    r[k++] = default_allow[i];
  for (size_t i = 0; i < ndevs; i++)
    {
      const char *t = devs[i].type;
      if (t == NULL || (t[0] != 'c' && t[0] != 'b' && t[0] != 'u'))
        continue; /* fifos ('p') are not device-cgroup controlled */
      r[k++] = (struct cgroup_dev_rule){ true, t[0] == 'b' ? 'b' : 'c', devs[i].major, devs[i].minor, 7 };
    }
  *out = steal_ptr (&r);
  *n = k;
  return 0;
}

static void
fmt_access (unsigned a, char *buf)
{
  char *p = buf;
  if (a & CGROUP_DEV_R)
    *p++ = 'r';
  if (a & CGROUP_DEV_W)
    *p++ = 'w';
  if (a & CGROUP_DEV_M)
    *p++ = 'm';
  *p = '\0';
}

static void
fmt_num (int64_t v, char *buf, size_t len)
{
  if (v < 0)
    snprintf (buf, len, "*");
  else
    snprintf (buf, len, "%" PRId64, v);
}

int
cgroup_devices_v1_set (const struct cgroup_dir *d, const struct cgroup_dev_rule *r, size_t n, asbx_err_t *err)
{
  for (size_t i = 0; i < n; i++)
    {
      const char *file = r[i].allow ? "devices.allow" : "devices.deny";
      char acc[4], ma[24], mi[24];
      fmt_access (r[i].access, acc);
      if (r[i].type == 'a' && r[i].access == 7)
        {
          if (cgroup_dir_write (d, "devices", file, "a", err) < 0)
            return -1;
          continue;
        }
      fmt_num (r[i].major, ma, sizeof ma);
      fmt_num (r[i].minor, mi, sizeof mi);
      if (r[i].type == 'a')
        {
          if (cgroup_dir_writef (d, "devices", file, err, "c *:* %s", acc) < 0
              || cgroup_dir_writef (d, "devices", file, err, "b *:* %s", acc) < 0)
            return -1;
          continue;
        }
      if (cgroup_dir_writef (d, "devices", file, err, "%c %s:%s %s", r[i].type, ma, mi, acc) < 0)
        return -1;
    }
  return 0;
}
