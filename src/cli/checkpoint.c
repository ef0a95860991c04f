/* checkpoint.c - `agentsbx checkpoint` / `agentsbx restore`: runc's verbs and flags (what
 * Docker, Podman and containerd pass), carried out by runtime/criu.c. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/util.h"
#include "runtime/criu.h"

enum
{
  O_IMAGE = 256,
  O_WORK,
  O_PARENT,
  O_LEAVE,
  O_TCP,
  O_EXTUNIX,
  O_SHELL,
  O_LAZY,
  O_STATUSFD,
  O_PAGESRV,
  O_LOCKS,
  O_PREDUMP,
  O_CGMODE,
  O_EMPTYNS,
  O_DEDUP,
  O_CONSOLE,
  O_PIDFILE,
  O_NOSUB,
  O_NOPIVOT,
  O_LSMPROF,
  O_LSMMNT,
};

static void
push (char ***v, size_t *n, char *s)
{
  *v = xrealloc (*v, sizeof (char *) * (*n + 2));
  (*v)[(*n)++] = s;
  (*v)[*n] = NULL;
}

static int
check_cgroups_mode (const char *verb, const char *m)
{
  static const char *const ok[] = { "soft", "full", "strict", "ignore" };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (strcmp (m, ok[i]) == 0)
      return 0;
  return cli_usage (verb, "invalid --manage-cgroups-mode `%s` (soft, full, strict, ignore)", m);
}

int
cli_checkpoint (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "image-path", required_argument, 0, O_IMAGE },
    { "work-path", required_argument, 0, O_WORK },
    { "parent-path", required_argument, 0, O_PARENT },
    { "leave-running", no_argument, 0, O_LEAVE },
    { "tcp-established", no_argument, 0, O_TCP },
    { "ext-unix-sk", no_argument, 0, O_EXTUNIX },
    { "shell-job", no_argument, 0, O_SHELL },
    { "lazy-pages", no_argument, 0, O_LAZY },
    { "status-fd", required_argument, 0, O_STATUSFD },
    { "page-server", required_argument, 0, O_PAGESRV },
    { "file-locks", no_argument, 0, O_LOCKS },
    { "pre-dump", no_argument, 0, O_PREDUMP },
    { "manage-cgroups-mode", required_argument, 0, O_CGMODE },
    { "empty-ns", required_argument, 0, O_EMPTYNS },
    { "auto-dedup", no_argument, 0, O_DEDUP },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  struct asbx_checkpoint_opts o = { .image_path = "checkpoint", .status_fd = -1 };
  asbx_err_t err = NULL;
  int c, r;

  while ((c = getopt_long_only (argc, argv, "+h", opts, NULL)) != -1)
    switch (c)
      {
      case O_IMAGE: o.image_path = optarg; break;
      case O_WORK: o.work_path = optarg; break;
      case O_PARENT: o.parent_path = optarg; break;
      case O_LEAVE: o.leave_running = true; break;
      case O_TCP: o.tcp_established = true; break;
      case O_EXTUNIX: o.ext_unix_sk = true; break;
      case O_SHELL: o.shell_job = true; break;
      case O_LAZY: o.lazy_pages = true; break;
      case O_STATUSFD:
        if (cli_parse_int ("checkpoint", "--status-fd", optarg, &o.status_fd) < 0)
          return 1;
        break;
      case O_PAGESRV: o.page_server = optarg; break;
      case O_LOCKS: o.file_locks = true; break;
      case O_PREDUMP: o.pre_dump = true; break;
      case O_CGMODE:
        if (check_cgroups_mode ("checkpoint", optarg) != 0)
          return 1;
        o.manage_cgroups_mode = optarg;
        break;
      case O_EMPTYNS: push (&o.empty_ns, &o.empty_ns_len, optarg); break;
      case O_DEDUP: o.auto_dedup = true; break;
      case 'h': printf ("usage: agentsbx checkpoint [options] CONTAINER_ID\n"); return 0;
      default: return cli_usage ("checkpoint", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind != argc - 1)
    return cli_usage ("checkpoint", "expected exactly one argument: the container id");
  o.id = argv[optind];
  r = asbx_container_checkpoint (g, &o, &err) < 0 ? cli_fail (&err) : 0;
  free (o.empty_ns);
  return r;
}

int
cli_restore (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "console-socket", required_argument, 0, O_CONSOLE },
    { "image-path", required_argument, 0, O_IMAGE },
    { "work-path", required_argument, 0, O_WORK },
    { "tcp-established", no_argument, 0, O_TCP },
    { "ext-unix-sk", no_argument, 0, O_EXTUNIX },
    { "shell-job", no_argument, 0, O_SHELL },
    { "file-locks", no_argument, 0, O_LOCKS },
    { "manage-cgroups-mode", required_argument, 0, O_CGMODE },
    { "bundle", required_argument, 0, 'b' },
    { "detach", no_argument, 0, 'd' },
    { "pid-file", required_argument, 0, O_PIDFILE },
    { "no-subreaper", no_argument, 0, O_NOSUB },
    { "no-pivot", no_argument, 0, O_NOPIVOT },
    { "empty-ns", required_argument, 0, O_EMPTYNS },
    { "auto-dedup", no_argument, 0, O_DEDUP },
    { "lazy-pages", no_argument, 0, O_LAZY },
    { "lsm-profile", required_argument, 0, O_LSMPROF },
    { "lsm-mount-context", required_argument, 0, O_LSMMNT },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  struct asbx_restore_opts o = { .image_path = "checkpoint" };
  asbx_err_t err = NULL;
  int c, r;

  while ((c = getopt_long_only (argc, argv, "+b:dh", opts, NULL)) != -1)
    switch (c)
      {
      case O_CONSOLE: o.console_socket = optarg; break;
      case O_IMAGE: o.image_path = optarg; break;
      case O_WORK: o.work_path = optarg; break;
      case O_TCP: o.tcp_established = true; break;
      case O_EXTUNIX: o.ext_unix_sk = true; break;
      case O_SHELL: o.shell_job = true; break;
      case O_LOCKS: o.file_locks = true; break;
      case O_CGMODE:
        if (check_cgroups_mode ("restore", optarg) != 0)
          return 1;
        o.manage_cgroups_mode = optarg;
        break;
      case 'b': o.bundle = optarg; break;
      case 'd': o.detach = true; break;
      case O_PIDFILE: o.pid_file = optarg; break;
      case O_NOSUB: o.no_subreaper = true; break;
      case O_NOPIVOT: o.no_pivot = true; break;
      case O_EMPTYNS: push (&o.empty_ns, &o.empty_ns_len, optarg); break;
      case O_DEDUP: o.auto_dedup = true; break;
      case O_LAZY: o.lazy_pages = true; break;
      case O_LSMPROF: o.lsm_profile = optarg; break;
      case O_LSMMNT: o.lsm_mount_context = optarg; break;
      case 'h': printf ("usage: agentsbx restore [options] CONTAINER_ID\n"); return 0;
      default: return cli_usage ("restore", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind != argc - 1)
    return cli_usage ("restore", "expected exactly one argument: the container id");
  o.id = argv[optind];
  r = asbx_container_restore (g, &o, &err) < 0 ? cli_fail (&err) : 0;
  free (o.empty_ns);
  return r;
}
