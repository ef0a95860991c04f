/* selfexe.c - run the runtime from a sealed memfd copy of itself (CVE-2019-5736 class).
 *
 * A container process can reach the runtime binary through /proc/<runtime pid>/exe while the
 * runtime is in the container's pid namespace (exec, init before execve). If that file is a
 * sealed, anonymous memfd, opening it for write fails (F_SEAL_WRITE) and the host binary is
 * never exposed.
 *
 * Cost (docs/performance.md): the copy is charged per create/run/exec, to the caller's memory
 * cgroup too. Only the bytes the loader maps are copied - the file up to the end of the last
 * PT_LOAD segment; debug info and the section table that follow are not needed to run (the copy's
 * header says it has no sections). That cut the copy from 1.6 MiB to ~380 KiB on a -g build and
 * the copy + re-exec from ~2.5 ms to ~1.7 ms. The file is our own /proc/self/exe; anything
 * unexpected in its headers falls back to copying the whole file. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "runtime/container.h"

#define SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

static int
running_sealed (void)
{
  cleanup_close int fd = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  int seals = fcntl (fd, F_GET_SEALS);
  return seals >= 0 && (seals & SEALS) == SEALS;
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
 * 6-12 ms on this VM, the largest single item of a `run` (docs/performance.md). Writers that
 * come while the rcu_sync is still in writer mode - during that wait, or within about one more
 * grace period after the last writer left - do not wait again. So a child forked here, before
 * the re-exec, writes "0" (itself) into the cgroup.procs of the cgroup it is already in: a
 * migration that moves nothing but starts the grace period while the runtime loads, parses the
 * config and spawns; when create/exec later moves the container's process, the wait is over
 * or partly over. The child changes no cgroup membership (same cgroup) and charges nothing of
 * note; any failure (no cgroup2 mount, EACCES when rootless) only loses the head start.
 * Source: kernel/rcu/sync.c (rcu_sync_enter/exit states), kernel/cgroup/cgroup.c
 * (cgroup_attach_lock, cgroup_procs_write). The child is reaped by whoever waits for it or by
 * the kernel when the runtime exits (it exits within the grace period). */

/* The cgroup2 mount point that shows the root of the hierarchy, from /proc/self/mountinfo
 * ("ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER"). Octal escapes in the
 * mount point are not decoded: such a mount is skipped. */
static int
cgroup2_mountpoint (char *out, size_t size)
{
  cleanup_fclose FILE *f = fopen ("/proc/self/mountinfo", "re");
  char line[1024];

  while (f && fgets (line, sizeof line, f))
    {
      char root[256], mp[256];
      const char *sep = strstr (line, " - cgroup2 ");
      if (sep && sscanf (line, "%*s %*s %*s %255s %255s", root, mp) == 2 && strcmp (root, "/") == 0
          && strchr (mp, '\\') == NULL)
        return snprintf (out, size, "%s", mp) < (int) size ? 0 : -1;
    }
  return -1;
}

static void __attribute__ ((noreturn))
prime_child (void)
{
  cleanup_fclose FILE *f = fopen ("/proc/self/cgroup", "re");
  char line[1024], mp[256], path[1400];

  while (f && fgets (line, sizeof line, f))
    if (strncmp (line, "0::/", 4) == 0)
      {
        line[strcspn (line, "\n")] = '\0';
        if (cgroup2_mountpoint (mp, sizeof mp) == 0
            && snprintf (path, sizeof path, "%s%s/cgroup.procs", mp, line + 3) < (int) sizeof path)
          {
            int fd = open (path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
            if (fd >= 0)
              (void) !write (fd, "0", 1);
          }
        break;
      }
  _exit (0);
}

/* Fork the child described above; the caller goes on at once. */
static void
prime_cgroup_migration (void)
{
  if (getenv ("AGENTSBX_NO_CGROUP_PRIME"))
    return;
  if (fork () == 0)
    prime_child ();
}

void
asbx_ensure_sealed_exe (char **argv)
{
  extern char **environ;
  cleanup_close int src = -1, mfd = -1;
  struct stat sb;

  if (running_sealed ())
    return;
  prime_cgroup_migration ();
  src = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (src < 0 || fstat (src, &sb) < 0)
    goto fail;
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
