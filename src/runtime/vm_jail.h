/* vm_jail.h - where the vm tier's QEMU runs on the host (docs/security.md "Isolation tiers").
 *
 * The guest is the attacker: a guest kernel it has compromised sends QEMU arbitrary 9p requests.
 * QEMU therefore runs with no power over the host beyond the shares' owner's own:
 *  - as the bundle's owner (uid, and gid, or 65534 for group root), never root: the host uid 0
 *    is dropped first (which clears every capability), then, unprivileged, QEMU enters a user
 *    namespace of its own mapping only that uid/gid to 0 (so the guest's root owns the owner's
 *    files, and files the guest makes are the owner's on the host); every capability set is then
 *    emptied (SECBIT_NOROOT locked: its execve as uid 0 there grants none), no_new_privs is set.
 *    The other namespaces are made by host root, so QEMU's user namespace has no power over them;
 *  - in its own mount, pid, ipc and network namespaces (under network.mode filtered the
 *    container's, joined or made by root before the user namespace: runtime/vm_net.h). Its root
 *    (pivot_root) is a read-only tmpfs with /usr, the host's /lib... links, ld.so.cache, a few
 *    device nodes, its own /proc and VM_JAIL_DIR: the share directories, the run directory and
 *    the guest kernel, attached there (nosuid, nodev; read-only where the share is) from detached
 *    clones of the O_PATH fds opened when the shares were checked; QEMU's path= names those
 *    mounts, so no path is re-resolved between the check and QEMU; no other host file is there;
 *  - under a seccomp filter (linux/setid_filter.h) that refuses S_ISUID/S_ISGID in any mode it
 *    sets, under QEMU's own -sandbox.
 * A bundle owned by root (an engine's: containerd's, CRI-O's) is refused unless the admin named
 * the unprivileged uid/gid QEMU runs as (`--vm-user`, runtime/vm_supervisor.h); every
 * root-owned share is then attached idmapped (MOUNT_ATTR_IDMAP: the host's uid/gid 0 on disk
 * appears as that uid/gid, so QEMU's root in its user namespace owns them, and what it creates
 * there is root's on the host, as a container's root's files are; other owners' files appear as
 * the overflow id); an overlayfs share (which cannot be idmapped) is rebuilt over idmapped clones
 * of its layers (vm_ovl.h), any other filesystem without idmapped mounts is attached read-only.
 * QEMU still never runs as root, has no capability and no set-ID mode. The first directory
 * added is the run directory (a rebuilt overlay's upper layer goes there). */
#ifndef ASBX_RUNTIME_VM_JAIL_H
#define ASBX_RUNTIME_VM_JAIL_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "runtime/vm_ovl.h"

#define VM_JAIL_MAX 18
#define VM_JAIL_DIR "/run/agentsbx-vm"
/* QEMU's stdout and stderr fds (-add-fd ...,set=1 / set=2; its chardevs open /dev/fdset/N) */
#define VM_JAIL_STDOUT_FD 3
#define VM_JAIL_STDERR_FD 4
/* the detached lifecycle's control socket (-chardev socket,fd=5; runtime/vm_supervisor.h) */
#define VM_JAIL_CTL_FD 5
/* ... and its exec sessions' socket (virtio-serial asbx.exec; runtime/vm_exec.h) */
#define VM_JAIL_EXEC_FD 6
/* the serial console's socket (runtime/vm_console.h) */
#define VM_JAIL_CONSOLE_FD 7

struct vm_jail_bind
{
  int fd;      /* open_tree(OPEN_TREE_CLONE) of the directory (or the kernel file) */
  char *where; /* its mount point under VM_JAIL_DIR */
  bool ro, file;
  struct vm_ovl ovl; /* an engine's overlayfs rootfs: rebuilt over idmapped layers (fd -1; vm_ovl.h) */
};

struct vm_jail
{
  uid_t uid;
  gid_t gid;
  struct vm_jail_bind binds[VM_JAIL_MAX];
  size_t n;
  int alive_rd, alive_wr; /* a pipe: the child sees the parent die (PR_SET_PDEATHSIG's race) */
  int idmap_userns;       /* a root-owned bundle: the user namespace mapping 0 to uid/gid, or -1 */
};

/* Start a jail for QEMU: the uid/gid is the owner of the directory `owner_fd` (the bundle). A
 * root-owned bundle takes as_uid/as_gid instead (0 = none: refused, EPERM: QEMU does not run as
 * root) and idmapped root-owned shares (above). 0 / -1 with *err. */
int vm_jail_init (struct vm_jail *j, int owner_fd, const char *bundle, uid_t as_uid, gid_t as_gid, asbx_err_t *err);

/* Open `path` (absolute; a directory, or a regular file when `file`) as O_PATH beneath its
 * parent, the last component no symlink (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
 * RESOLVE_NO_MAGICLINKS), and add it as VM_JAIL_DIR/`name`. The fd is what will be mounted
 * (idmapped when j has idmap_userns and the directory is root's on disk: ENOTSUP-like EINVAL
 * from a filesystem without idmapped mounts).
 * Returns the mount point (owned by j) or NULL with *err (ENOTDIR, ELOOP, ENOSPC for too many). */
const char *vm_jail_add (struct vm_jail *j, const char *path, const char *name, bool ro, bool file, asbx_err_t *err);

/* In the child made by clone(CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWIPC|CLONE_NEWNET): make the
 * mounts, move stdout/stderr to VM_JAIL_STDOUT_FD/STDERR_FD, drop to j's uid/gid, no capability,
 * no_new_privs, the parent-death signal, the set-ID filter. Returns 0, or -1 with *err (the
 * caller writes it and _exits). */
int vm_jail_enter (struct vm_jail *j, asbx_err_t *err);

/* Close the fds and free (parent; idempotent). */
void vm_jail_free (struct vm_jail *j);

#endif
