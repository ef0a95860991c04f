/* main.c - global options (runc's) and verb dispatch. Options are accepted with one or two
 * dashes, as runc (urfave/cli) does, and before the verb. */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <seccomp.h>

#include "cli/cli.h"
#include "core/log.h"
#include "core/util.h"
#include "runtime/secret_env.h"
#include "runtime/userdirs.h"
#include "runtime/vm.h"

static const struct
{
  const char *name;
  cli_verb_fn fn;
  int spawns; /* re-exec from a sealed memfd before touching a container; 2: and create one,
                 keeping the AGENTSBX_SECRET_* variables for its monitor (runtime/secret_env.h) */
  const char *help;
} verbs[] = {
  { "create", cli_create, 2, "create a container" },
  { "start", cli_start, 0, "executes the user defined process in a created container" },
  { "run", cli_run, 2, "create and run a container" },
  { "exec", cli_exec, 1, "execute new process inside the container" },
  { "sandbox", cli_sandbox, 2, "run one command under an agent policy (quick mode)" },
  { "state", cli_state, 0, "output the state of a container" },
  { "kill", cli_kill, 0, "kill sends the specified signal (default: SIGTERM) to the container's init process" },
  { "delete", cli_delete, 0, "delete any resources held by the container" },
  { "list", cli_list, 0, "lists containers started by agentsbx with the given root" },
  { "spec", cli_spec, 0, "create a new specification file" },
  { "features", cli_features, 0, "show the enabled features" },
  { "update", cli_update, 0, "update container resource constraints" },
  { "pause", cli_pause, 0, "pause suspends all processes inside the container" },
  { "resume", cli_resume, 0, "resumes all processes that have been previously paused" },
  { "ps", cli_ps, 0, "ps displays the processes running inside a container" },
  { "events", cli_events, 0,
    "display container events such as OOM notifications, cpu, memory, and IO usage statistics" },
  { "audit", cli_audit, 0, "print a container's audit log (agent policy; kept after delete)" },
  { "approvals", cli_approvals, 0, "list the questions a container's policy put to its approver" },
  { "approve", cli_approve, 0, "approve QID [--always]: allow the name a container asked for" },
  { "deny", cli_deny, 0, "deny QID: refuse the name a container asked for" },
  { "checkpoint", cli_checkpoint, 0, "checkpoint a running container (CRIU)" },
  { "restore", cli_restore, 0, "restore a container from a previous checkpoint (CRIU)" },
  { "setup", cli_setup, 0, "setup docker|podman|containerd: add agentsbx to an engine's configuration" },
  { "policy", cli_policy, 0, "policy check FILE... | policy explain: validate policies, show the effective plan" },
  { "workspace", cli_workspace, 0, "review workspaces: list, diff, apply, discard, snapshot, rollback, export" },
};

static void
usage (FILE *f)
{
  fprintf (f, "usage: agentsbx [global options] COMMAND [command options] [arguments...]\n\n"
              "agentsbx is an OCI runtime (a drop-in for runc) that can enforce agent policies.\n\n"
              "COMMANDS:\n");
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    fprintf (f, "   %-10s %s\n", verbs[i].name, verbs[i].help);
  fprintf (f, "\nGLOBAL OPTIONS:\n"
              "   --root DIR             root directory for storage of container state (default: /run/agentsbx)\n"
              "   --log FILE             write the log to FILE (default: stderr)\n"
              "   --log-format FORMAT    text or json (default: text)\n"
              "   --debug                enable debug logging\n"
              "   --systemd-cgroup       use systemd to manage cgroups\n"
              "   --rootless VALUE       ignore cgroup permission errors (true, false or auto)\n"
              "   --profile NAME         agent policy ceiling: a built-in or site profile\n"
              "   --policy FILE          agent policy ceiling from a file\n"
              "   --config FILE          host configuration (default: /etc/agentsbx/config.json)\n"
              "   --audit-dir DIR        audit log directory (default: /var/log/agentsbx)\n"
              "   --isolation TIER       container (default) or vm: every container of this runtime class\n"
              "                          in a microVM (the policy's isolation, as a ceiling)\n"
              "   --vm-user UID:GID      the unprivileged ids QEMU runs as when a bundle is root's (vm tier)\n"
              "   --help, -h             show help\n"
              "   --version, -v          print the version\n");
}

static void
version (void)
{
  const struct scmp_version *v = seccomp_version ();
  printf ("agentsbx version %s\nspec: 1.3.0\nlibseccomp: %u.%u.%u\n", PACKAGE_VERSION, v->major, v->minor, v->micro);
}

int
cli_fail (asbx_err_t *err)
{
  int status = *err && (*err)->status ? (*err)->status : 1;
  asbx_log_error_once (*err);
  asbx_error_free (err);
  return status;
}

int
cli_usage (const char *verb, const char *fmt, ...)
{
  va_list ap;
  fprintf (stderr, "agentsbx%s%s: ", verb ? " " : "", verb ? verb : "");
  va_start (ap, fmt);
  /* clang-analyzer 14 false positive: ap is va_start'ed just above */
  vfprintf (stderr, fmt, ap); /* NOLINT(clang-analyzer-valist.Uninitialized) */
  va_end (ap);
  fprintf (stderr, "\n");
  return 1;
}

int
cli_parse_int (const char *verb, const char *opt, const char *s, int *out)
{
  uint64_t v;
  if (parse_u64 (s, &v) < 0 || v > 65536)
    {
      cli_usage (verb, "invalid value `%s` for %s: expected a non-negative integer", s, opt);
      return -1;
    }
  *out = (int) v;
  return 0;
}

enum
{
  OPT_ROOT = 256,
  OPT_LOG,
  OPT_LOG_FORMAT,
  OPT_DEBUG,
  OPT_SYSTEMD,
  OPT_ROOTLESS,
  OPT_CRIU,
  OPT_PROFILE,
  OPT_POLICY,
  OPT_CONFIG,
  OPT_AUDIT_DIR,
  OPT_ISOLATION,
  OPT_VM_USER,
};

/* A non-root caller (issue 17): its own state root and audit directory unless --root /
 * --audit-dir name others (runtime/userdirs.h). Not for the verbs that touch no state. The strings
 * live until exit. 0, or -1 after printing the error. */
static int
user_dirs (struct asbx_global *g, const char *verb, bool root_given)
{
  /* static: the strings live until exit and stay reachable (LeakSanitizer, the ASan pass) */
  static char *state_root, *audit_dir;
  asbx_err_t err = NULL;
  char *dir;

  if (strcmp (verb, "spec") == 0 || strcmp (verb, "features") == 0 || strcmp (verb, "policy") == 0)
    return 0;
  if (!root_given)
    {
      if (!(dir = asbx_user_state_root (&err)))
        {
          cli_fail (&err);
          return -1;
        }
      g->root = state_root = dir;
    }
  if (!g->audit_dir)
    {
      if (!(dir = asbx_user_audit_dir (&err)))
        {
          cli_fail (&err);
          return -1;
        }
      g->audit_dir = audit_dir = dir;
    }
  return 0;
}

/* --vm-user UID:GID (runtime/vm_jail.h): both numeric, neither 0 (QEMU never runs as root) */
static int
parse_vm_user (const char *s, struct asbx_global *g)
{
  char u[16];
  const char *colon = strchr (s, ':');
  uint64_t uid, gid;
  if (!colon || (size_t) (colon - s) >= sizeof u)
    return -1;
  memcpy (u, s, (size_t) (colon - s));
  u[colon - s] = '\0';
  if (parse_u64 (u, &uid) < 0 || parse_u64 (colon + 1, &gid) < 0 || uid == 0 || gid == 0 || uid >= UINT32_MAX
      || gid >= UINT32_MAX)
    return -1;
  g->vm_uid = (uid_t) uid;
  g->vm_gid = (gid_t) gid;
  return 0;
}

int
main (int argc, char **argv)
{
  static const struct option opts[] = {
    { "root", required_argument, 0, OPT_ROOT },
    { "log", required_argument, 0, OPT_LOG },
    { "log-format", required_argument, 0, OPT_LOG_FORMAT },
    { "debug", no_argument, 0, OPT_DEBUG },
    { "systemd-cgroup", no_argument, 0, OPT_SYSTEMD },
    { "rootless", required_argument, 0, OPT_ROOTLESS },
    { "criu", required_argument, 0, OPT_CRIU },
    { "help", no_argument, 0, 'h' },
    { "version", no_argument, 0, 'v' },
    { "profile", required_argument, 0, OPT_PROFILE },
    { "policy", required_argument, 0, OPT_POLICY },
    { "config", required_argument, 0, OPT_CONFIG },
    { "audit-dir", required_argument, 0, OPT_AUDIT_DIR },
    { "isolation", required_argument, 0, OPT_ISOLATION },
    { "vm-user", required_argument, 0, OPT_VM_USER },
    { 0, 0, 0, 0 },
  };
  struct asbx_global g = { .root = "/run/agentsbx" };
  const char *log_path = NULL, *log_format = "text";
  asbx_err_t err = NULL;
  bool root_given = false;
  int c;

  /* the vm tier's guest: we are its /init (runtime/vm.h), started by the kernel before anything
   * mounted /proc (our own re-execs are PID 1 of a container's PID namespace, with /proc) */
  if (getpid () == 1 && argv[0] && strcmp (argv[0], "/init") == 0 && access ("/proc/1", F_OK) < 0)
    vm_guest_main ();
  signal (SIGPIPE, SIG_IGN);
  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+hv", opts, NULL)) != -1)
    switch (c)
      {
      case OPT_ROOT: g.root = optarg, root_given = true; break;
      case OPT_LOG: log_path = optarg; break;
      case OPT_LOG_FORMAT: log_format = optarg; break;
      case OPT_DEBUG: g.debug = true; break;
      case OPT_SYSTEMD: g.systemd_cgroup = true; break;
      case OPT_ROOTLESS: g.rootless = strcmp (optarg, "true") == 0; break;
      case OPT_CRIU: g.criu = optarg; break;
      case OPT_PROFILE: g.profile = optarg; break;
      case OPT_POLICY: g.policy_file = optarg; break;
      case OPT_CONFIG: g.config_path = optarg; break;
      case OPT_AUDIT_DIR: g.audit_dir = optarg; break;
      case OPT_ISOLATION:
        if (strcmp (optarg, "vm") != 0 && strcmp (optarg, "container") != 0)
          return cli_usage (NULL, "--isolation `%s`: expected container or vm", optarg);
        g.isolation_vm = strcmp (optarg, "vm") == 0;
        break;
      case OPT_VM_USER:
        if (parse_vm_user (optarg, &g) < 0)
          return cli_usage (NULL, "--vm-user `%s`: expected UID:GID, two non-zero numbers", optarg);
        break;
      case 'h': usage (stdout); return 0;
      case 'v': version (); return 0;
      default: return cli_usage (NULL, "unknown global option `%s` (see --help)", argv[optind - 1]);
      }
  if (strcmp (log_format, "text") != 0 && strcmp (log_format, "json") != 0)
    return cli_usage (NULL, "invalid --log-format `%s`: expected text or json", log_format);
  if (asbx_log_init (log_path, strcmp (log_format, "json") == 0 ? ASBX_LOG_JSON : ASBX_LOG_TEXT, g.debug, &err) < 0)
    return cli_fail (&err);
  if (optind >= argc)
    {
      usage (stderr);
      return 1;
    }
  const char *verb = argv[optind];
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    if (strcmp (verbs[i].name, verb) == 0)
      {
        if (verbs[i].spawns)
          asbx_ensure_sealed_exe (argv, verbs[i].spawns == 2);
        else
          secret_env_stash (false); /* no memfd: cannot fail; its hooks and children do not get them */
        if (asbx_uses_user_dirs () && user_dirs (&g, verb, root_given) < 0)
          return 1;
        int vargc = argc - optind;
        char **vargv = argv + optind;
        optind = 0; /* full re-initialisation of getopt for the verb */
        return verbs[i].fn (&g, vargc, vargv);
      }
  return cli_usage (NULL, "unknown command `%s` (see --help)", verb);
}
