/* kvm_probe.c - the /dev/kvm probe (kvm_probe.h). */
#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "linux/kvm_probe.h"

static int
kvm_hlt_child (void)
{
  int kvm = open ("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (kvm < 0 || ioctl (kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
    return 1;
  int vm = ioctl (kvm, KVM_CREATE_VM, 0);
  if (vm < 0)
    return 1;
  uint8_t *mem = mmap (NULL, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    return 1;
  mem[0] = 0xf4; /* hlt */
  struct kvm_userspace_memory_region reg = {
    .slot = 0, .guest_phys_addr = 0x1000, .memory_size = 0x1000, .userspace_addr = (uintptr_t) mem
  };
  if (ioctl (vm, KVM_SET_USER_MEMORY_REGION, &reg) < 0)
    return 1;
  int vcpu = ioctl (vm, KVM_CREATE_VCPU, 0);
  int sz = ioctl (kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
  if (vcpu < 0 || sz <= 0)
    return 1;
  /* the vCPU takes the feature MSR IA32_ARCH_CAPABILITIES (0x10a) the host reports: QEMU sets it
   * for every CPU model, and a nested KVM that refuses it aborts QEMU (seen on these CI hosts) */
  struct
  {
    struct kvm_msrs h;
    struct kvm_msr_entry e;
  } msr = { .h = { .nmsrs = 1 }, .e = { .index = 0x10a } };
  if (ioctl (kvm, KVM_GET_MSRS, &msr) == 1 && ioctl (vcpu, KVM_SET_MSRS, &msr) != 1)
    return 1;
  struct kvm_run *run = mmap (NULL, (size_t) sz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
  struct kvm_sregs sregs;
  if (run == MAP_FAILED || ioctl (vcpu, KVM_GET_SREGS, &sregs) < 0)
    return 1;
  sregs.cs.base = 0;
  sregs.cs.selector = 0;
  if (ioctl (vcpu, KVM_SET_SREGS, &sregs) < 0)
    return 1;
  struct kvm_regs regs = { .rip = 0x1000, .rflags = 0x2 };
  if (ioctl (vcpu, KVM_SET_REGS, &regs) < 0 || ioctl (vcpu, KVM_RUN, 0) < 0)
    return 1;
  return run->exit_reason == KVM_EXIT_HLT ? 0 : 1;
}

bool
linux_kvm_usable (void)
{
  int st = 0;
  if (access ("/dev/kvm", R_OK | W_OK) < 0)
    return false;
  pid_t pid = fork ();
  if (pid < 0)
    return false;
  if (pid == 0)
    {
      alarm (2); /* a vCPU that never exits: SIGALRM ends the child, the answer is no */
      _exit (kvm_hlt_child ());
    }
  while (waitpid (pid, &st, 0) < 0)
    ;
  return WIFEXITED (st) && WEXITSTATUS (st) == 0;
}
