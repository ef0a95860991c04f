/* test_seccomp.c - src/linux/seccomp_bpf.c and seccomp_notify.c: profile errors naming the JSON
 * path, then every action installed for real in a forked child (with no_new_privs, so no root is
 * needed) and observed from the parent: errno values, argument filters (incl. MASKED_EQ and the
 * OR form), TRAP/KILL deaths by SIGSYS, TRACE without a tracer, LOG, and the NOTIFY handshake
 * through a socketpair with the containerProcessState JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "linux/seccomp_bpf.h"

static char *names_getppid[] = { "getppid" };
static char *names_dup[] = { "dup" };
static char *names_prio[] = { "getpriority" };
static char *names_yield[] = { "sched_yield" };
static char *names_unknown[] = { "no_such_syscall_xyz", "getppid" };

static void
expect_error (struct oci_seccomp *s, const char *msg)
{
  struct linux_seccomp f;
  asbx_err_t err = NULL;
  assert_int_equal (linux_seccomp_compile (s, &f, &err), -1);
  assert_non_null (err);
  if (strstr (err->msg, msg) == NULL)
    fail_msg ("error `%s` does not contain `%s`", err->msg, msg);
  asbx_error_free (&err);
}

static void
test_errors (void **state)
{
  struct oci_seccomp_arg arg = { .index = 0, .value = 1, .op = "SCMP_CMP_EQ" };
  struct oci_seccomp_syscall sc[2] = {
    { .names = names_getppid, .names_len = 1, .action = "SCMP_ACT_ERRNO" },
    { .names = names_dup, .names_len = 1, .action = "SCMP_ACT_FOO" },
  };
  struct oci_seccomp s = { .default_action = "SCMP_ACT_ALLOW", .syscalls = sc, .syscalls_len = 2 };
  char *arch[] = { "SCMP_ARCH_X86_64", "SCMP_ARCH_Z80" };
  char *flags[] = { "SECCOMP_FILTER_FLAG_NOPE" };
  (void) state;

  expect_error (&s, "linux.seccomp.syscalls[1].action: unknown action \"SCMP_ACT_FOO\"");
  sc[1].action = "SCMP_ACT_ERRNO";
  sc[1].args = &arg;
  sc[1].args_len = 1;
  arg.op = "SCMP_CMP_SOMETIMES";
  expect_error (&s, "linux.seccomp.syscalls[1].args[0].op: unknown operator \"SCMP_CMP_SOMETIMES\"");
  arg.op = "SCMP_CMP_EQ";
  arg.index = 6;
  expect_error (&s, "linux.seccomp.syscalls[1].args[0].index: 6 out of range");
  arg.index = 0;
  s.architectures = arch;
  s.architectures_len = 2;
  expect_error (&s, "linux.seccomp.architectures[1]: unknown architecture \"SCMP_ARCH_Z80\"");
  s.architectures_len = 1;
  s.flags = flags;
  s.flags_len = 1;
  expect_error (&s, "linux.seccomp.flags[0]: unknown flag \"SECCOMP_FILTER_FLAG_NOPE\"");
  s.flags_len = 0;
  s.default_action = "SCMP_ACT_NOTIFY";
  expect_error (&s, "linux.seccomp.defaultAction: SCMP_ACT_NOTIFY cannot be the default action");
  s.default_action = NULL;
  expect_error (&s, "linux.seccomp.defaultAction: required");
  s.default_action = "SCMP_ACT_ALLOW";
  sc[0].action = "SCMP_ACT_NOTIFY";
  expect_error (&s, "linux.seccomp.listenerPath: required when a rule uses SCMP_ACT_NOTIFY");
  sc[0].action = "SCMP_ACT_ERRNO";
  sc[0].has_errno_ret = true;
  sc[0].errno_ret = 70000;
  expect_error (&s, "linux.seccomp.syscalls[0].action: errno value 70000 out of range");
}

static void
test_unknown_name_skipped (void **state)
{
  struct oci_seccomp_syscall sc = { .names = names_unknown, .names_len = 2, .action = "SCMP_ACT_ERRNO" };
  struct oci_seccomp s = { .default_action = "SCMP_ACT_ALLOW", .syscalls = &sc, .syscalls_len = 1 };
  struct linux_seccomp f;
  asbx_err_t err = NULL;
  (void) state;
  assert_int_equal (linux_seccomp_compile (&s, &f, &err), 0);
  assert_int_equal (f.skipped_names, 1);
  assert_int_equal (f.rules, 1);
  assert_true (f.len > 0);
  linux_seccomp_release (&f);
  /* a rule equal to the default action is dropped, not an error (runc) */
  sc.action = "SCMP_ACT_ALLOW";
  assert_int_equal (linux_seccomp_compile (&s, &f, &err), 0);
  assert_int_equal (f.rules, 0);
  linux_seccomp_release (&f);
}

/* Install `s` in a child with no_new_privs and run `body` there; returns the wait status. */
static int
run_filtered (struct oci_seccomp *s, int (*body) (void))
{
  struct linux_seccomp f;
  asbx_err_t err = NULL;
  int st;
  if (linux_seccomp_compile (s, &f, &err) < 0)
    fail_msg ("compile: %s", err->msg);
  pid_t pid = fork ();
  if (pid == 0)
    {
      int nfd;
      signal (SIGSYS, SIG_DFL); /* cmocka catches SIGSYS in the test process */
      if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || linux_seccomp_load (&f, &nfd, &err) < 0)
        _exit (99);
      _exit (body ());
    }
  waitpid (pid, &st, 0);
  linux_seccomp_release (&f);
  return st;
}

static int
body_errno (void)
{
  /* default EPERM for a bare ERRNO, errnoRet otherwise; arg filters decide per call */
  if (syscall (SYS_getppid) != -1 || errno != ENXIO)
    return 1;
  if (syscall (SYS_getpriority, PRIO_PROCESS, 0) < 0)
    return 2; /* arg0 != PRIO_USER: allowed */
  if (syscall (SYS_getpriority, PRIO_USER, 0) != -1 || errno != E2BIG)
    return 3;
  if (syscall (SYS_dup, 0x13) != -1 || errno != 77) /* (0x13 & 0xf0) == 0x10: masked match */
    return 4;
  if (syscall (SYS_dup, 0x23) != -1 || errno != EBADF) /* no match: the kernel's own EBADF */
    return 5;
  if (syscall (SYS_sched_yield) != -1 || errno != EPERM) /* ERRNO without errnoRet: EPERM */
    return 6;
  return 0;
}

static void
test_errno_and_args (void **state)
{
  struct oci_seccomp_arg prio = { .index = 0, .value = PRIO_USER, .op = "SCMP_CMP_EQ" };
  struct oci_seccomp_arg masked = {
    .index = 0, .value = 0xf0, .has_value_two = true, .value_two = 0x10, .op = "SCMP_CMP_MASKED_EQ"
  };
  struct oci_seccomp_syscall sc[] = {
    { .names = names_getppid, .names_len = 1, .action = "SCMP_ACT_ERRNO", .has_errno_ret = true, .errno_ret = ENXIO },
    { .names = names_prio,
      .names_len = 1,
      .action = "SCMP_ACT_ERRNO",
      .has_errno_ret = true,
      .errno_ret = E2BIG,
      .args = &prio,
      .args_len = 1 },
    { .names = names_dup,
      .names_len = 1,
      .action = "SCMP_ACT_ERRNO",
      .has_errno_ret = true,
      .errno_ret = 77,
      .args = &masked,
      .args_len = 1 },
    { .names = names_yield, .names_len = 1, .action = "SCMP_ACT_ERRNO" },
  };
  struct oci_seccomp s = { .default_action = "SCMP_ACT_ALLOW", .syscalls = sc, .syscalls_len = 4 };
  (void) state;
  int st = run_filtered (&s, body_errno);
  assert_true (WIFEXITED (st));
  assert_int_equal (WEXITSTATUS (st), 0);
}

static int
body_or_args (void)
{
  /* two conditions on arg0 in one rule: runc adds one rule per condition (OR) */
  if (syscall (SYS_getpriority, PRIO_USER, 0) != -1 || errno != EDOM)
    return 1;
  if (syscall (SYS_getpriority, PRIO_PGRP, 0) != -1 || errno != EDOM)
    return 2;
  if (syscall (SYS_getpriority, PRIO_PROCESS, 0) < 0)
    return 3;
  return 0;
}

static void
test_or_args (void **state)
{
  struct oci_seccomp_arg a[2] = { { .index = 0, .value = PRIO_USER, .op = "SCMP_CMP_EQ" },
                                  { .index = 0, .value = PRIO_PGRP, .op = "SCMP_CMP_EQ" } };
  struct oci_seccomp_syscall sc = { .names = names_prio,
                                    .names_len = 1,
                                    .action = "SCMP_ACT_ERRNO",
                                    .has_errno_ret = true,
                                    .errno_ret = EDOM,
                                    .args = a,
                                    .args_len = 2 };
  struct oci_seccomp s = { .default_action = "SCMP_ACT_ALLOW", .syscalls = &sc, .syscalls_len = 1 };
  (void) state;
  int st = run_filtered (&s, body_or_args);
  assert_true (WIFEXITED (st));
  assert_int_equal (WEXITSTATUS (st), 0);
}

static int
body_yield (void)
{
  long r = syscall (SYS_sched_yield);
  return r == 0 ? 0 : (errno == ENOSYS ? 38 : 1);
}

static int
action_status (const char *action, const char *def)
{
  struct oci_seccomp_syscall sc = { .names = names_yield, .names_len = 1, .action = (char *) action };
  struct oci_seccomp s = { .default_action = (char *) def, .syscalls = &sc, .syscalls_len = 1 };
  return run_filtered (&s, body_yield);
}

static void
test_actions (void **state)
{
  const char *kill[] = { "SCMP_ACT_KILL", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_TRAP" };
  int st;
  (void) state;
  for (size_t i = 0; i < sizeof kill / sizeof kill[0]; i++)
    {
      st = action_status (kill[i], "SCMP_ACT_ALLOW");
      if (!WIFSIGNALED (st) || WTERMSIG (st) != SIGSYS)
        fail_msg ("%s: expected death by SIGSYS, status %#x", kill[i], st);
    }
  st = action_status ("SCMP_ACT_LOG", "SCMP_ACT_ALLOW");
  assert_true (WIFEXITED (st) && WEXITSTATUS (st) == 0);
  /* TRACE with no tracer attached: the kernel fails the call with ENOSYS (seccomp(2)) */
  st = action_status ("SCMP_ACT_TRACE", "SCMP_ACT_ALLOW");
  assert_true (WIFEXITED (st) && WEXITSTATUS (st) == 38);
  /* allow-list: everything else hits the default */
  st = action_status ("SCMP_ACT_TRAP", "SCMP_ACT_LOG");
  assert_true (WIFSIGNALED (st) && WTERMSIG (st) == SIGSYS);
}

static void
test_process_state (void **state)
{
  asbx_err_t err = NULL;
  (void) state;
  char *j = linux_seccomp_process_state (
      "{\"ociVersion\":\"1.2.0\",\"id\":\"c1\",\"status\":\"creating\",\"pid\":4242,\"bundle\":\"/b\","
      "\"annotations\":{\"a\":\"b\"}}",
      "meta \"q\"", &err);
  assert_non_null (j);
  assert_string_equal (j,
                       "{\"ociVersion\":\"1.2.0\",\"fds\":[\"seccompFd\"],\"pid\":4242,\"metadata\":\"meta \\\"q\\\"\","
                       "\"state\":{\"ociVersion\":\"1.2.0\",\"id\":\"c1\",\"status\":\"creating\",\"pid\":4242,"
                       "\"bundle\":\"/b\",\"annotations\":{\"a\":\"b\"}}}");
  free (j);
  assert_null (linux_seccomp_process_state ("[1]", NULL, &err));
  asbx_error_free (&err);
  assert_int_equal (linux_seccomp_listener_connect ("/nonexistent/agentsbx.sock", &err), -1);
  assert_non_null (strstr (err->msg, "linux.seccomp.listenerPath: connect `/nonexistent/agentsbx.sock`"));
  asbx_error_free (&err);
}

/* NOTIFY end to end: the child installs the filter and hands the notify fd + state over a
 * socketpair (linux_seccomp_install); the parent answers getppid with 4242. */
static void
test_notify (void **state)
{
  struct oci_seccomp_syscall sc = { .names = names_getppid, .names_len = 1, .action = "SCMP_ACT_NOTIFY" };
  struct oci_seccomp s = {
    .default_action = "SCMP_ACT_ALLOW", .syscalls = &sc, .syscalls_len = 1, .listener_path = "/unused"
  };
  struct linux_seccomp f;
  asbx_err_t err = NULL;
  int sp[2], st;
  (void) state;
  assert_int_equal (linux_seccomp_compile (&s, &f, &err), 0);
  assert_true (f.notify);
  assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  pid_t pid = fork ();
  if (pid == 0)
    {
      close (sp[0]);
      if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || linux_seccomp_install (&f, sp[1], "{\"x\":1}", &err) < 0)
        _exit (99);
      _exit (syscall (SYS_getppid) == 4242 ? 0 : 1);
    }
  close (sp[1]);
  char buf[256] = "";
  union
  {
    char b[CMSG_SPACE (sizeof (int))];
    struct cmsghdr a;
  } u;
  struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf - 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b };
  ssize_t n = recvmsg (sp[0], &msg, 0);
  assert_true (n > 0);
  assert_string_equal (buf, "{\"x\":1}");
  struct cmsghdr *c = CMSG_FIRSTHDR (&msg);
  assert_non_null (c);
  assert_int_equal (c->cmsg_type, SCM_RIGHTS);
  int nfd;
  memcpy (&nfd, CMSG_DATA (c), sizeof nfd);
  struct seccomp_notif req;
  memset (&req, 0, sizeof req);
  assert_int_equal (ioctl (nfd, SECCOMP_IOCTL_NOTIF_RECV, &req), 0);
  assert_int_equal (req.data.nr, SYS_getppid);
  struct seccomp_notif_resp resp = { .id = req.id, .val = 4242, .error = 0, .flags = 0 };
  assert_int_equal (ioctl (nfd, SECCOMP_IOCTL_NOTIF_SEND, &resp), 0);
  waitpid (pid, &st, 0);
  assert_true (WIFEXITED (st));
  assert_int_equal (WEXITSTATUS (st), 0);
  close (nfd);
  close (sp[0]);
  linux_seccomp_release (&f);
}

static void
test_flags_and_tables (void **state)
{
  char *flags[] = { "SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_TSYNC" };
  struct oci_seccomp s = { .default_action = "SCMP_ACT_ALLOW", .flags = flags, .flags_len = 3 };
  struct linux_seccomp f;
  asbx_err_t err = NULL;
  (void) state;
  assert_int_equal (linux_seccomp_compile (&s, &f, &err), 0);
  assert_int_equal (f.flags, SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_SPEC_ALLOW | SECCOMP_FILTER_FLAG_TSYNC);
  linux_seccomp_release (&f);
  assert_true (linux_seccomp_flag_supported (SECCOMP_FILTER_FLAG_TSYNC));
  assert_false (linux_seccomp_flag_supported (1U << 30));
  size_t n = 0;
  for (const char *const *a = linux_seccomp_action_names; *a; a++)
    n++;
  assert_int_equal (n, 9);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_errors),         cmocka_unit_test (test_unknown_name_skipped),
    cmocka_unit_test (test_errno_and_args), cmocka_unit_test (test_or_args),
    cmocka_unit_test (test_actions),        cmocka_unit_test (test_process_state),
    cmocka_unit_test (test_notify),         cmocka_unit_test (test_flags_and_tables),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
