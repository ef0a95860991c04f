/* policy.c - `agentsbx policy check FILE...` and `agentsbx policy explain` (POLICY.md §1-§3):
 * validate policy documents, and show the effective policy of a runtime class (+ a bundle's
 * annotations): where each part came from and the concrete plan the enforcement will apply.
 * Both are read-only: no container, no kernel state is touched. */
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "policy/nft_ruleset.h"
#include "policy/policy.h"
#include "policy/syscall_groups.h"
#include "runtime/policy_noexec.h"

static int
policy_usage (FILE *f)
{
  fprintf (f, "usage: agentsbx policy check [--profiles-dir DIR] [--quiet] FILE...\n"
              "       agentsbx policy explain [--profile NAME | --policy FILE] [--bundle DIR] [--config FILE]\n"
              "                               [--profiles-dir DIR] [--sandbox] [--json]\n\n"
              "check     validate policy documents (unknown keys, values, extends); print each expanded\n"
              "explain   the effective policy (ceiling from --profile/--policy/the host config, request from\n"
              "          the bundle's io.agentsbx.* annotations) and the plan: mounts, Landlock rules, syscall\n"
              "          groups, capabilities, network, limits, approvals, audit\n");
  return f == stdout ? 0 : 1;
}

static int
policy_check_verb (int argc, char **argv)
{
  static const struct option opts[] = { { "profiles-dir", required_argument, 0, 'd' },
                                        { "quiet", no_argument, 0, 'q' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  const char *dir = NULL;
  bool quiet = false;
  int c, status = 0;
  while ((c = getopt_long (argc, argv, "qh", opts, NULL)) != -1)
    switch (c)
      {
      case 'd': dir = optarg; break;
      case 'q': quiet = true; break;
      case 'h': return policy_usage (stdout);
      default: return cli_usage ("policy check", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind >= argc)
    return cli_usage ("policy check", "expected at least one FILE");
  for (int i = optind; i < argc; i++)
    {
      asbx_err_t err = NULL;
      cleanup_free char *text = NULL, *out = NULL;
      size_t len = 0;
      if (read_file_at (AT_FDCWD, argv[i], 1u << 20, &text, &len, &err) == 0)
        out = policy_check (text, len, argv[i], dir, &err);
      if (out == NULL)
        {
          status = cli_fail (&err);
          continue;
        }
      if (quiet)
        printf ("%s: ok\n", argv[i]);
      else
        printf ("%s: ok\n%s\n", argv[i], out);
    }
  return status;
}

static void
print_list (const char *label, char **v, size_t n)
{
  printf ("  %-18s", label);
  if (n == 0)
    printf ("(none)");
  for (size_t i = 0; i < n; i++)
    printf ("%s%s", i ? ", " : "", v[i]);
  printf ("\n");
}

static void
explain_fs (const struct policy_plan *p)
{
  static const char *const kinds[] = { "rw bind", "ro bind", "mask", "tmpfs" };
  printf ("filesystem (mount layer, outermost first):\n  rootfs %s\n", p->rootfs_readonly ? "read-only" : "writable");
  for (size_t i = 0; i < p->mounts_len; i++)
    {
      const struct policy_mount *m = &p->mounts[i];
      printf ("  %-8s %s%s%s%s%s%s   <- %s\n", kinds[m->kind], m->path, m->each_child ? "/<each>/" : "",
              m->each_child ? m->each_child : "", m->noexec ? " noexec" : "", m->optional ? " optional" : "",
              m->writable_parent && !m->optional ? " (missing = create fails)" : "", m->origin);
    }
  printf ("filesystem (Landlock%s):\n", p->landlock ? "" : ": off");
  for (size_t i = 0; i < p->fs_rules_len; i++)
    {
      const struct policy_fs_rule *r = &p->fs_rules[i];
      printf ("  %c%c%c %s%s   <- %s\n", r->rights & POLICY_FS_READ ? 'r' : '-',
              r->rights & POLICY_FS_WRITE ? 'w' : '-', r->rights & POLICY_FS_EXEC ? 'x' : '-', r->path,
              r->optional ? " optional" : "", r->origin);
    }
}

/* The nftables text the runtime loads into the container's network namespace (the very string
 * policy_net.c passes to libnftables), so a reviewer reads the rules, not a paraphrase.
 * Indented by two spaces under its heading; nothing for `open`. */
static int
explain_nft (const struct policy_plan *p)
{
  asbx_err_t err = NULL;
  cleanup_free char *text = NULL;
  if (policy_nft_ruleset (p, &text, &err) < 0)
    {
      cli_fail (&err); /* prints the message once */
      return -1;
    }
  if (text == NULL)
    return 0;
  printf ("nftables ruleset (loaded into the container's network namespace):\n");
  for (char *line = text, *nl; *line; line = nl + 1)
    {
      nl = strchrnul (line, '\n');
      printf ("  %.*s\n", (int) (nl - line), line);
      if (*nl == '\0')
        break;
    }
  return 0;
}

static int
explain_rest (const struct policy_plan *p)
{
  static const char *const modes[] = { "open", "none", "filtered" };
  printf ("syscall groups denied (seccomp, stacked on the OCI filter):\n");
  for (size_t i = 0; i < policy_syscall_groups_len; i++)
    if (p->deny_groups & policy_syscall_groups[i].bit)
      printf ("  %-12s %s\n", policy_syscall_groups[i].name, policy_syscall_groups[i].doc);
  if (policy_exec_restricted (p))
    printf ("native code: only from allowExec paths (every other mount noexec); memfd_create, memfd_secret: "
            "ENOSYS; shmat SHM_EXEC: EPERM\n");
  printf ("write+exec memory: %s\n",
          p->deny_write_exec_memory ? "refused (PR_SET_MDWE: no W+X mapping, none made executable later)" : "allowed");
  printf ("capabilities: %s\n", p->restrict_caps ? "each set ∩ allow list" : "as config.json");
  if (p->restrict_caps)
    print_list ("allow", p->caps_allow, p->caps_allow_len);
  /* runtime/policy_hostfiles.h: every policy, not a field (docs/policy.md §2.4a) */
  printf ("host-visible files (every policy): S_ISUID/S_ISGID refused in every mode argument, openat2 ENOSYS,\n"
          "  io_uring EPERM (seccomp); never CAP_SETFCAP, CAP_MKNOD; without an isolating user namespace\n"
          "  also not CAP_CHOWN, CAP_FSETID\n");
  printf ("network: %s%s\n", modes[p->net_mode], p->allow_local_binding ? " (local binding allowed)" : "");
  if (p->net_mode == POLICY_NET_FILTERED)
    {
      print_list ("allowedDomains", p->allowed_domains, p->allowed_domains_len);
      print_list ("deniedDomains", p->denied_domains, p->denied_domains_len);
      print_list ("allowedCidrs", p->allowed_cidrs, p->allowed_cidrs_len);
      printf ("  %-18s", "ports");
      for (size_t i = 0; i < p->ports_len; i++)
        printf ("%s%u", i ? ", " : "", p->ports[i]);
      printf ("\n");
    }
  if (p->net_mode != POLICY_NET_OPEN)
    {
      printf ("unix sockets (connect supervised, docs/security.md): under the writable grants, on the "
              "container's own tmpfs, and\n");
      print_list ("allowUnixSockets", p->allow_unix_sockets, p->allow_unix_sockets_len);
    }
  if (explain_nft (p) < 0)
    return -1;
  printf ("limits (0 = not limited by the policy):\n"
          "  cgroup   memory %" PRIu64 " bytes, pids %" PRIu64 ", cpus %g\n"
          "  rlimit   open files %" PRIu64 ", file size %" PRIu64 " bytes\n"
          "  monitor  wall clock %" PRIu64 " s, cpu %" PRIu64 " s, failed execs %" PRIu64 "\n",
          p->memory_bytes, p->pids, p->cpus, p->open_files, p->file_size_bytes, p->wall_clock_seconds, p->cpu_seconds,
          p->failed_execs);
  printf ("approvals: network %s, timeout %" PRIu64 " s, then %s\n",
          p->approvals_network == POLICY_APPROVAL_ASK ? "ask" : "deny", p->approvals_timeout_seconds,
          p->approvals_on_timeout_allow ? "allow" : "deny");
  printf ("audit: %s%s\n", p->audit_dir, p->audit_syslog ? " + syslog" : "");
  print_list ("degrade accepted", p->degrade, p->degrade_len);
  print_list ("clamped", p->clamps, p->clamps_len);
  return 0;
}

static int
policy_explain_verb (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "profile", required_argument, 0, 'p' },
    { "policy", required_argument, 0, 'f' },
    { "bundle", required_argument, 0, 'b' },
    { "config", required_argument, 0, 'c' },
    { "profiles-dir", required_argument, 0, 'd' },
    { "sandbox", no_argument, 0, 's' },
    { "json", no_argument, 0, 'j' },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  struct policy_inputs in = { .profile_flag = g->profile,
                              .policy_flag = g->policy_file,
                              .config_path = g->config_path,
                              .audit_dir_flag = g->audit_dir };
  const char *bundle = NULL;
  bool json = false;
  struct oci_spec *spec = NULL;
  asbx_err_t err = NULL;
  int c;

  while ((c = getopt_long (argc, argv, "+b:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'p': in.profile_flag = optarg; break;
      case 'f': in.policy_flag = optarg; break;
      case 'b': bundle = optarg; break;
      case 'c': in.config_path = optarg; break;
      case 'd': in.profiles_dir = optarg; break;
      case 's': in.sandbox_default_profile = "agent"; break;
      case 'j': json = true; break;
      case 'h': return policy_usage (stdout);
      default: return cli_usage ("policy explain", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind < argc)
    return cli_usage ("policy explain", "unexpected argument `%s`", argv[optind]);
  if (bundle)
    {
      cleanup_free char *path = xasprintf ("%s/config.json", bundle);
      spec = oci_spec_parse_file (path, &err);
      if (spec == NULL)
        return cli_fail (&err);
      in.annotations = &spec->annotations;
    }
  struct policy_plan *p = policy_resolve (&in, &err);
  if (spec)
    oci_spec_free (spec);
  if (p == NULL)
    return cli_fail (&err);
  if (json)
    {
      cleanup_free char *j = policy_plan_to_json (p, true);
      printf ("%s\n", j);
    }
  else
    {
      for (size_t i = 0; i < p->sources_len; i++)
        printf ("%s\n", p->sources[i]);
      if (!p->active)
        printf ("no policy: plain OCI behaviour, nothing added\n");
      else
        {
          printf ("digest: %s\neffective policy: %s\n", p->digest, p->effective_json);
          explain_fs (p);
          if (explain_rest (p) < 0)
            {
              policy_plan_free (p);
              return 1;
            }
        }
    }
  policy_plan_free (p);
  return 0;
}

int
cli_policy (struct asbx_global *g, int argc, char **argv)
{
  if (argc < 2)
    return policy_usage (stderr);
  optind = 0; /* full getopt re-initialisation for the subcommand (permutes options) */
  if (strcmp (argv[1], "check") == 0)
    return policy_check_verb (argc - 1, argv + 1);
  if (strcmp (argv[1], "explain") == 0)
    return policy_explain_verb (g, argc - 1, argv + 1);
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "help") == 0)
    return policy_usage (stdout);
  return cli_usage ("policy", "unknown subcommand `%s` (check, explain)", argv[1]);
}
