/* seccomp_bpf.c - linux.seccomp -> classic BPF (libseccomp) -> seccomp(2).
 *
 * Mechanism: libseccomp builds the filter in memory and exports the BPF program; we install that
 * program ourselves with seccomp(SECCOMP_SET_MODE_FILTER, flags). Installing it ourselves means the
 * flags are exactly the ones the spec asked for (libseccomp 2.5 has no WAIT_KILLABLE_RECV) and that
 * nothing of libseccomp (allocations, /proc reads) runs between the load and execve.
 *
 * Threat model: the filter is what keeps the container's process from reaching kernel surface the
 * profile denies, including through a foreign syscall ABI (32-bit int 0x80, x32): every arch that
 * is not listed hits libseccomp's bad-arch action (kill), and listed arches get the same rules.
 *
 * Ordering (runtime/init.c): compile before READY, so a bad profile fails `create`; load after
 * capabilities and no_new_privs as the last step before execve, or - without noNewPrivileges -
 * before capabilities are dropped, while CAP_SYS_ADMIN is still held (runc does the same). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/seccomp_bpf.h"
#include "linux/seccomp_cache.h"

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef SECCOMP_FILTER_FLAG_TSYNC_ESRCH
#define SECCOMP_FILTER_FLAG_TSYNC_ESRCH (1UL << 4)
#endif

/* seccomp_cache.c keys its entries with this: a rebuilt compiler never reuses an older program */
const char linux_seccomp_build_stamp[] = __DATE__ " " __TIME__;

const char *const linux_seccomp_action_names[] = {
  "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO",  "SCMP_ACT_KILL",  "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD",
  "SCMP_ACT_LOG",   "SCMP_ACT_NOTIFY", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP",         NULL,
};

const char *const linux_seccomp_operator_names[] = {
  "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE", NULL,
};

/* OCI name -> libseccomp name is "strip SCMP_ARCH_, lower-case"; the list is the set the spec
 * defines and libseccomp 2.5 knows. */
const char *const linux_seccomp_arch_names[] = {
  "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM",      "SCMP_ARCH_MIPS",        "SCMP_ARCH_MIPS64",  "SCMP_ARCH_MIPS64N32",
  "SCMP_ARCH_MIPSEL",  "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_MIPSEL64N32", "SCMP_ARCH_PARISC",  "SCMP_ARCH_PARISC64",
  "SCMP_ARCH_PPC",     "SCMP_ARCH_PPC64",    "SCMP_ARCH_PPC64LE",     "SCMP_ARCH_RISCV64", "SCMP_ARCH_S390",
  "SCMP_ARCH_S390X",   "SCMP_ARCH_X32",      "SCMP_ARCH_X86",         "SCMP_ARCH_X86_64",  NULL,
};

static const struct
{
  const char *name;
  unsigned int flag;
} flag_table[] = {
  { "SECCOMP_FILTER_FLAG_TSYNC", SECCOMP_FILTER_FLAG_TSYNC },
  { "SECCOMP_FILTER_FLAG_LOG", SECCOMP_FILTER_FLAG_LOG },
  { "SECCOMP_FILTER_FLAG_SPEC_ALLOW", SECCOMP_FILTER_FLAG_SPEC_ALLOW },
  { "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV", SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV },
};

const char *const linux_seccomp_flag_names[] = {
  "SECCOMP_FILTER_FLAG_TSYNC",
  "SECCOMP_FILTER_FLAG_LOG",
  "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
  "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV",
  NULL,
};

bool
linux_seccomp_flag_supported (unsigned int flag)
{
  /* a NULL program with a known flag fails with EFAULT once the flags have been checked;
   * WAIT_KILLABLE_RECV is only valid together with NEW_LISTENER */
  if (flag & SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
    flag |= SECCOMP_FILTER_FLAG_NEW_LISTENER;
  return syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, flag, NULL) < 0 && errno == EFAULT;
}

const char *const *
linux_seccomp_supported_flags (void)
{
  static const char *out[ASBX_ARRAY_SIZE (flag_table) + 1];
  size_t n = 0;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (flag_table); i++)
    if (linux_seccomp_flag_supported (flag_table[i].flag))
      out[n++] = flag_table[i].name;
  out[n] = NULL;
  return out;
}

/* "SCMP_ACT_ERRNO" + errnoRet -> libseccomp action value. EPERM is runc's default errno for ERRNO
 * and TRACE when no errnoRet is given. */
static int
parse_action (const char *name, bool has_ret, uint32_t ret, const char *path, uint32_t *out, asbx_err_t *err)
{
  uint32_t data = has_ret ? ret : EPERM;

  if (name == NULL)
    return asbx_error (err, EINVAL, "%s: required", path);
  if (has_ret && ret > 0xffff)
    return asbx_error (err, EINVAL, "%s: errno value %u out of range (0..65535)", path, ret);
  if (strcmp (name, "SCMP_ACT_ERRNO") == 0)
    *out = SCMP_ACT_ERRNO (data);
  else if (strcmp (name, "SCMP_ACT_TRACE") == 0)
    *out = SCMP_ACT_TRACE (data);
  else
    {
      if (strcmp (name, "SCMP_ACT_KILL") == 0 || strcmp (name, "SCMP_ACT_KILL_THREAD") == 0)
        *out = SCMP_ACT_KILL_THREAD;
      else if (strcmp (name, "SCMP_ACT_KILL_PROCESS") == 0)
        *out = SCMP_ACT_KILL_PROCESS;
      else if (strcmp (name, "SCMP_ACT_TRAP") == 0)
        *out = SCMP_ACT_TRAP;
      else if (strcmp (name, "SCMP_ACT_ALLOW") == 0)
        *out = SCMP_ACT_ALLOW;
      else if (strcmp (name, "SCMP_ACT_LOG") == 0)
        *out = SCMP_ACT_LOG;
      else if (strcmp (name, "SCMP_ACT_NOTIFY") == 0)
        *out = SCMP_ACT_NOTIFY;
      else
        return asbx_error (err, EINVAL, "%s: unknown action \"%s\"", path, name);
      if (has_ret)
        log_debug ("%s: errnoRet ignored for %s (only ERRNO and TRACE take one)", path, name);
    }
  return 0;
}

static int
parse_operator (const char *name, const char *path, enum scmp_compare *out, asbx_err_t *err)
{
  static const struct
  {
    const char *n;
    enum scmp_compare op;
  } ops[] = {
    { "SCMP_CMP_NE", SCMP_CMP_NE },
    { "SCMP_CMP_LT", SCMP_CMP_LT },
    { "SCMP_CMP_LE", SCMP_CMP_LE },
    { "SCMP_CMP_EQ", SCMP_CMP_EQ },
    { "SCMP_CMP_GE", SCMP_CMP_GE },
    { "SCMP_CMP_GT", SCMP_CMP_GT },
    { "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
  };
  if (name == NULL)
    return asbx_error (err, EINVAL, "%s: required", path);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (ops); i++)
    if (strcmp (name, ops[i].n) == 0)
      {
        *out = ops[i].op;
        return 0;
      }
  return asbx_error (err, EINVAL, "%s: unknown operator \"%s\"", path, name);
}

static int
parse_arch (const char *name, const char *path, uint32_t *out, asbx_err_t *err)
{
  char lower[32];
  size_t i;

  if (name == NULL || strncmp (name, "SCMP_ARCH_", 10) != 0 || strlen (name + 10) >= sizeof lower)
    return asbx_error (err, EINVAL, "%s: unknown architecture \"%s\"", path, name ? name : "");
  for (i = 0; name[10 + i]; i++)
    lower[i] = (char) (name[10 + i] >= 'A' && name[10 + i] <= 'Z' ? name[10 + i] + 32 : name[10 + i]);
  lower[i] = '\0';
  *out = seccomp_arch_resolve_name (lower);
  if (*out == 0)
    return asbx_error (err, EINVAL, "%s: unknown architecture \"%s\"", path, name);
  return 0;
}

static int
parse_flags (const struct oci_seccomp *s, unsigned int *out, asbx_err_t *err)
{
  *out = 0;
  for (size_t i = 0; i < s->flags_len; i++)
    {
      size_t k;
      for (k = 0; k < ASBX_ARRAY_SIZE (flag_table); k++)
        if (s->flags[i] && strcmp (s->flags[i], flag_table[k].name) == 0)
          break;
      if (k == ASBX_ARRAY_SIZE (flag_table))
        return asbx_error (err, EINVAL, "linux.seccomp.flags[%zu]: unknown flag \"%s\"", i,
                           s->flags[i] ? s->flags[i] : "");
      /* fail closed: a flag asked for and not enforceable here is an error, not a silent skip */
      if (!linux_seccomp_flag_supported (flag_table[k].flag))
        return asbx_error (err, EINVAL, "linux.seccomp.flags[%zu]: %s is not supported by this kernel", i,
                           flag_table[k].name);
      *out |= flag_table[k].flag;
    }
  return 0;
}

/* Build the conditions of syscalls[i] (path prefix `path`). *multi is set when an index appears
 * more than once (runc then adds one rule per condition). */
static int
build_conditions (const struct oci_seccomp_syscall *sc, const char *path, struct scmp_arg_cmp *conds, bool *multi,
                  asbx_err_t *err)
{
  unsigned int seen[6] = { 0 };

  *multi = false;
  for (size_t j = 0; j < sc->args_len; j++)
    {
      const struct oci_seccomp_arg *a = &sc->args[j];
      cleanup_free char *apath = xasprintf ("%s.args[%zu]", path, j);
      enum scmp_compare op = SCMP_CMP_EQ;

      if (a->index > 5)
        return asbx_error (err, EINVAL, "%s.index: %u out of range (0..5)", apath, a->index);
      cleanup_free char *opath = xasprintf ("%s.op", apath);
      if (parse_operator (a->op, opath, &op, err) < 0)
        return -1;
      conds[j].arg = a->index;
      conds[j].op = op;
      /* MASKED_EQ: (arg & value) == valueTwo; other operators compare against value */
      conds[j].datum_a = a->value;
      conds[j].datum_b = a->has_value_two ? a->value_two : 0;
      if (++seen[a->index] > 1)
        *multi = true;
    }
  return 0;
}

static int
add_rules (scmp_filter_ctx ctx, const struct oci_seccomp_syscall *sc, size_t i, uint32_t def, uint32_t *nrules,
           unsigned int *skipped, asbx_err_t *err)
{
  cleanup_free char *path = xasprintf ("linux.seccomp.syscalls[%zu]", i);
  cleanup_free char *apath = xasprintf ("%s.action", path);
  cleanup_free struct scmp_arg_cmp *conds = NULL;
  uint32_t act = 0;
  bool multi = false;

  if (parse_action (sc->action, sc->has_errno_ret, sc->errno_ret, apath, &act, err) < 0)
    return -1;
  if (sc->args_len > 0)
    {
      conds = xmalloc0 (sc->args_len * sizeof *conds);
      if (build_conditions (sc, path, conds, &multi, err) < 0)
        return -1;
    }
  if (sc->names_len == 0)
    return asbx_error (err, EINVAL, "%s.names: expected at least one syscall name", path);
  if (act == def)
    {
      /* libseccomp refuses a rule equal to the default; it would change nothing (runc skips too) */
      log_debug ("%s: action equals defaultAction: rule skipped", path);
      return 0;
    }
  for (size_t n = 0; n < sc->names_len; n++)
    {
      const char *name = sc->names[n] ? sc->names[n] : "";
      int nr = seccomp_syscall_resolve_name (name), r = 0;
      if (nr == __NR_SCMP_ERROR)
        {
          log_debug ("%s.names[%zu]: unknown syscall \"%s\" skipped", path, n, name);
          (*skipped)++;
          continue;
        }
      if (sc->args_len == 0)
        r = seccomp_rule_add_array (ctx, act, nr, 0, NULL);
      else if (!multi)
        r = seccomp_rule_add_array (ctx, act, nr, (unsigned int) sc->args_len, conds);
      else
        for (size_t j = 0; j < sc->args_len && r == 0; j++)
          r = seccomp_rule_add_array (ctx, act, nr, 1, &conds[j]);
      if (r < 0)
        return asbx_error (err, -r, "%s: add rule for \"%s\"", path, name);
      (*nrules)++;
    }
  return 0;
}

static void
ctx_release (scmp_filter_ctx *ctx)
{
  if (*ctx)
    seccomp_release (*ctx);
}

/* Export the generated BPF into memory (libseccomp 2.5 exports only to an fd: use a memfd). */
static int
export_bpf (scmp_filter_ctx ctx, struct linux_seccomp *out, asbx_err_t *err)
{
  cleanup_close int fd = memfd_create ("asbx-seccomp", MFD_CLOEXEC);
  cleanup_free char *buf = NULL;
  size_t len = 0;
  int r;

  if (fd < 0)
    return asbx_error (err, errno, "linux.seccomp: memfd_create");
  r = seccomp_export_bpf (ctx, fd);
  if (r < 0)
    return asbx_error (err, -r, "linux.seccomp: export the BPF program");
  if (lseek (fd, 0, SEEK_SET) < 0 || read_all_fd (fd, 1 << 20, &buf, &len) < 0)
    return asbx_error (err, errno, "linux.seccomp: read back the BPF program");
  if (len == 0 || len % sizeof (struct sock_filter) || len / sizeof (struct sock_filter) > BPF_MAXINSNS)
    return asbx_error (err, E2BIG, "linux.seccomp: the filter has %zu instructions (kernel limit %d)",
                       len / sizeof (struct sock_filter), BPF_MAXINSNS);
  out->len = (unsigned short) (len / sizeof (struct sock_filter));
  out->insns = steal_ptr (&buf);
  return 0;
}

int
linux_seccomp_compile (const struct oci_seccomp *s, struct linux_seccomp *out, asbx_err_t *err)
{
  __attribute__ ((cleanup (ctx_release))) scmp_filter_ctx ctx = NULL;
  struct linux_seccomp f = { 0 };
  uint32_t def = 0;
  int r;

  if (parse_action (s->default_action, s->has_default_errno_ret, s->default_errno_ret, "linux.seccomp.defaultAction",
                    &def, err)
      < 0)
    return -1;
  if (def == SCMP_ACT_NOTIFY)
    return asbx_error (err, EINVAL, "linux.seccomp.defaultAction: SCMP_ACT_NOTIFY cannot be the default action");
  if (parse_flags (s, &f.flags, err) < 0)
    return -1;
  ctx = seccomp_init (def);
  if (ctx == NULL)
    return asbx_error (err, EINVAL, "linux.seccomp: seccomp_init failed");
  for (size_t i = 0; i < s->architectures_len; i++)
    {
      cleanup_free char *path = xasprintf ("linux.seccomp.architectures[%zu]", i);
      uint32_t arch = 0;
      if (parse_arch (s->architectures[i], path, &arch, err) < 0)
        return -1;
      r = seccomp_arch_add (ctx, arch);
      if (r < 0 && r != -EEXIST)
        return asbx_error (err, -r, "%s: add \"%s\"", path, s->architectures[i]);
    }
  /* the binary-tree layout keeps long profiles (Docker's: ~350 names) under the 4096 limit and fast */
  if (s->syscalls_len > 8 && (r = seccomp_attr_set (ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
    log_debug ("linux.seccomp: binary tree optimization unavailable: %s", strerror (-r));
  for (size_t i = 0; i < s->syscalls_len; i++)
    {
      if (add_rules (ctx, &s->syscalls[i], i, def, &f.rules, &f.skipped_names, err) < 0)
        return -1;
      if (s->syscalls[i].action && strcmp (s->syscalls[i].action, "SCMP_ACT_NOTIFY") == 0)
        f.notify = true;
    }
  if (f.notify && (s->listener_path == NULL || s->listener_path[0] == '\0'))
    return asbx_error (err, EINVAL, "linux.seccomp.listenerPath: required when a rule uses SCMP_ACT_NOTIFY");
  if (!f.notify && (f.flags & SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV))
    {
      /* the kernel takes it only with a listener; it changes nothing without one */
      log_debug ("linux.seccomp.flags: SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV ignored: no rule uses SCMP_ACT_NOTIFY");
      f.flags &= ~(unsigned int) SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    }
  if (!f.notify && s->listener_path && s->listener_path[0])
    log_debug ("linux.seccomp.listenerPath ignored: no rule uses SCMP_ACT_NOTIFY");
  if (export_bpf (ctx, &f, err) < 0)
    return -1;
  *out = f;
  return 0;
}

void
linux_seccomp_release (struct linux_seccomp *f)
{
  if (f == NULL)
    return;
  free (f->insns);
  f->insns = NULL;
  f->len = 0;
}

int
linux_seccomp_load (const struct linux_seccomp *f, int *notify_fd, asbx_err_t *err)
{
  struct sock_fprog prog = { .len = f->len, .filter = f->insns };
  unsigned long flags = f->flags;
  long r;

  *notify_fd = -1;
  if (f->notify)
    {
      flags |= SECCOMP_FILTER_FLAG_NEW_LISTENER;
      /* TSYNC reports a failing thread id, which collides with the listener fd return value */
      if (flags & SECCOMP_FILTER_FLAG_TSYNC)
        flags |= SECCOMP_FILTER_FLAG_TSYNC_ESRCH;
    }
  r = syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
  if (r < 0)
    return asbx_error (err, errno, "linux.seccomp: install the filter (flags %#lx)", flags);
  if (f->notify)
    *notify_fd = (int) r; /* the kernel sets O_CLOEXEC on the listener fd */
  return 0;
}

int
linux_seccomp_install (const struct linux_seccomp *f, int listener, const char *process_state, asbx_err_t *err)
{
  cleanup_close int nfd = -1;

  if (linux_seccomp_load (f, &nfd, err) < 0)
    return -1;
  if (!f->notify)
    return 0;
  if (listener < 0 || process_state == NULL)
    return asbx_error (err, EINVAL, "linux.seccomp.listenerPath: no listener connection");
  return linux_seccomp_listener_send (listener, nfd, process_state, err);
}
