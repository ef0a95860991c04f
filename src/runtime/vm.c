/* vm.c - the host side of the vm tier (vm.h): find QEMU and the guest kernel, write the
 * initramfs and the manifest the guest reads, start QEMU's `microvm` machine, enforce the wall
 * clock from the host (SIGKILL to QEMU), read the exit status the guest sends.
 *
 * QEMU runs confined on the host (vm_jail.h: the bundle owner's uid, its own namespaces, no
 * capability, a set-ID mode filter), with -nodefaults (no NIC but network.mode filtered's, runtime/vm_net.h; no
 * display, no firmware devices), its own seccomp filter
 * (-sandbox on: no new privileges, no spawn, no obsolete syscalls), one virtio-serial device
 * (ports asbx.stdout, asbx.stderr, asbx.status; the detached lifecycle's asbx.ctl and asbx.exec:
 * vm_supervisor.h, vm_exec.h; stdin is /dev/null in the guest) and one virtio-9p device per shared
 * directory. microvm has 24 virtio-mmio transports: one is the serial device. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/kvm_probe.h"
#include "runtime/oci_unpack.h"
#include "runtime/vm.h"
#include "runtime/vm_cgroup.h"
#include "runtime/vm_console.h"
#include "runtime/vm_exec.h"
#include "runtime/vm_jail.h"
#include "runtime/vm_rundir.h"
#include "runtime/vm_runrec.h"
#include "runtime/vm_net.h"
#include "spec/model.h"

#define VM_MAX_SHARES 16    /* virtio-9p devices (below microvm's transports, see above) */
#define VM_MIN_MEM_MIB 256  /* guest kernel + our init + the container's own runtime */
#define VM_OVERHEAD_MIB 192 /* added to the policy's memory limit: the limit stays the container's */
#define VM_DEFAULT_MEM_MIB 512

/* The oldest guest kernel the tier boots: the policy's filesystem layers need Linux 6.8 (a deny
 * mask or pin names its mount by statx's STATX_MNT_ID_UNIQUE; Landlock ABI 3+ is 6.2), so an
 * older cached kernel (tests/vm's Debian 12 6.1) is passed over, not booted to fail inside. */
#define VM_MIN_KERNEL_MAJOR 6
#define VM_MIN_KERNEL_MINOR 8

/* Load order = dependency order (the kernel package ships no modules.dep we could read cheaply).
 * Written for Debian's 6.12 (bookworm-backports): each as shipped (.ko.xz) or built in (virtio,
 * virtio_ring, virtio_console; vm_cpio.c skips those); fscache is part of netfs since 6.8. */
static const char *const vm_modules[] = {
  "drivers/virtio/virtio_ring.ko",
  "drivers/virtio/virtio.ko",
  "drivers/virtio/virtio_mmio.ko",
  "drivers/char/virtio_console.ko",
  "fs/netfs/netfs.ko",
  "net/9p/9pnet.ko",
  "net/9p/9pnet_virtio.ko",
  "fs/9p/9p.ko",
  /* nftables: the policy's table is loaded in the container's netns in the guest as on a host */
  "crypto/crc32c_generic.ko",
  "lib/libcrc32c.ko",
  "net/netfilter/nfnetlink.ko",
  "net/netfilter/nf_tables.ko",
  "net/ipv4/netfilter/nf_reject_ipv4.ko",
  "net/ipv6/netfilter/nf_reject_ipv6.ko",
  "net/netfilter/nft_reject.ko",
  "net/netfilter/nft_reject_inet.ko",
  "net/netfilter/nft_log.ko",
  "net/netfilter/nft_limit.ko",
  "net/netfilter/nfnetlink_log.ko",
  "net/ipv4/netfilter/nf_defrag_ipv4.ko",
  "net/ipv6/netfilter/nf_defrag_ipv6.ko",
  "net/netfilter/nf_conntrack.ko",
  "net/netfilter/nft_ct.ko",
  /* the NIC of network.mode filtered (runtime/vm_net.h) */
  "net/core/failover.ko",
  "drivers/net/net_failover.ko",
  "drivers/net/virtio_net.ko",
  NULL,
};

static char *
find_in_path (const char *name)
{
  const char *path = getenv ("PATH");
  cleanup_free char *copy = xstrdup (path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
  char *save = NULL;
  for (char *d = strtok_r (copy, ":", &save); d; d = strtok_r (NULL, ":", &save))
    {
      char *p = xasprintf ("%s/%s", d, name);
      if (d[0] == '/' && access (p, X_OK) == 0)
        return p;
      free (p);
    }
  return NULL;
}

/* a cache entry's kernel is at least VM_MIN_KERNEL (its release: "6.12.95+deb12-amd64") */
static bool
kernel_new_enough (const char *release)
{
  unsigned major = 0, minor = 0;
  if (sscanf (release, "%u.%u", &major, &minor) != 2)
    return false;
  return major > VM_MIN_KERNEL_MAJOR || (major == VM_MIN_KERNEL_MAJOR && minor >= VM_MIN_KERNEL_MINOR);
}

bool
vm_host_probe (struct vm_host *h)
{
  const char *cache = getenv ("AGENTSBX_VM_CACHE");
  cleanup_closedir DIR *d = NULL;
  struct dirent *de;
  char best[NAME_MAX + 1] = "";

  *h = (struct vm_host){ 0 };
  h->qemu = find_in_path ("qemu-system-x86_64");
  if (!cache || !*cache)
    cache = VM_DEFAULT_CACHE;
  d = opendir (cache);
  while (d && (de = readdir (d)) != NULL)
    if (strncmp (de->d_name, "kernel-linux-image-", 19) == 0 && !strstr (de->d_name, ".tmp")
        && kernel_new_enough (de->d_name + 19) && (!best[0] || strverscmp (de->d_name, best) > 0))
      snprintf (best, sizeof best, "%s", de->d_name);
  if (best[0])
    {
      /* kernel-linux-image-6.12.95+deb12-amd64/{boot/vmlinuz-6.12.95+deb12-amd64, lib/modules/6.12.95+deb12-amd64} */
      const char *rel = best + strlen ("kernel-linux-image-");
      char *k = xasprintf ("%s/%s/boot/vmlinuz-%s", cache, best, rel);
      char *m = xasprintf ("%s/%s/lib/modules/%s/kernel", cache, best, rel);
      if (access (k, R_OK) == 0 && access (m, R_OK) == 0)
        {
          h->kernel = k;
          h->moddir = m;
        }
      else
        {
          free (k);
          free (m);
        }
    }
  /* AGENTSBX_VM_ACCEL=tcg|kvm overrides the probe (a host whose KVM passes it and still fails) */
  const char *accel = getenv ("AGENTSBX_VM_ACCEL");
  h->kvm = accel && *accel ? strcmp (accel, "kvm") == 0 : linux_kvm_usable ();
  return h->qemu && h->kernel;
}

void
vm_host_free (struct vm_host *h)
{
  free (h->qemu);
  free (h->kernel);
  free (h->moddir);
  *h = (struct vm_host){ 0 };
}

struct vm_share
{
  char *path; /* host directory, absolute, shared at the same path in the guest */
  bool ro;
};

struct vm_ctx
{
  struct vm_share shares[VM_MAX_SHARES];
  size_t nshares;
  char *manifest; /* the text the guest reads (vm_guest.c) */
  char *dir;      /* <state root>/vm/<id> */
  unsigned nfiles;
  struct vm_jail jail;              /* QEMU's confinement (vm_jail.h) */
  const char *mnt[VM_MAX_SHARES];   /* each share's mount point in QEMU's mount namespace */
  const char *run_mnt, *kernel_mnt; /* the run directory's, the guest kernel's */
  uid_t as_uid;                     /* QEMU's uid/gid for a root-owned bundle (vm_attach), or 0 */
  gid_t as_gid;
};

static void
append (char **s, const char *fmt, const char *a, const char *b)
{
  char *n = xasprintf (fmt, *s ? *s : "", a, b);
  free (*s);
  *s = n;
}

static bool
under (const char *path, const char *dir)
{
  size_t n = strlen (dir);
  return strncmp (path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || (n == 1 && dir[0] == '/'));
}

static int
add_share (struct vm_ctx *c, const char *path, bool ro, asbx_err_t *err)
{
  for (size_t i = 0; i < c->nshares; i++)
    if (under (path, c->shares[i].path) && c->shares[i].ro == ro)
      return 0;
  if (c->nshares == VM_MAX_SHARES)
    return asbx_error (err, EINVAL,
                       "isolation vm: more than %d host directories to share (one virtio-9p device each): not built "
                       "yet",
                       VM_MAX_SHARES);
  if (strchr (path, '\n'))
    return asbx_error (err, EINVAL, "isolation vm: a path with a newline cannot be shared: %s", path);
  c->shares[c->nshares].path = xstrdup (path);
  c->shares[c->nshares].ro = ro;
  char *line = xasprintf ("%sshare s%zu %s %s\n", c->manifest ? c->manifest : "", c->nshares, ro ? "ro" : "rw", path);
  free (c->manifest);
  c->manifest = line;
  c->nshares++;
  return 0;
}

static bool
mount_is_ro (const struct oci_mount *m)
{
  bool ro = false;
  for (size_t i = 0; i < m->options_len; i++)
    if (strcmp (m->options[i], "ro") == 0)
      ro = true;
    else if (strcmp (m->options[i], "rw") == 0)
      ro = false;
  return ro;
}

/* a bind mount's source: a directory is shared; a file is copied into the run's own share
 * (read-only) and bound from there by the guest; what the guest has of its own (/dev, /proc,
 * /sys) is not shared */
static int
plan_bind (struct vm_ctx *c, const char *bundle, const struct oci_mount *m, asbx_err_t *err)
{
  char src[PATH_MAX];
  struct stat st;
  if (!m->source)
    return 0;
  if (m->source[0] == '/')
    snprintf (src, sizeof src, "%s", m->source);
  else
    snprintf (src, sizeof src, "%s/%s", bundle, m->source);
  if (under (src, "/dev") || under (src, "/proc") || under (src, "/sys"))
    return 0;
  if (stat (src, &st) < 0)
    return asbx_error (err, errno, "isolation vm: bind mount source %s", src);
  if (S_ISDIR (st.st_mode))
    return add_share (c, src, mount_is_ro (m), err);
  if (!S_ISREG (st.st_mode))
    return asbx_error (err, EINVAL, "isolation vm: bind mount source %s: only directories and regular files", src);
  char name[32];
  snprintf (name, sizeof name, "f%u", c->nfiles++);
  cleanup_free char *dst = xasprintf ("%s/share/%s", c->dir, name);
  cleanup_free char *data = NULL;
  size_t len = 0;
  cleanup_close int fd = -1;
  if (read_file_at (AT_FDCWD, src, 64u << 20, &data, &len, err) < 0)
    return -1;
  fd = open (dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 || write_all (fd, data, len) < 0)
    return asbx_error (err, errno, "isolation vm: copy %s", src);
  append (&c->manifest, "%sfile %s %s\n", name, src);
  return 0;
}

/* a qemu option value: commas are doubled (qemu-options: "," inside a value is ",,") */
static char *
qopt (const char *s)
{
  size_t n = 0;
  for (const char *p = s; *p; p++)
    n += *p == ',' ? 2 : 1;
  char *o = xmalloc (n + 1), *q = o;
  for (const char *p = s; *p; p++)
    {
      *q++ = *p;
      if (*p == ',')
        *q++ = ',';
    }
  *q = '\0';
  return o;
}

struct argv
{
  char **v;
  size_t n;
};

static void
arg (struct argv *a, char *s) /* takes s */
{
  a->v = xrealloc (a->v, (a->n + 2) * sizeof (char *));
  a->v[a->n++] = s;
  a->v[a->n] = NULL;
}

/* QEMU's mounts (vm_jail.h): the run directory, the kernel, each share */
static int
plan_jail (struct vm_ctx *c, const struct vm_host *h, const char *bundle, asbx_err_t *err)
{
  cleanup_close int bfd = open (bundle, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (bfd < 0)
    return asbx_error (err, errno, "isolation vm: open the bundle %s", bundle);
  /* the run directory QEMU's own first: it is never idmapped (vm_jail_add maps root's dirs) */
  if (vm_jail_init (&c->jail, bfd, bundle, c->as_uid, c->as_gid, err) < 0
      || vm_rundir_chown (c->dir, c->jail.uid, c->jail.gid, err) < 0)
    return -1;
  if (!(c->run_mnt = vm_jail_add (&c->jail, c->dir, "run", false, false, err))
      || !(c->kernel_mnt = vm_jail_add (&c->jail, h->kernel, "vmlinuz", true, true, err)))
    return -1;
  for (size_t i = 0; i < c->nshares; i++)
    {
      char name[16];
      snprintf (name, sizeof name, "s%zu", i);
      if (!(c->mnt[i] = vm_jail_add (&c->jail, c->shares[i].path, name, c->shares[i].ro, false, err)))
        return -1;
    }
  return 0;
}

/* A stop signal (TERM, INT, HUP, QUIT: timeout(1), a CI runner, ^C) that reached a foreground
 * run: its number, set by the handler vm_run_attached installs for the run. */
static volatile sig_atomic_t vm_stop_sig;
static const int vm_stop_sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };

static void
vm_on_stop (int sig)
{
  vm_stop_sig = sig;
}

/* Wait for QEMU; SIGKILL it when the wall clock runs out (deadline_ns 0 = none) or a stop signal
 * came. Returns the wait status, -1 when it was killed for the wall clock, -2 for a stop signal
 * (vm_stop_sig). Polled every 20 ms: a signal between a check and a blocking wait would be missed. */
static int
wait_qemu (pid_t pid, uint64_t deadline_ns)
{
  int st = 0;
  for (;;)
    {
      pid_t r = waitpid (pid, &st, WNOHANG);
      if (r == pid)
        return st;
      if (r < 0 && errno != EINTR)
        return st;
      bool stop = vm_stop_sig != 0;
      if (stop || (deadline_ns && now_ns () >= deadline_ns))
        {
          kill (pid, SIGKILL);
          while (waitpid (pid, &st, 0) < 0 && errno == EINTR)
            ;
          return stop ? -2 : -1;
        }
      nanosleep (&(struct timespec){ .tv_nsec = 20L * 1000 * 1000 }, NULL);
    }
}

static int
build_ctx (struct vm_ctx *c, const char *id, const char *bundle, const struct oci_spec *spec,
           const struct policy_plan *plan, asbx_err_t *err)
{
  char rootfs[PATH_MAX];
  bool ro = spec->root && spec->root->readonly;
  if (asbx_log_debug_enabled ())
    append (&c->manifest, "%sdebug%s%s\n", "", "");
  append (&c->manifest, "%sid %s%s\n", id, "");
  append (&c->manifest, "%sbundle %s%s\n", bundle, "");
  if (!spec->root || !spec->root->path)
    return asbx_error (err, EINVAL, "isolation vm: config.json has no root.path");
  if (spec->root->path[0] == '/')
    snprintf (rootfs, sizeof rootfs, "%s", spec->root->path);
  else
    snprintf (rootfs, sizeof rootfs, "%s/%s", bundle, spec->root->path);
  /* the bundle (config.json and, usually, the rootfs) always read-only: a guest that wrote
   * config.json would plant hooks for the next run of that bundle, which run on the host
   * (outside attack 08: a prestart hook from the guest ran as root in a later container run);
   * the rootfs is a share of its own, writable unless root.readonly, mounted over it in the
   * guest (the manifest keeps this order) */
  if (add_share (c, bundle, true, err) < 0)
    return -1;
  if ((!ro || !under (rootfs, bundle)) && add_share (c, rootfs, ro, err) < 0)
    return -1;
  for (size_t i = 0; i < spec->mounts_len; i++)
    if (spec_mount_is_bind (&spec->mounts[i]) && plan_bind (c, bundle, &spec->mounts[i], err) < 0)
      return -1;
  if (vm_rundir_write (c->dir, "share/policy.json", plan->effective_json, err) < 0
      || vm_rundir_write (c->dir, "share/manifest", c->manifest, err) < 0)
    return -1;
  return 0;
}

/* the guest's RAM (MiB, QEMU's -m) and vCPUs (-smp) for the policy's limits */
static void
guest_size (const struct policy_plan *plan, uint64_t *mem_mib, unsigned *vcpus)
{
  uint64_t mem = plan->memory_bytes ? plan->memory_bytes / (1024ull * 1024) + VM_OVERHEAD_MIB : VM_DEFAULT_MEM_MIB;
  unsigned cpus = plan->cpus > 0 ? (unsigned) ceil (plan->cpus) : 1;
  long online = sysconf (_SC_NPROCESSORS_ONLN);
  if (mem < VM_MIN_MEM_MIB)
    mem = VM_MIN_MEM_MIB;
  if (online > 0 && cpus > (unsigned) online)
    cpus = (unsigned) online;
  *mem_mib = mem;
  *vcpus = cpus;
}

static void
build_argv (struct argv *a, const struct vm_host *h, const struct vm_ctx *c, const struct policy_plan *plan)
{
  uint64_t mem;
  unsigned cpus;
  guest_size (plan, &mem, &cpus);
  cleanup_free char *d = qopt (c->run_mnt);
  arg (a, xstrdup (h->qemu));
  arg (a, xstrdup ("-nodefaults"));
  arg (a, xstrdup ("-no-user-config"));
  arg (a, xstrdup ("-no-reboot"));
  arg (a, xstrdup ("-M"));
  arg (a, xstrdup ("microvm")); /* acpi on: the virtio-mmio devices are in the DSDT (Debian's
                                   virtio_mmio has no virtio_mmio.device= command-line devices) */
  arg (a, xstrdup ("-accel"));
  /* TCG's translation cache bounded (QEMU's default is 1 GiB): it counts against QEMU's cgroup
   * limit (runtime/vm_cgroup.h) */
  arg (a, h->kvm ? xstrdup ("kvm") : xasprintf ("tcg,tb-size=%d", VM_TCG_TB_MIB));
  arg (a, xstrdup ("-cpu"));
  arg (a, xstrdup (h->kvm ? "host" : "max"));
  arg (a, xstrdup ("-smp"));
  arg (a, xasprintf ("%u", cpus));
  arg (a, xstrdup ("-m"));
  arg (a, xasprintf ("%llu", (unsigned long long) mem));
  arg (a, xstrdup ("-display"));
  arg (a, xstrdup ("none"));
  arg (a, xstrdup ("-sandbox"));
  arg (a, xstrdup ("on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
  arg (a, xstrdup ("-kernel"));
  arg (a, xstrdup (c->kernel_mnt));
  arg (a, xstrdup ("-initrd"));
  arg (a, xasprintf ("%s/initrd.cpio", d));
  /* the console through the runner, bounded (runtime/vm_console.h) */
  arg (a, xstrdup ("-add-fd"));
  arg (a, xasprintf ("fd=%d,set=5", VM_JAIL_CONSOLE_FD));
  arg (a, xstrdup ("-chardev"));
  arg (a, xstrdup ("pipe,id=con,path=/dev/fdset/5"));
  arg (a, xstrdup ("-serial"));
  arg (a, xstrdup ("chardev:con"));
  arg (a, xstrdup ("-append"));
  /* microvm has no HPET, PIT or PM timer to calibrate the TSC against; under TCG on a loaded
   * host the kernel's PIT-less calibration fails and the boot stops at "Marking TSC unstable".
   * A stated TSC frequency and lpj skip both calibrations (the guest's clock is QEMU's virtual
   * TSC; its absolute rate does not matter to a container's run) */
  arg (a, xstrdup ("console=ttyS0 quiet loglevel=3 panic=-1 tsc_early_khz=2000000 tsc=reliable no_timer_check "
                   "lpj=2000000"));
  arg (a, xstrdup ("-device"));
  arg (a, xstrdup ("virtio-serial-device,max_ports=6")); /* port 0 is reserved (a console's): 5 ports */
  /* stdout, stderr: QEMU's own, one port each. Not QEMU's `stdio` chardev: at the end of its
   * input it closes, and the guest's writes to a port whose host side is closed block. stdin is
   * not forwarded yet (QEMU 7.2's file chardev has no input path): the process reads /dev/null */
  /* our stdout/stderr as fds (vm_jail_enter puts them there): QEMU's uid may not open a
   * root-owned pipe again through /dev/stdout */
  arg (a, xstrdup ("-add-fd"));
  arg (a, xasprintf ("fd=%d,set=1", VM_JAIL_STDOUT_FD));
  arg (a, xstrdup ("-add-fd"));
  arg (a, xasprintf ("fd=%d,set=2", VM_JAIL_STDERR_FD));
  arg (a, xstrdup ("-chardev"));
  arg (a, xstrdup ("file,id=out,path=/dev/fdset/1,append=on"));
  arg (a, xstrdup ("-device"));
  arg (a, xstrdup ("virtserialport,chardev=out,name=asbx.stdout"));
  arg (a, xstrdup ("-chardev"));
  arg (a, xstrdup ("file,id=er,path=/dev/fdset/2,append=on"));
  arg (a, xstrdup ("-device"));
  arg (a, xstrdup ("virtserialport,chardev=er,name=asbx.stderr"));
  arg (a, xstrdup ("-chardev"));
  arg (a, xasprintf ("file,id=st,path=%s/status", d));
  arg (a, xstrdup ("-device"));
  arg (a, xstrdup ("virtserialport,chardev=st,name=asbx.status"));
  /* the run's own share: manifest, policy, copied files (tag asbx, read-only) */
  arg (a, xstrdup ("-fsdev"));
  arg (a, xasprintf ("local,id=asbx,path=%s/share,security_model=none,readonly=on", d));
  arg (a, xstrdup ("-device"));
  arg (a, xstrdup ("virtio-9p-device,fsdev=asbx,mount_tag=asbx"));
  for (size_t i = 0; i < c->nshares; i++)
    {
      cleanup_free char *p = qopt (c->mnt[i]);
      /* security_model=none: the guest's chmod and create modes are applied to the host's files
       * with QEMU's credentials (the bundle owner's, vm_jail.h); set-ID bits are refused by
       * QEMU's seccomp filter (linux/setid_filter.h), chown fails (no CAP_CHOWN), device nodes
       * cannot be made (no CAP_MKNOD) */
      arg (a, xstrdup ("-fsdev"));
      arg (a, xasprintf ("local,id=s%zu,path=%s,security_model=none%s", i, p, c->shares[i].ro ? ",readonly=on" : ""));
      arg (a, xstrdup ("-device"));
      arg (a, xasprintf ("virtio-9p-device,fsdev=s%zu,mount_tag=s%zu", i, i));
    }
}

int
vm_run (const char *state_root, const char *id, const char *bundle, const struct oci_spec *spec,
        const struct policy_plan *plan, int *status, asbx_err_t *err)
{
  return vm_run_attached (state_root, id, bundle, spec, plan, NULL, status, err);
}

/* QEMU's line in the run record (runtime/vm_runrec.h) with its cgroup's */
static void
vm_runrec_qemu_cg (const char *state_root, const char *id, pid_t pid, const struct vm_cgroup *cg)
{
  cleanup_free char *rec = vm_cgroup_record (cg);
  vm_runrec_qemu (state_root, id, pid, rec);
}

static int vm_run_inner (const char *state_root, const char *id, const char *bundle, const struct oci_spec *spec,
                         const struct policy_plan *plan, struct vm_attach *att, int *status, asbx_err_t *err);

/* A foreground run (no supervisor) catches the stop signals for its life: their default action
 * killed `run`/`sandbox` at once and left <root>/<id>, <root>/vm/<id> and the sandbox's bundle
 * behind (a fixed --id then refused to start again). Now QEMU is killed, everything is removed
 * as at a normal end, and the status is 128 + the signal. The handlers are the caller's again
 * afterwards (children reset them at execve; the monitor blocks every signal itself). */
int
vm_run_attached (const char *state_root, const char *id, const char *bundle, const struct oci_spec *spec,
                 const struct policy_plan *plan, struct vm_attach *att, int *status, asbx_err_t *err)
{
  if (att)
    return vm_run_inner (state_root, id, bundle, spec, plan, att, status, err);
  struct sigaction sa = { .sa_handler = vm_on_stop }, old[ASBX_ARRAY_SIZE (vm_stop_sigs)];
  sigemptyset (&sa.sa_mask);
  vm_stop_sig = 0;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (vm_stop_sigs); i++)
    sigaction (vm_stop_sigs[i], &sa, &old[i]);
  int r = vm_run_inner (state_root, id, bundle, spec, plan, att, status, err);
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (vm_stop_sigs); i++)
    sigaction (vm_stop_sigs[i], &old[i], NULL);
  return r;
}

static int
vm_run_inner (const char *state_root, const char *id, const char *bundle, const struct oci_spec *spec,
              const struct policy_plan *plan, struct vm_attach *att, int *status, asbx_err_t *err)
{
  struct vm_host h;
  struct vm_ctx c = { 0 };
  struct argv a = { 0 };
  struct vm_net net = {
    .netns_fd = -1, .host_fd = -1, .rootfd = -1, .dirfd = -1, .ready_rd = -1, .ready_wr = -1, .go_rd = -1, .go_wr = -1
  };
  int ret = -1;
  struct vm_cgroup cg = { .gate_rd = -1, .gate_wr = -1 };
  struct vm_console con = { .rd = -1, .log = -1 };
  int con_qemu = -1; /* QEMU's end of the console (runtime/vm_console.h) until the fork */

  if (plan->ws_mode == POLICY_WS_REVIEW)
    return asbx_error (err, EINVAL,
                       "isolation vm: filesystem.workspace.mode \"review\" is not built yet in the vm tier");
  if (spec->process && spec->process->terminal)
    return asbx_error (err, EINVAL, "isolation vm: process.terminal is not built yet in the vm tier");
  if (!vm_host_probe (&h))
    {
      asbx_error (err, ENOENT, "isolation vm: %s",
                  !h.qemu ? "qemu-system-x86_64 is not in PATH (apt-get install qemu-system-x86)"
                          : "no guest kernel >= 6.8 in the cache (contrib/vm/fetch-kernel.sh " VM_DEFAULT_CACHE ")");
      vm_host_free (&h);
      return -1;
    }
  cleanup_free char *vmroot = xasprintf ("%s/vm", state_root);
  c.dir = xasprintf ("%s/%s", vmroot, id);
  cleanup_free char *share = xasprintf ("%s/share", c.dir);
  /* the state root as create makes it (0700), if this is its first container */
  if ((mkdir (state_root, 0700) < 0 && errno != EEXIST) || (mkdir (vmroot, 0700) < 0 && errno != EEXIST))
    {
      asbx_error (err, errno, "isolation vm: make %s", vmroot);
      free (c.dir);
      vm_host_free (&h);
      return -1;
    }
  /* the id's run directory is ours (a stale run's, whose runner is gone, reaped first) */
  if (vm_runrec_claim (state_root, id, err) < 0)
    {
      free (c.dir);
      vm_host_free (&h);
      return -1;
    }
  if (mkdir (c.dir, 0700) < 0 || mkdir (share, 0700) < 0)
    {
      asbx_error (err, errno, "isolation vm: make %s", c.dir);
      if (errno != EEXIST)
        rmdir (c.dir);
      vm_runrec_release (state_root, id);
      free (c.dir);
      vm_host_free (&h);
      return -1;
    }
  if (vm_console_open (&con, c.dir, &con_qemu, err) < 0)
    goto out;
  c.jail = (struct vm_jail){ .alive_rd = -1, .alive_wr = -1, .idmap_userns = -1 };
  if (att)
    {
      c.manifest = xstrdup ("gate\n"); /* the guest waits for "start" on asbx.ctl (vm_guest.c) */
      c.as_uid = att->as_uid;
      c.as_gid = att->as_gid;
    }
  /* network.mode filtered: the host side of the guest's NIC (runtime/vm_net.h) */
  if (vm_net_prepare (&net, state_root, id, spec, plan, att ? &att->net : NULL, err) < 0)
    goto out;
  if (net.on)
    append (&c.manifest, "%snet%s%s\n", "", "");
  if (build_ctx (&c, id, bundle, spec, plan, err) < 0)
    goto out;
  {
    cleanup_free char *ip = xasprintf ("%s/initrd.cpio", c.dir);
    cleanup_close int ifd = open (ip, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (ifd < 0)
      {
        asbx_error (err, errno, "isolation vm: create %s", ip);
        goto out;
      }
    if (vm_cpio_write (ifd, h.moddir, vm_modules, err) < 0)
      goto out;
  }
  if (plan_jail (&c, &h, bundle, err) < 0 || !c.run_mnt) /* run_mnt: set on success (for the analyzer) */
    goto out;
  build_argv (&a, &h, &c, plan);
  {
    uint64_t mem;
    unsigned vcpus;
    guest_size (plan, &mem, &vcpus);
    if (vm_cgroup_prepare (&cg, spec, id, mem, vcpus, plan->cpus, err) < 0)
      goto out;
  }
  for (const char *const *na = vm_net_qemu_args (&net); *na; na++)
    arg (&a, xstrdup (*na));
  if (att)
    {
      /* the control channel: a connected socket QEMU is given as VM_JAIL_CTL_FD (the fourth
       * port of the serial device), read and written as a `pipe` chardev through its fdset (no
       * .in/.out beside it: QEMU opens the path itself O_RDWR). Not a `socket` chardev: one
       * connected before the port exists can leave the port closed, the guest's writes blocked */
      arg (&a, xstrdup ("-add-fd"));
      arg (&a, xasprintf ("fd=%d,set=3", VM_JAIL_CTL_FD));
      arg (&a, xstrdup ("-chardev"));
      arg (&a, xstrdup ("pipe,id=ctl,path=/dev/fdset/3"));
      arg (&a, xstrdup ("-device"));
      arg (&a, xstrdup ("virtserialport,chardev=ctl,name=asbx.ctl"));
      /* exec sessions (runtime/vm_exec.h): a fifth port, the same way */
      arg (&a, xstrdup ("-add-fd"));
      arg (&a, xasprintf ("fd=%d,set=4", VM_JAIL_EXEC_FD));
      arg (&a, xstrdup ("-chardev"));
      arg (&a, xstrdup ("pipe,id=exec,path=/dev/fdset/4"));
      arg (&a, xstrdup ("-device"));
      arg (&a, xstrdup ("virtserialport,chardev=exec,name=" VM_EXEC_PORT));
    }
  uint64_t deadline = plan->wall_clock_seconds ? now_ns () + plan->wall_clock_seconds * 1000000000ull : 0;
  /* fork(2) into QEMU's own namespaces (vm_jail.h); SIGCHLD: waited for as a child */
  pid_t pid = (pid_t) syscall (SYS_clone,
                               CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | vm_net_clone_flags (&net) | SIGCHLD, NULL,
                               NULL, NULL, 0UL);
  if (pid < 0)
    {
      asbx_error (err, errno, "isolation vm: fork");
      goto out;
    }
  if (pid == 0)
    {
      /* QEMU does not outlive us (vm_jail_enter sets the parent-death signal): a killed `run`
       * takes its VM with it (signals are not forwarded to the guest yet) */
      asbx_err_t e = NULL;
      /* nothing before QEMU's cgroup holds it (runtime/vm_cgroup.h) */
      if (vm_cgroup_child_wait (&cg) < 0)
        _exit (127);
      if (vm_net_child (&net, &e) < 0 || vm_jail_enter (&c.jail, &e) < 0 || dup2 (con_qemu, VM_JAIL_CONSOLE_FD) < 0
          || (att && (dup2 (att->ctl_fd, VM_JAIL_CTL_FD) < 0 || dup2 (att->exec_fd, VM_JAIL_EXEC_FD) < 0)))
        {
          fprintf (stderr, "agentsbx: %s\n", e ? e->msg : "setup failed");
          _exit (127);
        }
      execv (a.v[0], a.v);
      fprintf (stderr, "agentsbx: isolation vm: exec %s: %s\n", a.v[0], strerror (errno));
      _exit (127);
    }
  close (c.jail.alive_rd);
  c.jail.alive_rd = -1;
  close (con_qemu);
  con_qemu = -1;
  if (att)
    att->cgroup = NULL;
  bool attached = vm_cgroup_attach (&cg, pid, err) == 0 && (!att || (att->cgroup = vm_cgroup_record (&cg)))
                  && vm_console_start (&con, err) == 0;
  if (attached)
    vm_runrec_qemu_cg (state_root, id, pid, &cg);
  if (!attached || vm_net_start (&net, pid, plan, err) < 0)
    {
      kill (pid, SIGKILL);
      while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
      goto out;
    }
  int st = att ? att->wait (att, pid, deadline) : wait_qemu (pid, deadline);
  vm_console_finish (&con); /* QEMU is gone: console.log is whole (its tail is read below) */
  if (st == -2)
    {
      *status = 128 + vm_stop_sig; /* as for a container: the signal that asked us to stop */
      ret = 0;
      goto out;
    }
  /* the host's OOM killer ended QEMU at its cgroup's limit (runtime/vm_cgroup.h): the run's
   * error, whatever the monitor's clock says */
  bool oom = st != -1 && !WIFEXITED (st) && vm_cgroup_oom_killed (&cg);
  /* the monitor enforces the wall clock too (its timer started first): its kill is the same 124 */
  if (!oom && (st == -1 || (vm_net_finish (&net) && !WIFEXITED (st))))
    {
      *status = 124; /* the wall clock, as for a container (docs/policy.md limits) */
      ret = 0;
      goto out;
    }
  if (oom)
    {
      cleanup_free char *why = cg.lowered ? xstrdup ("as AGENTSBX_VM_QEMU_LIMIT_MIB set it")
                                          : xasprintf ("the guest's %" PRIu64 " MiB of RAM and %d MiB for QEMU itself",
                                                       cg.guest_mib, VM_CGROUP_OVERHEAD_MIB);
      vm_rundir_console_tail (c.dir);
      asbx_error (err, ENOMEM,
                  "isolation vm: QEMU was killed by the host's OOM killer: it reached the memory limit of its "
                  "cgroup %s, %" PRIu64 " MiB (%s; docs/security.md \"Isolation tiers\")",
                  cg.path, cg.limit_mib, why);
      goto out;
    }
  if (!WIFEXITED (st) || WEXITSTATUS (st) != 0)
    {
      vm_rundir_console_tail (c.dir);
      asbx_error (err, EIO, "isolation vm: qemu ended with %s %d", WIFEXITED (st) ? "status" : "signal",
                  WIFEXITED (st) ? WEXITSTATUS (st) : WTERMSIG (st));
      goto out;
    }
  ret = vm_rundir_status (c.dir, status, err);
out:
  vm_console_finish (&con);
  if (con_qemu >= 0)
    close (con_qemu);
  vm_net_free (&net);
  vm_jail_free (&c.jail);
  vm_cgroup_free (&cg); /* QEMU is reaped: its cgroup is empty */
  if (!getenv ("AGENTSBX_VM_KEEP"))
    vm_rundir_remove (c.dir);
  vm_runrec_release (state_root, id);
  for (size_t i = 0; i < c.nshares; i++)
    free (c.shares[i].path);
  free (c.manifest);
  free (c.dir);
  for (size_t i = 0; i < a.n; i++)
    free (a.v[i]);
  free (a.v);
  vm_host_free (&h);
  return ret;
}
