/* rlimit.c - process.rlimits: name table, pre-flight check, setrlimit.
 *
 * Mechanism: setrlimit(2)/prlimit(2) on the calling process; limits are inherited across
 * fork/exec. Threat model: the config is trusted to ask, not to be granted: raising a hard limit
 * above the current one needs CAP_SYS_RESOURCE in the initial user namespace, so the check runs
 * in the runtime before anything is created and fails with a message naming the field instead of
 * a bare EPERM from inside the half-built container.
 * Ordering: linux_rlimits_check() at create time (no side effects); linux_rlimits_apply() in the
 * container init before the uid change drops CAP_SYS_RESOURCE. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/resource.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/process.h"

/* All 16 resources of setrlimit(2), in the kernel's numbering order. */
static const struct
{
  const char *name;
  int resource;
} rlimit_names[] = {
  { "RLIMIT_CPU", RLIMIT_CPU },           { "RLIMIT_FSIZE", RLIMIT_FSIZE },
  { "RLIMIT_DATA", RLIMIT_DATA },         { "RLIMIT_STACK", RLIMIT_STACK },
  { "RLIMIT_CORE", RLIMIT_CORE },         { "RLIMIT_RSS", RLIMIT_RSS },
  { "RLIMIT_NPROC", RLIMIT_NPROC },       { "RLIMIT_NOFILE", RLIMIT_NOFILE },
  { "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK },   { "RLIMIT_AS", RLIMIT_AS },
  { "RLIMIT_LOCKS", RLIMIT_LOCKS },       { "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING },
  { "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE }, { "RLIMIT_NICE", RLIMIT_NICE },
  { "RLIMIT_RTPRIO", RLIMIT_RTPRIO },     { "RLIMIT_RTTIME", RLIMIT_RTTIME },
};

int
linux_rlimit_from_name (const char *name)
{
  if (name == NULL)
    return -1;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (rlimit_names); i++)
    if (strcmp (rlimit_names[i].name, name) == 0)
      return rlimit_names[i].resource;
  return -1;
}

const char *
linux_rlimit_name (int resource)
{
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (rlimit_names); i++)
    if (rlimit_names[i].resource == resource)
      return rlimit_names[i].name;
  return NULL;
}

/* "unlimited" for RLIM_INFINITY, the number otherwise; buf must hold 24 bytes. */
static const char *
fmt_limit (uint64_t v, char *buf, size_t len)
{
  if (v == (uint64_t) RLIM_INFINITY)
    return "unlimited";
  snprintf (buf, len, "%" PRIu64, v);
  return buf;
}

/* Is CAP_SYS_RESOURCE in our effective set? (Only the effective set lets setrlimit raise.) */
static int
have_sys_resource (bool *out, asbx_err_t *err)
{
  cap_flag_value_t v = CAP_CLEAR;
  cap_t caps = cap_get_proc ();
  if (caps == NULL)
    return asbx_error (err, errno, "cap_get_proc");
  if (cap_get_flag (caps, CAP_SYS_RESOURCE, CAP_EFFECTIVE, &v) < 0)
    {
      int saved = errno;
      cap_free (caps);
      return asbx_error (err, saved, "cap_get_flag CAP_SYS_RESOURCE");
    }
  cap_free (caps);
  *out = v == CAP_SET;
  return 0;
}

static int
rlimit_check_one (const struct oci_rlimit *rl, size_t idx, bool can_raise, asbx_err_t *err)
{
  struct rlimit cur;
  char b1[24], b2[24];
  int res = linux_rlimit_from_name (rl->type);

  if (res < 0)
    return asbx_error (err, EINVAL,
                       "process.rlimits[%zu].type: unknown rlimit `%s` (expected RLIMIT_AS ... RLIMIT_STACK)", idx,
                       rl->type ? rl->type : "(null)");
  if (rl->soft > rl->hard)
    return asbx_error (err, EINVAL, "process.rlimits[%zu]: %s soft limit %s is above the hard limit %s", idx, rl->type,
                       fmt_limit (rl->soft, b1, sizeof b1), fmt_limit (rl->hard, b2, sizeof b2));
  if (getrlimit (res, &cur) < 0)
    return asbx_error (err, errno, "getrlimit %s", rl->type);
  if (!can_raise && (cur.rlim_max != RLIM_INFINITY && rl->hard > (uint64_t) cur.rlim_max))
    return asbx_error (err, EPERM,
                       "process.rlimits[%zu]: %s hard %s exceeds the current hard limit %s and this process lacks "
                       "CAP_SYS_RESOURCE",
                       idx, rl->type, fmt_limit (rl->hard, b1, sizeof b1),
                       fmt_limit ((uint64_t) cur.rlim_max, b2, sizeof b2));
  return 0;
}

int
linux_rlimits_check (const struct oci_process *proc, asbx_err_t *err)
{
  bool can_raise = false;

  if (proc == NULL || proc->rlimits_len == 0)
    return 0;
  if (have_sys_resource (&can_raise, err) < 0)
    return asbx_error_wrap (err, "process.rlimits");
  for (size_t i = 0; i < proc->rlimits_len; i++)
    {
      if (rlimit_check_one (&proc->rlimits[i], i, can_raise, err) < 0)
        return -1;
      /* spec config.md: "the runtime MUST generate an error for any duplicate entries" */
      for (size_t j = 0; j < i; j++)
        if (strcmp (proc->rlimits[j].type, proc->rlimits[i].type) == 0)
          return asbx_error (err, EINVAL, "process.rlimits[%zu].type: duplicate %s (already at process.rlimits[%zu])",
                             i, proc->rlimits[i].type, j);
    }
  return 0;
}

int
linux_rlimits_apply (const struct oci_process *proc, asbx_err_t *err)
{
  if (proc == NULL)
    return 0;
  for (size_t i = 0; i < proc->rlimits_len; i++)
    {
      const struct oci_rlimit *rl = &proc->rlimits[i];
      int res = linux_rlimit_from_name (rl->type);
      struct rlimit lim = { .rlim_cur = (rlim_t) rl->soft, .rlim_max = (rlim_t) rl->hard };

      if (res < 0)
        return asbx_error (err, EINVAL, "process.rlimits[%zu].type: unknown rlimit `%s`", i,
                           rl->type ? rl->type : "(null)");
      if (setrlimit (res, &lim) < 0)
        return asbx_error (err, errno, "process.rlimits[%zu]: setrlimit %s soft %" PRIu64 " hard %" PRIu64, i, rl->type,
                           rl->soft, rl->hard);
      log_debug ("rlimit %s set to %" PRIu64 "/%" PRIu64, rl->type, rl->soft, rl->hard);
    }
  return 0;
}
