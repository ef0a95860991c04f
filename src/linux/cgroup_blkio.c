/* cgroup_blkio.c - linux.resources.blockIO on v1 blkio and cgroup2 io.
 *
 * Sources: runtime-spec config-linux.md "Block IO"; cgroup-v1/blkio-controller.rst; cgroup-v2.rst
 * "IO" (io.max "MAJ:MIN rbps=N wbps=N riops=N wiops=N", io.weight "default N" / "MAJ:MIN N",
 * io.bfq.weight). Weights: the BFQ scheduler takes the spec's 10..1000 range natively
 * (blkio.bfq.weight / io.bfq.weight); without BFQ, v1 blkio.weight (CFQ, gone since 5.0) or
 * v2 io.weight with cgroup_blkio_to_io_weight() - the order runc 1.1 and crun try them in.
 * leafWeight exists only for CFQ: on kernels without blkio.leaf_weight it is an error.
 * Each throttle entry is one write (the kernel parses one device per write). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "linux/cgroup_internal.h"

/* v1 weight file: CFQ's when present, else BFQ's */
static const char *
v1_weight_file (const struct cgroup_dir *d, bool device)
{
  if (cgroup_dir_has (d, device ? "blkio.weight_device" : "blkio.weight"))
    return device ? "blkio.weight_device" : "blkio.weight";
  return device ? "blkio.bfq.weight_device" : "blkio.bfq.weight";
}

static int
set_v1 (const struct cgroup_dir *d, const struct oci_block_io *b, asbx_err_t *err)
{
  if (b->has_weight && b->weight
      && cgroup_dir_writef (d, "blockIO.weight", v1_weight_file (d, false), err, "%u", b->weight) < 0)
    return -1;
  if (b->has_leaf_weight && b->leaf_weight
      && cgroup_dir_writef (d, "blockIO.leafWeight", "blkio.leaf_weight", err, "%u", b->leaf_weight) < 0)
    return -1;
  for (size_t i = 0; i < b->weight_device_len; i++)
    {
      const struct oci_weight_device *w = &b->weight_device[i];
      char field[64];
      snprintf (field, sizeof field, "blockIO.weightDevice[%zu]", i);
      if (w->has_weight
          && cgroup_dir_writef (d, field, v1_weight_file (d, true), err, "%" PRId64 ":%" PRId64 " %u", w->major,
                                w->minor, w->weight)
                 < 0)
        return -1;
      if (w->has_leaf_weight
          && cgroup_dir_writef (d, field, "blkio.leaf_weight_device", err, "%" PRId64 ":%" PRId64 " %u", w->major,
                                w->minor, w->leaf_weight)
                 < 0)
        return -1;
    }
  return 0;
}

static int
set_v2 (const struct cgroup_dir *d, const struct oci_block_io *b, asbx_err_t *err)
{
  bool bfq = cgroup_dir_has (d, "io.bfq.weight");

  if (b->has_leaf_weight && b->leaf_weight)
    return asbx_error (err, ENOTSUP, "linux.resources.blockIO.leafWeight: not supported on cgroup v2");
  if (b->has_weight && b->weight)
    {
      if (bfq)
        {
          if (cgroup_dir_writef (d, "blockIO.weight", "io.bfq.weight", err, "%u", b->weight) < 0)
            return -1;
        }
      else if (cgroup_dir_writef (d, "blockIO.weight", "io.weight", err, "default %" PRIu64,
                                  cgroup_blkio_to_io_weight (b->weight))
               < 0)
        return -1;
    }
  for (size_t i = 0; i < b->weight_device_len; i++)
    {
      const struct oci_weight_device *w = &b->weight_device[i];
      char field[64];
      snprintf (field, sizeof field, "blockIO.weightDevice[%zu]", i);
      if (w->has_leaf_weight && w->leaf_weight)
        return asbx_error (err, ENOTSUP, "linux.resources.%s.leafWeight: not supported on cgroup v2", field);
      if (!w->has_weight)
        continue;
      if (bfq ? cgroup_dir_writef (d, field, "io.bfq.weight", err, "%" PRId64 ":%" PRId64 " %u", w->major, w->minor,
                                   w->weight)
              : cgroup_dir_writef (d, field, "io.weight", err, "%" PRId64 ":%" PRId64 " %" PRIu64, w->major, w->minor,
                                   cgroup_blkio_to_io_weight (w->weight)))
        return -1;
    }
  return 0;
}

/* One throttle list: v1 file "blkio.throttle.X" or v2 io.max key. */
static int
set_throttle (const struct cgroup_dir *d, const char *field, const char *v1file, const char *v2key,
              const struct oci_throttle_device *t, size_t n, asbx_err_t *err)
{
  for (size_t i = 0; i < n; i++)
    {
      char f[80];
      int r;
      snprintf (f, sizeof f, "blockIO.%s[%zu]", field, i);
      if (d->version == 2)
        r = cgroup_dir_writef (d, f, "io.max", err, "%" PRId64 ":%" PRId64 " %s=%" PRIu64, t[i].major, t[i].minor,
                               v2key, t[i].rate);
      else
        r = cgroup_dir_writef (d, f, v1file, err, "%" PRId64 ":%" PRId64 " %" PRIu64, t[i].major, t[i].minor,
                               t[i].rate);
      if (r < 0)
        return -1;
    }
  return 0;
}

int
cgroup_blkio_set (const struct cgroup_dir *d, const struct oci_block_io *b, asbx_err_t *err)
{
  if (b == NULL)
    return 0;
  if ((d->version == 2 ? set_v2 (d, b, err) : set_v1 (d, b, err)) < 0)
    return -1;
  if (set_throttle (d, "throttleReadBpsDevice", "blkio.throttle.read_bps_device", "rbps", b->throttle_read_bps_device,
                    b->throttle_read_bps_device_len, err)
          < 0
      || set_throttle (d, "throttleWriteBpsDevice", "blkio.throttle.write_bps_device", "wbps",
                       b->throttle_write_bps_device, b->throttle_write_bps_device_len, err)
             < 0
      || set_throttle (d, "throttleReadIOPSDevice", "blkio.throttle.read_iops_device", "riops",
                       b->throttle_read_iops_device, b->throttle_read_iops_device_len, err)
             < 0
      || set_throttle (d, "throttleWriteIOPSDevice", "blkio.throttle.write_iops_device", "wiops",
                       b->throttle_write_iops_device, b->throttle_write_iops_device_len, err)
             < 0)
    return -1;
  return 0;
}
