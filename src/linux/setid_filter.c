/* setid_filter.c - see setid_filter.h. */
#include <errno.h>
#include <seccomp.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "linux/setid_filter.h"

/* the mode argument's index in each call */
static const struct
{
  const char *name;
  unsigned arg;
} mode_calls[] = {
  { "chmod", 1 }, { "fchmod", 1 }, { "fchmodat", 2 }, { "fchmodat2", 2 }, { "open", 2 },    { "openat", 3 },
  { "creat", 1 }, { "mkdir", 1 },  { "mkdirat", 2 },  { "mknod", 1 },     { "mknodat", 2 },
};

static int
add_rules (scmp_filter_ctx ctx)
{
  static const unsigned long bits[] = { S_ISUID, S_ISGID };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (mode_calls); i++)
    {
      int nr = seccomp_syscall_resolve_name (mode_calls[i].name);
      if (nr == __NR_SCMP_ERROR)
        continue; /* a call this libseccomp does not know (fchmodat2 before 2.5.5): see below */
      for (size_t b = 0; b < ASBX_ARRAY_SIZE (bits); b++)
        {
          struct scmp_arg_cmp c = { mode_calls[i].arg, SCMP_CMP_MASKED_EQ, bits[b], bits[b] };
          int r = seccomp_rule_add_array (ctx, SCMP_ACT_ERRNO (EPERM), nr, 1, &c);
          if (r < 0)
            return r;
        }
    }
#ifdef __x86_64__
  /* fchmodat2 (Linux 6.6) by number when libseccomp cannot name it: glibc 2.39 uses it */
  if (seccomp_syscall_resolve_name ("fchmodat2") == __NR_SCMP_ERROR)
    for (unsigned long b = S_ISGID; b <= S_ISUID; b <<= 1)
      {
        int r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), 452, 1, SCMP_A2 (SCMP_CMP_MASKED_EQ, b, b));
        if (r < 0)
          return r;
      }
#endif
  static const char *const enosys[] = { "openat2", "io_uring_setup" };
  static const char *const eperm[] = { "unshare", "setns" };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (enosys); i++)
    {
      int nr = seccomp_syscall_resolve_name (enosys[i]);
      int r = nr == __NR_SCMP_ERROR ? 0 : seccomp_rule_add (ctx, SCMP_ACT_ERRNO (ENOSYS), nr, 0);
      if (r < 0)
        return r;
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (eperm); i++)
    {
      int r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), seccomp_syscall_resolve_name (eperm[i]), 0);
      if (r < 0)
        return r;
    }
  return 0;
}

int
linux_load_setid_filter (asbx_err_t *err)
{
  scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);
  if (!ctx)
    return asbx_error (err, ENOMEM, "seccomp: init the set-ID mode filter");
  int r = add_rules (ctx);
  if (r == 0)
    r = seccomp_load (ctx);
  seccomp_release (ctx);
  if (r < 0)
    return asbx_error (err, -r, "seccomp: load the set-ID mode filter");
  return 0;
}
