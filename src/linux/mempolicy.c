/* mempolicy.c - linux.memoryPolicy (runtime-spec 1.3 config-linux.md "Memory policy"):
 * set_mempolicy(2) on the container's processes (the policy is inherited across fork and
 * kept across execve, so the init and each exec'd process set it once before exec).
 *
 * Sources: set_mempolicy(2), include/uapi/linux/mempolicy.h (mode numbers, MPOL_F_* flag bits),
 * Documentation/admin-guide/mm/numa_memory_policy.rst. The node list is the cpuset list
 * format ("0-3,7"). Modes that need nodes (BIND, INTERLEAVE, WEIGHTED_INTERLEAVE,
 * PREFERRED_MANY) without them, or nodes given to DEFAULT/LOCAL, are refused at create; the
 * kernel's refusal (a node that is not online, a mode this kernel lacks) names the field. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/util.h"
#include "linux/process.h"

#define MPOL_MAX_NODES 1024 /* MAX_NUMNODES at CONFIG_NODES_SHIFT 10, the largest distributions use */

const char *const linux_mempolicy_mode_names[] = {
  "MPOL_DEFAULT",        "MPOL_PREFERRED",           "MPOL_BIND", "MPOL_INTERLEAVE", "MPOL_LOCAL",
  "MPOL_PREFERRED_MANY", "MPOL_WEIGHTED_INTERLEAVE", NULL, /* index = the kernel's mode number */
};

const char *const linux_mempolicy_flag_names[] = {
  "MPOL_F_NUMA_BALANCING", /* 1 << 13 */
  "MPOL_F_RELATIVE_NODES", /* 1 << 14 */
  "MPOL_F_STATIC_NODES",   /* 1 << 15 */
  NULL,
};

static int
mode_value (const char *name)
{
  for (int i = 0; linux_mempolicy_mode_names[i]; i++)
    if (strcmp (linux_mempolicy_mode_names[i], name) == 0)
      return i;
  return -1;
}

static int
flag_value (const char *name)
{
  for (int i = 0; linux_mempolicy_flag_names[i]; i++)
    if (strcmp (linux_mempolicy_flag_names[i], name) == 0)
      return 1 << (13 + i);
  return -1;
}

static int
parse_node (const char **s, unsigned long *out)
{
  char *end;
  if (**s < '0' || **s > '9')
    return -1;
  errno = 0;
  *out = strtoul (*s, &end, 10);
  if (errno || *out >= MPOL_MAX_NODES)
    return -1;
  *s = end;
  return 0;
}

/* "0-3,7" -> bits in mask (MPOL_MAX_NODES bits); -1 on bad syntax */
static int
parse_nodes (const char *s, unsigned long *mask)
{
  const size_t bits = 8 * sizeof (unsigned long);
  while (*s)
    {
      unsigned long a, b;
      if (parse_node (&s, &a) < 0)
        return -1;
      b = a;
      if (*s == '-')
        {
          s++;
          if (parse_node (&s, &b) < 0 || b < a)
            return -1;
        }
      for (unsigned long n = a; n <= b; n++)
        mask[n / bits] |= 1UL << (n % bits);
      if (*s == ',')
        s++;
      else if (*s)
        return -1;
    }
  return 0;
}

/* mode | flags and the node mask; errors name the JSON path */
static int
mempolicy_compile (const struct oci_memory_policy *m, int *mode, unsigned long *mask, bool *has_nodes, asbx_err_t *err)
{
  int v = mode_value (m->mode);
  if (v < 0)
    return asbx_error (err, EINVAL,
                       "linux.memoryPolicy.mode: unknown mode `%s` (MPOL_DEFAULT, MPOL_PREFERRED, MPOL_BIND, "
                       "MPOL_INTERLEAVE, MPOL_LOCAL, MPOL_PREFERRED_MANY, MPOL_WEIGHTED_INTERLEAVE)",
                       m->mode);
  *has_nodes = m->nodes && *m->nodes;
  if (*has_nodes && parse_nodes (m->nodes, mask) < 0)
    return asbx_error (err, EINVAL,
                       "linux.memoryPolicy.nodes: `%s`: expected a node list such as \"0-3,7\" (nodes < %d)", m->nodes,
                       MPOL_MAX_NODES);
  bool need = v == 2 || v == 3 || v == 5 || v == 6, forbid = v == 0 || v == 4;
  if (need && !*has_nodes)
    return asbx_error (err, EINVAL, "linux.memoryPolicy.nodes: required for %s", m->mode);
  if (forbid && *has_nodes)
    return asbx_error (err, EINVAL, "linux.memoryPolicy.nodes: must be empty for %s", m->mode);
  for (size_t i = 0; i < m->flags_len; i++)
    {
      int f = flag_value (m->flags[i]);
      if (f < 0)
        return asbx_error (err, EINVAL,
                           "linux.memoryPolicy.flags[%zu]: unknown flag `%s` (MPOL_F_NUMA_BALANCING, "
                           "MPOL_F_RELATIVE_NODES, MPOL_F_STATIC_NODES)",
                           i, m->flags[i]);
      v |= f;
    }
  *mode = v;
  return 0;
}

int
linux_mempolicy_check (const struct oci_memory_policy *m, asbx_err_t *err)
{
  unsigned long mask[MPOL_MAX_NODES / (8 * sizeof (unsigned long))] = { 0 };
  int mode = 0;
  bool has_nodes = false;
  return m ? mempolicy_compile (m, &mode, mask, &has_nodes, err) : 0;
}

int
linux_mempolicy_apply (const struct oci_memory_policy *m, asbx_err_t *err)
{
  unsigned long mask[MPOL_MAX_NODES / (8 * sizeof (unsigned long))] = { 0 };
  int mode = 0;
  bool has_nodes = false;
  if (!m)
    return 0;
  if (mempolicy_compile (m, &mode, mask, &has_nodes, err) < 0)
    return -1;
  /* maxnode counts bits; the kernel reads maxnode - 1 of them (set_mempolicy(2) BUGS) */
  if (syscall (SYS_set_mempolicy, mode, has_nodes ? mask : NULL, has_nodes ? MPOL_MAX_NODES + 1 : 0) < 0)
    return asbx_error (err, errno, "linux.memoryPolicy: set_mempolicy(%s%s%s)", m->mode, has_nodes ? ", nodes " : "",
                       has_nodes ? m->nodes : "");
  return 0;
}
