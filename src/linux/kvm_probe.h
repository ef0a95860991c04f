/* kvm_probe.h - whether /dev/kvm can run a guest here (the vm tier's accelerator, runtime/vm.h). */
#ifndef ASBX_LINUX_KVM_PROBE_H
#define ASBX_LINUX_KVM_PROBE_H

#include <stdbool.h>

/* Run a one-instruction guest (hlt, in real mode) under /dev/kvm in a throwaway child with a
 * 2 s deadline: true when it exits with KVM_EXIT_HLT. A /dev/kvm that opens but cannot run a
 * guest (nested virtualisation without the features a vCPU needs) is false, so the caller
 * falls back to TCG instead of a QEMU that hangs or aborts; so is one whose vCPU refuses the
 * feature MSR IA32_ARCH_CAPABILITIES the host itself reports (QEMU aborts on it). Source:
 * Documentation/virt/kvm/api.rst. */
bool linux_kvm_usable (void);

#endif
