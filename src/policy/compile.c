/* compile.c - the effective policy document -> struct policy_plan (POLICY.md §3). Pure.
 *
 * Filesystem: two independent layers. Mounts (applied by the rootfs code, outermost first, so
 * this list is sorted by depth): read-only rootfs, rw binds for allowWrite (noexec unless an
 * allowExec rule covers the path: writable and executable are disjoint by default), fresh
 * tmpfs for `tmpfs`, ro binds for denyWrite, masks for denyRead. Landlock rules are allow-only
 * (Landlock cannot carve a hole in a granted hierarchy), so deny rules live in the mount layer;
 * an exact-path deny also removes the right from the Landlock rule of that path, and the
 * enforcement carves the read-only rules around the denyRead paths beneath them (a runtime
 * fact: it lists directories; runtime/policy_carve.h). A deny rule on
 * a path that is missing at create cannot be checked here (existence is a runtime fact): the
 * rule carries writable_parent and the enforcement decides (plan.h).
 * Capabilities: CAP_NET_ADMIN and CAP_NET_RAW are dropped whenever the network is not open,
 * so that the container cannot rewrite its own nftables table or forge packets. */
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/compile.h"
#include "policy/doc.h"
#include "core/sha256.h"

static bool
covered_by (const struct pdoc_paths *list, const char *path, bool strict)
{
  for (size_t i = 0; i < list->len; i++)
    if (pval_path_covers (list->v[i].path, path) && !(strict && strcmp (list->v[i].path, path) == 0))
      return true;
  return false;
}

static void
add_mount (struct policy_plan *p, enum policy_mount_kind kind, const struct pdoc_path *src, const char *path,
           bool noexec, bool writable_parent, const char *each_child)
{
  p->mounts = xrealloc (p->mounts, (p->mounts_len + 1) * sizeof (*p->mounts));
  p->mounts[p->mounts_len++] = (struct policy_mount){
    .kind = kind,
    .path = xstrdup (path),
    .noexec = noexec,
    .optional = src->optional,
    .origin = xstrdup (src->origin),
    .writable_parent = writable_parent,
    .each_child = xstrdup (each_child),
  };
}

static size_t
depth (const char *path)
{
  size_t n = 0;
  if (strcmp (path, "/") == 0)
    return 0;
  for (; *path; path++)
    n += *path == '/';
  return n;
}

static int
kind_rank (enum policy_mount_kind k)
{
  return k == POLICY_MOUNT_TMPFS ? 0 : k == POLICY_MOUNT_BIND_RW ? 1 : k == POLICY_MOUNT_BIND_RO ? 2 : 3;
}

static int
cmp_mount (const void *a_, const void *b_)
{
  const struct policy_mount *a = a_, *b = b_;
  size_t da = depth (a->path) + (a->each_child ? 2 : 0), db = depth (b->path) + (b->each_child ? 2 : 0);
  if (da != db)
    return da < db ? -1 : 1;
  if (kind_rank (a->kind) != kind_rank (b->kind))
    return kind_rank (a->kind) - kind_rank (b->kind);
  int c = strcmp (a->path, b->path);
  if (c)
    return c;
  return strcmp (a->each_child ? a->each_child : "", b->each_child ? b->each_child : "");
}

/* one deny list -> mounts; `~/x` expands to /root/x and /home/<each>/x */
static void
compile_denies (struct policy_plan *p, const struct pdoc *e, int list, enum policy_mount_kind kind)
{
  const struct pdoc_paths *w = &e->fs[PDOC_ALLOW_WRITE], *t = &e->fs[PDOC_TMPFS];
  for (size_t i = 0; i < e->fs[list].len; i++)
    {
      const struct pdoc_path *r = &e->fs[list].v[i];
      if (r->each_home)
        {
          cleanup_free char *root = xasprintf ("/root/%s", r->path);
          add_mount (p, kind, r, root, false, covered_by (w, root, true) || covered_by (t, root, true), NULL);
          add_mount (p, kind, r, "/home", false, covered_by (w, "/home", false) || covered_by (t, "/home", false),
                     r->path);
          continue;
        }
      add_mount (p, kind, r, r->path, false, covered_by (w, r->path, true) || covered_by (t, r->path, true), NULL);
    }
}

static void
compile_mounts (struct policy_plan *p, const struct pdoc *e)
{
  const struct pdoc_paths *x = &e->fs[PDOC_ALLOW_EXEC];
  p->rootfs_readonly = true;
  for (size_t i = 0; i < e->fs[PDOC_ALLOW_WRITE].len; i++)
    {
      const struct pdoc_path *r = &e->fs[PDOC_ALLOW_WRITE].v[i];
      if (strcmp (r->path, "/") == 0)
        {
          p->rootfs_readonly = false; /* the rootfs itself stays writable; nothing to bind */
          continue;
        }
      add_mount (p, POLICY_MOUNT_BIND_RW, r, r->path, !(x->set && covered_by (x, r->path, false)), false, NULL);
    }
  for (size_t i = 0; i < e->fs[PDOC_TMPFS].len; i++)
    {
      const struct pdoc_path *r = &e->fs[PDOC_TMPFS].v[i];
      add_mount (p, POLICY_MOUNT_TMPFS, r, r->path, !(x->set && covered_by (x, r->path, false)), false, NULL);
    }
  compile_denies (p, e, PDOC_DENY_WRITE, POLICY_MOUNT_BIND_RO);
  compile_denies (p, e, PDOC_DENY_READ, POLICY_MOUNT_MASK);
  qsort (p->mounts, p->mounts_len, sizeof (*p->mounts), cmp_mount);
}

/* The runtime's own per-user data in every home, masked whatever the policy says (outside
 * tester: a root sandbox, whose root keeps CAP_DAC_OVERRIDE, read and rewrote a user's review
 * layers through the read-only /home of quick mode; hidden_paths names only the caller's own
 * directories). XDG defaults: the review workspaces and image cache (share), the audit logs
 * (state), the user config and its secretsDir (config). Not optional: a writable home holds the
 * mask too, so the agent cannot plant a directory the user's next run would trust. */
static const char *const runtime_home_dirs[] = { ".local/share/agentsbx", ".local/state/agentsbx", ".config/agentsbx" };

static void
compile_runtime_masks (struct policy_plan *p, const struct pdoc *e)
{
  const struct pdoc_paths *w = &e->fs[PDOC_ALLOW_WRITE], *t = &e->fs[PDOC_TMPFS];
  const struct pdoc_path src = { .origin = (char *) "the runtime's own data in each home (docs/security.md)" };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (runtime_home_dirs); i++)
    {
      cleanup_free char *root = xasprintf ("/root/%s", runtime_home_dirs[i]);
      add_mount (p, POLICY_MOUNT_MASK, &src, root, false, covered_by (w, root, true) || covered_by (t, root, true),
                 NULL);
      add_mount (p, POLICY_MOUNT_MASK, &src, "/home", false,
                 covered_by (w, "/home", false) || covered_by (t, "/home", false), runtime_home_dirs[i]);
    }
  qsort (p->mounts, p->mounts_len, sizeof (*p->mounts), cmp_mount);
}

static void
add_rule (struct policy_plan *p, const struct pdoc_path *src, unsigned rights)
{
  for (size_t i = 0; i < p->fs_rules_len; i++)
    if (strcmp (p->fs_rules[i].path, src->path) == 0)
      {
        p->fs_rules[i].rights |= rights;
        p->fs_rules[i].optional = p->fs_rules[i].optional && src->optional;
        return;
      }
  p->fs_rules = xrealloc (p->fs_rules, (p->fs_rules_len + 1) * sizeof (*p->fs_rules));
  p->fs_rules[p->fs_rules_len++] = (struct policy_fs_rule){
    .path = xstrdup (src->path),
    .rights = rights,
    .optional = src->optional,
    .origin = xstrdup (src->origin),
  };
}

static int
cmp_rule (const void *a, const void *b)
{
  return strcmp (((const struct policy_fs_rule *) a)->path, ((const struct policy_fs_rule *) b)->path);
}

static void
compile_landlock (struct policy_plan *p, const struct pdoc *e)
{
  bool exec_anywhere = !e->fs[PDOC_ALLOW_EXEC].set;
  unsigned rx = POLICY_FS_READ | (exec_anywhere ? POLICY_FS_EXEC : 0);
  p->landlock = true;
  for (size_t i = 0; i < e->fs[PDOC_ALLOW_READ].len; i++)
    add_rule (p, &e->fs[PDOC_ALLOW_READ].v[i], rx);
  for (size_t i = 0; i < e->fs[PDOC_ALLOW_WRITE].len; i++)
    add_rule (p, &e->fs[PDOC_ALLOW_WRITE].v[i], rx | POLICY_FS_WRITE);
  for (size_t i = 0; i < e->fs[PDOC_TMPFS].len; i++)
    add_rule (p, &e->fs[PDOC_TMPFS].v[i], rx | POLICY_FS_WRITE);
  for (size_t i = 0; i < e->fs[PDOC_ALLOW_EXEC].len; i++)
    add_rule (p, &e->fs[PDOC_ALLOW_EXEC].v[i], POLICY_FS_EXEC);
  /* deny wins: an exact-path deny takes the right away from that path's own rule */
  for (size_t i = 0; i < p->fs_rules_len; i++)
    {
      for (size_t j = 0; j < e->fs[PDOC_DENY_WRITE].len; j++)
        if (!e->fs[PDOC_DENY_WRITE].v[j].each_home
            && strcmp (e->fs[PDOC_DENY_WRITE].v[j].path, p->fs_rules[i].path) == 0)
          p->fs_rules[i].rights &= ~POLICY_FS_WRITE;
      for (size_t j = 0; j < e->fs[PDOC_DENY_READ].len; j++)
        if (!e->fs[PDOC_DENY_READ].v[j].each_home && strcmp (e->fs[PDOC_DENY_READ].v[j].path, p->fs_rules[i].path) == 0)
          p->fs_rules[i].rights = 0;
    }
  size_t o = 0;
  for (size_t i = 0; i < p->fs_rules_len; i++)
    if (p->fs_rules[i].rights)
      p->fs_rules[o++] = p->fs_rules[i];
    else
      {
        free (p->fs_rules[i].path);
        free (p->fs_rules[i].origin);
      }
  p->fs_rules_len = o;
  qsort (p->fs_rules, p->fs_rules_len, sizeof (*p->fs_rules), cmp_rule);
}

static char **
strv_dup (char *const *v, size_t n, size_t *len)
{
  char **out = xmalloc0 ((n + 1) * sizeof (char *));
  for (size_t i = 0; i < n; i++)
    out[i] = xstrdup (v[i]);
  *len = n;
  return out;
}

static void
compile_caps (struct policy_plan *p, const struct pdoc *e)
{
  bool drop_net = e->has_net && e->net_mode != POLICY_NET_OPEN;
  if (!e->caps_allow.set && !drop_net)
    return;
  p->restrict_caps = true;
  p->caps_allow = xmalloc0 (sizeof (char *));
  /* in capability-number order, whatever the document's order */
  for (size_t i = 0; pdoc_caps[i]; i++)
    {
      if (e->caps_allow.set && !pdoc_strs_has (&e->caps_allow, pdoc_caps[i]))
        continue;
      if (drop_net && (strcmp (pdoc_caps[i], "CAP_NET_ADMIN") == 0 || strcmp (pdoc_caps[i], "CAP_NET_RAW") == 0))
        continue;
      p->caps_allow = xrealloc (p->caps_allow, (p->caps_allow_len + 2) * sizeof (char *));
      p->caps_allow[p->caps_allow_len++] = xstrdup (pdoc_caps[i]);
      p->caps_allow[p->caps_allow_len] = NULL;
    }
}

/* network.credentials and network.http as the monitor reads them (plan.h); the values stay
 * templates: a secret is read by the monitor at each request, never compiled in */
static void
compile_egress (struct policy_plan *p, const struct pdoc *e)
{
  if (e->credentials.len)
    p->credentials = xmalloc0 (e->credentials.len * sizeof (*p->credentials));
  for (size_t i = 0; i < e->credentials.len; i++)
    p->credentials[i] = (struct policy_credential){ .host = xstrdup (e->credentials.v[i].host),
                                                    .header = xstrdup (e->credentials.v[i].header),
                                                    .value = xstrdup (e->credentials.v[i].value) };
  p->credentials_len = e->credentials.len;
  if (e->http.len)
    p->http_hosts = xmalloc0 (e->http.len * sizeof (*p->http_hosts));
  for (size_t i = 0; i < e->http.len; i++)
    {
      const struct pdoc_http *h = &e->http.v[i];
      struct policy_http_host *o = &p->http_hosts[i];
      o->host = xstrdup (h->host);
      o->max_body_bytes = h->max_body_bytes;
      /* no allow rule: every method and path (plan.h); parse refuses an empty list */
      o->allow_len = h->allow_len;
      o->allow = xmalloc0 ((o->allow_len + 1) * sizeof (*o->allow));
      for (size_t j = 0; j < h->allow_len; j++)
        {
          o->allow[j].methods = strv_dup (h->allow[j].methods.v, h->allow[j].methods.len, &o->allow[j].methods_len);
          o->allow[j].paths = strv_dup (h->allow[j].paths.v, h->allow[j].paths.len, &o->allow[j].paths_len);
        }
    }
  p->http_hosts_len = e->http.len;
}

static void
compile_net (struct policy_plan *p, const struct pdoc *e)
{
  p->net_mode = e->has_net ? (enum policy_net_mode) e->net_mode : POLICY_NET_OPEN;
  if (!e->has_net)
    return;
  p->allow_local_binding = e->allow_local_binding == 1;
  p->allowed_domains = strv_dup (e->allowed_domains.v, e->allowed_domains.len, &p->allowed_domains_len);
  p->denied_domains = strv_dup (e->denied_domains.v, e->denied_domains.len, &p->denied_domains_len);
  p->allowed_cidrs = strv_dup (e->allowed_cidrs.v, e->allowed_cidrs.len, &p->allowed_cidrs_len);
  p->allow_unix_sockets = strv_dup (e->allow_unix_sockets.v, e->allow_unix_sockets.len, &p->allow_unix_sockets_len);
  p->ports = xmalloc (e->ports_len * sizeof (*p->ports) + 1);
  memcpy (p->ports, e->ports, e->ports_len * sizeof (*p->ports));
  p->ports_len = e->ports_len;
  compile_egress (p, e);
}

struct policy_plan *
policy_compile (const struct pdoc *e)
{
  struct policy_plan *p = xmalloc0 (sizeof *p);
  char hex[65];

  p->active = true;
  if (e->has_fs)
    {
      compile_mounts (p, e);
      compile_landlock (p, e);
    }
  compile_runtime_masks (p, e);
  p->ws_mode = e->ws_mode == POLICY_WS_REVIEW ? POLICY_WS_REVIEW : POLICY_WS_DIRECT;
  p->isolation = e->isolation == POLICY_ISOLATION_VM ? POLICY_ISOLATION_VM : POLICY_ISOLATION_CONTAINER;
  p->ws_path = xstrdup (e->ws_path ? e->ws_path : POLICY_DEFAULT_WS_PATH);
  p->deny_groups = e->deny_groups;
  p->deny_write_exec_memory = e->deny_wx_memory == 1;
  compile_caps (p, e);
  compile_net (p, e);
  p->memory_bytes = e->limits[PDOC_MEMORY_BYTES].v;
  p->pids = e->limits[PDOC_PIDS].v;
  p->cpus = e->cpus_set ? e->cpus : 0;
  p->open_files = e->limits[PDOC_OPEN_FILES].v;
  p->file_size_bytes = e->limits[PDOC_FILE_SIZE_BYTES].v;
  p->wall_clock_seconds = e->limits[PDOC_WALL_CLOCK_SECONDS].v;
  p->cpu_seconds = e->limits[PDOC_CPU_SECONDS].v;
  p->failed_execs = e->limits[PDOC_FAILED_EXECS].v;
  p->approvals_network = e->approvals_network == POLICY_APPROVAL_ASK ? POLICY_APPROVAL_ASK : POLICY_APPROVAL_DENY;
  p->approvals_timeout_seconds = e->approvals_timeout.v;
  p->approvals_on_timeout_allow = e->on_timeout_allow == 1;
  p->audit_events = e->audit_events | POLICY_AUDIT_ALWAYS;
  p->audit_on_full_continue = e->audit_on_full == 1;
  p->degrade = strv_dup (e->degrade.v, e->degrade.len, &p->degrade_len);
  p->effective_json = pdoc_to_json (e, false);
  sha256_hex (p->effective_json, strlen (p->effective_json), hex);
  p->digest = xasprintf ("sha256:%s", hex);
  return p;
}
