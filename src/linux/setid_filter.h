/* setid_filter.h - a seccomp filter that keeps set-user-ID and set-group-ID mode bits off every
 * file the calling process creates or chmods (the vm tier's QEMU, runtime/vm_jail.c).
 *
 * Why: QEMU's virtio-9p "none"/"passthrough" backends apply the guest's chmod(2) and create(2)
 * modes to the host's files. A compromised guest asking for 04755 on a file it wrote in a shared
 * directory would leave a set-ID executable on the host, which a later host exec (outside QEMU's
 * mount namespace, where the nosuid mount does not apply) would honour. The filter decides on the
 * mode register only (never on memory), so there is no TOCTOU. Source: seccomp(2), chmod(2),
 * open(2), mknod(2), inode(7). */
#ifndef ASBX_LINUX_SETID_FILTER_H
#define ASBX_LINUX_SETID_FILTER_H

#include "core/error.h"

/* Load the filter into the calling thread (and its future threads, SECCOMP_FILTER_FLAG_TSYNC is
 * not needed: call it before execve). The caller must have set no_new_privs (PR_SET_NO_NEW_PRIVS)
 * or hold CAP_SYS_ADMIN. Refused with EPERM: chmod, fchmod, fchmodat, fchmodat2, open, openat,
 * creat, mkdir, mkdirat, mknod, mknodat with S_ISUID or S_ISGID in the mode argument; unshare,
 * setns (no namespace of QEMU's own making: a user namespace would hand it a capability set).
 * Refused with ENOSYS (so callers fall back to calls this filter can read): openat2 (its mode
 * is in memory), io_uring_setup (io_uring's operations bypass seccomp). Everything else is
 * allowed (the caller's own filter, QEMU's -sandbox, stacks on top).
 * Returns 0, or -1 with *err (the libseccomp error as errno). */
int linux_load_setid_filter (asbx_err_t *err);

#endif
