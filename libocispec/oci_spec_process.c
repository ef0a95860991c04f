/* oci_spec_process.c - the `process` object (runtime-spec config.md "Process", "User" and the
 * Linux process fields: capabilities, rlimits, scheduler, ioPriority, execCPUAffinity).
 *
 * Also the top level of `runc exec --process FILE`, which is a process object on its own.
 * Only structure and types are checked here (plus the spec's MUSTs that need no host knowledge:
 * cwd absolute, required members present); names such as capabilities or rlimit types are
 * validated by the mechanisms that apply them.
 */
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"

static void
rlimit_clear (void *elem)
{
  struct oci_rlimit *r = elem;
  free (r->type);
}

static int
rlimit_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_rlimit *r = elem;
  OCI_TRY (oci_required (c, "type", oci_get_string (c, v, "type", &r->type)));
  OCI_TRY (oci_required (c, "soft", oci_get_u64 (c, v, "soft", &r->soft)));
  OCI_TRY (oci_required (c, "hard", oci_get_u64 (c, v, "hard", &r->hard)));
  return 0;
}

static void
capabilities_clear (void *elem)
{
  struct oci_capabilities *k = elem;
  asbx_strv_free (k->bounding);
  asbx_strv_free (k->effective);
  asbx_strv_free (k->inheritable);
  asbx_strv_free (k->permitted);
  asbx_strv_free (k->ambient);
}

static int
capabilities_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_capabilities *k = elem;
  int r;
  OCI_TRY (r = oci_get_strv (c, v, "bounding", &k->bounding, &k->bounding_len));
  k->has_bounding = r > 0;
  OCI_TRY (r = oci_get_strv (c, v, "effective", &k->effective, &k->effective_len));
  k->has_effective = r > 0;
  OCI_TRY (r = oci_get_strv (c, v, "inheritable", &k->inheritable, &k->inheritable_len));
  k->has_inheritable = r > 0;
  OCI_TRY (r = oci_get_strv (c, v, "permitted", &k->permitted, &k->permitted_len));
  k->has_permitted = r > 0;
  OCI_TRY (r = oci_get_strv (c, v, "ambient", &k->ambient, &k->ambient_len));
  k->has_ambient = r > 0;
  return 0;
}

static void
scheduler_clear (void *elem)
{
  struct oci_scheduler *s = elem;
  free (s->policy);
  asbx_strv_free (s->flags);
}

/* config.md "Scheduler" (1.1+): policy REQUIRED; runtime/deadline/period are ns (uint64). */
static int
scheduler_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_scheduler *s = elem;
  int r;
  OCI_TRY (oci_required (c, "policy", oci_get_string (c, v, "policy", &s->policy)));
  OCI_TRY (r = oci_get_i32 (c, v, "nice", &s->nice));
  s->has_nice = r > 0;
  OCI_TRY (r = oci_get_i32 (c, v, "priority", &s->priority));
  s->has_priority = r > 0;
  OCI_TRY (oci_get_strv (c, v, "flags", &s->flags, &s->flags_len));
  OCI_TRY (r = oci_get_u64 (c, v, "runtime", &s->runtime));
  s->has_runtime = r > 0;
  OCI_TRY (r = oci_get_u64 (c, v, "deadline", &s->deadline));
  s->has_deadline = r > 0;
  OCI_TRY (r = oci_get_u64 (c, v, "period", &s->period));
  s->has_period = r > 0;
  return 0;
}

static void
io_priority_clear (void *elem)
{
  struct oci_io_priority *p = elem;
  free (p->class_);
}

static int
io_priority_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_io_priority *p = elem;
  OCI_TRY (oci_required (c, "class", oci_get_string (c, v, "class", &p->class_)));
  OCI_TRY (oci_required (c, "priority", oci_get_i32 (c, v, "priority", &p->priority)));
  return 0;
}

static void
cpu_affinity_clear (void *elem)
{
  struct oci_cpu_affinity *a = elem;
  free (a->initial);
  free (a->final);
}

static int
cpu_affinity_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_cpu_affinity *a = elem;
  OCI_TRY (oci_get_string (c, v, "initial", &a->initial));
  OCI_TRY (oci_get_string (c, v, "final", &a->final));
  return 0;
}

/* config.md "User" for POSIX platforms: uid and gid REQUIRED, umask and additionalGids
 * optional; username is the Windows field, kept for completeness. */
static int
user_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_user *u = elem;
  int r;
  OCI_TRY (oci_required (c, "uid", oci_get_u32 (c, v, "uid", &u->uid)));
  OCI_TRY (oci_required (c, "gid", oci_get_u32 (c, v, "gid", &u->gid)));
  OCI_TRY (r = oci_get_u32 (c, v, "umask", &u->umask));
  u->has_umask = r > 0;
  OCI_TRY (oci_get_u32v (c, v, "additionalGids", &u->additional_gids, &u->additional_gids_len));
  OCI_TRY (oci_get_string (c, v, "username", &u->username));
  return 0;
}

static int
console_size_fill (struct oci_ctx *c, yajl_val v, struct oci_process *p)
{
  OCI_TRY (oci_required (c, "height", oci_get_u32 (c, v, "height", &p->console_height)));
  OCI_TRY (oci_required (c, "width", oci_get_u32 (c, v, "width", &p->console_width)));
  return 0;
}

/* Parse the parts of `process` that are plain members or inline objects (user, consoleSize). */
static int
process_inline (struct oci_ctx *c, yajl_val v, struct oci_process *p)
{
  yajl_val o = NULL;
  size_t mark;
  int r;

  OCI_TRY (oci_get_bool (c, v, "terminal", &p->terminal));
  OCI_TRY (r = oci_get_object (c, v, "consoleSize", &o));
  if (r > 0)
    {
      mark = oci_ctx_push_key (c, "consoleSize");
      r = console_size_fill (c, o, p);
      oci_ctx_pop (c, mark);
      OCI_TRY (r);
      p->has_console_size = true;
    }
  OCI_TRY (oci_required (c, "cwd", oci_get_string (c, v, "cwd", &p->cwd)));
  if (p->cwd[0] != '/')
    {
      cleanup_free char *q = oci_quote (p->cwd);
      return oci_fail_key (c, "cwd", "%s is not an absolute path", q);
    }
  OCI_TRY (oci_get_strv (c, v, "env", &p->env, &p->env_len));
  OCI_TRY (oci_get_strv (c, v, "args", &p->args, &p->args_len));
  OCI_TRY (oci_get_string (c, v, "commandLine", &p->command_line));
  OCI_TRY (oci_get_string (c, v, "apparmorProfile", &p->apparmor_profile));
  OCI_TRY (oci_get_bool (c, v, "noNewPrivileges", &p->no_new_privileges));
  OCI_TRY (r = oci_get_i32 (c, v, "oomScoreAdj", &p->oom_score_adj));
  p->has_oom_score_adj = r > 0;
  OCI_TRY (oci_get_string (c, v, "selinuxLabel", &p->selinux_label));
  OCI_TRY (r = oci_get_object (c, v, "user", &o));
  if (r > 0)
    {
      mark = oci_ctx_push_key (c, "user");
      r = user_fill (c, o, &p->user);
      oci_ctx_pop (c, mark);
      OCI_TRY (r);
      p->has_user = true;
    }
  return 0;
}

int
oci_parse_process (struct oci_ctx *c, yajl_val v, struct oci_process *p)
{
  void *sub = NULL;

  OCI_TRY (process_inline (c, v, p));
  OCI_TRY (
      oci_get_array_of (c, v, "rlimits", sizeof (struct oci_rlimit), rlimit_fill, rlimit_clear, &sub, &p->rlimits_len));
  p->rlimits = sub;
  sub = NULL;
  OCI_TRY (oci_get_sub (c, v, "capabilities", sizeof (struct oci_capabilities), capabilities_fill, capabilities_clear,
                        &sub));
  p->capabilities = sub;
  sub = NULL;
  OCI_TRY (oci_get_sub (c, v, "scheduler", sizeof (struct oci_scheduler), scheduler_fill, scheduler_clear, &sub));
  p->scheduler = sub;
  sub = NULL;
  OCI_TRY (
      oci_get_sub (c, v, "ioPriority", sizeof (struct oci_io_priority), io_priority_fill, io_priority_clear, &sub));
  p->io_priority = sub;
  sub = NULL;
  OCI_TRY (oci_get_sub (c, v, "execCPUAffinity", sizeof (struct oci_cpu_affinity), cpu_affinity_fill,
                        cpu_affinity_clear, &sub));
  p->exec_cpu_affinity = sub;
  return 0;
}

void
oci_process_clear (struct oci_process *p)
{
  if (p == NULL)
    return;
  free (p->cwd);
  asbx_strv_free (p->env);
  asbx_strv_free (p->args);
  free (p->command_line);
  for (size_t i = 0; i < p->rlimits_len; i++)
    rlimit_clear (&p->rlimits[i]);
  free (p->rlimits);
  free (p->apparmor_profile);
  if (p->capabilities)
    capabilities_clear (p->capabilities);
  free (p->capabilities);
  if (p->scheduler)
    scheduler_clear (p->scheduler);
  free (p->scheduler);
  free (p->selinux_label);
  if (p->io_priority)
    io_priority_clear (p->io_priority);
  free (p->io_priority);
  if (p->exec_cpu_affinity)
    cpu_affinity_clear (p->exec_cpu_affinity);
  free (p->exec_cpu_affinity);
  free (p->user.additional_gids);
  free (p->user.username);
  memset (p, 0, sizeof (*p));
}

void
oci_process_free (struct oci_process *p)
{
  oci_process_clear (p);
  free (p);
}

/* a NULL-terminated copy of v[0..len) (NULL stays NULL) */
static char **
strv_dup (char *const *v, size_t len)
{
  if (v == NULL)
    return NULL;
  char **out = xmalloc0 ((len + 1) * sizeof (char *));
  for (size_t i = 0; i < len; i++)
    out[i] = xstrdup (v[i]);
  return out;
}

static void *
mem_dup (const void *src, size_t size)
{
  if (src == NULL)
    return NULL;
  void *out = xmalloc0 (size ? size : 1);
  memcpy (out, src, size);
  return out;
}

struct oci_process *
oci_process_dup (const struct oci_process *p)
{
  struct oci_process *d = mem_dup (p, sizeof *p);
  if (d == NULL)
    return NULL;
  d->cwd = xstrdup (p->cwd);
  d->env = strv_dup (p->env, p->env_len);
  d->args = strv_dup (p->args, p->args_len);
  d->command_line = xstrdup (p->command_line);
  d->rlimits = p->rlimits_len ? mem_dup (p->rlimits, p->rlimits_len * sizeof *p->rlimits) : NULL;
  for (size_t i = 0; i < p->rlimits_len; i++)
    d->rlimits[i].type = xstrdup (p->rlimits[i].type);
  d->apparmor_profile = xstrdup (p->apparmor_profile);
  if ((d->capabilities = mem_dup (p->capabilities, sizeof *p->capabilities)))
    {
      const struct oci_capabilities *c = p->capabilities;
      d->capabilities->bounding = strv_dup (c->bounding, c->bounding_len);
      d->capabilities->effective = strv_dup (c->effective, c->effective_len);
      d->capabilities->inheritable = strv_dup (c->inheritable, c->inheritable_len);
      d->capabilities->permitted = strv_dup (c->permitted, c->permitted_len);
      d->capabilities->ambient = strv_dup (c->ambient, c->ambient_len);
    }
  if ((d->scheduler = mem_dup (p->scheduler, sizeof *p->scheduler)))
    {
      d->scheduler->policy = xstrdup (p->scheduler->policy);
      d->scheduler->flags = strv_dup (p->scheduler->flags, p->scheduler->flags_len);
    }
  d->selinux_label = xstrdup (p->selinux_label);
  if ((d->io_priority = mem_dup (p->io_priority, sizeof *p->io_priority)))
    d->io_priority->class_ = xstrdup (p->io_priority->class_);
  if ((d->exec_cpu_affinity = mem_dup (p->exec_cpu_affinity, sizeof *p->exec_cpu_affinity)))
    {
      d->exec_cpu_affinity->initial = xstrdup (p->exec_cpu_affinity->initial);
      d->exec_cpu_affinity->final = xstrdup (p->exec_cpu_affinity->final);
    }
  d->user.additional_gids = p->user.additional_gids_len
                                ? mem_dup (p->user.additional_gids, p->user.additional_gids_len * sizeof (uint32_t))
                                : NULL;
  d->user.username = xstrdup (p->user.username);
  return d;
}

struct oci_process *
oci_process_parse (const char *json, size_t len, const char *name, asbx_err_t *err)
{
  struct oci_ctx c;
  struct oci_process *p = NULL;
  yajl_val tree;

  oci_ctx_init (&c, name ? name : "process.json", err);
  tree = oci_json_load (&c, json, len);
  if (tree)
    {
      p = xmalloc0 (sizeof (*p));
      if (oci_parse_process (&c, tree, p) < 0)
        {
          oci_process_free (p);
          p = NULL;
        }
      yajl_tree_free (tree);
    }
  oci_ctx_release (&c);
  return p;
}
