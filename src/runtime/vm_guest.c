/* vm_guest.c - /init of the vm tier's guest (vm.h): PID 1 in the VM, this same binary.
 *
 *  1. the root: a bind mount of the initramfs moved onto / (pivot_root refuses the initramfs
 *     itself, and the container's runtime below pivots as it does on a host);
 *  2. proc, sysfs, devtmpfs, cgroup2, a tmpfs on /run; the modules of /modules/order;
 *  3. stdout and stderr on the virtio-serial ports asbx.stdout, asbx.stderr; stdin /dev/null;
 *  4. the run's share (tag asbx: manifest, policy.json, copied files) and every share of the
 *     manifest at its host path, read-only where the host said so;
 *  5. create + start + wait of the container exactly as `agentsbx run` does on a host, under the
 *     effective policy the host resolved (as the ceiling: nothing can widen it here);
 *  6. "exit N" (or "error MESSAGE") on asbx.status, then power off.
 * Under the detached lifecycle (manifest line `gate`, runtime/vm_supervisor.h) 5 is split at the
 * start gate: "created" goes to the host on asbx.ctl, the container starts on "start" (answered
 * "started" or "error MESSAGE"), and every "kill N" line is the signal N for its init; once it
 * runs, exec sessions arrive on asbx.exec (vm_exec_guest.c) and every child is reaped here. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/module.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "monitor/monitor.h"
#include "runtime/container.h"
#include "runtime/vm.h"
#include "runtime/vm_exec.h"
#include "runtime/vm_net.h"

#define G_SHARE "/run/asbx-vm"
#define GUEST_CONFIG "/run/asbx-host-config.json" /* the guest's host config: empty (below) */
#define G_9P_OPTS "trans=virtio,version=9p2000.L,msize=512000"

static int status_fd = -1;
static bool guest_net;   /* the manifest's `net` line */
static bool guest_debug; /* ... its `debug` line */

static _Noreturn void
power_off (void)
{
  sync ();
  reboot (RB_POWER_OFF);
  for (;;)
    pause ();
}

static _Noreturn void
guest_fail (const char *what, int errnum)
{
  char line[1024];
  snprintf (line, sizeof line, "error %s%s%s\n", what, errnum ? ": " : "", errnum ? strerror (errnum) : "");
  if (status_fd >= 0)
    write_all (status_fd, line, strlen (line));
  else
    dprintf (2, "agentsbx (vm guest): %s", line);
  power_off ();
}

static void
mkdir_p (const char *path, mode_t mode)
{
  cleanup_free char *p = xstrdup (path);
  for (char *s = strchr (p + 1, '/'); s; s = strchr (s + 1, '/'))
    {
      *s = '\0';
      mkdir (p, mode);
      *s = '/';
    }
  mkdir (p, mode);
}

static void
load_modules (void)
{
  cleanup_free char *order = NULL;
  size_t len = 0;
  asbx_err_t e = NULL;
  if (read_file_at (AT_FDCWD, "/modules/order", 65536, &order, &len, &e) < 0)
    guest_fail ("read /modules/order", e->errnum);
  char *save = NULL;
  for (char *m = strtok_r (order, "\n", &save); m; m = strtok_r (NULL, "\n", &save))
    {
      cleanup_free char *p = xasprintf ("/modules/%s", m);
      cleanup_close int fd = open (p, O_RDONLY | O_CLOEXEC);
      size_t n = strlen (m);
      /* a .ko.xz/.zst/.gz as the package ships it (vm_cpio.c): the kernel decompresses it
       * (CONFIG_MODULE_DECOMPRESS, set in Debian's 6.12); without it, finit_module fails: EOPNOTSUPP */
      bool packed = (n > 3 && strcmp (m + n - 3, ".xz") == 0) || (n > 4 && strcmp (m + n - 4, ".zst") == 0)
                    || (n > 3 && strcmp (m + n - 3, ".gz") == 0);
      if (fd < 0
          || (syscall (SYS_finit_module, fd, "", packed ? MODULE_INIT_COMPRESSED_FILE : 0) < 0 && errno != EEXIST))
        guest_fail (p, errno);
    }
}

/* the /dev node of the virtio-serial port named `name` (its sysfs name attribute) */
static int
open_port (const char *name, int flags)
{
  for (int tries = 0; tries < 200; tries++)
    {
      cleanup_closedir DIR *d = opendir ("/sys/class/virtio-ports");
      struct dirent *de;
      while (d && (de = readdir (d)) != NULL)
        {
          if (de->d_name[0] == '.')
            continue;
          char buf[64] = "";
          cleanup_free char *np = xasprintf ("/sys/class/virtio-ports/%s/name", de->d_name);
          cleanup_close int nfd = open (np, O_RDONLY | O_CLOEXEC);
          ssize_t n = nfd >= 0 ? read (nfd, buf, sizeof buf - 1) : -1;
          if (n <= 0)
            continue;
          buf[strcspn (buf, "\n")] = '\0';
          if (strcmp (buf, name) != 0)
            continue;
          cleanup_free char *dev = xasprintf ("/dev/%s", de->d_name);
          int fd = open (dev, flags);
          if (fd >= 0)
            return fd;
        }
      usleep (10000); /* the port appears once the host side has announced it */
    }
  return -1;
}

static void
stdio_on_ports (void)
{
  int in = open ("/dev/null", O_RDONLY | O_NOCTTY); /* stdin is not forwarded yet (vm.c) */
  int out = open_port ("asbx.stdout", O_WRONLY | O_NOCTTY);
  int er = open_port ("asbx.stderr", O_WRONLY | O_NOCTTY);
  status_fd = open_port ("asbx.status", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (in < 0 || out < 0 || er < 0 || status_fd < 0)
    guest_fail ("the virtio-serial ports asbx.stdout, asbx.stderr, asbx.status", errno);
  if (dup2 (in, 0) < 0 || dup2 (out, 1) < 0 || dup2 (er, 2) < 0)
    guest_fail ("dup2 onto the ports", errno);
  for (int fd = 3; fd <= (in > out ? (in > er ? in : er) : (out > er ? out : er)); fd++)
    if (fd == in || fd == out || fd == er)
      close (fd);
}

static void
mount_share (const char *tag, const char *path, bool ro)
{
  cleanup_free char *opts = xasprintf ("%s", G_9P_OPTS);
  mkdir_p (path, 0755);
  if (mount (tag, path, "9p", MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0), opts) < 0)
    {
      cleanup_free char *w = xasprintf ("mount 9p %s on %s", tag, path);
      guest_fail (w, errno);
    }
}

static void
bind_file (const char *name, const char *path)
{
  cleanup_free char *src = xasprintf (G_SHARE "/%s", name);
  cleanup_free char *dir = xstrdup (path);
  char *slash = strrchr (dir, '/');
  if (slash && slash != dir)
    {
      *slash = '\0';
      mkdir_p (dir, 0755);
    }
  int fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0)
    close (fd);
  if (mount (src, path, NULL, MS_BIND, NULL) < 0
      || mount (NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
    {
      cleanup_free char *w = xasprintf ("bind %s on %s", src, path);
      guest_fail (w, errno);
    }
}

/* the manifest's lines: debug (the host runs with --debug) / id ID / bundle PATH / share TAG ro|rw PATH / file NAME
 * PATH */
static void
apply_manifest (char **id, char **bundle, bool *gate)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  asbx_err_t e = NULL;
  if (read_file_at (AT_FDCWD, G_SHARE "/manifest", 1 << 20, &text, &len, &e) < 0)
    guest_fail ("read the manifest", e->errnum);
  char *save = NULL;
  for (char *l = strtok_r (text, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      char tag[32], mode[4];
      int off = 0;
      if (strcmp (l, "debug") == 0)
        {
          guest_debug = true;
          asbx_err_t e2 = NULL;
          if (asbx_log_init (NULL, ASBX_LOG_TEXT, 1, &e2) < 0)
            asbx_error_free (&e2);
        }
      else if (strcmp (l, "net") == 0)
        {
          /* network.mode filtered: the host's NIC, enforced there (runtime/vm_net.h) */
          asbx_err_t e2 = NULL;
          if (vm_net_guest_setup (&e2) < 0)
            guest_fail (e2->msg, 0);
          guest_net = true;
        }
      else if (strcmp (l, "gate") == 0)
        *gate = true;
      else if (strncmp (l, "id ", 3) == 0)
        *id = xstrdup (l + 3);
      else if (strncmp (l, "bundle ", 7) == 0)
        *bundle = xstrdup (l + 7);
      else if (sscanf (l, "share %31s %3s %n", tag, mode, &off) == 2 && off > 0)
        mount_share (tag, l + off, strcmp (mode, "ro") == 0);
      else if (sscanf (l, "file %31s %n", tag, &off) == 1 && off > 0)
        bind_file (tag, l + off);
      else
        guest_fail ("a manifest line this agentsbx does not read", EINVAL);
    }
  if (!*id || !*bundle)
    guest_fail ("the manifest names no id or bundle", EINVAL);
}

/* one line from the host on asbx.ctl into buf (NUL-terminated, without the newline); false at
 * EOF. Bytes after the newline stay in *pending. */
static bool
ctl_line (int fd, char *buf, size_t size, char *pending, size_t *plen)
{
  for (;;)
    {
      char *nl = memchr (pending, '\n', *plen);
      if (nl)
        {
          size_t n = (size_t) (nl - pending);
          snprintf (buf, size, "%.*s", (int) n, pending);
          memmove (pending, nl + 1, *plen - n - 1);
          *plen -= n + 1;
          return true;
        }
      if (*plen == 256)
        *plen = 0; /* a line this long is none of ours: dropped */
      ssize_t r = read (fd, pending + *plen, 256 - *plen);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return false;
      *plen += (size_t) r;
    }
}

/* The start gate and the signals (manifest `gate`): "created" to the host, wait for "start",
 * start, then forward "kill N" to the container's init until it exits. Returns its status as
 * asbx_container_wait does. */
static int
gated_run (const struct asbx_global *g, const char *id, pid_t pid)
{
  char line[256], pending[256];
  size_t plen = 0;
  asbx_err_t err = NULL;
  int ctl = open_port ("asbx.ctl", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (ctl < 0)
    guest_fail ("the virtio-serial port asbx.ctl", errno);
  write_all (ctl, "created\n", 8);
  for (;;)
    {
      if (!ctl_line (ctl, line, sizeof line, pending, &plen))
        guest_fail ("the host closed asbx.ctl before start", 0);
      if (strcmp (line, "start") == 0)
        break;
      int sig = 0;
      if (sscanf (line, "kill %d", &sig) == 1 && sig > 0)
        kill (pid, sig); /* a created container killed before start */
    }
  if (asbx_container_start (g, id, &err) < 0)
    {
      cleanup_free char *msg = xasprintf ("error %s\n", err->msg);
      for (char *p = msg; *p && p[1]; p++)
        if (*p == '\n')
          *p = ' ';
      write_all (ctl, msg, strlen (msg));
      asbx_error_free (&err);
    }
  else
    write_all (ctl, "started\n", 8);
  /* exec sessions (runtime/vm_exec.h), served once the process runs: the guest's own
   * `agentsbx exec` of this container, with the options the container was created with */
  static const char *gargv[12];
  size_t ga = 0;
  gargv[ga++] = "agentsbx";
  if (guest_debug)
    gargv[ga++] = "--debug";
  gargv[ga++] = "--root";
  gargv[ga++] = g->root;
  gargv[ga++] = "--config";
  gargv[ga++] = g->config_path;
  gargv[ga++] = "--audit-dir";
  gargv[ga++] = g->audit_dir;
  gargv[ga] = NULL;
  int xport = open_port (VM_EXEC_PORT, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (xport < 0)
    guest_fail ("the virtio-serial port " VM_EXEC_PORT, errno);
  struct vm_exec_guest *x = vm_exec_guest_new (xport, id, gargv);
  int pfd = (int) syscall (SYS_pidfd_open, pid, 0);
  for (;;)
    {
      int st;
      pid_t r;
      /* every child is ours to reap (PID 1): the container's process ends the run, an exec'd
       * one (orphaned by its `agentsbx exec`) its session */
      while ((r = waitpid (-1, &st, WNOHANG)) > 0)
        {
          if (r == pid)
            return WIFSIGNALED (st) ? 128 + WTERMSIG (st) : WEXITSTATUS (st);
          vm_exec_guest_reaped (x, r, st);
        }
      if (r < 0 && errno != EINTR && errno != ECHILD)
        return 255;
      struct pollfd p[2 + 4 * VM_EXEC_MAX_SESSIONS + 1] = { { .fd = pfd, .events = POLLIN },
                                                            { .fd = ctl, .events = POLLIN } };
      size_t nx = vm_exec_guest_pollfds (x, p + 2, ASBX_ARRAY_SIZE (p) - 2);
      if (poll (p, 2 + nx, -1) < 0)
        continue;
      vm_exec_guest_handle (x, p + 2, nx);
      if (!(p[1].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      do
        {
          int sig = 0;
          if (!ctl_line (ctl, line, sizeof line, pending, &plen))
            {
              close (ctl); /* the host is gone: QEMU ends with it */
              ctl = -1;
              break;
            }
          if (sscanf (line, "kill %d", &sig) == 1 && sig > 0)
            kill (pid, sig);
        }
      while (memchr (pending, '\n', plen));
    }
}

/* / as a mount with a parent: bind the initramfs on /newroot, move it onto /, chroot there (as
 * switch_root does, without deleting anything: the files are this binary and its libraries) */
static void
movable_root (void)
{
  mkdir ("/newroot", 0755);
  if (mount ("/", "/newroot", NULL, MS_BIND, NULL) < 0 || chdir ("/newroot") < 0
      || mount (".", "/", NULL, MS_MOVE, NULL) < 0 || chroot (".") < 0 || chdir ("/") < 0)
    guest_fail ("make the initramfs a movable root", errno);
}

_Noreturn void
vm_guest_main (void)
{
  cleanup_free char *id = NULL, *bundle = NULL;
  asbx_err_t err = NULL;
  bool gate = false;
  pid_t pid;
  int status;

  movable_root ();
  if (mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0
      || mount ("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0
      || mount ("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") < 0
      || mount ("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0
      || mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
    guest_fail ("mount proc, sysfs, devtmpfs, tmpfs", errno);
  if (mount ("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, "nsdelegate") < 0)
    guest_fail ("mount cgroup2", errno);
  load_modules ();
  stdio_on_ports ();
  mount_share ("asbx", G_SHARE, true);
  apply_manifest (&id, &bundle, &gate);
  /* every controller for the container's cgroup (the policy's limits apply in here too) */
  cleanup_free char *ctrls = NULL;
  size_t clen = 0;
  if (read_file_at (AT_FDCWD, "/sys/fs/cgroup/cgroup.controllers", 4096, &ctrls, &clen, &err) == 0)
    {
      char *save = NULL;
      for (char *c = strtok_r (ctrls, " \n", &save); c; c = strtok_r (NULL, " \n", &save))
        {
          cleanup_free char *w = xasprintf ("+%s", c);
          asbx_err_t e2 = NULL;
          if (write_file_at (AT_FDCWD, "/sys/fs/cgroup/cgroup.subtree_control", w, strlen (w), &e2) < 0)
            asbx_error_free (&e2);
        }
    }
  asbx_error_free (&err);
  /* The host resolved its config into policy.json: an empty host config here, not the
   * /etc/agentsbx/config.json of a shared host /etc (root's `sandbox`: it may be unreadable to
   * QEMU's uid). The audit log on the guest's own tmpfs (guest-side records are not built): the
   * default /var/log lies in a shared /var there, read-only, owned by QEMU's unmapped uid. */
  {
    static const char empty[] = "{}\n";
    cleanup_close int cfd = open (GUEST_CONFIG, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (cfd < 0 || write_all (cfd, empty, sizeof empty - 1) < 0)
      guest_fail ("write " GUEST_CONFIG, errno);
  }

  struct asbx_global g = {
    .root = "/run/agentsbx",
    .policy_file = G_SHARE "/policy.json",
    .config_path = GUEST_CONFIG,
    .audit_dir = "/run/agentsbx-audit",
    .vm_guest = true,
    .vm_net_outside = guest_net,
    /* detached: the hooks are the host's (runtime/vm_supervisor.h), none runs in here */
    .vm_guest_no_hooks = gate,
  };
  struct asbx_create_opts o = { .id = id, .bundle = bundle };
  if (asbx_container_create (&g, &o, &pid, &err) < 0 || (!gate && asbx_container_start (&g, id, &err) < 0))
    guest_fail (err->msg, 0);
  status = gate ? gated_run (&g, id, pid) : asbx_container_wait (pid);
  /* the guest's own monitor may enforce the wall clock before the host does (the guest's clock,
   * from its create): the same status as the host's kill (vm.h: 124) */
  {
    cleanup_free char *sd = xasprintf ("%s/%s", g.root, id);
    cleanup_close int sfd = open (sd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cleanup_free char *reason = NULL;
    if (sfd >= 0)
      {
        monitor_wait_exit (sfd, 5000);
        reason = monitor_exit_reason (sfd);
      }
    if (reason && strncmp (reason, "wallclock", 9) == 0)
      status = 124;
  }
  if (asbx_container_delete (&g, id, true, &err) < 0)
    asbx_error_free (&err);
  char line[32];
  snprintf (line, sizeof line, "exit %d\n", status);
  write_all (status_fd, line, strlen (line));
  fsync (status_fd);
  power_off ();
}
