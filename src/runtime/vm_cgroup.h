/* vm_cgroup.h - the host cgroup QEMU runs in for the VM's life (docs/security.md "Isolation
 * tiers"; outside attack 12: a guest root grew QEMU's heap without bound through libslirp's
 * queue of out-of-order TCP segments, 330 MB to 1.16 GB RSS in 200 s with -m 256).
 *
 * The guest's RAM is bounded by -m, QEMU's own memory was not: the cgroup's memory limit is the
 * guest's -m plus VM_CGROUP_OVERHEAD_MIB for QEMU itself (its TCG translation cache, capped at
 * VM_TCG_TB_MIB by -accel tcg,tb-size, and the rest measured under TCG: below), swap limited to
 * nothing beyond it (v1 memory.memsw.limit_in_bytes = the limit, v2 memory.swap.max 0, where
 * the controller has the file), pids.max VM_CGROUP_PIDS_BASE + vCPUs (QEMU's threads: its
 * thread pool of up to 64 workers, a thread per vCPU, RCU and I/O threads), and the policy's
 * cpus as a CFS quota. The cgroup is linux.cgroupsPath (resolved as for a container:
 * linux/cgroup.h) or, without one, the default parent's vm-<id> ("/agentsbx/vm-<id>").
 *
 * Ordering: the child made for QEMU waits on a gate (vm_cgroup_child_wait) before anything of
 * the jail; the parent moves it in and writes the limits (vm_cgroup_attach), then opens the
 * gate: QEMU never runs, and never execs, outside its limits. Any failure is the run's error
 * (fail closed). An OOM kill of QEMU is reported as such (vm_cgroup_oom_killed). */
#ifndef ASBX_RUNTIME_VM_CGROUP_H
#define ASBX_RUNTIME_VM_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"
#include "linux/cgroup_systemd.h"

/* The TCG translation cache's size (MiB; QEMU 7.2's default is 1 GiB, filled as the guest runs
 * new code: a boot of the tier's guest filled 66 MiB of it). */
#define VM_TCG_TB_MIB 128
/* QEMU's own memory beyond the guest's RAM: measured under TCG for a normal run (boot, 20 MiB
 * written and read through 9p, exit; /proc/<qemu>/smaps): 290 MB RSS, of which 144 MB guest
 * RAM touched, 66 MB translation cache, 80 MB the rest (heap, libraries, the initramfs' pages,
 * 9p buffers). The overhead is the cache's cap, that rest, and 48 MiB of margin. */
#define VM_CGROUP_OVERHEAD_MIB (VM_TCG_TB_MIB + 128)
#define VM_CGROUP_PIDS_BASE 128

struct vm_cgroup
{
  char *path; /* the resolved cgroup path (linux/cgroup.h), NULL before vm_cgroup_prepare */
  struct cgroup_systemd_unit unit;
  unsigned long mask;    /* what cgroup_enter made (removed by vm_cgroup_free) */
  bool entered, lowered; /* lowered: by $AGENTSBX_VM_QEMU_LIMIT_MIB */
  uint64_t guest_mib, limit_mib;
  unsigned vcpus;
  double cpus;          /* the policy's limit (fraction of CPUs), 0 = none */
  int gate_rd, gate_wr; /* the child reads one byte before the jail (-1 when closed) */
};

/* Resolve the cgroup for container `id` (`spec`'s linux.cgroupsPath, or the default above),
 * compute the limits for a guest of `guest_mib` MiB and `vcpus` vCPUs under the policy's `cpus`,
 * and make the gate. $AGENTSBX_VM_QEMU_LIMIT_MIB lowers the memory limit (tests, a tighter
 * host); a value above the computed limit is refused. Needs root (the cgroup is the host's):
 * EPERM otherwise. 0 / -1 with *err; vm_cgroup_free in both cases. */
int vm_cgroup_prepare (struct vm_cgroup *cg, const struct oci_spec *spec, const char *id, uint64_t guest_mib,
                       unsigned vcpus, double cpus, asbx_err_t *err);

/* In the child made for QEMU, first: wait until the parent has placed it in the cgroup.
 * 0 to go on, -1 when the parent failed or is gone (the child then _exits). */
int vm_cgroup_child_wait (struct vm_cgroup *cg);

/* In the parent: create the cgroup, move `pid` (waiting at the gate) into it, write the limits,
 * then open the gate. 0 / -1 with *err naming the cgroup and the file (the caller kills pid). */
int vm_cgroup_attach (struct vm_cgroup *cg, pid_t pid, asbx_err_t *err);

/* true when the kernel's OOM killer killed a process of the cgroup (QEMU). */
bool vm_cgroup_oom_killed (const struct vm_cgroup *cg);

/* "MASK PATH" for delete's record (vm_supervisor.h), heap; NULL when not entered. */
char *vm_cgroup_record (const struct vm_cgroup *cg);

/* Remove the cgroup of a record written by vm_cgroup_record (QEMU ended). Best effort. */
void vm_cgroup_remove_record (const char *rec);

/* Close the gate, remove the cgroup when entered (once QEMU is reaped), free. Idempotent. */
void vm_cgroup_free (struct vm_cgroup *cg);

#endif
