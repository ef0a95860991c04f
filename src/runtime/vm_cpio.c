/* vm_cpio.c - the vm tier's initramfs: a cpio "newc" archive (the format the kernel unpacks:
 * Documentation/driver-api/early-userspace/buffer-format.rst) holding this binary as /init, the
 * shared objects it runs with and the guest kernel's modules for virtio-mmio, virtio-serial and
 * 9p. The libraries are the ones this process has loaded (dl_iterate_phdr): exactly what the
 * dynamic loader resolved for us, at the same paths, so the guest needs no ldd and no copy of
 * the host's library tree. */
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/nft.h"
#include "runtime/vm.h"

struct cpio
{
  int fd;
  unsigned ino;
  char **seen; /* directories and files already written */
  size_t seen_len;
};

static int
cpio_pad (struct cpio *c, size_t len)
{
  static const char zero[4] = { 0 };
  size_t pad = (4 - (len & 3)) & 3;
  return pad ? write_all (c->fd, zero, pad) : 0;
}

/* One entry: header, name, data (regular files and symlinks); each padded to 4 bytes. */
static int
cpio_entry (struct cpio *c, const char *name, mode_t mode, const void *data, size_t len)
{
  char hdr[160];
  size_t nlen = strlen (name) + 1;
  snprintf (hdr, sizeof hdr, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ++c->ino, (unsigned) mode,
            0u, 0u, S_ISDIR (mode) ? 2u : 1u, 0u, (unsigned) len, 0u, 0u, 0u, 0u, (unsigned) nlen, 0u);
  if (write_all (c->fd, hdr, 110) < 0 || write_all (c->fd, name, nlen) < 0 || cpio_pad (c, 110 + nlen) < 0
      || (len && write_all (c->fd, data, len) < 0) || cpio_pad (c, len) < 0)
    return -1;
  return 0;
}

static bool
cpio_seen (struct cpio *c, const char *name)
{
  for (size_t i = 0; i < c->seen_len; i++)
    if (strcmp (c->seen[i], name) == 0)
      return true;
  c->seen = xrealloc (c->seen, (c->seen_len + 1) * sizeof (char *));
  c->seen[c->seen_len++] = xstrdup (name);
  return false;
}

/* every parent directory of `path` (absolute), once; names in the archive are relative */
static int
cpio_parents (struct cpio *c, const char *path)
{
  cleanup_free char *p = xstrdup (path + 1);
  for (char *s = strchr (p, '/'); s; s = strchr (s + 1, '/'))
    {
      *s = '\0';
      if (!cpio_seen (c, p) && cpio_entry (c, p, S_IFDIR | 0755, NULL, 0) < 0)
        return -1;
      *s = '/';
    }
  return 0;
}

/* host file `src` at archive path `dst` (absolute) */
static int
cpio_file (struct cpio *c, const char *src, const char *dst, mode_t mode, asbx_err_t *err)
{
  cleanup_free char *data = NULL;
  size_t len = 0;
  if (cpio_seen (c, dst + 1))
    return 0;
  if (read_file_at (AT_FDCWD, src, 256u << 20, &data, &len, err) < 0)
    return -1;
  if (cpio_parents (c, dst) < 0 || cpio_entry (c, dst + 1, S_IFREG | mode, data, len) < 0)
    return asbx_error (err, errno, "initramfs: write %s", dst);
  return 0;
}

/* PT_INTERP of our own executable ("/lib64/ld-linux-x86-64.so.2"), or NULL for a static one */
static char *
elf_interp (void)
{
  cleanup_close int fd = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  Elf64_Ehdr eh;
  if (fd < 0 || pread (fd, &eh, sizeof eh, 0) != (ssize_t) sizeof eh || memcmp (eh.e_ident, ELFMAG, SELFMAG) != 0
      || eh.e_ident[EI_CLASS] != ELFCLASS64)
    return NULL;
  for (unsigned i = 0; i < eh.e_phnum; i++)
    {
      Elf64_Phdr ph;
      if (pread (fd, &ph, sizeof ph, (off_t) (eh.e_phoff + (uint64_t) i * eh.e_phentsize)) != (ssize_t) sizeof ph)
        return NULL;
      if (ph.p_type == PT_INTERP && ph.p_filesz > 1 && ph.p_filesz < 4096)
        {
          char *s = xmalloc0 (ph.p_filesz + 1);
          if (pread (fd, s, ph.p_filesz, (off_t) ph.p_offset) != (ssize_t) ph.p_filesz)
            {
              free (s);
              return NULL;
            }
          return s;
        }
    }
  return NULL;
}

struct libs_ud
{
  struct cpio *c;
  asbx_err_t *err;
  int r;
};

static int
one_lib (struct dl_phdr_info *info, size_t size, void *ud_)
{
  struct libs_ud *ud = ud_;
  (void) size;
  if (ud->r < 0 || !info->dlpi_name || info->dlpi_name[0] != '/')
    return 0; /* the executable itself ("") and the vDSO */
  ud->r = cpio_file (ud->c, info->dlpi_name, info->dlpi_name, 0755, ud->err);
  return 0;
}

/* the shared objects loaded in this process, each at the path the loader found it under (its
 * soname in a default directory: the guest's loader, without ld.so.cache, looks there) */
static int
cpio_loaded_libs (struct cpio *c, asbx_err_t *err)
{
  struct libs_ud ud = { .c = c, .err = err };
  dl_iterate_phdr (one_lib, &ud);
  return ud.r;
}

/* Is kernel/<mod> built into the kernel? modules.builtin (beside kernel/, in the package: one
 * "kernel/<path>.ko" line per built-in module) says so. Debian's 6.12 builds virtio, virtio_ring
 * and virtio_console in, 6.1 had them as modules. */
static bool
mod_builtin (const char *moddir, const char *mod)
{
  cleanup_free char *path = xasprintf ("%s/../modules.builtin", moddir);
  cleanup_free char *text = NULL;
  size_t len = 0, mlen = strlen (mod);
  asbx_err_t e = NULL;
  if (read_file_at (AT_FDCWD, path, 4u << 20, &text, &len, &e) < 0)
    {
      asbx_error_free (&e);
      return false;
    }
  for (char *l = text; l && *l; l = strchr (l, '\n') ? strchr (l, '\n') + 1 : NULL)
    if (strncmp (l, "kernel/", 7) == 0 && strncmp (l + 7, mod, mlen) == 0 && (l[7 + mlen] == '\n' || !l[7 + mlen]))
      return true;
  return false;
}

/* The file of module `mod` (a ".ko" path under moddir) as the package ships it: as named, or
 * compressed (Debian's 6.12 ships .ko.xz, 6.1 plain .ko; the guest kernel decompresses them,
 * vm_guest.c). Returns it (heap), or NULL with *builtin when the kernel has it built in, or NULL
 * and *err (ENOENT, naming the module) when it has neither. */
static char *
mod_file (const char *moddir, const char *mod, bool *builtin, asbx_err_t *err)
{
  static const char *const suffixes[] = { "", ".xz", ".zst", ".gz" };
  *builtin = false;
  for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++)
    {
      char *p = xasprintf ("%s/%s%s", moddir, mod, suffixes[i]);
      if (access (p, R_OK) == 0)
        return p;
      free (p);
    }
  if (mod_builtin (moddir, mod))
    {
      *builtin = true;
      return NULL;
    }
  asbx_error (err, ENOENT,
              "initramfs: the guest kernel has no module %s: neither %s/%s[.xz|.zst|.gz] nor built in (its "
              "modules.builtin)",
              mod, moddir, mod);
  return NULL;
}

int
vm_cpio_write (int fd, const char *moddir, const char *const *mods, asbx_err_t *err)
{
  struct cpio c = { .fd = fd };
  cleanup_free char *interp = elf_interp ();
  cleanup_free char *order = xstrdup ("");
  int ret = -1;

  /* libnftables is loaded on use (linux/nft.c); the guest's agentsbx loads the container's
   * table, so it is mapped here first and then copied with the rest */
  if (linux_nft_preload (err) < 0 || cpio_file (&c, "/proc/self/exe", "/init", 0755, err) < 0
      || cpio_loaded_libs (&c, err) < 0)
    goto out;
  /* the loader's name as the binary asks for it (a symlink into /usr on a merged-/usr host) */
  if (interp && interp[0] == '/' && !cpio_seen (&c, interp + 1))
    {
      char real[4096];
      if (realpath (interp, real) == NULL)
        {
          asbx_error (err, errno, "initramfs: the ELF interpreter %s", interp);
          goto out;
        }
      if (strcmp (real, interp) != 0
          && (cpio_parents (&c, interp) < 0 || cpio_entry (&c, interp + 1, S_IFLNK | 0777, real, strlen (real)) < 0))
        {
          asbx_error (err, errno, "initramfs: write");
          goto out;
        }
    }
  for (const char *const *m = mods; *m; m++)
    {
      bool builtin = false;
      cleanup_free char *src = mod_file (moddir, *m, &builtin, err);
      if (!src && builtin)
        continue;
      if (!src)
        goto out;
      const char *base = strrchr (src, '/') + 1;
      cleanup_free char *dst = xasprintf ("/modules/%s", base);
      char *o2 = xasprintf ("%s%s\n", order, base);
      free (order);
      order = o2;
      if (cpio_file (&c, src, dst, 0644, err) < 0)
        goto out;
    }
  for (const char *d = "dev\0proc\0sys\0run\0tmp\0"; *d; d += strlen (d) + 1)
    if (!cpio_seen (&c, d) && cpio_entry (&c, d, S_IFDIR | 0755, NULL, 0) < 0)
      goto werr;
  if (cpio_entry (&c, "modules/order", S_IFREG | 0644, order, strlen (order)) < 0
      || cpio_entry (&c, "TRAILER!!!", 0, NULL, 0) < 0)
    goto werr;
  ret = 0;
  goto out;
werr:
  asbx_error (err, errno, "initramfs: write");
out:
  for (size_t i = 0; i < c.seen_len; i++)
    free (c.seen[i]);
  free (c.seen);
  return ret;
}
