/* vm_jail.c - QEMU's confinement on the host (vm_jail.h for the design). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <linux/securebits.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/idmap.h"
#include "linux/pathsafe.h"
#include "linux/setid_filter.h"
#include "runtime/vm_jail.h"

#define NOGROUP 65534

/* the user namespace for the idmapped shares: on-disk 0 appears as uid/gid */
static int
idmap_userns (uid_t uid, gid_t gid, asbx_err_t *err)
{
  struct oci_id_mapping um = { .container_id = 0, .host_id = uid, .size = 1 };
  struct oci_id_mapping gm = { .container_id = 0, .host_id = gid, .size = 1 };
  struct oci_linux maps = { .uid_mappings = &um, .uid_mappings_len = 1, .gid_mappings = &gm, .gid_mappings_len = 1 };
  int fd = linux_userns_with_maps (&maps, err);
  return fd < 0 ? asbx_error_wrap (err, "isolation vm: a user namespace for the idmapped shares") : fd;
}

int
vm_jail_init (struct vm_jail *j, int owner_fd, const char *bundle, uid_t as_uid, gid_t as_gid, asbx_err_t *err)
{
  struct stat st;
  int p[2];
  *j = (struct vm_jail){ .alive_rd = -1, .alive_wr = -1, .idmap_userns = -1 };
  if (fstat (owner_fd, &st) < 0)
    return asbx_error (err, errno, "isolation vm: stat %s", bundle);
  if (st.st_uid == 0 && as_uid == 0)
    return asbx_error (err, EPERM,
                       "isolation vm: the bundle %s is owned by root: QEMU runs as the bundle's owner and never as "
                       "root (chown the bundle and the directories it shares to the unprivileged user the VM's "
                       "files should belong to, or name one with the global --vm-user UID:GID)",
                       bundle);
  j->uid = st.st_uid ? st.st_uid : as_uid;
  j->gid = st.st_uid ? (st.st_gid ? st.st_gid : NOGROUP) : (as_gid ? as_gid : NOGROUP);
  if (st.st_uid == 0 && (j->idmap_userns = idmap_userns (j->uid, j->gid, err)) < 0)
    return -1;
  if (pipe2 (p, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "isolation vm: pipe");
  j->alive_rd = p[0];
  j->alive_wr = p[1];
  return 0;
}

const char *
vm_jail_add (struct vm_jail *j, const char *path, const char *name, bool ro, bool file, asbx_err_t *err)
{
  cleanup_free char *dir = xstrdup (path);
  char *slash = strrchr (dir, '/');
  const char *base;
  if (j->n == VM_JAIL_MAX)
    {
      asbx_error (err, ENOSPC, "isolation vm: more than %d mounts for QEMU", VM_JAIL_MAX);
      return NULL;
    }
  if (!slash || path[0] != '/')
    {
      asbx_error (err, EINVAL, "isolation vm: %s: not an absolute path", path);
      return NULL;
    }
  *slash = '\0';
  base = slash[1] ? slash + 1 : ".";
  cleanup_close int parent = open (dir[0] ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fd = parent < 0 ? -1
                      : ps_openat2 (parent, base, O_PATH | O_NOFOLLOW | (file ? 0 : O_DIRECTORY), 0,
                                    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0 || (file && !S_ISREG (st.st_mode)))
    {
      int e = fd < 0 ? errno : EINVAL;
      if (fd >= 0)
        close (fd);
      asbx_error (err, e, "isolation vm: open %s for QEMU's mount namespace (%s, no symlink)", path,
                  file ? "a regular file" : "a directory");
      return NULL;
    }
  struct vm_ovl ovl = { 0 };
  int isovl = j->idmap_userns >= 0 && !file && st.st_uid == 0 ? vm_ovl_layers (fd, path, j->idmap_userns, &ovl, err)
                                                              : 0;
  if (isovl != 0)
    {
      close (fd);
      if (isovl < 0)
        return NULL;
      j->binds[j->n] = (struct vm_jail_bind){
        .fd = -1, .where = xasprintf (VM_JAIL_DIR "/%s", name), .ro = ro, .ovl = ovl
      };
      return j->binds[j->n++].where;
    }
  /* a detached copy of the mount at that very object (not its submounts): a mount of the
   * host's namespace cannot be bound from QEMU's new one, a detached tree can be attached there
   * (open_tree(2), move_mount(2), Linux 5.2) */
  int tree = (int) open_tree (fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  int e = errno;
  close (fd);
  if (tree < 0)
    {
      asbx_error (err, e, "isolation vm: open_tree %s (Linux 5.2 or later)", path);
      return NULL;
    }
  fd = tree;
  /* a root-owned bundle's root-owned share: root's files become QEMU's uid's (vm_jail.h) */
  if (j->idmap_userns >= 0 && !file && st.st_uid == 0)
    {
      struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t) j->idmap_userns };
      int r = (int) mount_setattr (fd, "", AT_EMPTY_PATH, &attr, sizeof attr), e2 = r < 0 ? errno : 0;
      if (r < 0 && e2 != EINVAL)
        {
          errno = e2;
          asbx_error (err, errno, "isolation vm: an idmapped mount of %s for QEMU", path);
          close (fd);
          return NULL;
        }
      if (e2 == EINVAL && !ro)
        {
          /* a filesystem without idmapped mounts (overlayfs: an engine's rootfs): attached as it
           * is and read-only: QEMU's uid reads what the world may read there and writes nothing
           * (docs/security.md "Isolation tiers") */
          log_warning ("isolation vm: %s cannot be idmapped for QEMU (its filesystem has no idmapped mounts): "
                       "shared read-only, with the access its files give everyone",
                       path);
          ro = true;
        }
    }
  j->binds[j->n] = (struct vm_jail_bind){
    .fd = fd, .where = xasprintf (VM_JAIL_DIR "/%s", name), .ro = ro, .file = file
  };
  return j->binds[j->n++].where;
}

void
vm_jail_free (struct vm_jail *j)
{
  for (size_t i = 0; i < j->n; i++)
    {
      if (j->binds[i].fd >= 0)
        close (j->binds[i].fd);
      vm_ovl_free (&j->binds[i].ovl);
      free (j->binds[i].where);
    }
  if (j->alive_rd >= 0)
    close (j->alive_rd);
  if (j->alive_wr >= 0)
    close (j->alive_wr);
  if (j->idmap_userns >= 0)
    close (j->idmap_userns);
  j->idmap_userns = -1;
  j->n = 0;
  j->alive_rd = j->alive_wr = -1;
}

/* the new root, a tmpfs mounted on the host's /run before pivot_root(2) makes it "/" */
#define NEWROOT "/run"

/* bind the host's `src` (a trusted host path: /usr, /dev/null...) at NEWROOT`dst`, read-only */
static int
bind_host (const char *src, const char *dst, bool file, unsigned long extra, asbx_err_t *err)
{
  cleanup_free char *at = xasprintf (NEWROOT "%s", dst);
  int fd = file ? open (at, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : mkdir (at, 0755);
  if (fd < 0)
    return asbx_error (err, errno, "isolation vm: make %s", at);
  if (file)
    close (fd);
  if (mount (src, at, NULL, MS_BIND, NULL) < 0
      || mount (NULL, at, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | extra, NULL) < 0)
    return asbx_error (err, errno, "isolation vm: bind %s for QEMU", src);
  return 0;
}

/* QEMU's whole file tree: /usr (and /bin, /lib... as the host has them: links into /usr, or
 * directories), /etc/ld.so.cache, a few device nodes, its own /proc, and VM_JAIL_DIR with the
 * shares, the run directory and the kernel. Nothing else of the host is visible. */
static int
make_tree (asbx_err_t *err)
{
  static const char *const top[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
  static const char *const devs[] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/kvm"
  };
  if (bind_host ("/usr", "/usr", false, MS_NODEV, err) < 0)
    return -1;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (top); i++)
    {
      struct stat st;
      char link[PATH_MAX];
      if (lstat (top[i], &st) < 0)
        continue;
      cleanup_free char *at = xasprintf (NEWROOT "%s", top[i]);
      if (S_ISLNK (st.st_mode))
        {
          ssize_t n = readlink (top[i], link, sizeof link - 1);
          if (n < 0)
            return asbx_error (err, errno, "isolation vm: readlink %s", top[i]);
          link[n] = '\0';
          if (symlink (link, at) < 0)
            return asbx_error (err, errno, "isolation vm: symlink %s", at);
        }
      else if (S_ISDIR (st.st_mode) && bind_host (top[i], top[i], false, MS_NODEV, err) < 0)
        return -1;
    }
  if (mkdir (NEWROOT "/etc", 0755) < 0 || mkdir (NEWROOT "/dev", 0755) < 0 || mkdir (NEWROOT "/proc", 0555) < 0)
    return asbx_error (err, errno, "isolation vm: make QEMU's /etc, /dev, /proc");
  /* slirp's resolver address (runtime/vm_net.h) is forwarded to the first nameserver here: the
   * container namespace's own loopback, where the monitor's DNS stub listens (with no such file
   * libslirp 4.7 drops the guest's queries to it). Unused without a NIC. */
  static const char resolv[] = "nameserver 127.0.0.1\n";
  cleanup_close int rfd = open (NEWROOT "/etc/resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (rfd < 0 || write_all (rfd, resolv, sizeof resolv - 1) < 0)
    return asbx_error (err, errno, "isolation vm: write QEMU's /etc/resolv.conf");
  if (access ("/etc/ld.so.cache", F_OK) == 0
      && bind_host ("/etc/ld.so.cache", "/etc/ld.so.cache", true, MS_NODEV, err) < 0)
    return -1;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (devs); i++)
    if (access (devs[i], F_OK) == 0 && bind_host (devs[i], devs[i], true, 0, err) < 0)
      return -1;
  /* QEMU's own pid namespace's: QEMU reads /proc/self (9p's chmod goes through /proc/self/fd) */
  if (mount ("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return asbx_error (err, errno, "isolation vm: mount QEMU's /proc");
  return 0;
}

static int
make_mounts (struct vm_jail *j, asbx_err_t *err)
{
  /* nothing we mount propagates back to the host */
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return asbx_error (err, errno, "isolation vm: make / private in QEMU's mount namespace");
  if (mount ("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") < 0
      || mkdir (NEWROOT "/run", 0755) < 0 || mkdir (NEWROOT VM_JAIL_DIR, 0755) < 0 || mkdir (NEWROOT "/.old", 0700) < 0)
    return asbx_error (err, errno, "isolation vm: a tmpfs root for QEMU");
  if (make_tree (err) < 0)
    return -1;
  for (size_t i = 0; i < j->n; i++)
    {
      struct vm_jail_bind *b = &j->binds[i];
      cleanup_free char *at = xasprintf (NEWROOT "%s", b->where);
      int fd = b->file ? open (at, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : mkdir (at, 0755);
      if (fd < 0)
        return asbx_error (err, errno, "isolation vm: make %s", at);
      if (b->file)
        close (fd);
      if (b->ovl.n)
        {
          /* an engine's overlay rootfs (vm_ovl.h): its upper layer in the run directory, binds[0] */
          cleanup_free char *run = xasprintf (NEWROOT "%s", j->binds[0].where);
          if ((mkdir (NEWROOT "/.l", 0700) < 0 && errno != EEXIST)
              || vm_ovl_mount (&b->ovl, NEWROOT "/.l", at, run, j->uid, j->gid,
                               MS_NOSUID | MS_NODEV | (b->ro ? MS_RDONLY : 0), err)
                     < 0)
            return asbx_error_wrap (err, "isolation vm: %s", b->where);
          continue;
        }
      unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (b->ro ? MS_RDONLY : 0);
      if (move_mount (b->fd, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0 || mount (NULL, at, NULL, fl, NULL) < 0)
        return asbx_error (err, errno, "isolation vm: bind mount %s", b->where);
      close (b->fd);
      b->fd = -1;
    }
  /* the tmpfs becomes "/", the host's tree is detached (pivot_root(2): new_root is a mount) */
  if (chdir (NEWROOT) < 0 || syscall (SYS_pivot_root, ".", ".old") < 0 || umount2 ("/.old", MNT_DETACH) < 0
      || rmdir ("/.old") < 0 || chdir ("/") < 0)
    return asbx_error (err, errno, "isolation vm: pivot_root into QEMU's tree");
  if (mount (NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") < 0)
    return asbx_error (err, errno, "isolation vm: remount QEMU's root read-only");
  return 0;
}

/* fd `from` again, write-only (QEMU's fdset matches the access mode its chardev asks for), at
 * `to`. A pipe or terminal is reopened through /proc; what cannot be (a socket) is duplicated. */
static int
place_output (int from, int to, asbx_err_t *err)
{
  char p[64];
  snprintf (p, sizeof p, "/proc/self/fd/%d", from);
  int fd = open (p, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    fd = fcntl (from, F_DUPFD_CLOEXEC, 10);
  if (fd < 0 || dup2 (fd, to) < 0) /* dup2 clears FD_CLOEXEC on `to` */
    return asbx_error (err, errno, "isolation vm: QEMU's output fd %d", to);
  if (fd != to)
    close (fd);
  else if (fcntl (to, F_SETFD, 0) < 0)
    return asbx_error (err, errno, "isolation vm: QEMU's output fd %d", to);
  return 0;
}

static int
write_proc_self (const char *name, const char *text, asbx_err_t *err)
{
  cleanup_free char *p = xasprintf ("/proc/self/%s", name);
  cleanup_close int fd = open (p, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write (fd, text, strlen (text)) != (ssize_t) strlen (text))
    return asbx_error (err, errno, "isolation vm: write %s of QEMU's user namespace", p);
  return 0;
}

/* Every capability set empty, for good: the bounding set, the ambient set, and securebits that
 * keep an execve by uid 0 (QEMU is uid 0 in its user namespace) from granting any back
 * (capabilities(7) "Capabilities and execution of programs by root"). */
static int
drop_all_caps (asbx_err_t *err)
{
  struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
  struct __user_cap_data_struct d[2] = { { 0 } };
  for (int c = 0; c <= CAP_LAST_CAP; c++)
    if (prctl (PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
      return asbx_error (err, errno, "isolation vm: drop capability %d from the bounding set", c);
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return asbx_error (err, errno, "isolation vm: clear the ambient capabilities");
  if (prctl (PR_SET_SECUREBITS,
             SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED
                 | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
             0, 0, 0)
      < 0)
    return asbx_error (err, errno, "isolation vm: set the securebits");
  if (syscall (SYS_capset, &h, d) < 0)
    return asbx_error (err, errno, "isolation vm: clear the capability sets");
  return 0;
}

int
vm_jail_enter (struct vm_jail *j, asbx_err_t *err)
{
  close (j->alive_wr);
  j->alive_wr = -1;
  /* the alive pipe above QEMU's fixed fds: at fd 4 (when fd 3 was free at vm_jail_init, the
   * bundle's fd took it) the dup2 of stderr to VM_JAIL_STDERR_FD replaced it, and the poll below
   * saw stderr readable: "agentsbx ended before QEMU started" (2 of 6 runs under load) */
  int alive = fcntl (j->alive_rd, F_DUPFD_CLOEXEC, 10);
  if (alive < 0)
    return asbx_error (err, errno, "isolation vm: dup the alive pipe");
  close (j->alive_rd);
  j->alive_rd = alive;
  if (make_mounts (j, err) < 0)
    return -1;
  int out = fcntl (STDOUT_FILENO, F_DUPFD_CLOEXEC, 10), er = fcntl (STDERR_FILENO, F_DUPFD_CLOEXEC, 10);
  if (out < 0 || er < 0 || place_output (out, VM_JAIL_STDOUT_FD, err) < 0
      || place_output (er, VM_JAIL_STDERR_FD, err) < 0)
    return out < 0 || er < 0 ? asbx_error (err, errno, "isolation vm: dup stdout") : -1;
  close (out);
  close (er);
  /* the host's uid 0 is given up first (setresuid from 0 to non-zero clears every capability,
   * no SECBIT_KEEP_CAPS); then, as that unprivileged uid, a user namespace mapping only it to 0
   * (what an unprivileged `unshare -r` does): QEMU's stat(2) then reports the owner's files as
   * uid 0 to the guest, whose root owns them as on a host, and its files land on the host as
   * the owner's. The namespaces made by clone belong to the host's user namespace: QEMU's
   * capabilities in its own would not reach them, and they are dropped below anyway. */
  if (setgroups (0, NULL) < 0 || setresgid (j->gid, j->gid, j->gid) < 0 || setresuid (j->uid, j->uid, j->uid) < 0)
    return asbx_error (err, errno, "isolation vm: become uid %u gid %u", (unsigned) j->uid, (unsigned) j->gid);
  if (setresuid (0, 0, 0) == 0)
    return asbx_error (err, EPERM, "isolation vm: uid 0 could be regained after the drop");
  if (unshare (CLONE_NEWUSER) < 0)
    return asbx_error (err, errno,
                       "isolation vm: an unprivileged user namespace for QEMU (user.max_user_namespaces, or an "
                       "LSM restricting unprivileged user namespaces)");
  /* the uid change made us non-dumpable, which gives /proc/self to root: our own again */
  if (prctl (PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
    return asbx_error (err, errno, "isolation vm: PR_SET_DUMPABLE");
  char map[64];
  snprintf (map, sizeof map, "0 %u 1\n", (unsigned) j->uid);
  if (write_proc_self ("setgroups", "deny", err) < 0 || write_proc_self ("uid_map", map, err) < 0)
    return -1;
  snprintf (map, sizeof map, "0 %u 1\n", (unsigned) j->gid);
  if (write_proc_self ("gid_map", map, err) < 0 || drop_all_caps (err) < 0)
    return -1;
  /* after the uid change (which clears it), and checked against the race with a parent that
   * died before: its end of the pipe is then closed */
  if (prctl (PR_SET_PDEATHSIG, SIGKILL) < 0)
    return asbx_error (err, errno, "isolation vm: PR_SET_PDEATHSIG");
  struct pollfd pf = { .fd = j->alive_rd, .events = POLLIN };
  if (poll (&pf, 1, 0) != 0)
    return asbx_error (err, ESRCH, "isolation vm: agentsbx ended before QEMU started");
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return asbx_error (err, errno, "isolation vm: PR_SET_NO_NEW_PRIVS");
  return linux_load_setid_filter (err);
}
