/* no-openat2.c - run a command with openat2(2) failing with ENOSYS, as on kernels < 5.6.
 *
 * Usage: no-openat2 PROGRAM [ARG...]. Installs a seccomp filter (inherited by every child,
 * the container included) that answers openat2 with ENOSYS, then execs PROGRAM. Used by
 * tests/escape/test_robustness.py and `make check-noopenat2` (via noopenat2-wrap.sh) to run
 * agentsbx on its userspace resolution fallback (src/linux/pathsafe_fallback.c).
 * Needs root (no no_new_privs is set, so that the container's own setting stays observable).
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
  scmp_filter_ctx ctx;
  int rc;

  if (argc < 2)
    {
      fprintf (stderr, "usage: no-openat2 PROGRAM [ARG...]\n");
      return 2;
    }
  ctx = seccomp_init (SCMP_ACT_ALLOW);
  if (ctx == NULL)
    return 2;
  rc = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (ENOSYS), seccomp_syscall_resolve_name ("openat2"), 0);
  if (rc == 0)
    rc = seccomp_attr_set (ctx, SCMP_FLTATR_CTL_NNP, 0);
  /* other ABIs (an i386 `int 0x80` of the escape suite) pass untouched: libseccomp's default
   * would kill them, and what the container's own filters do with them is what is tested */
  if (rc == 0)
    rc = seccomp_attr_set (ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW);
  if (rc == 0)
    rc = seccomp_load (ctx);
  seccomp_release (ctx);
  if (rc < 0)
    {
      fprintf (stderr, "no-openat2: seccomp: %s\n", strerror (-rc));
      return 2;
    }
  execvp (argv[1], argv + 1);
  fprintf (stderr, "no-openat2: exec %s: %s\n", argv[1], strerror (errno));
  return 127;
}
