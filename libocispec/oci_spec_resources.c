/* oci_spec_resources.c - `linux.resources` (runtime-spec config-linux.md "Control groups"):
 * device allow-list, memory, cpu, blockIO, hugepageLimits, network, pids, rdma, unified.
 *
 * Types follow the spec's Go definitions (specs-go/config.go): limits that take -1 for
 * "unlimited" are int64, shares/period/rates are uint64, weights uint16. Values are only
 * range-checked for their C type here; what the kernel accepts is checked by the cgroup code.
 */
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_json.h"

static void
device_cgroup_clear (void *elem)
{
  struct oci_device_cgroup *d = elem;
  free (d->type);
  free (d->access);
}

/* "Allowed device list": allow REQUIRED; type a c b; access a composition of r w m;
 * absent major/minor mean "all" and are recorded as -1 (has_* stays false). */
static int
device_cgroup_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_device_cgroup *d = elem;
  int r;

  OCI_TRY (oci_required (c, "allow", oci_get_bool (c, v, "allow", &d->allow)));
  OCI_TRY (oci_get_string (c, v, "type", &d->type));
  if (d->type && strcmp (d->type, "a") != 0 && strcmp (d->type, "c") != 0 && strcmp (d->type, "b") != 0)
    {
      cleanup_free char *q = oci_quote (d->type);
      return oci_fail_key (c, "type", "unknown device type %s (a c b)", q);
    }
  d->major = d->minor = -1;
  OCI_TRY (r = oci_get_i64 (c, v, "major", &d->major));
  d->has_major = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "minor", &d->minor));
  d->has_minor = r > 0;
  OCI_TRY (oci_get_string (c, v, "access", &d->access));
  if (d->access && d->access[strspn (d->access, "rwm")] != '\0')
    {
      cleanup_free char *q = oci_quote (d->access);
      return oci_fail_key (c, "access", "%s is not a combination of r, w and m", q);
    }
  return 0;
}

static void
nothing_clear (void *elem)
{
  (void) elem;
}

static int
memory_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_memory *m = elem;
  int r;
  OCI_TRY (r = oci_get_i64 (c, v, "limit", &m->limit));
  m->has_limit = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "reservation", &m->reservation));
  m->has_reservation = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "swap", &m->swap));
  m->has_swap = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "kernel", &m->kernel));
  m->has_kernel = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "kernelTCP", &m->kernel_tcp));
  m->has_kernel_tcp = r > 0;
  OCI_TRY (r = oci_get_u64 (c, v, "swappiness", &m->swappiness));
  m->has_swappiness = r > 0;
  OCI_TRY (r = oci_get_bool (c, v, "disableOOMKiller", &m->disable_oom_killer));
  m->has_disable_oom_killer = r > 0;
  OCI_TRY (r = oci_get_bool (c, v, "useHierarchy", &m->use_hierarchy));
  m->has_use_hierarchy = r > 0;
  OCI_TRY (r = oci_get_bool (c, v, "checkBeforeUpdate", &m->check_before_update));
  m->has_check_before_update = r > 0;
  return 0;
}

static void
cpu_clear (void *elem)
{
  struct oci_cpu *p = elem;
  free (p->cpus);
  free (p->mems);
}

static int
cpu_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_cpu *p = elem;
  int r;
  OCI_TRY (r = oci_get_u64 (c, v, "shares", &p->shares));
  p->has_shares = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "quota", &p->quota));
  p->has_quota = r > 0;
  OCI_TRY (r = oci_get_u64 (c, v, "burst", &p->burst));
  p->has_burst = r > 0;
  OCI_TRY (r = oci_get_u64 (c, v, "period", &p->period));
  p->has_period = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "realtimeRuntime", &p->realtime_runtime));
  p->has_realtime_runtime = r > 0;
  OCI_TRY (r = oci_get_u64 (c, v, "realtimePeriod", &p->realtime_period));
  p->has_realtime_period = r > 0;
  OCI_TRY (r = oci_get_i64 (c, v, "idle", &p->idle));
  p->has_idle = r > 0;
  OCI_TRY (oci_get_string (c, v, "cpus", &p->cpus));
  OCI_TRY (oci_get_string (c, v, "mems", &p->mems));
  return 0;
}

static int
weight_device_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_weight_device *w = elem;
  int r;
  OCI_TRY (oci_required (c, "major", oci_get_i64 (c, v, "major", &w->major)));
  OCI_TRY (oci_required (c, "minor", oci_get_i64 (c, v, "minor", &w->minor)));
  OCI_TRY (r = oci_get_u16 (c, v, "weight", &w->weight));
  w->has_weight = r > 0;
  OCI_TRY (r = oci_get_u16 (c, v, "leafWeight", &w->leaf_weight));
  w->has_leaf_weight = r > 0;
  return 0;
}

static int
throttle_device_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_throttle_device *t = elem;
  OCI_TRY (oci_required (c, "major", oci_get_i64 (c, v, "major", &t->major)));
  OCI_TRY (oci_required (c, "minor", oci_get_i64 (c, v, "minor", &t->minor)));
  OCI_TRY (oci_required (c, "rate", oci_get_u64 (c, v, "rate", &t->rate)));
  return 0;
}

static void
block_io_clear (void *elem)
{
  struct oci_block_io *b = elem;
  free (b->weight_device);
  free (b->throttle_read_bps_device);
  free (b->throttle_write_bps_device);
  free (b->throttle_read_iops_device);
  free (b->throttle_write_iops_device);
}

static int
throttle_list (struct oci_ctx *c, yajl_val v, const char *key, struct oci_throttle_device **out, size_t *len)
{
  void *arr = NULL;
  int r = oci_get_array_of (c, v, key, sizeof (struct oci_throttle_device), throttle_device_fill, nothing_clear, &arr,
                            len);
  if (r > 0)
    *out = arr;
  return r;
}

static int
block_io_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_block_io *b = elem;
  void *arr = NULL;
  int r;
  OCI_TRY (r = oci_get_u16 (c, v, "weight", &b->weight));
  b->has_weight = r > 0;
  OCI_TRY (r = oci_get_u16 (c, v, "leafWeight", &b->leaf_weight));
  b->has_leaf_weight = r > 0;
  OCI_TRY (oci_get_array_of (c, v, "weightDevice", sizeof (struct oci_weight_device), weight_device_fill, nothing_clear,
                             &arr, &b->weight_device_len));
  b->weight_device = arr;
  OCI_TRY (
      throttle_list (c, v, "throttleReadBpsDevice", &b->throttle_read_bps_device, &b->throttle_read_bps_device_len));
  OCI_TRY (
      throttle_list (c, v, "throttleWriteBpsDevice", &b->throttle_write_bps_device, &b->throttle_write_bps_device_len));
  OCI_TRY (
      throttle_list (c, v, "throttleReadIOPSDevice", &b->throttle_read_iops_device, &b->throttle_read_iops_device_len));
  OCI_TRY (throttle_list (c, v, "throttleWriteIOPSDevice", &b->throttle_write_iops_device,
                          &b->throttle_write_iops_device_len));
  return 0;
}

static void
hugepage_clear (void *elem)
{
  struct oci_hugepage_limit *h = elem;
  free (h->page_size);
}

static int
hugepage_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_hugepage_limit *h = elem;
  OCI_TRY (oci_required (c, "pageSize", oci_get_string (c, v, "pageSize", &h->page_size)));
  OCI_TRY (oci_required (c, "limit", oci_get_u64 (c, v, "limit", &h->limit)));
  return 0;
}

static void
net_priority_clear (void *elem)
{
  struct oci_net_priority *p = elem;
  free (p->name);
}

static int
net_priority_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_net_priority *p = elem;
  OCI_TRY (oci_required (c, "name", oci_get_string (c, v, "name", &p->name)));
  OCI_TRY (oci_required (c, "priority", oci_get_u32 (c, v, "priority", &p->priority)));
  return 0;
}

static void
network_clear (void *elem)
{
  struct oci_network *n = elem;
  for (size_t i = 0; i < n->priorities_len; i++)
    net_priority_clear (&n->priorities[i]);
  free (n->priorities);
}

static int
network_fill (struct oci_ctx *c, yajl_val v, void *elem)
{
  struct oci_network *n = elem;
  void *arr = NULL;
  int r;
  OCI_TRY (r = oci_get_u32 (c, v, "classID", &n->class_id));
  n->has_class_id = r > 0;
  OCI_TRY (oci_get_array_of (c, v, "priorities", sizeof (struct oci_net_priority), net_priority_fill,
                             net_priority_clear, &arr, &n->priorities_len));
  n->priorities = arr;
  return 0;
}

static void
rdma_clear (void *elem)
{
  struct oci_rdma *d = elem;
  free (d->device);
}

static int
rdma_fill (struct oci_ctx *c, const char *key, yajl_val v, void *elem)
{
  struct oci_rdma *d = elem;
  int r;
  d->device = xstrdup (key);
  OCI_TRY (r = oci_get_u32 (c, v, "hcaHandles", &d->hca_handles));
  d->has_hca_handles = r > 0;
  OCI_TRY (r = oci_get_u32 (c, v, "hcaObjects", &d->hca_objects));
  d->has_hca_objects = r > 0;
  return 0;
}

/* "pids": limit REQUIRED when the object is present. */
static int
pids_fill (struct oci_ctx *c, yajl_val v, struct oci_resources *r)
{
  yajl_val o = NULL;
  int n = oci_get_object (c, v, "pids", &o);
  size_t mark;
  if (n <= 0)
    return n;
  mark = oci_ctx_push_key (c, "pids");
  n = oci_required (c, "limit", oci_get_i64 (c, o, "limit", &r->pids_limit));
  oci_ctx_pop (c, mark);
  OCI_TRY (n);
  r->has_pids = true;
  return 1;
}

int
oci_parse_resources (struct oci_ctx *c, yajl_val v, struct oci_resources *r)
{
  void *p = NULL;

  OCI_TRY (oci_get_array_of (c, v, "devices", sizeof (struct oci_device_cgroup), device_cgroup_fill,
                             device_cgroup_clear, &p, &r->devices_len));
  r->devices = p;
  p = NULL;
  OCI_TRY (oci_get_sub (c, v, "memory", sizeof (struct oci_memory), memory_fill, nothing_clear, &p));
  r->memory = p;
  p = NULL;
  OCI_TRY (oci_get_sub (c, v, "cpu", sizeof (struct oci_cpu), cpu_fill, cpu_clear, &p));
  r->cpu = p;
  p = NULL;
  OCI_TRY (pids_fill (c, v, r));
  OCI_TRY (oci_get_sub (c, v, "blockIO", sizeof (struct oci_block_io), block_io_fill, block_io_clear, &p));
  r->block_io = p;
  p = NULL;
  OCI_TRY (oci_get_array_of (c, v, "hugepageLimits", sizeof (struct oci_hugepage_limit), hugepage_fill, hugepage_clear,
                             &p, &r->hugepage_limits_len));
  r->hugepage_limits = p;
  p = NULL;
  OCI_TRY (oci_get_sub (c, v, "network", sizeof (struct oci_network), network_fill, network_clear, &p));
  r->network = p;
  p = NULL;
  OCI_TRY (oci_get_map_of (c, v, "rdma", sizeof (struct oci_rdma), rdma_fill, rdma_clear, &p, &r->rdma_len));
  r->rdma = p;
  OCI_TRY (oci_get_map (c, v, "unified", &r->unified));
  return 0;
}

void
oci_resources_clear (void *elem)
{
  struct oci_resources *r = elem;
  for (size_t i = 0; i < r->devices_len; i++)
    device_cgroup_clear (&r->devices[i]);
  free (r->devices);
  free (r->memory);
  if (r->cpu)
    cpu_clear (r->cpu);
  free (r->cpu);
  if (r->block_io)
    block_io_clear (r->block_io);
  free (r->block_io);
  for (size_t i = 0; i < r->hugepage_limits_len; i++)
    hugepage_clear (&r->hugepage_limits[i]);
  free (r->hugepage_limits);
  if (r->network)
    network_clear (r->network);
  free (r->network);
  for (size_t i = 0; i < r->rdma_len; i++)
    rdma_clear (&r->rdma[i]);
  free (r->rdma);
  oci_map_clear (&r->unified);
  memset (r, 0, sizeof (*r));
}

void
oci_resources_free (struct oci_resources *r)
{
  if (r == NULL)
    return;
  oci_resources_clear (r);
  free (r);
}
