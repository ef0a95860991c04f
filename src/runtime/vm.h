/* vm.h - the microVM isolation tier (issue 22; docs/security.md "Isolation tiers").
 *
 * Under `isolation: "vm"` a foreground `run` (and `sandbox`) boots QEMU's `microvm` machine with
 * Debian's guest kernel (bookworm-backports' 6.12, fetched by contrib/vm/fetch-kernel.sh into
 * /var/cache/agentsbx-vm) and an initramfs whose /init is this binary (vm_cpio.c). The bundle
 * and every host directory a bind mount names are shared with virtio-9p at the same paths; stdio
 * and the exit status travel over virtio-serial ports. Inside, agentsbx (vm_guest.c) runs the
 * same config.json under the same effective policy, so the VM is a boundary added around the
 * container, not a replacement.
 *
 * create/start/kill/state/delete as separate verbs: runtime/vm_supervisor.h (a host-side supervisor
 * process drives vm_run_attached). What is not built (refused with an error, never skipped): exec,
 * pause, ps, a terminal, network.mode open (filtered: runtime/vm_net.h). */
#ifndef ASBX_RUNTIME_VM_H
#define ASBX_RUNTIME_VM_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "policy/plan.h"
#include "runtime/vm_net.h"

#define VM_DEFAULT_CACHE "/var/cache/agentsbx-vm"

/* What this host offers for the vm tier (`features`). */
struct vm_host
{
  char *qemu;   /* absolute path of qemu-system-x86_64, or NULL */
  char *kernel; /* the guest kernel (vmlinuz) in the cache, or NULL */
  char *moddir; /* its lib/modules/<release>/kernel directory */
  bool kvm;     /* /dev/kvm runs a guest (linux/kvm_probe.h): -accel kvm, else TCG */
};

/* Look for qemu-system-x86_64 in PATH and the newest cached kernel under $AGENTSBX_VM_CACHE or
 * /var/cache/agentsbx-vm (kernel-linux-image-*, the layout contrib/vm/fetch-kernel.sh writes) of
 * Linux 6.8 or newer (older ones, e.g. tests/vm's 6.1, cannot enforce the policy's filesystem
 * layers in the guest: passed over), and whether KVM can run a guest ($AGENTSBX_VM_ACCEL=kvm|tcg decides instead when
 * set). Returns true when both are there. Fills h (vm_host_free); never fails otherwise. */
bool vm_host_probe (struct vm_host *h);
void vm_host_free (struct vm_host *h);

/* Boot the VM for container `id` of `bundle` (absolute) whose model is `spec`, run its process
 * under `plan` inside, wait, and store the process's status (or 128+N for a signal, 124 when the
 * policy's wall clock ran out: the host kills QEMU) in *status. Everything made for the run
 * (<state root>/vm/<id>/) is removed before return. Errors: EINVAL for what this tier does not
 * build yet (an open network, a terminal, more shares than microvm has transports),
 * ENOENT without qemu or kernel, the errno of a failed step otherwise; 0 / -1 with *err. */
int vm_run (const char *state_root, const char *id, const char *bundle, const struct oci_spec *spec,
            const struct policy_plan *plan, int *status, asbx_err_t *err);

/* The detached lifecycle's part in a run (runtime/vm_supervisor.h); NULL for a foreground run. */
struct vm_attach
{
  int ctl_fd;  /* QEMU's end of the control channel (a stream socket): the virtio-serial port asbx.ctl;
                  the guest then holds the container at `created` until told "start" on it */
  int exec_fd; /* QEMU's end of the exec sessions' channel (virtio-serial asbx.exec; runtime/vm_exec.h) */
  /* called instead of the foreground wait once QEMU runs (pid), with the wall clock's deadline
   * (CLOCK_MONOTONIC ns, 0 = none): returns QEMU's wait status, or -1 when it was killed for the
   * wall clock */
  int (*wait) (struct vm_attach *a, pid_t qemu, uint64_t deadline_ns);
  void *arg;    /* the caller's */
  char *cgroup; /* set by vm_run_attached before `wait`: QEMU's cgroup as "MASK PATH"
                   (vm_cgroup_record, runtime/vm_cgroup.h; heap, the caller's), or NULL */
  uid_t as_uid; /* QEMU's uid/gid when the bundle is root's (`--vm-user`; vm_jail.h), 0 = refused */
  gid_t as_gid;
  struct vm_net_given net; /* the network namespace the caller made or joined (fds borrowed; -1: none) */
};

/* vm_run with the detached lifecycle's control channel and wait (a NULL `att` is vm_run). */
int vm_run_attached (const char *state_root, const char *id, const char *bundle, const struct oci_spec *spec,
                     const struct policy_plan *plan, struct vm_attach *att, int *status, asbx_err_t *err);

/* Remove <state_root>/vm/<id> (a run whose process was killed leaves it), through fds and
 * without following a symlink (QEMU's uid owned it), and its record (runtime/vm_runrec.h). Best
 * effort: a failure is a warning. */
void vm_run_dir_remove (const char *state_root, const char *id);

/* The guest side: /init of the initramfs (PID 1 in the VM). Never returns: powers the VM off. */
_Noreturn void vm_guest_main (void);

/* Write the initramfs (cpio "newc", uncompressed) to fd: /init is /proc/self/exe, the shared
 * objects this process has loaded at their paths (and the ELF interpreter's name), the kernel
 * modules `mods` (NULL-terminated, ".ko" paths under moddir, in load order) under /modules with
 * /modules/order, each as the package ships it (.ko or .ko.xz/.zst/.gz: the guest kernel
 * decompresses), skipping one the kernel has built in (modules.builtin beside moddir).
 * 0 / -1 with *err: ENOENT naming a module that is neither shipped nor built in. */
int vm_cpio_write (int fd, const char *moddir, const char *const *mods, asbx_err_t *err);

#endif
