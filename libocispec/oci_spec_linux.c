/* oci_spec_linux.c - the `linux` object (runtime-spec config-linux.md) except `resources`
 * (oci_spec_resources.c): namespaces, id mappings, time offsets, devices, seccomp, sysctl,
 * masked/readonly paths, intelRdt, personality, netDevices.
 *
 * Enumerations the spec closes (namespace types, device types, rootfsPropagation) are checked
 * here so that a typo fails at parse time, naming the path, instead of deep inside create.
 */
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"

static bool
in_list (const char *s, const char *const *list)
{
  for (; *list; list++)
    if (strcmp (s, *list) == 0)
      return true;
  return false;
}

static const char *const namespace_types[] = {
  "pid", "network", "mount", "ipc", "uts", "user", "cgroup", "time", NULL
};

static void
namespace_clear (void *elem)
{
  struct oci_namespace *n = elem;
  free (n->type);
  free (n->path);
}

static int
namespace_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_namespace *n = elem;
  OCI_TRY (oci_required (c, "type", oci_get_string (c, v, "type", &n->type)));
  if (!in_list (n->type, namespace_types))
    {
      cleanup_free char *q = oci_quote (n->type);
      return oci_fail_key (c, "type", "unknown namespace type %s (pid network mount ipc uts user cgroup time)", q);
    }
  OCI_TRY (oci_get_string (c, v, "path", &n->path));
  return 0;
}

/* config-linux.md "Namespaces": "Duplicated namespaces are not allowed." */
static int
check_namespace_duplicates (struct oci_ctx *c, const struct oci_linux *l)
{
  for (size_t i = 1; i < l->namespaces_len; i++)
    for (size_t j = 0; j < i; j++)
      if (strcmp (l->namespaces[i].type, l->namespaces[j].type) == 0)
        {
          size_t mark = oci_ctx_push_key (c, "namespaces");
          oci_ctx_push_index (c, i);
          oci_fail_key (c, "type", "duplicate namespace \"%s\"", l->namespaces[i].type);
          oci_ctx_pop (c, mark);
          return -1;
        }
  return 0;
}

void
oci_id_mapping_clear (void *elem)
{
  (void) elem;
}

int
oci_fill_id_mapping (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_id_mapping *m = elem;
  OCI_TRY (oci_required (c, "containerID", oci_get_u32 (c, v, "containerID", &m->container_id)));
  OCI_TRY (oci_required (c, "hostID", oci_get_u32 (c, v, "hostID", &m->host_id)));
  OCI_TRY (oci_required (c, "size", oci_get_u32 (c, v, "size", &m->size)));
  return 0;
}

static int
time_offset_fill (struct oci_ctx *c, yajl_val v, struct oci_time_offset *t)
{
  OCI_TRY (oci_get_i64 (c, v, "secs", &t->secs));
  OCI_TRY (oci_get_u32 (c, v, "nanosecs", &t->nanosecs));
  return 0;
}

/* config-linux.md "Offset for Time Namespace": keys are clock names. Only monotonic and
 * boottime exist in time namespaces (time_namespaces(7)); another clock is refused rather than
 * ignored, because it asks for an offset we cannot apply. */
static int
time_offsets_fill (struct oci_ctx *c, yajl_val obj, struct oci_linux *l)
{
  yajl_val o = NULL;
  int r = oci_get_object (c, obj, "timeOffsets", &o);
  size_t mark;

  if (r <= 0)
    return r;
  mark = oci_ctx_push_key (c, "timeOffsets");
  for (size_t i = 0; i < o->u.object.len && r >= 0; i++)
    {
      const char *k = o->u.object.keys[i];
      yajl_val v = o->u.object.values[i];
      size_t m2 = oci_ctx_push_key (c, k);
      struct oci_time_offset *t = NULL;
      if (strcmp (k, "monotonic") == 0)
        {
          t = &l->time_offsets_monotonic;
          l->has_time_offsets_monotonic = !YAJL_IS_NULL (v);
        }
      else if (strcmp (k, "boottime") == 0)
        {
          t = &l->time_offsets_boottime;
          l->has_time_offsets_boottime = !YAJL_IS_NULL (v);
        }
      if (t == NULL)
        r = oci_fail (c, "unsupported clock (monotonic, boottime)");
      else if (YAJL_IS_NULL (v))
        ;
      else if (!YAJL_IS_OBJECT (v))
        r = oci_fail (c, "expected object");
      else
        r = time_offset_fill (c, v, t);
      oci_ctx_pop (c, m2);
    }
  oci_ctx_pop (c, mark);
  return r;
}

static void
device_clear (void *elem)
{
  struct oci_device *d = elem;
  free (d->type);
  free (d->path);
}

/* config-linux.md "Devices": type c b u p, path REQUIRED, major/minor REQUIRED unless p. */
static int
device_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  static const char *const types[] = { "c", "b", "u", "p", NULL };
  struct oci_device *d = elem;
  int r;

  OCI_TRY (oci_required (c, "type", oci_get_string (c, v, "type", &d->type)));
  if (!in_list (d->type, types))
    {
      cleanup_free char *q = oci_quote (d->type);
      return oci_fail_key (c, "type", "unknown device type %s (c b u p)", q);
    }
  OCI_TRY (oci_required (c, "path", oci_get_string (c, v, "path", &d->path)));
  OCI_TRY (r = oci_get_i64 (c, v, "major", &d->major));
  d->has_major = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "minor", &d->minor));
  d->has_minor = r > 0;
  if (strcmp (d->type, "p") != 0)
    {
      OCI_TRY (oci_required (c, "major", d->has_major));
      OCI_TRY (oci_required (c, "minor", d->has_minor));
    }
  OCI_TRY (r = oci_get_u32 (c, v, "fileMode", &d->file_mode));
  d->has_file_mode = r > 0;
  OCI_TRY (r = oci_get_u32 (c, v, "uid", &d->uid));
  d->has_uid = r > 0;
  OCI_TRY (r = oci_get_u32 (c, v, "gid", &d->gid));
  d->has_gid = r > 0;
  return 0;
}

static void
seccomp_arg_clear (void *elem)
{
  struct oci_seccomp_arg *a = elem;
  free (a->op);
}

static int
seccomp_arg_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_seccomp_arg *a = elem;
  int r;
  OCI_TRY (oci_required (c, "index", oci_get_u32 (c, v, "index", &a->index)));
  OCI_TRY (oci_required (c, "value", oci_get_u64 (c, v, "value", &a->value)));
  OCI_TRY (r = oci_get_u64 (c, v, "valueTwo", &a->value_two));
  a->has_value_two = r > 0;
  OCI_TRY (oci_required (c, "op", oci_get_string (c, v, "op", &a->op)));
  return 0;
}

static void
seccomp_syscall_clear (void *elem)
{
  struct oci_seccomp_syscall *s = elem;
  asbx_strv_free (s->names);
  free (s->action);
  for (size_t i = 0; i < s->args_len; i++)
    seccomp_arg_clear (&s->args[i]);
  free (s->args);
}

static int
seccomp_syscall_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_seccomp_syscall *s = elem;
  void *args = NULL;
  int r;
  OCI_TRY (oci_required (c, "names", oci_get_strv (c, v, "names", &s->names, &s->names_len)));
  OCI_TRY (oci_required (c, "action", oci_get_string (c, v, "action", &s->action)));
  OCI_TRY (r = oci_get_u32 (c, v, "errnoRet", &s->errno_ret));
  s->has_errno_ret = r > 0;
  OCI_TRY (oci_get_array_of (c, v, "args", sizeof (struct oci_seccomp_arg), seccomp_arg_fill, seccomp_arg_clear, &args,
                             &s->args_len));
  s->args = args;
  return 0;
}

static void
seccomp_clear (void *elem)
{
  struct oci_seccomp *s = elem;
  free (s->default_action);
  asbx_strv_free (s->architectures);
  asbx_strv_free (s->flags);
  free (s->listener_path);
  free (s->listener_metadata);
  for (size_t i = 0; i < s->syscalls_len; i++)
    seccomp_syscall_clear (&s->syscalls[i]);
  free (s->syscalls);
}

/* config-linux.md "Seccomp": defaultAction REQUIRED. */
static int
seccomp_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_seccomp *s = elem;
  void *sys = NULL;
  int r;
  OCI_TRY (oci_required (c, "defaultAction", oci_get_string (c, v, "defaultAction", &s->default_action)));
  OCI_TRY (r = oci_get_u32 (c, v, "defaultErrnoRet", &s->default_errno_ret));
  s->has_default_errno_ret = r > 0;
  OCI_TRY (oci_get_strv (c, v, "architectures", &s->architectures, &s->architectures_len));
  OCI_TRY (oci_get_strv (c, v, "flags", &s->flags, &s->flags_len));
  OCI_TRY (oci_get_string (c, v, "listenerPath", &s->listener_path));
  OCI_TRY (oci_get_string (c, v, "listenerMetadata", &s->listener_metadata));
  OCI_TRY (oci_get_array_of (c, v, "syscalls", sizeof (struct oci_seccomp_syscall), seccomp_syscall_fill,
                             seccomp_syscall_clear, &sys, &s->syscalls_len));
  s->syscalls = sys;
  return 0;
}

static void
intel_rdt_clear (void *elem)
{
  struct oci_intel_rdt *r = elem;
  free (r->clos_id);
  free (r->l3_cache_schema);
  free (r->mem_bw_schema);
  asbx_strv_free (r->schemata);
}

static int
intel_rdt_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_intel_rdt *t = elem;
  int r;
  OCI_TRY (oci_get_string (c, v, "closID", &t->clos_id));
  OCI_TRY (oci_get_string (c, v, "l3CacheSchema", &t->l3_cache_schema));
  OCI_TRY (oci_get_string (c, v, "memBwSchema", &t->mem_bw_schema));
  OCI_TRY (oci_get_strv (c, v, "schemata", &t->schemata, &t->schemata_len));
  OCI_TRY (r = oci_get_bool (c, v, "enableCMT", &t->enable_cmt));
  t->has_enable_cmt = r > 0;
  OCI_TRY (r = oci_get_bool (c, v, "enableMBM", &t->enable_mbm));
  t->has_enable_mbm = r > 0;
  return 0;
}

static void
personality_clear (void *elem)
{
  struct oci_personality *p = elem;
  free (p->domain);
  asbx_strv_free (p->flags);
}

static int
personality_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_personality *p = elem;
  OCI_TRY (oci_required (c, "domain", oci_get_string (c, v, "domain", &p->domain)));
  OCI_TRY (oci_get_strv (c, v, "flags", &p->flags, &p->flags_len));
  return 0;
}

static void
memory_policy_clear (void *elem)
{
  struct oci_memory_policy *m = elem;
  free (m->mode);
  free (m->nodes);
  asbx_strv_free (m->flags);
}

/* config-linux.md "Memory policy" (1.3): mode REQUIRED, nodes and flags optional */
static int
memory_policy_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_memory_policy *m = elem;
  OCI_TRY (oci_required (c, "mode", oci_get_string (c, v, "mode", &m->mode)));
  OCI_TRY (oci_get_string (c, v, "nodes", &m->nodes));
  OCI_TRY (oci_get_strv (c, v, "flags", &m->flags, &m->flags_len));
  return 0;
}

static void
net_device_clear (void *elem)
{
  struct oci_net_device *d = elem;
  free (d->host_name);
  free (d->name);
}

static int
net_device_fill (struct oci_ctx *c, const char *key, yajl_val v, void *elem)
{
  struct oci_net_device *d = elem;
  d->host_name = xstrdup (key);
  OCI_TRY (oci_get_string (c, v, "name", &d->name));
  return 0;
}

static int
linux_lists (struct oci_ctx *c, yajl_val v, struct oci_linux *l)
{
  void *arr = NULL;
  OCI_TRY (oci_get_array_of (c, v, "namespaces", sizeof (struct oci_namespace), namespace_fill, namespace_clear, &arr,
                             &l->namespaces_len));
  l->namespaces = arr;
  arr = NULL;
  OCI_TRY (check_namespace_duplicates (c, l));
  OCI_TRY (oci_get_array_of (c, v, "uidMappings", sizeof (struct oci_id_mapping), oci_fill_id_mapping,
                             oci_id_mapping_clear, &arr, &l->uid_mappings_len));
  l->uid_mappings = arr;
  arr = NULL;
  OCI_TRY (oci_get_array_of (c, v, "gidMappings", sizeof (struct oci_id_mapping), oci_fill_id_mapping,
                             oci_id_mapping_clear, &arr, &l->gid_mappings_len));
  l->gid_mappings = arr;
  arr = NULL;
  OCI_TRY (
      oci_get_array_of (c, v, "devices", sizeof (struct oci_device), device_fill, device_clear, &arr, &l->devices_len));
  l->devices = arr;
  arr = NULL;
  OCI_TRY (oci_get_map_of (c, v, "netDevices", sizeof (struct oci_net_device), net_device_fill, net_device_clear, &arr,
                           &l->net_devices_len));
  l->net_devices = arr;
  return 0;
}

static int
resources_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  return oci_parse_resources (c, v, elem);
}

static int
check_propagation (struct oci_ctx *c, const char *p)
{
  /* spec: shared slave private unbindable; runc also takes the recursive forms */
  static const char *const ok[] = { "private", "rprivate",   "shared",      "rshared", "slave",
                                    "rslave",  "unbindable", "runbindable", NULL };
  cleanup_free char *q = NULL;
  if (in_list (p, ok))
    return 0;
  q = oci_quote (p);
  return oci_fail_key (c, "rootfsPropagation", "unknown propagation %s (shared slave private unbindable)", q);
}

int
oci_parse_linux (struct oci_ctx *c, yajl_val v, struct oci_linux *l)
{
  void *sub = NULL;

  OCI_TRY (linux_lists (c, v, l));
  OCI_TRY (time_offsets_fill (c, v, l));
  OCI_TRY (oci_get_string (c, v, "cgroupsPath", &l->cgroups_path));
  OCI_TRY (oci_get_sub (c, v, "resources", sizeof (struct oci_resources), resources_fill, oci_resources_clear, &sub));
  l->resources = sub;
  sub = NULL;
  OCI_TRY (oci_get_string (c, v, "rootfsPropagation", &l->rootfs_propagation));
  if (l->rootfs_propagation)
    OCI_TRY (check_propagation (c, l->rootfs_propagation));
  OCI_TRY (oci_get_sub (c, v, "seccomp", sizeof (struct oci_seccomp), seccomp_fill, seccomp_clear, &sub));
  l->seccomp = sub;
  sub = NULL;
  OCI_TRY (oci_get_map (c, v, "sysctl", &l->sysctl));
  OCI_TRY (oci_get_strv (c, v, "maskedPaths", &l->masked_paths, &l->masked_paths_len));
  OCI_TRY (oci_get_strv (c, v, "readonlyPaths", &l->readonly_paths, &l->readonly_paths_len));
  OCI_TRY (oci_get_string (c, v, "mountLabel", &l->mount_label));
  OCI_TRY (oci_get_sub (c, v, "intelRdt", sizeof (struct oci_intel_rdt), intel_rdt_fill, intel_rdt_clear, &sub));
  l->intel_rdt = sub;
  sub = NULL;
  OCI_TRY (
      oci_get_sub (c, v, "personality", sizeof (struct oci_personality), personality_fill, personality_clear, &sub));
  l->personality = sub;
  sub = NULL;
  OCI_TRY (oci_get_sub (c, v, "memoryPolicy", sizeof (struct oci_memory_policy), memory_policy_fill,
                        memory_policy_clear, &sub));
  l->memory_policy = sub;
  return 0;
}

void
oci_linux_clear (void *elem)
{
  struct oci_linux *l = elem;
  for (size_t i = 0; i < l->namespaces_len; i++)
    namespace_clear (&l->namespaces[i]);
  free (l->namespaces);
  free (l->uid_mappings);
  free (l->gid_mappings);
  for (size_t i = 0; i < l->devices_len; i++)
    device_clear (&l->devices[i]);
  free (l->devices);
  free (l->cgroups_path);
  oci_resources_free (l->resources);
  free (l->rootfs_propagation);
  if (l->seccomp)
    seccomp_clear (l->seccomp);
  free (l->seccomp);
  oci_map_clear (&l->sysctl);
  asbx_strv_free (l->masked_paths);
  asbx_strv_free (l->readonly_paths);
  free (l->mount_label);
  if (l->intel_rdt)
    intel_rdt_clear (l->intel_rdt);
  free (l->intel_rdt);
  if (l->personality)
    personality_clear (l->personality);
  free (l->personality);
  if (l->memory_policy)
    memory_policy_clear (l->memory_policy);
  free (l->memory_policy);
  for (size_t i = 0; i < l->net_devices_len; i++)
    net_device_clear (&l->net_devices[i]);
  free (l->net_devices);
  memset (l, 0, sizeof (*l));
}

void
oci_linux_free (struct oci_linux *l)
{
  if (l == NULL)
    return;
  oci_linux_clear (l);
  free (l);
}
