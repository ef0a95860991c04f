/* model.c - the container's internal model: config.json + the compiled policy; see the header.
 * The narrowing rules were policy_apply.c's and policy_process.c's, which rewrote the parsed
 * spec in place; they now build the model's own copies, from a spec_narrowing the runtime fills
 * from the compiled plan (spec/ does not include policy/). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "spec/model.h"

/* keep the entries of v allowed by capabilities.allow (all when not restricted),
 * without CAP_NET_ADMIN/CAP_NET_RAW when drop_net */
static void
caps_filter (char ***v, size_t *len, const struct spec_narrowing *n, bool drop_net)
{
  size_t w = 0;
  for (size_t i = 0; i < *len; i++)
    {
      bool keep = !n->restrict_caps;
      for (size_t j = 0; n->restrict_caps && j < n->caps_allow_len; j++)
        if (strcmp ((*v)[i], n->caps_allow[j]) == 0)
          keep = true;
      if (drop_net && (strcmp ((*v)[i], "CAP_NET_ADMIN") == 0 || strcmp ((*v)[i], "CAP_NET_RAW") == 0))
        keep = false;
      if (keep)
        (*v)[w++] = (*v)[i];
      else
        free ((*v)[i]);
    }
  *len = w;
  if (*v)
    (*v)[w] = NULL;
}

/* remove the first n names of drop from v */
static void
caps_remove (char **v, size_t *len, const char *const *drop, size_t n)
{
  size_t w = 0;
  for (size_t i = 0; v && i < *len; i++)
    {
      bool gone = false;
      for (size_t j = 0; j < n && !gone; j++)
        gone = strcmp (v[i], drop[j]) == 0;
      if (gone)
        free (v[i]);
      else
        v[w++] = v[i];
    }
  if (v)
    {
      v[w] = NULL;
      *len = w;
    }
}

static void
caps_narrow (struct oci_capabilities *c, const struct spec_narrowing *n, bool userns_isolating)
{
  /* host privilege through what the container writes (runtime/policy_hostfiles.h) */
  static const char *const hostfile_drop[] = { "CAP_SETFCAP", "CAP_MKNOD", "CAP_CHOWN", "CAP_FSETID" };
  char ***sets[] = { &c->bounding, &c->effective, &c->permitted, &c->inheritable, &c->ambient };
  size_t *lens[] = { &c->bounding_len, &c->effective_len, &c->permitted_len, &c->inheritable_len, &c->ambient_len };
  bool drop_net = n->isolate_net;
  size_t ndrop = userns_isolating ? 2 : 4;

  for (size_t s = 0; s < ASBX_ARRAY_SIZE (sets); s++)
    caps_filter (sets[s], lens[s], n, drop_net);
  for (size_t s = 0; s < ASBX_ARRAY_SIZE (sets); s++)
    caps_remove (*sets[s], lens[s], hostfile_drop, ndrop);
}

/* the smaller of the process's and the policy's rlimit (0: the policy sets none) */
static void
rlimit_narrow (struct oci_process *p, const char *type, uint64_t limit)
{
  if (limit == 0)
    return;
  for (size_t i = 0; i < p->rlimits_len; i++)
    if (strcmp (p->rlimits[i].type, type) == 0)
      {
        if (p->rlimits[i].hard > limit)
          p->rlimits[i].hard = limit;
        if (p->rlimits[i].soft > p->rlimits[i].hard)
          p->rlimits[i].soft = p->rlimits[i].hard;
        return;
      }
  p->rlimits = xrealloc (p->rlimits, sizeof (*p->rlimits) * (p->rlimits_len + 1));
  p->rlimits[p->rlimits_len++] = (struct oci_rlimit){ .type = xstrdup (type), .soft = limit, .hard = limit };
}

void
spec_narrow_process (struct oci_process *p, const struct spec_narrowing *n, bool userns_isolating)
{
  if (!p || !n || !n->active)
    return;
  /* Landlock needs no_new_privs, and a policy never lets a setuid binary widen it */
  p->no_new_privileges = true;
  if (p->capabilities)
    caps_narrow (p->capabilities, n, userns_isolating);
  rlimit_narrow (p, "RLIMIT_NOFILE", n->open_files);
  rlimit_narrow (p, "RLIMIT_FSIZE", n->file_size_bytes);
}

/* sd_listen_fds(3): the fds 3.. are passed on and the init is pid 1 in its namespace */
static void
add_listen_fds (struct oci_process *p, unsigned n)
{
  if (n == 0 || !p)
    return;
  p->env = xrealloc (p->env, sizeof (char *) * (p->env_len + 3));
  p->env[p->env_len++] = xasprintf ("LISTEN_FDS=%u", n);
  p->env[p->env_len++] = xstrdup ("LISTEN_PID=1");
  p->env[p->env_len] = NULL;
}

/* The smaller of the spec's and the policy's memory, pids and cpu limits, into m->res (a copy of
 * the spec's linux.resources with its own memory and cpu). */
static void
resources_narrow (struct spec_model *m, const struct oci_resources *spec_res, const struct spec_narrowing *p)
{
  struct oci_resources *r = &m->res;
  struct oci_memory *mem = &m->mem;
  struct oci_cpu *cpu = &m->cpu;

  m->resources = spec_res;
  if (!p->memory_bytes && !p->pids && p->cpus <= 0)
    return;
  if (spec_res)
    *r = *spec_res;
  if (r->memory)
    *mem = *r->memory;
  if (r->cpu)
    *cpu = *r->cpu;
  r->memory = (r->memory || p->memory_bytes) ? mem : NULL;
  r->cpu = (r->cpu || p->cpus > 0) ? cpu : NULL;
  m->resources = r;
  if (p->memory_bytes && (!mem->has_limit || mem->limit <= 0 || (uint64_t) mem->limit > p->memory_bytes))
    mem->limit = (int64_t) p->memory_bytes, mem->has_limit = true;
  if (p->pids && (!r->has_pids || r->pids_limit <= 0 || (uint64_t) r->pids_limit > p->pids))
    r->pids_limit = (int64_t) p->pids, r->has_pids = true;
  if (p->cpus > 0)
    {
      uint64_t period = cpu->has_period && cpu->period ? cpu->period : 100000;
      int64_t quota = (int64_t) (p->cpus * (double) period);
      if (quota < 1000)
        quota = 1000; /* the kernel's minimum cfs quota is 1 ms */
      if (!cpu->has_quota || cpu->quota <= 0 || cpu->quota > quota)
        cpu->quota = quota, cpu->has_quota = true, cpu->period = period, cpu->has_period = true;
    }
}

static const struct oci_namespace *
find_ns (const struct oci_namespace *ns, size_t len, const char *type)
{
  for (size_t i = 0; i < len; i++)
    if (ns[i].type && strcmp (ns[i].type, type) == 0)
      return &ns[i];
  return NULL;
}

bool
spec_model_netns (const struct spec_model *m, const char **path)
{
  const struct oci_namespace *n = find_ns (m->namespaces, m->namespaces_len, "network");
  if (n && path)
    *path = n->path && *n->path ? n->path : NULL;
  return n != NULL;
}

/* the mount layer (read-only root, grants, masks) and Landlock's paths are the container's own
 * mount namespace; without a policy agentsbx runs both forms as runc does (issue 15) */
static int
check_mount_ns (const struct oci_linux *l, asbx_err_t *err)
{
  const struct oci_namespace *n = l ? find_ns (l->namespaces, l->namespaces_len, "mount") : NULL;
  if (!n)
    return asbx_error (err, EINVAL,
                       "agent policy: linux.namespaces has no `mount` entry: the policy needs a new mount "
                       "namespace (its read-only root, grants and masks are mounts of the container's own "
                       "namespace, never the runtime's)");
  if (n->path && *n->path)
    return asbx_error (err, EINVAL,
                       "agent policy: linux.namespaces joins the mount namespace `%s`: the policy needs a new "
                       "one (its mounts would change a namespace other processes use, and what they mount "
                       "there would bypass the policy)",
                       n->path);
  return 0;
}

/* a policy's processes live in a pid namespace of their own (or one an engine shares between a
 * pod's containers, by path): in the runtime's, the agent could signal every process of its
 * uid on the host - the kernel's signal check compares uids and ignores user namespaces (outside
 * tester: a rootless bundle without one signalled the user's other processes) */
static int
check_pid_ns (const struct oci_linux *l, asbx_err_t *err)
{
  if (l && find_ns (l->namespaces, l->namespaces_len, "pid"))
    return 0;
  return asbx_error (err, EINVAL,
                     "agent policy: linux.namespaces has no `pid` entry: the policy needs a pid namespace "
                     "(in the host's, the agent could see and signal the host's processes of its uid; "
                     "docker/podman --pid=host cannot be combined with an agent policy)");
}

/* the policy's parts of the model (an active narrowing) */
static void
model_narrow (struct spec_model *m, const struct spec_narrowing *n, bool userns_isolating)
{
  const struct oci_spec *spec = m->spec;
  m->root_readonly = m->root_readonly || n->rootfs_readonly;
  spec_narrow_process (m->process, n, userns_isolating);
  resources_narrow (m, spec->linux_->resources, n);
  /* `none`/`filtered`: a fresh network namespace holds only a loopback device; a joined
   * (engine-given) one is isolated by the nftables table the init loads, as a fresh one is */
  if (n->netns_runtime)
    {
      size_t w = 0;
      for (size_t i = 0; i < m->namespaces_len; i++)
        if (strcmp (m->namespaces[i].type, "network") != 0)
          m->namespaces[w++] = m->namespaces[i];
      m->namespaces_len = w;
    }
  else if (n->isolate_net && !spec_model_netns (m, NULL))
    m->namespaces[m->namespaces_len++] = (struct oci_namespace){ .type = (char *) "network" };
}

int
spec_model_build (const struct oci_spec *spec, const struct spec_narrowing *n, const struct spec_model_host *host,
                  struct spec_model **out, asbx_err_t *err)
{
  const struct oci_linux *l = spec->linux_;
  bool active = n && n->active;

  *out = NULL;
  if (active && (check_mount_ns (l, err) < 0 || check_pid_ns (l, err) < 0))
    return -1;
  struct spec_model *m = xmalloc0 (sizeof *m);
  m->spec = spec;
  if (active)
    m->narrowing = *n;
  m->process = oci_process_dup (spec->process);
  m->root_readonly = spec->root && spec->root->readonly;
  size_t nns = l ? l->namespaces_len : 0;
  m->namespaces = xmalloc0 ((nns + 1) * sizeof *m->namespaces); /* + the policy's network */
  if (nns)
    memcpy (m->namespaces, l->namespaces, nns * sizeof *m->namespaces);
  m->namespaces_len = nns;
  m->resources = l ? l->resources : NULL;
  if (active)
    model_narrow (m, n, host->userns_isolating);
  add_listen_fds (m->process, host->listen_fds);

  m->view = *spec;
  m->view.process = m->process;
  if (spec->root)
    {
      m->view_root = *spec->root;
      m->view_root.readonly = m->root_readonly;
      m->view.root = &m->view_root;
    }
  if (l)
    {
      m->view_linux = *l;
      m->view_linux.namespaces = m->namespaces;
      m->view_linux.namespaces_len = m->namespaces_len;
      m->view_linux.resources = (struct oci_resources *) m->resources;
      m->view.linux_ = &m->view_linux;
    }
  *out = m;
  return 0;
}

void
spec_model_free (struct spec_model *m)
{
  if (!m)
    return;
  oci_process_free (m->process);
  free (m->namespaces);
  free (m);
}

bool
spec_mount_is_bind (const struct oci_mount *m)
{
  if (m->type && strcmp (m->type, "bind") == 0)
    return true;
  for (size_t i = 0; i < m->options_len; i++)
    if (strcmp (m->options[i], "bind") == 0 || strcmp (m->options[i], "rbind") == 0)
      return true;
  return false;
}
