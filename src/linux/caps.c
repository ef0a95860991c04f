/* caps.c - process.capabilities: bounding, effective, permitted, inheritable, ambient sets.
 *
 * Mechanism: capabilities(7). Bounding is dropped with prctl(PR_CAPBSET_DROP) (needs CAP_SETPCAP,
 * so before the uid change); PR_SET_KEEPCAPS keeps the permitted set across setresuid() to a
 * non-zero uid; E/P/I are then set at once with libcap's cap_set_proc(); ambient last (it can only
 * hold caps that are both permitted and inheritable), cleared first so nothing leaks from us.
 * Threat model: the container must end up with exactly the sets asked for, never more. A name we
 * do not know is an error (fail closed); a name libcap knows but the running kernel does not
 * (cap number > /proc/sys/kernel/cap_last_cap) is skipped, as runc does, since the kernel cannot
 * grant it anyway.
 * Ordering: check at create; in init: drop_bounding -> keep -> user change -> apply. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/process.h"

int
linux_cap_last_cap (void)
{
  static int cached = -1;
  cleanup_free char *buf = NULL;
  uint64_t v;

  if (cached >= 0)
    return cached;
  if (read_file_at (AT_FDCWD, "/proc/sys/kernel/cap_last_cap", 64, &buf, NULL, NULL) == 0)
    {
      buf[strcspn (buf, "\n")] = '\0';
      if (parse_u64 (buf, &v) == 0 && v < 64)
        return cached = (int) v;
    }
  /* no procfs (early init): libcap's probe of the bounding set */
  cached = (int) cap_max_bits () - 1;
  return cached;
}

int
linux_cap_from_name (const char *name, int *cap)
{
  cap_value_t v;

  /* OCI names are "CAP_XXX"; cap_from_name() also takes numbers and "all", which we refuse. */
  if (name == NULL || strncmp (name, "CAP_", 4) != 0 || name[4] == '\0')
    return -1;
  for (const char *p = name + 4; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return -1;
  if (cap_from_name (name, &v) < 0)
    return -1;
  *cap = (int) v;
  return 0;
}

/* Name of a cap number into buf (cap_to_name() memory must go back through cap_free()). */
static const char *
cap_name (int cap, char *buf, size_t len)
{
  char *n = cap_to_name (cap);
  snprintf (buf, len, "%s", n ? n : "?");
  if (n)
    cap_free (n);
  return buf;
}

struct cap_set_ref
{
  const char *field;
  char **names;
  size_t len;
};

static void
caps_sets (const struct oci_capabilities *caps, struct cap_set_ref out[5])
{
  out[0] = (struct cap_set_ref){ "bounding", caps->bounding, caps->bounding_len };
  out[1] = (struct cap_set_ref){ "effective", caps->effective, caps->effective_len };
  out[2] = (struct cap_set_ref){ "inheritable", caps->inheritable, caps->inheritable_len };
  out[3] = (struct cap_set_ref){ "permitted", caps->permitted, caps->permitted_len };
  out[4] = (struct cap_set_ref){ "ambient", caps->ambient, caps->ambient_len };
}

/* Bit mask of the caps of one set the running kernel knows. -1 with *err on an unknown name. */
static int
set_mask (const struct cap_set_ref *s, uint64_t *mask, asbx_err_t *err)
{
  int last = linux_cap_last_cap ();

  *mask = 0;
  for (size_t i = 0; i < s->len; i++)
    {
      int cap;
      if (linux_cap_from_name (s->names[i], &cap) < 0)
        return asbx_error (err, EINVAL, "process.capabilities.%s[%zu]: unknown capability `%s`", s->field, i,
                           s->names[i] ? s->names[i] : "(null)");
      if (cap > last)
        {
          log_debug ("capability %s (%d) is not known to the running kernel (last %d): skipped", s->names[i], cap,
                     last);
          continue;
        }
      *mask |= 1ull << cap;
    }
  return 0;
}

int
linux_caps_check (const struct oci_capabilities *caps, asbx_err_t *err)
{
  struct cap_set_ref sets[5];
  uint64_t m;

  if (caps == NULL)
    return 0;
  caps_sets (caps, sets);
  for (size_t i = 0; i < 5; i++)
    if (set_mask (&sets[i], &m, err) < 0)
      return -1;
  return 0;
}

int
linux_caps_drop_bounding (const struct oci_capabilities *caps, asbx_err_t *err)
{
  uint64_t keep = 0;
  int last = linux_cap_last_cap ();

  if (caps)
    {
      struct cap_set_ref sets[5];
      caps_sets (caps, sets);
      if (set_mask (&sets[0], &keep, err) < 0)
        return -1;
    }
  for (int cap = 0; cap <= last; cap++)
    {
      if (keep & (1ull << cap))
        continue;
      /* drop first, read only when refused: one prctl per capability instead of two (a drop
       * of a capability already gone succeeds with CAP_SETPCAP; without it, EPERM, and then a
       * capability already gone is what we wanted) */
      if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
        {
          int saved = errno;
          if (saved == EPERM && prctl (PR_CAPBSET_READ, cap, 0, 0, 0) == 0)
            continue; /* already gone: no CAP_SETPCAP needed */
          char n[64];
          return asbx_error (err, saved, "process.capabilities.bounding: drop %s", cap_name (cap, n, sizeof n));
        }
    }
  return 0;
}

int
linux_caps_keep (asbx_err_t *err)
{
  if (prctl (PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
    return asbx_error (err, errno, "prctl PR_SET_KEEPCAPS");
  return 0;
}

/* Fill one libcap flag from a mask. */
static int
fill_flag (cap_t c, cap_flag_t flag, uint64_t mask, asbx_err_t *err)
{
  for (int cap = 0; cap < 64; cap++)
    {
      cap_value_t v = cap;
      if (!(mask & (1ull << cap)))
        continue;
      if (cap_set_flag (c, flag, 1, &v, CAP_SET) < 0)
        return asbx_error (err, errno, "cap_set_flag %d", cap);
    }
  return 0;
}

static int
apply_ambient (uint64_t mask, asbx_err_t *err)
{
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
    {
      /* Kernels without ambient support (< 4.3) have no ambient set to leak: fine if none asked. */
      if (errno == EINVAL && mask == 0)
        return 0;
      return asbx_error (err, errno, "prctl PR_CAP_AMBIENT_CLEAR_ALL");
    }
  for (int cap = 0; cap < 64; cap++)
    {
      if (!(mask & (1ull << cap)))
        continue;
      if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
        {
          int saved = errno;
          char n[64];
          /* EPERM: not in both permitted and inheritable (capabilities(7)). runc skips such a
           * cap (`runc spec` itself writes ambient caps without inheritable ones), and not
           * raising it only leaves the process with less privilege: skip, say so in the log. */
          if (saved == EPERM || saved == EINVAL)
            {
              log_debug ("process.capabilities.ambient: %s not raised (not permitted and inheritable)",
                         cap_name (cap, n, sizeof n));
              continue;
            }
          return asbx_error (err, saved, "process.capabilities.ambient: raise %s", cap_name (cap, n, sizeof n));
        }
    }
  return 0;
}

int
linux_caps_apply (const struct oci_capabilities *caps, asbx_err_t *err)
{
  struct cap_set_ref sets[5];
  uint64_t eff = 0, inh = 0, prm = 0, amb = 0;
  struct oci_capabilities empty = { 0 };
  cap_t c;

  if (caps == NULL)
    caps = &empty; /* spec: an absent set is empty */
  caps_sets (caps, sets);
  if (set_mask (&sets[1], &eff, err) < 0 || set_mask (&sets[2], &inh, err) < 0 || set_mask (&sets[3], &prm, err) < 0
      || set_mask (&sets[4], &amb, err) < 0)
    return -1;

  c = cap_init ();
  if (c == NULL)
    return asbx_error (err, errno, "cap_init");
  if (fill_flag (c, CAP_EFFECTIVE, eff, err) < 0 || fill_flag (c, CAP_PERMITTED, prm, err) < 0
      || fill_flag (c, CAP_INHERITABLE, inh, err) < 0)
    {
      cap_free (c);
      return -1;
    }
  if (cap_set_proc (c) < 0)
    {
      int saved = errno;
      cap_free (c);
      if (saved == EPERM && (eff & ~prm))
        return asbx_error (err, saved, "process.capabilities: effective set is not a subset of permitted");
      return asbx_error (err, saved, "process.capabilities: cap_set_proc");
    }
  cap_free (c);
  return apply_ambient (amb, err);
}
