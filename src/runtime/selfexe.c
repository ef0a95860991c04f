/* selfexe.c - run the runtime from a copy of itself the container can never write
 * (CVE-2019-5736 class).
 *
 * A container process can reach the runtime binary through /proc/<runtime pid>/exe while the
 * runtime is in the container's pid namespace (exec, init before execve), or make the runtime
 * run itself inside the container (`#!/proc/self/exe`). What it reaches must not be the host
 * binary, nor anything that can be made writable. Two ways, tried in this order:
 *
 * 1. A lower-only overlayfs of the binary's directory (lowers: that directory and an empty,
 *    detached tmpfs; no upper layer), mounted detached (fsmount: in no mount namespace, gone
 *    when its last user goes) and executed through an fd. An overlay without an upper layer has
 *    a read-only superblock: opening the exe for writing fails with EROFS, and so does clearing
 *    MOUNT_ATTR_RDONLY on a clone of its mount or reconfiguring it rw (a read-only bind would
 *    not hold: clearing the flag on a clone makes it writable). Costs ~0.1 ms and charges
 *    nothing to the caller's memory cgroup. Needs CAP_SYS_ADMIN and Linux >= 6.8 ("lowerdir+").
 * 2. Otherwise a sealed memfd (F_SEAL_WRITE, cannot be unsealed) copy. Only the bytes the loader
 *    maps are copied - the file up to the end of the last PT_LOAD segment; debug info and the
 *    section table that follow are not needed to run (the copy's header says it has no
 *    sections): ~380 KiB instead of 1.6 MiB on a -g build, ~0.15 ms, all of it charged to the
 *    caller's memory cgroup. Anything unexpected in the headers falls back to the whole file.
 *
 * The re-executed process must know it is protected without trusting its path: a sealed memfd
 * is recognised by its seals; the overlay by AGENTSBX_SELFEXE=overlay (set here, removed at
 * once by the new process; only the runtime's caller sets our environment, and a container can
 * only reach a runtime that already runs protected) together with fstatfs: overlayfs, read-only.
 * Switches for tests and A/B measurements (only the runtime's caller sets our environment, and
 * both only choose the weaker-but-still-safe or the slower path): AGENTSBX_SELFEXE_MEMFD=1 skips
 * the overlay (the memfd fallback is tested), AGENTSBX_NO_CGROUP_PRIME=1 skips the priming below.
 * Numbers: docs/performance.md "Self-protection". */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <linux/magic.h>
#include <sys/mount.h> /* the fsopen/fsmount constants (glibc >= 2.36); <linux/mount.h> is our src/linux/mount.h under -Isrc */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "runtime/container.h"
#include "runtime/secret_env.h"

#define SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

#define ENV_MARK "AGENTSBX_SELFEXE"

static int
running_sealed (void)
{
  cleanup_close int fd = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  int seals = fcntl (fd, F_GET_SEALS);
  if (seals >= 0 && (seals & SEALS) == SEALS)
    return 1;
  const char *mark = getenv (ENV_MARK);
  if (mark == NULL)
    return 0;
  /* the mark alone proves nothing: the file must also be on a read-only overlayfs */
  struct statfs sf;
  bool ok = strcmp (mark, "overlay") == 0 && fstatfs (fd, &sf) == 0 && sf.f_type == OVERLAYFS_SUPER_MAGIC
            && (sf.f_flags & ST_RDONLY);
  unsetenv (ENV_MARK);
  return ok;
}

/* fsopen/fsconfig/fsmount: a detached mount of a new superblock of `type` configured with the
 * (key, value) pairs. mount fd / -1 (errno). */
static int
detached_fs (const char *type, const char *const *kv, size_t n, unsigned attrs)
{
  cleanup_close int fs = (int) syscall (SYS_fsopen, type, FSOPEN_CLOEXEC);
  if (fs < 0)
    return -1;
  for (size_t i = 0; i + 1 < n; i += 2)
    if (syscall (SYS_fsconfig, fs, FSCONFIG_SET_STRING, kv[i], kv[i + 1], 0) < 0)
      return -1;
  if (syscall (SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return -1;
  return (int) syscall (SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs);
}

/* The binary opened through a lower-only overlay of its directory (see the top comment), or -1.
 * The tmpfs is only there because an overlay without an upper layer needs two lowers; it is
 * empty, 4 KiB at most, and read-only. */
static int
overlay_exe (int src)
{
  char self[4096], lower2[64];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
  struct stat a, b;

  if (n <= 0 || self[0] != '/' || getenv ("AGENTSBX_SELFEXE_MEMFD"))
    return -1;
  self[n] = '\0';
  char *slash = strrchr (self, '/');
  const char *base = slash + 1;
  *slash = '\0';
  const char *tmp_kv[] = { "size", "4k", "mode", "0555" };
  cleanup_close int empty = detached_fs ("tmpfs", tmp_kv, 4, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  if (empty < 0)
    return -1;
  snprintf (lower2, sizeof lower2, "/proc/self/fd/%d", empty);
  const char *ovl_kv[] = { "lowerdir+", self[0] ? self : "/", "lowerdir+", lower2 };
  cleanup_close int mnt = detached_fs ("overlay", ovl_kv, 4, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID);
  if (mnt < 0)
    return -1;
  int fd = openat (mnt, base, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  /* the same file as the one running (the path may have been replaced since we started) */
  if (fd >= 0
      && (fstat (fd, &a) < 0 || fstat (src, &b) < 0 || a.st_size != b.st_size || a.st_mtim.tv_sec != b.st_mtim.tv_sec
          || a.st_mtim.tv_nsec != b.st_mtim.tv_nsec))
    {
      close (fd);
      return -1;
    }
  return fd;
}

/* Bytes of the ELF file `fd` (size `size`) that the loader needs: up to the end of the last
 * PT_LOAD segment and of the program header table. Returns `size` when the headers are not what
 * we expect (then everything is copied). */
static off_t
loaded_extent (int fd, off_t size)
{
  ElfW (Ehdr) eh;
  ElfW (Phdr) ph[64];
  off_t end;

  if (pread (fd, &eh, sizeof eh, 0) != (ssize_t) sizeof eh || memcmp (eh.e_ident, ELFMAG, SELFMAG) != 0
      || eh.e_phentsize != sizeof ph[0] || eh.e_phnum == 0 || eh.e_phnum > 64)
    return size;
  size_t len = (size_t) eh.e_phnum * sizeof ph[0];
  if (pread (fd, ph, len, (off_t) eh.e_phoff) != (ssize_t) len)
    return size;
  end = (off_t) (eh.e_phoff + len);
  for (size_t i = 0; i < eh.e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && (off_t) (ph[i].p_offset + ph[i].p_filesz) > end)
      end = (off_t) (ph[i].p_offset + ph[i].p_filesz);
  return end > 0 && end <= size ? end : size;
}

/* The copy ends before the section table: say there is none (e_shoff/e_shnum/e_shstrndx = 0), so
 * nothing reading the copy follows an offset past its end. */
static int
drop_section_table (int mfd)
{
  ElfW (Ehdr) eh;

  if (pread (mfd, &eh, sizeof eh, 0) != (ssize_t) sizeof eh)
    return -1;
  eh.e_shoff = 0;
  eh.e_shnum = 0;
  eh.e_shstrndx = SHN_UNDEF;
  return pwrite (mfd, &eh, sizeof eh, 0) == (ssize_t) sizeof eh ? 0 : -1;
}

/* ---- starting the cgroup migration's grace period early ----
 *
 * Moving a process into a cgroup (a write to cgroup.procs) takes cgroup_threadgroup_rwsem for
 * writing, a per-cpu rwsem whose first writer waits for an RCU grace period (rcu_sync_enter):
 * 6-12 ms on this VM (more under load), the largest single item of a `run`
 * (docs/performance.md). Writers that come while the rcu_sync is in writer mode - during that
 * wait, or within about one grace period after the last writer left - do not wait again.
 * So the runtime writes "0" (itself) into the cgroup.procs of the cgroup it is already in: a
 * migration that moves nothing but puts the rcu_sync into writer mode while the runtime loads,
 * parses the config and spawns; when create/exec move the container's process, the wait is over.
 *  - start: a child forked before the re-exec does one such write (as early as possible; the
 *    re-exec could not proceed while a thread of ours sits in that wait). It holds the old
 *    image's pages until it exits, one grace period later (~64 KiB charged to the caller).
 *  - keep: in the re-executed runtime a thread repeats the write every PRIME_PERIOD_MS (below
 *    this VM's shortest grace period; each write after the first costs microseconds) for
 *    PRIME_WINDOW_MS, so that a runtime slowed by load still finds writer mode when it moves
 *    the container (load 10, 25 interleaved runs: cgroup_enter median 8.5 ms with the single
 *    write, 0.8 ms with the repeats, 13.4 ms without priming). A thread rather than the child:
 *    it shares our pages (the child kept alive that long held ~430 KiB more at the memory
 *    peak; the thread costs ~0.1-0.2 MiB of peak memory cgroup usage); nothing in the runtime
 *    process itself calls an unshare/setns that a second thread makes fail (exec.c's setns of
 *    the pid namespace for children allows threads), and its
 *    children (S, hooks, the monitor) are forked with one thread.
 * For that window the host's forks take the slow path of the rwsem, as with cgroup2's
 * favordynmods. No cgroup membership changes; any failure (no cgroup2 mount, EACCES when
 * rootless) only loses the head start. Source: kernel/rcu/sync.c (rcu_sync_enter/exit states),
 * kernel/cgroup/cgroup.c (cgroup_attach_lock, cgroup_procs_write). */
#define PRIME_PERIOD_MS 3
/* built with ASan/TSan (gcc says so with __SANITIZE_*__, clang with __has_feature) */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ASBX_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ASBX_SANITIZED 1
#endif
#endif
#ifndef ASBX_SANITIZED
#define ASBX_SANITIZED 0
#endif
#define PRIME_WINDOW_MS 100

/* Calls fn(line, arg) for each line of the file `path` (a line longer than 1023 bytes is skipped)
 * until fn returns >= 0, and returns that value; -1 when no line matched or on error. System calls
 * only - no stdio, no malloc: the keep thread runs it while the main thread may fork. */
static int
proc_lines (const char *path, int (*fn) (char *line, void *arg), void *arg)
{
  char buf[2048], line[1024];
  size_t len = 0;
  bool skip = false;
  int ret = -1;
  ssize_t n;
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return -1;
  while (ret < 0 && (n = read (fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n && ret < 0; i++)
      {
        if (buf[i] != '\n')
          {
            if (len + 1 < sizeof line)
              line[len++] = buf[i];
            else
              skip = true;
            continue;
          }
        line[len] = '\0';
        if (!skip)
          ret = fn (line, arg);
        len = 0;
        skip = false;
      }
  close (fd);
  return ret;
}

struct str_out
{
  char *s;
  size_t size;
};

/* A mountinfo line ("ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER") of a
 * cgroup2 mount that shows the root of the hierarchy: its mount point into the output, 0. Octal
 * escapes in the mount point are not decoded: such a mount is skipped. */
static int
mountinfo_cgroup2_root (char *line, void *arg)
{
  struct str_out *o = arg;
  char *f[5], *p = line;

  if (strstr (line, " - cgroup2 ") == NULL)
    return -1;
  for (int i = 0; i < 5; i++)
    {
      f[i] = p;
      if ((p = strchr (p, ' ')) == NULL)
        return -1;
      *p++ = '\0';
    }
  if (strcmp (f[3], "/") != 0 || strchr (f[4], '\\') != NULL)
    return -1;
  return snprintf (o->s, o->size, "%s", f[4]) < (int) o->size ? 0 : -1;
}

/* The cgroup2 line of /proc/self/cgroup ("0::/PATH"): PATH into the output, 0. */
static int
own_cgroup2_path (char *line, void *arg)
{
  struct str_out *o = arg;

  if (strncmp (line, "0::/", 4) != 0)
    return -1;
  return snprintf (o->s, o->size, "%s", line + 3) < (int) o->size ? 0 : -1;
}

/* Our own cgroup2 cgroup.procs opened for writing, or -1. System calls only (proc_lines). */
static int
open_own_procs (void)
{
  char cg[1024], mp[256], path[1400];
  struct str_out c = { cg, sizeof cg }, m = { mp, sizeof mp };

  if (proc_lines ("/proc/self/cgroup", own_cgroup2_path, &c) < 0
      || proc_lines ("/proc/self/mountinfo", mountinfo_cgroup2_root, &m) < 0
      || snprintf (path, sizeof path, "%s%s/cgroup.procs", mp, cg) >= (int) sizeof path)
    return -1;
  return open (path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
}

static void __attribute__ ((noreturn)) prime_child (void)
{
  /* hold none of the caller's fds (pipes it waits on for EOF, --preserve-fds, sockets) */
  syscall (SYS_close_range, 0U, ~0U, 0U);
  int fd = open_own_procs ();
  if (fd >= 0)
    (void) !write (fd, "0", 1);
  _exit (0);
}

/* set by asbx_cgroup_prime_done: the move the window was kept open for is done */
static volatile sig_atomic_t prime_stop;

void
asbx_cgroup_prime_done (void)
{
  __atomic_store_n (&prime_stop, 1, __ATOMIC_RELAXED);
}

/* The keep thread: system calls only (no malloc, no stdio), so that it never holds a lock of
 * the C library's while the main thread forks the processes that go on to run container code. */
static void *
prime_thread (void *arg)
{
  struct timespec period = { 0, PRIME_PERIOD_MS * 1000000L };
  /* opened here, not by the main thread before it starts us: reading /proc/self/cgroup and
   * mountinfo (~0.15 ms, the kernel formatting every mount) stays off the runtime's own path */
  int fd = open_own_procs ();
  (void) arg;

  for (int i = 0; fd >= 0 && i * PRIME_PERIOD_MS < PRIME_WINDOW_MS && !__atomic_load_n (&prime_stop, __ATOMIC_RELAXED);
       i++)
    {
      if (pwrite (fd, "0", 1, 0) != 1)
        break;
      nanosleep (&period, NULL);
    }
  if (fd >= 0)
    close (fd);
  return NULL;
}

/* Before the re-exec: fork the "start" child; the caller goes on at once. */
static void
prime_start (void)
{
  if (getenv ("AGENTSBX_NO_CGROUP_PRIME"))
    return;
  if (fork () == 0)
    prime_child ();
}

/* In the re-executed runtime: the "keep" thread (detached; gone by exit at the latest). */
static void
prime_keep (void)
{
  pthread_attr_t attr;
  pthread_t t;

#if ASBX_SANITIZED
  /* clang 14's sanitizer runtimes do not make their allocator safe across a fork() taken while
   * another thread is inside it (seen: children hung in ASan's malloc); the sanitizer build is
   * for finding bugs, not for speed: no keep thread there */
  return;
#endif
  if (getenv ("AGENTSBX_NO_CGROUP_PRIME"))
    return;
  if (pthread_attr_init (&attr) != 0)
    return;
  /* glibc's default is an 8 MiB mapping; the loop needs a few hundred bytes */
  (void) pthread_attr_setstacksize (&attr, (size_t) 64 * 1024);
  (void) pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  /* the thread starts with every signal blocked (it inherits the creator's mask): a signal sent
   * to the runtime must reach the main thread's handlers/signalfd (tty.c's SIGWINCH and signal
   * proxy, run's forwarding) - in this thread it would take the default action instead */
  sigset_t all, old;
  sigfillset (&all);
  if (pthread_sigmask (SIG_SETMASK, &all, &old) == 0)
    {
      (void) pthread_create (&t, &attr, prime_thread, NULL);
      (void) pthread_sigmask (SIG_SETMASK, &old, NULL);
    }
  pthread_attr_destroy (&attr);
}

void
asbx_ensure_sealed_exe (char **argv, bool keep_secrets)
{
  extern char **environ;
  cleanup_close int src = -1, mfd = -1, ofd = -1;
  struct stat sb;

  const bool sealed = running_sealed (); /* once: it consumes the overlay's mark */
  if (sealed && !secret_env_present ())
    {
      secret_env_adopt (); /* the memfd our previous image made, when it was asked to keep one */
      prime_keep ();
      return;
    }
  /* the environment's secrets leave environ before any execve of ours (runtime/secret_env.h); a
   * sealed image started with them (not by us) is re-executed once more without them */
  if (secret_env_stash (keep_secrets) < 0)
    {
      fprintf (stderr, "agentsbx: cannot move the AGENTSBX_SECRET_* variables out of the environment: %s\n",
               strerror (errno));
      exit (1);
    }
  if (sealed)
    {
      src = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
      if (src >= 0)
        fexecve (src, argv, environ);
      goto fail;
    }
  prime_start ();
  src = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (src < 0 || fstat (src, &sb) < 0)
    goto fail;
  ofd = overlay_exe (src);
  if (ofd >= 0)
    {
      setenv (ENV_MARK, "overlay", 1);
      fexecve (ofd, argv, environ);
      unsetenv (ENV_MARK); /* could not execute it: fall back to the copy */
    }
  mfd = memfd_create ("agentsbx", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mfd < 0)
    goto fail;
  off_t want = loaded_extent (src, sb.st_size);
  for (off_t left = want, off = 0; left > 0;)
    {
      ssize_t n = sendfile (mfd, src, &off, (size_t) left);
      if (n <= 0)
        goto fail;
      left -= n;
    }
  if (want < sb.st_size && drop_section_table (mfd) < 0)
    goto fail;
  if (fcntl (mfd, F_ADD_SEALS, SEALS) < 0)
    goto fail;
  fexecve (mfd, argv, environ);
fail:
  fprintf (stderr, "agentsbx: cannot re-execute from a sealed copy of the binary: %s\n", strerror (errno));
  exit (1);
}
