/* monitor_driver.c - root-only test driver for the per-container monitor (monitor/monitor.c),
 * used by tests/integration/test_monitor.py while no policy reaches `create` from the CLI.
 *
 * It plays the part of `agentsbx create` + `start` for a host process: forks CMD (held before
 * exec on a pipe, like the container init waiting for `start`), places it in a fresh cgroup,
 * calls monitor_start() with a hand-filled policy plan, then releases it (the init's exec =
 * `started`) and exits like the CLI does - unless --wait.
 *
 *   monitor_driver run --id ID --state-dir DIR --audit-dir DIR [--cgroup PATH] [--wall S]
 *                      [--cpu S] [--failed N] [--exec] [--wait] -- CMD ARG...
 *     prints {"init":PID,"monitor":PID,"mask":N} on stdout
 *   monitor_driver cleanup --cgroup PATH --mask N
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/cgroup.h"
#include "policy/plan.h"
#include "monitor/monitor.h"

static int
die (asbx_err_t *err)
{
  fprintf (stderr, "monitor_driver: %s\n", *err ? (*err)->msg : "error");
  return 1;
}

int
main (int argc, char **argv)
{
  static const struct option opts[] = {
    { "id", required_argument, 0, 'i' },
    { "state-dir", required_argument, 0, 's' },
    { "audit-dir", required_argument, 0, 'a' },
    { "cgroup", required_argument, 0, 'c' },
    { "wall", required_argument, 0, 'w' },
    { "cpu", required_argument, 0, 'u' },
    { "failed", required_argument, 0, 'f' },
    { "exec", no_argument, 0, 'e' },
    { "wait", no_argument, 0, 'W' },
    { "mask", required_argument, 0, 'm' },
    { 0, 0, 0, 0 },
  };
  const char *id = "ctr", *state_dir = NULL, *audit_dir = NULL, *cgroup = NULL;
  struct policy_plan plan = {
    .active = true,
    .digest = (char *) "sha256:0000000000000000000000000000000000000000000000000000000000000000",
    .audit_events = POLICY_AUDIT_LIFECYCLE | POLICY_AUDIT_POLICY | POLICY_AUDIT_DENIAL | POLICY_AUDIT_LIMIT,
  };
  char *sources[] = { (char *) "ceiling: monitor_driver (test)" };
  bool wait_child = false;
  unsigned long mask = 0;
  asbx_err_t err = NULL;
  int c;

  plan.sources = sources;
  plan.sources_len = 1;
  if (argc < 2)
    return 2;
  const char *verb = argv[1];
  optind = 2;
  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c)
      {
      case 'i': id = optarg; break;
      case 's': state_dir = optarg; break;
      case 'a': audit_dir = optarg; break;
      case 'c': cgroup = optarg; break;
      case 'w': plan.wall_clock_seconds = strtoull (optarg, NULL, 10); break;
      case 'u': plan.cpu_seconds = strtoull (optarg, NULL, 10); break;
      case 'f': plan.failed_execs = strtoull (optarg, NULL, 10); break;
      case 'e': plan.audit_events |= POLICY_AUDIT_EXEC; break;
      case 'W': wait_child = true; break;
      case 'm': mask = strtoul (optarg, NULL, 10); break;
      default: return 2;
      }
  if (strcmp (verb, "cleanup") == 0)
    return cgroup && cgroup_remove (cgroup, mask, 5000, &err) < 0 ? die (&err) : 0;
  if (strcmp (verb, "run") != 0 || !state_dir || optind >= argc)
    return 2;

  int go[2];
  if (mkdir (state_dir, 0700) < 0 && errno != EEXIST)
    {
      asbx_error (&err, errno, "state dir `%s`", state_dir);
      return die (&err);
    }
  if (pipe2 (go, O_CLOEXEC) < 0)
    return 1;
  pid_t child = fork ();
  if (child < 0)
    return 1;
  if (child == 0)
    {
      char b;
      close (go[1]);
      if (read (go[0], &b, 1) != 1)
        _exit (126); /* the "create" failed: never exec */
      /* like a container init: not the driver's stdout, which the test reads to EOF */
      int null = open ("/dev/null", O_RDWR);
      if (null < 0 || dup2 (null, 0) < 0 || dup2 (null, 1) < 0 || dup2 (null, 2) < 0)
        _exit (125);
      execvp (argv[optind], argv + optind);
      _exit (127);
    }
  close (go[0]);
  if (cgroup && cgroup_enter (cgroup, NULL, child, &mask, &err) < 0)
    {
      kill (child, SIGKILL);
      return die (&err);
    }
  cleanup_close int dirfd = open (state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    {
      asbx_error (&err, errno, "state dir `%s`", state_dir);
      kill (child, SIGKILL);
      waitpid (child, NULL, 0);
      if (cgroup)
        {
          asbx_err_t e2 = NULL;
          cgroup_remove (cgroup, mask, 5000, &e2);
          asbx_error_free (&e2);
        }
      return die (&err);
    }
  struct monitor_opts mo = {
    .id = id,
    .init_pid = child,
    .cgroup_path = cgroup,
    .state_dirfd = dirfd,
    .audit_dir = audit_dir,
    .plan = &plan,
    .unixsock_fd = -1,
    .secrets_env_fd = -1, /* no environment secrets: fd 0 would be kept as one */
    .egress_owner_pidfd = -1,
  };
  pid_t mpid = 0;
  if (monitor_start (&mo, &mpid, &err) < 0)
    {
      kill (child, SIGKILL);
      waitpid (child, NULL, 0);
      if (cgroup)
        {
          asbx_err_t e2 = NULL;
          cgroup_remove (cgroup, mask, 5000, &e2);
          asbx_error_free (&e2);
        }
      return die (&err);
    }
  if (write (go[1], "g", 1) != 1)
    return 1;
  close (go[1]);
  printf ("{\"init\":%d,\"monitor\":%d,\"mask\":%lu}\n", (int) child, (int) mpid, mask);
  fflush (stdout);
  if (wait_child)
    {
      int st;
      waitpid (child, &st, 0);
      return WIFEXITED (st) ? WEXITSTATUS (st) : 128 + WTERMSIG (st);
    }
  return 0;
}
