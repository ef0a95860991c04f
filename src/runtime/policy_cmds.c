/* policy_cmds.c - what `agentsbx policy check` and `agentsbx policy explain` do (POLICY.md
 * §1-§3): validate policy documents, and render the effective policy of a runtime class (+ a
 * bundle's annotations): where each part came from and the concrete plan the enforcement will
 * apply. Both are read-only: no container, no kernel state is touched. The CLI (cli/policy.c)
 * parses the options and prints the errors. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "policy/nft_ruleset.h"
#include "policy/policy.h"
#include "policy/syscall_groups.h"
#include "runtime/policy_cmds.h"
#include "runtime/policy_noexec.h"

char *
runtime_policy_check_file (const char *path, const char *profiles_dir, asbx_err_t *err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  if (read_file_at (AT_FDCWD, path, 1u << 20, &text, &len, err) < 0)
    return NULL;
  return policy_check (text, len, path, profiles_dir, err);
}

static void
print_list (FILE *out, const char *label, char **v, size_t n)
{
  fprintf (out, "  %-18s", label);
  if (n == 0)
    fprintf (out, "(none)");
  for (size_t i = 0; i < n; i++)
    fprintf (out, "%s%s", i ? ", " : "", v[i]);
  fprintf (out, "\n");
}

static void
explain_fs (FILE *out, const struct policy_plan *p)
{
  static const char *const kinds[] = { "rw bind", "ro bind", "mask", "tmpfs" };
  fprintf (out, "filesystem (mount layer, outermost first):\n  rootfs %s\n",
           p->rootfs_readonly ? "read-only" : "writable");
  for (size_t i = 0; i < p->mounts_len; i++)
    {
      const struct policy_mount *m = &p->mounts[i];
      fprintf (out, "  %-8s %s%s%s%s%s%s   <- %s\n", kinds[m->kind], m->path, m->each_child ? "/<each>/" : "",
               m->each_child ? m->each_child : "", m->noexec ? " noexec" : "", m->optional ? " optional" : "",
               m->writable_parent && !m->optional ? " (missing = create fails)" : "", m->origin);
    }
  if (p->ws_mode == POLICY_WS_REVIEW)
    fprintf (out, "  overlay  %s (review workspace: upper layer in %s/<id>)\n", p->ws_path,
             p->workspaces_dir ? p->workspaces_dir : "(none)");
  fprintf (out, "filesystem (Landlock%s):\n", p->landlock ? "" : ": off");
  for (size_t i = 0; i < p->fs_rules_len; i++)
    {
      const struct policy_fs_rule *r = &p->fs_rules[i];
      fprintf (out, "  %c%c%c %s%s   <- %s\n", r->rights & POLICY_FS_READ ? 'r' : '-',
               r->rights & POLICY_FS_WRITE ? 'w' : '-', r->rights & POLICY_FS_EXEC ? 'x' : '-', r->path,
               r->optional ? " optional" : "", r->origin);
    }
}

/* The nftables text the runtime loads into the container's network namespace (the very string
 * policy_net.c passes to libnftables), so a reviewer reads the rules, not a paraphrase.
 * Indented by two spaces under its heading; nothing for `open`. */
/* network.credentials and network.http (issue 19): the intercepted hosts, the secrets' names
 * (never a value: the monitor reads them at each request) and the rules */
struct secret_src
{
  FILE *out;
  const char *dir;
};

/* Where the egress takes one ${secret:NAME} from (docs/policy.md "Credentials and HTTP rules"):
 * the file NAME of the secrets directory, else the runtime's variable AGENTSBX_SECRET_NAME; one
 * that is both or neither is refused at create. Printed once per reference, in template order. */
static void
explain_secret (void *ud, const char *name, size_t len)
{
  struct secret_src *s = ud;
  fprintf (s->out, "    secret %.*s: the file %s/%.*s, else the runtime's environment variable AGENTSBX_SECRET_%.*s\n",
           (int) len, name, s->dir ? s->dir : "(no secrets directory)", (int) len, name, (int) len, name);
}

static void
explain_egress (FILE *out, const struct policy_plan *p)
{
  if (p->credentials_len == 0 && p->http_hosts_len == 0)
    return;
  fprintf (out, "  intercepted (TLS terminated with the container's own CA, docs/policy.md \"Credentials\"):\n");
  for (size_t i = 0; i < p->credentials_len; i++)
    fprintf (out, "    %s: header %s = %s\n", p->credentials[i].host, p->credentials[i].header,
             p->credentials[i].value);
  for (size_t i = 0; i < p->http_hosts_len; i++)
    {
      const struct policy_http_host *h = &p->http_hosts[i];
      fprintf (out, "    %s: %s", h->host, h->allow_len ? "allow" : "any request");
      for (size_t j = 0; j < h->allow_len; j++)
        {
          fprintf (out, "%s ", j ? ";" : "");
          for (size_t k = 0; k < h->allow[j].methods_len; k++)
            fprintf (out, "%s%s", k ? "|" : "", h->allow[j].methods[k]);
          if (h->allow[j].methods_len == 0)
            fprintf (out, "any method");
          for (size_t k = 0; k < h->allow[j].paths_len; k++)
            fprintf (out, "%s%s", k ? "," : " ", h->allow[j].paths[k]);
        }
      if (h->max_body_bytes)
        fprintf (out, "; body <= %" PRIu64 " bytes", h->max_body_bytes);
      fprintf (out, "\n");
    }
  struct secret_src src = { out, p->secrets_dir };
  for (size_t i = 0; i < p->credentials_len; i++)
    policy_secret_refs (p->credentials[i].value, explain_secret, &src);
  if (p->upstream_ca_file)
    fprintf (out, "    upstreams also trusted from %s\n", p->upstream_ca_file);
}

static int
explain_nft (FILE *out, const struct policy_plan *p, asbx_err_t *err)
{
  cleanup_free char *text = NULL;
  if (policy_nft_ruleset (p, &text, err) < 0)
    return -1;
  if (text == NULL)
    return 0;
  fprintf (out, "nftables ruleset (loaded into the container's network namespace):\n");
  for (char *line = text, *nl; *line; line = nl + 1)
    {
      nl = strchrnul (line, '\n');
      fprintf (out, "  %.*s\n", (int) (nl - line), line);
      if (*nl == '\0')
        break;
    }
  return 0;
}

static int
explain_rest (FILE *out, const struct policy_plan *p, asbx_err_t *err)
{
  fprintf (out, "syscall groups denied (seccomp, stacked on the OCI filter):\n");
  for (size_t i = 0; i < policy_syscall_groups_len; i++)
    if (p->deny_groups & policy_syscall_groups[i].bit)
      fprintf (out, "  %-12s %s\n", policy_syscall_groups[i].name, policy_syscall_groups[i].doc);
  if (policy_exec_restricted (p))
    fprintf (out, "native code: only from allowExec paths (every other mount noexec); memfd_create, memfd_secret: "
                  "ENOSYS; shmat SHM_EXEC: EPERM\n");
  fprintf (out, "write+exec memory: %s\n",
           p->deny_write_exec_memory ? "refused (PR_SET_MDWE: no W+X mapping, none made executable later)" : "allowed");
  fprintf (out, "capabilities: %s\n", p->restrict_caps ? "each set ∩ allow list" : "as config.json");
  if (p->restrict_caps)
    print_list (out, "allow", p->caps_allow, p->caps_allow_len);
  /* runtime/policy_hostfiles.h: every policy, not a field (docs/policy.md §2.4a) */
  fprintf (out, "host-visible files (every policy): S_ISUID/S_ISGID refused in every mode argument, openat2 ENOSYS,\n"
                "  io_uring EPERM (seccomp); never CAP_SETFCAP, CAP_MKNOD; without an isolating user namespace\n"
                "  also not CAP_CHOWN, CAP_FSETID\n");
  fprintf (out, "network: %s%s\n", policy_net_mode_names[p->net_mode],
           p->allow_local_binding ? " (local binding allowed)" : "");
  if (p->net_mode == POLICY_NET_FILTERED)
    {
      print_list (out, "allowedDomains", p->allowed_domains, p->allowed_domains_len);
      print_list (out, "deniedDomains", p->denied_domains, p->denied_domains_len);
      print_list (out, "allowedCidrs", p->allowed_cidrs, p->allowed_cidrs_len);
      fprintf (out, "  %-18s", "ports");
      for (size_t i = 0; i < p->ports_len; i++)
        fprintf (out, "%s%u", i ? ", " : "", p->ports[i]);
      fprintf (out, "\n");
      explain_egress (out, p);
    }
  if (p->net_mode != POLICY_NET_OPEN)
    {
      fprintf (out, "unix sockets (connect supervised, docs/security.md): under the writable grants, on the "
                    "container's own tmpfs, and\n");
      print_list (out, "allowUnixSockets", p->allow_unix_sockets, p->allow_unix_sockets_len);
    }
  if (explain_nft (out, p, err) < 0)
    return -1;
  fprintf (out,
           "limits (0 = not limited by the policy):\n"
           "  cgroup   memory %" PRIu64 " bytes, pids %" PRIu64 ", cpus %g\n"
           "  rlimit   open files %" PRIu64 ", file size %" PRIu64 " bytes\n"
           "  monitor  wall clock %" PRIu64 " s, cpu %" PRIu64 " s, failed execs %" PRIu64 "\n",
           p->memory_bytes, p->pids, p->cpus, p->open_files, p->file_size_bytes, p->wall_clock_seconds, p->cpu_seconds,
           p->failed_execs);
  fprintf (out, "approvals: network %s, timeout %" PRIu64 " s, then %s\n", policy_approval_names[p->approvals_network],
           p->approvals_timeout_seconds, policy_on_timeout_names[p->approvals_on_timeout_allow]);
  fprintf (out, "audit: %s%s\n", p->audit_dir, p->audit_syslog ? " + syslog" : "");
  print_list (out, "degrade accepted", p->degrade, p->degrade_len);
  print_list (out, "clamped", p->clamps, p->clamps_len);
  return 0;
}

/* the human-readable report of an active plan */
static int
explain_text (FILE *out, const struct policy_plan *p, asbx_err_t *err)
{
  for (size_t i = 0; i < p->sources_len; i++)
    fprintf (out, "%s\n", p->sources[i]);
  if (!p->active)
    {
      fprintf (out, "no policy: plain OCI behaviour, nothing added\n");
      return 0;
    }
  fprintf (out, "digest: %s\neffective policy: %s\n", p->digest, p->effective_json);
  explain_fs (out, p);
  return explain_rest (out, p, err);
}

int
runtime_policy_explain (const struct runtime_policy_query *q, FILE *out, asbx_err_t *err)
{
  struct policy_inputs in = { .profile_flag = q->profile_flag,
                              .policy_flag = q->policy_flag,
                              .config_path = q->config_path,
                              .profiles_dir = q->profiles_dir,
                              .audit_dir_flag = q->audit_dir_flag,
                              .sandbox_default_profile = q->sandbox_default_profile };
  struct oci_spec *spec = NULL;
  if (q->bundle)
    {
      cleanup_free char *path = xasprintf ("%s/config.json", q->bundle);
      spec = oci_spec_parse_file (path, err);
      if (spec == NULL)
        return -1;
      in.annotations = &spec->annotations;
    }
  struct policy_plan *p = policy_resolve (&in, err);
  if (spec)
    oci_spec_free (spec);
  if (p == NULL)
    return -1;
  int r = 0;
  if (q->json)
    {
      cleanup_free char *j = policy_plan_to_json (p, true);
      fprintf (out, "%s\n", j);
    }
  else
    r = explain_text (out, p, err);
  policy_plan_free (p);
  return r;
}

/* A built-in profile's "description" (heap), or "" when it has none. */
static char *
builtin_description (const char *name)
{
  const char *path[] = { "description", NULL };
  yajl_val tree = yajl_tree_parse (policy_builtin_profile (name), NULL, 0);
  yajl_val d = tree ? yajl_tree_get (tree, path, yajl_t_string) : NULL;
  char *out = xstrdup (d ? YAJL_GET_STRING (d) : "");
  yajl_tree_free (tree);
  return out;
}

void
runtime_policy_list (enum runtime_policy_table t, bool markdown, FILE *out)
{
  bool groups = t == RUNTIME_POLICY_GROUPS;
  if (markdown)
    fputs (groups ? "| group | members (errno) |\n|---|---|\n" : "| profile | description |\n|---|---|\n", out);
  if (groups)
    for (size_t i = 0; i < policy_syscall_groups_len; i++)
      fprintf (out, markdown ? "| `%s` | %s |\n" : "%-12s %s\n", policy_syscall_groups[i].name,
               markdown ? policy_syscall_groups[i].ref : policy_syscall_groups[i].doc);
  else
    for (size_t i = 0; policy_builtin_name (i); i++)
      {
        cleanup_free char *d = builtin_description (policy_builtin_name (i));
        fprintf (out, markdown ? "| `%s` | %s |\n" : "%-12s %s\n", policy_builtin_name (i), d);
      }
}
