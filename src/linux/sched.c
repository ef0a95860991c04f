/* sched.c - process.scheduler (sched_setattr(2)) and process.ioPriority (ioprio_set(2)).
 *
 * Sources: runtime-spec config.md "Scheduler" and "IO Priority" (1.1+), sched(7),
 * sched_setattr(2), ioprio_set(2), include/uapi/linux/sched.h and ioprio.h. Names are checked
 * at create (and for exec's process) before anything exists; the values go to the kernel
 * unchanged (it owns the range rules: nice -20..19, rt priority 1..99, deadline <= period), and
 * a refusal names the field. Applied by the init and by exec's process before the capabilities
 * go (a real-time class or a negative nice needs CAP_SYS_NICE). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/process.h"

/* struct sched_attr, SCHED_ATTR_SIZE_VER0 (48 bytes): the fields the spec can set */
struct asbx_sched_attr
{
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
};

static const struct
{
  const char *name;
  int value;
} sched_policies[] = {
  { "SCHED_OTHER", 0 }, { "SCHED_FIFO", 1 }, { "SCHED_RR", 2 },       { "SCHED_BATCH", 3 },
  { "SCHED_ISO", 4 },   { "SCHED_IDLE", 5 }, { "SCHED_DEADLINE", 6 },
};

/* the flags that need no extra attr fields; SCHED_FLAG_UTIL_CLAMP_MIN/MAX need clamp values
 * the spec does not carry, so they are refused by name rather than sent half-filled */
static const struct
{
  const char *name;
  uint64_t value;
} sched_flags[] = {
  { "SCHED_FLAG_RESET_ON_FORK", 0x01 }, { "SCHED_FLAG_RECLAIM", 0x02 },     { "SCHED_FLAG_DL_OVERRUN", 0x04 },
  { "SCHED_FLAG_KEEP_POLICY", 0x08 },   { "SCHED_FLAG_KEEP_PARAMS", 0x10 },
};

static const struct
{
  const char *name;
  int value;
} io_classes[] = { { "IOPRIO_CLASS_RT", 1 }, { "IOPRIO_CLASS_BE", 2 }, { "IOPRIO_CLASS_IDLE", 3 } };

static int
policy_value (const char *name)
{
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (sched_policies); i++)
    if (strcmp (sched_policies[i].name, name) == 0)
      return sched_policies[i].value;
  return -1;
}

static int
io_class_value (const char *name)
{
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (io_classes); i++)
    if (strcmp (io_classes[i].name, name) == 0)
      return io_classes[i].value;
  return -1;
}

static int
sched_flags_value (const struct oci_scheduler *s, const char *where, uint64_t *out, asbx_err_t *err)
{
  *out = 0;
  for (size_t i = 0; i < s->flags_len; i++)
    {
      size_t k = 0;
      while (k < ASBX_ARRAY_SIZE (sched_flags) && strcmp (sched_flags[k].name, s->flags[i]) != 0)
        k++;
      if (k == ASBX_ARRAY_SIZE (sched_flags))
        return asbx_error (err, EINVAL,
                           "%sprocess.scheduler.flags[%zu]: `%s` is not supported (SCHED_FLAG_RESET_ON_FORK, "
                           "SCHED_FLAG_RECLAIM, SCHED_FLAG_DL_OVERRUN, SCHED_FLAG_KEEP_POLICY, SCHED_FLAG_KEEP_PARAMS; "
                           "the UTIL_CLAMP flags need clamp values the spec does not carry)",
                           where, i, s->flags[i]);
      *out |= sched_flags[k].value;
    }
  return 0;
}

int
linux_sched_check (const struct oci_process *p, const char *where, asbx_err_t *err)
{
  uint64_t flags;
  const struct oci_scheduler *s = p->scheduler;
  if (s)
    {
      int pol = policy_value (s->policy);
      if (pol < 0)
        return asbx_error (err, EINVAL,
                           "%sprocess.scheduler.policy: unknown policy `%s` (SCHED_OTHER, SCHED_FIFO, SCHED_RR, "
                           "SCHED_BATCH, SCHED_ISO, SCHED_IDLE, SCHED_DEADLINE)",
                           where, s->policy);
      if (sched_flags_value (s, where, &flags, err) < 0)
        return -1;
      /* sched_setattr(2) clamps nice silently: a value the kernel would change is refused */
      if (s->has_nice && (s->nice < -20 || s->nice > 19))
        return asbx_error (err, EINVAL, "%sprocess.scheduler.nice: %d is out of range (expected -20 to 19)", where,
                           (int) s->nice);
      if (pol == 6 && !(s->has_runtime && s->has_deadline))
        return asbx_error (err, EINVAL, "%sprocess.scheduler: SCHED_DEADLINE needs runtime and deadline", where);
    }
  if (p->io_priority)
    {
      if (io_class_value (p->io_priority->class_) < 0)
        return asbx_error (err, EINVAL,
                           "%sprocess.ioPriority.class: unknown class `%s` (IOPRIO_CLASS_RT, IOPRIO_CLASS_BE, "
                           "IOPRIO_CLASS_IDLE)",
                           where, p->io_priority->class_);
      if (p->io_priority->priority < 0 || p->io_priority->priority > 7)
        return asbx_error (err, EINVAL, "%sprocess.ioPriority.priority: %d is out of range (expected 0 to 7)", where,
                           (int) p->io_priority->priority);
    }
  return 0;
}

int
linux_sched_apply (const struct oci_process *p, asbx_err_t *err)
{
  const struct oci_scheduler *s = p->scheduler;
  if (s)
    {
      struct asbx_sched_attr a = { .size = sizeof a, .sched_policy = (uint32_t) policy_value (s->policy) };
      if (sched_flags_value (s, "", &a.sched_flags, err) < 0)
        return -1;
      a.sched_nice = s->has_nice ? s->nice : 0;
      a.sched_priority = s->has_priority ? (uint32_t) s->priority : 0;
      a.sched_runtime = s->runtime;
      a.sched_deadline = s->deadline;
      a.sched_period = s->period;
      if (syscall (SYS_sched_setattr, 0, &a, 0) < 0)
        {
          bool rt = a.sched_policy == 1 || a.sched_policy == 2 || a.sched_policy == 6;
          return asbx_error (err, errno, "process.scheduler: sched_setattr(%s, nice %d, priority %u)%s", s->policy,
                             a.sched_nice, a.sched_priority,
                             rt && errno == EPERM ? " (a real-time class needs CAP_SYS_NICE over the host and, with "
                                                    "RT group scheduling, a cpu.rt_runtime_us budget in the "
                                                    "container's cgroup: linux.resources.cpu.realtimeRuntime)"
                                                  : "");
        }
    }
  if (p->io_priority)
    {
      /* IOPRIO_PRIO_VALUE(class, data) = class << 13 | data; IOPRIO_WHO_PROCESS = 1 */
      int cls = io_class_value (p->io_priority->class_);
      if (cls < 0)
        return asbx_error (err, EINVAL, "process.ioPriority.class: unknown class `%s`", p->io_priority->class_);
      int v = cls << 13 | p->io_priority->priority;
      if (syscall (SYS_ioprio_set, 1, 0, v) < 0)
        return asbx_error (err, errno, "process.ioPriority: ioprio_set(%s, %d)", p->io_priority->class_,
                           (int) p->io_priority->priority);
    }
  return 0;
}
