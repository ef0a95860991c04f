/* cgroup_internal.h - shared by cgroup*.c and the unit tests; not a public interface.
 *
 * The parsers take text (the contents of /proc/self/mountinfo, /proc/cgroups, /proc/self/cgroup)
 * so they are testable with fixture strings; cgroup_layout.c feeds them the real files. */
#ifndef ASBX_LINUX_CGROUP_INTERNAL_H
#define ASBX_LINUX_CGROUP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "linux/cgroup.h"

#include <string.h>

/* At most this many hierarchies: one bit each in the created mask. */
#define CGROUP_MAX_HIERARCHIES 32

struct cgroup_hier
{
  /* Identity used to match /proc/self/cgroup lines and to sort: "" for cgroup2, else the v1
   * controllers and name= of the hierarchy, sorted and comma-joined ("cpu,cpuacct",
   * "name=systemd"). Hierarchies are kept sorted by key, so bit i of a created mask means the
   * same hierarchy in a later process (as long as the host's mounts do not change). */
  char *key;
  int version;      /* 1 or 2 */
  char *mountpoint; /* unescaped */
  char *mount_root; /* path inside the hierarchy that is mounted there ("/" normally) */
  char *own;        /* our own cgroup in this hierarchy (/proc/self/cgroup), NULL if not listed */
  bool cpuset;      /* v1 hierarchy carrying the cpuset controller */
};

struct cgroup_layout_info
{
  enum cgroup_layout layout;
  struct cgroup_hier h[CGROUP_MAX_HIERARCHIES];
  size_t n;
};

/* /proc/cgroups text -> NULL-terminated vector of enabled controller names (heap). */
char **cgroup_parse_proc_cgroups (const char *text, asbx_err_t *err);

/* /proc/self/mountinfo text + known controllers -> info->h/n (sorted by key) and info->layout.
 * Duplicate mounts of one hierarchy keep the first mount whose root is "/" (else the first).
 * -1 with *err when no cgroup filesystem is mounted or the text is malformed. */
int cgroup_parse_mountinfo (const char *text, char *const *controllers, struct cgroup_layout_info *info,
                            asbx_err_t *err);

/* /proc/self/cgroup text -> info->h[i].own for every hierarchy listed. 0 / -1. */
int cgroup_parse_self (const char *text, struct cgroup_layout_info *info, asbx_err_t *err);

void cgroup_layout_info_clear (struct cgroup_layout_info *info);

/* The host's layout, detected once (thread-unsafe cache, like the rest of the runtime). */
const struct cgroup_layout_info *cgroup_layout_get (asbx_err_t *err);

/* cgroup_resolve_path() against an explicit layout (tests). `systemd_running` replaces the
 * check for /run/systemd/system. The result is either one absolute path used in every hierarchy
 * ("/agentsbx/ID"), or - when a relative cgroupsPath meets a process whose own cgroup differs
 * between hierarchies (hybrid hosts often) - the list "KEY:/path;KEY:/path;..." with one entry
 * per hierarchy (KEY as in struct cgroup_hier). */
char *cgroup_resolve_path_in (const struct cgroup_layout_info *info, const char *cgroups_path, const char *id,
                              bool systemd, bool systemd_running, struct cgroup_systemd_unit *unit, asbx_err_t *err);

/* The path of resolved path `path` in hierarchy h (heap, absolute inside the hierarchy) or NULL
 * with *err (a list without an entry for h). */
char *cgroup_path_in_hier (const char *path, const struct cgroup_hier *h, asbx_err_t *err);

/* Whether resolved path `path` places the container in hierarchy h: always for one absolute
 * path, for a per-hierarchy list only when it has an entry for h (a non-root caller's list names
 * only the hierarchies delegated to it: runtime/rootless_cgroup.h). cgroup_enter and cgroup_join
 * skip the others; cgroup_remove never has their bit in its mask. */
bool cgroup_path_covers (const char *path, const struct cgroup_hier *h);

/* Open the hierarchy's mountpoint (O_PATH|O_DIRECTORY) checked with fstatfs to be a cgroup or
 * cgroup2 filesystem. fd / -1 with *err. */
int cgroup_open_hier_root (const struct cgroup_hier *h, asbx_err_t *err);

/* v1: make a cpuset directory usable: copy cpuset.cpus and cpuset.mems from the parent when
 * empty (otherwise cgroup.procs fails with ENOSPC). dirfds may be O_PATH. 0 / -1. */
int cgroup_v1_cpuset_fill (int parentfd, int dirfd, const char *name, asbx_err_t *err);

/* v2: write "1" to cgroup.kill (kernel >= 5.14). 0, 1 when the file is missing, -1 with *err. */
int cgroup_v2_kill (int dirfd, asbx_err_t *err);

/* The path of the container's cgroup in hierarchy h opened as an O_PATH directory (walk from
 * the checked mount fd, O_NOFOLLOW per component). create = mkdir missing components. 0 with
 * *fd / -1 with *err (errno ENOENT when missing and !create). Defined in cgroup.c. */
int cgroup_open_in_hier (const struct cgroup_hier *h, const char *path, bool create, bool *created, int *fd,
                         asbx_err_t *err);

/* ---- controller access (cgroup_ctl.c) ----
 * A controller's directory of the container: the v1 hierarchy that carries the controller, or
 * the cgroup2 hierarchy when the controller is enabled there (hybrid hosts: e.g. hugetlb).
 * `where` is the full path for messages only (never used to open anything). */
struct cgroup_dir
{
  int fd;      /* O_PATH|O_DIRECTORY fd of the container's cgroup in that hierarchy */
  int version; /* 1 or 2 */
  char *where; /* "/sys/fs/cgroup/memory/agentsbx/ID" */
};

#define CGROUP_DIR_INIT                                                                                                \
  {                                                                                                                    \
    .fd = -1, .version = 0, .where = NULL                                                                              \
  }

void cgroup_dir_clear (struct cgroup_dir *d);

/* Which hierarchy carries `controller` ("memory", "cpu", "cpuacct", "cpuset", "pids", "blkio"
 * (v2: "io"), "devices", "freezer", "hugetlb", "net_cls", "net_prio", "rdma", "misc"): the v1
 * hierarchy listing it, else cgroup2 when the root's cgroup.controllers lists it (v1 names are
 * mapped: blkio->io). NULL when the host has it nowhere (no error set). */
const struct cgroup_hier *cgroup_ctl_hier (const struct cgroup_layout_info *info, const char *controller);

/* Open the container's cgroup directory for `controller` (see cgroup_ctl_hier). On cgroup2 the
 * controller is first enabled (+name in cgroup.subtree_control) in every ancestor from the
 * hierarchy root down to the leaf's parent, as cgroup-v2.rst "Enabling and Disabling" requires.
 * Returns 0 with *d filled, 1 when the host has no such controller (d untouched), -1 with *err. */
int cgroup_ctl_open (const char *path, const char *controller, struct cgroup_dir *d, asbx_err_t *err);

/* Write `value` to file `file` of d. `field` is the linux.resources JSON path for the message:
 * "linux.resources.memory.limit: write `1234` to /sys/fs/cgroup/memory/x/memory.limit_in_bytes:
 * Device or resource busy". A missing file is ENOTSUP "... not supported by this kernel (no FILE)".
 * 0 / -1 with *err. */
int cgroup_dir_write (const struct cgroup_dir *d, const char *field, const char *file, const char *value,
                      asbx_err_t *err);
/* printf form of cgroup_dir_write. */
int cgroup_dir_writef (const struct cgroup_dir *d, const char *field, const char *file, asbx_err_t *err,
                       const char *fmt, ...) __attribute__ ((format (printf, 5, 6)));
/* Read a (small) file of d into a heap string; -1 with *err naming the file. */
int cgroup_dir_read (const struct cgroup_dir *d, const char *file, char **out, asbx_err_t *err);
/* Read a file holding one unsigned number ("max" -> UINT64_MAX). -1 with *err. */
int cgroup_dir_read_u64 (const struct cgroup_dir *d, const char *file, uint64_t *out, asbx_err_t *err);
/* Whether file exists in d. */
bool cgroup_dir_has (const struct cgroup_dir *d, const char *file);

/* ---- conversions between v1 and v2 values (cgroup_convert.c) ----
 * Formulas as runc's libcontainer/cgroups/utils.go and crun's libcrun/cgroup-resources.c agree. */
/* cpu.shares [2..262144] -> cpu.weight [1..10000]: 1 + ((shares - 2) * 9999) / 262142; 0 -> 0. */
uint64_t cgroup_shares_to_weight (uint64_t shares);
/* blkio.weight [10..1000] -> io.weight [1..10000]: 1 + ((w - 10) * 9999) / 990; 0 -> 0. */
uint64_t cgroup_blkio_to_io_weight (uint64_t w);
/* The spec's memory.swap is memory+swap (v1 memsw); v2 memory.swap.max is swap alone.
 * swap -1 -> -1 (max); swap 0 -> 0 (unset); limit unset/-1 with a swap limit -> EINVAL;
 * swap < limit -> EINVAL. 0 / -1 with *err. */
int cgroup_swap_to_v2 (int64_t swap, int64_t limit, int64_t *out, asbx_err_t *err);

/* ---- per-controller writers: write only the fields the config sets (update relies on it) ---- */
int cgroup_memory_set (const struct cgroup_dir *d, const struct oci_memory *m, asbx_err_t *err);
int cgroup_cpu_set (const struct cgroup_dir *d, const struct oci_cpu *c, asbx_err_t *err);
int cgroup_cpuset_set (const struct cgroup_dir *d, const struct oci_cpu *c, asbx_err_t *err);
int cgroup_pids_set (const struct cgroup_dir *d, int64_t limit, asbx_err_t *err);
int cgroup_blkio_set (const struct cgroup_dir *d, const struct oci_block_io *b, asbx_err_t *err);
int cgroup_hugetlb_set (const struct cgroup_dir *d, const struct oci_hugepage_limit *l, size_t n, asbx_err_t *err);
int cgroup_net_cls_set (const struct cgroup_dir *d, const struct oci_network *n, asbx_err_t *err);
int cgroup_net_prio_set (const struct cgroup_dir *d, const struct oci_network *n, asbx_err_t *err);
int cgroup_rdma_set (const struct cgroup_dir *d, const struct oci_rdma *r, size_t n, asbx_err_t *err);
/* unified: write key=value into the cgroup2 directory (key = a file name; no '/'). */
int cgroup_unified_set (const struct cgroup_dir *d, const char *key, const char *value, asbx_err_t *err);

/* ---- devices (cgroup_devices.c, cgroup_devices_bpf.c) ---- */
struct cgroup_dev_rule
{
  bool allow;
  char type;       /* 'a', 'c', 'b' */
  int64_t major;   /* -1 = any */
  int64_t minor;   /* -1 = any */
  unsigned access; /* CGROUP_DEV_R|W|M */
};
#define CGROUP_DEV_M 1u /* = BPF_DEVCG_ACC_MKNOD */
#define CGROUP_DEV_R 2u /* = BPF_DEVCG_ACC_READ */
#define CGROUP_DEV_W 4u /* = BPF_DEVCG_ACC_WRITE */

/* The effective rule list, in order: deny all, the config's rules, then the runtime's default
 * allow list (runc's AllowedDevices: mknod of any c/b, null zero full random urandom tty
 * console ptmx pts/N tun) and an rwm allow rule for every linux.devices entry. Later rules win.
 * *out heap. -1 with *err for a malformed rule (names linux.resources.devices[i]). */
int cgroup_dev_rules_build (const struct oci_device_cgroup *cfg, size_t ncfg, const struct oci_device *devs,
                            size_t ndevs, struct cgroup_dev_rule **out, size_t *n, asbx_err_t *err);
/* v1: write the rules to devices.deny / devices.allow in order. */
int cgroup_devices_v1_set (const struct cgroup_dir *d, const struct cgroup_dev_rule *r, size_t n, asbx_err_t *err);
/* v2: compile the rules (last match wins, default deny) into BPF_PROG_TYPE_CGROUP_DEVICE
 * instructions. *insns heap (struct bpf_insn[]), *ninsns count. */
int cgroup_devices_bpf_build (const struct cgroup_dev_rule *r, size_t n, void **insns, size_t *ninsns, asbx_err_t *err);
/* v2: load the program and attach it to the cgroup directory fd (BPF_F_ALLOW_MULTI), then
 * detach the programs that were attached before (update replaces). 0 / -1. */
int cgroup_devices_bpf_attach (int cgroup_dirfd, const struct cgroup_dev_rule *r, size_t n, asbx_err_t *err);

/* Whether name s ends in suf (a unit's ".scope" / ".slice"). */
static inline bool
cgroup_has_suffix (const char *s, const char *suf)
{
  size_t a = strlen (s), b = strlen (suf);
  return a >= b && strcmp (s + a - b, suf) == 0;
}

#endif
