/* mountopts.c - the OCI mount option table (config.md "Mounts"; runc 1.1 specconv's mountPropagationMapping
 * and recursive flags of runtime-spec 1.1 "mount_setattr"). Pure code, no syscalls.
 *
 * Semantics kept from mount(8)/runc: options apply left to right and the last one touching a
 * flag wins; the atime mode is one field (noatime | relatime | strictatime), so every atime option
 * rewrites the whole field (mount_setattr(2) refuses a partial clear of MOUNT_ATTR__ATIME).
 * "atime", "norelatime" and "nostrictatime" select the kernel default, relatime, which is what
 * mount(2) ends up with when those flags are cleared.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/mountopts.h"

enum opt_kind
{
  K_ATTR,   /* per-mount attribute bit, top mount */
  K_RATTR,  /* per-mount attribute bit, recursive */
  K_ATIME,  /* atime mode, top mount */
  K_RATIME, /* atime mode, recursive */
  K_PROP,   /* propagation, top mount */
  K_RPROP,  /* propagation, recursive */
  K_SB,     /* superblock flag (new filesystems only) */
  K_NOP,    /* default superblock behaviour: async, nomand; silent, loud (see the table) */
  K_DATA,   /* a filesystem parameter named in the features document: passed on as data */
  K_BIND,
  K_RBIND,
  K_REMOUNT,
  K_IDMAP,
  K_RIDMAP,
  K_TMPCOPYUP,
};

struct opt_def
{
  const char *name;
  enum opt_kind kind;
  bool set; /* K_ATTR/K_RATTR: set (true) or clear (false) the bit */
  uint64_t value;
};

static const struct opt_def opt_table[] = {
  { "bind", K_BIND, true, 0 },
  { "rbind", K_RBIND, true, 0 },
  { "remount", K_REMOUNT, true, 0 },
  { "idmap", K_IDMAP, true, 0 },
  { "ridmap", K_RIDMAP, true, 0 },
  { "tmpcopyup", K_TMPCOPYUP, true, 0 },

  { "ro", K_ATTR, true, MOUNT_ATTR_RDONLY },
  { "rw", K_ATTR, false, MOUNT_ATTR_RDONLY },
  { "nosuid", K_ATTR, true, MOUNT_ATTR_NOSUID },
  { "suid", K_ATTR, false, MOUNT_ATTR_NOSUID },
  { "nodev", K_ATTR, true, MOUNT_ATTR_NODEV },
  { "dev", K_ATTR, false, MOUNT_ATTR_NODEV },
  { "noexec", K_ATTR, true, MOUNT_ATTR_NOEXEC },
  { "exec", K_ATTR, false, MOUNT_ATTR_NOEXEC },
  { "nodiratime", K_ATTR, true, MOUNT_ATTR_NODIRATIME },
  { "diratime", K_ATTR, false, MOUNT_ATTR_NODIRATIME },
  { "nosymfollow", K_ATTR, true, MOUNT_ATTR_NOSYMFOLLOW },
  { "symfollow", K_ATTR, false, MOUNT_ATTR_NOSYMFOLLOW },
  { "noatime", K_ATIME, true, MOUNT_ATTR_NOATIME },
  { "atime", K_ATIME, true, MOUNT_ATTR_RELATIME },
  { "relatime", K_ATIME, true, MOUNT_ATTR_RELATIME },
  { "norelatime", K_ATIME, true, MOUNT_ATTR_RELATIME },
  { "strictatime", K_ATIME, true, MOUNT_ATTR_STRICTATIME },
  { "nostrictatime", K_ATIME, true, MOUNT_ATTR_RELATIME },

  { "rro", K_RATTR, true, MOUNT_ATTR_RDONLY },
  { "rrw", K_RATTR, false, MOUNT_ATTR_RDONLY },
  { "rnosuid", K_RATTR, true, MOUNT_ATTR_NOSUID },
  { "rsuid", K_RATTR, false, MOUNT_ATTR_NOSUID },
  { "rnodev", K_RATTR, true, MOUNT_ATTR_NODEV },
  { "rdev", K_RATTR, false, MOUNT_ATTR_NODEV },
  { "rnoexec", K_RATTR, true, MOUNT_ATTR_NOEXEC },
  { "rexec", K_RATTR, false, MOUNT_ATTR_NOEXEC },
  { "rnodiratime", K_RATTR, true, MOUNT_ATTR_NODIRATIME },
  { "rdiratime", K_RATTR, false, MOUNT_ATTR_NODIRATIME },
  { "rnosymfollow", K_RATTR, true, MOUNT_ATTR_NOSYMFOLLOW },
  { "rsymfollow", K_RATTR, false, MOUNT_ATTR_NOSYMFOLLOW },
  { "rnoatime", K_RATIME, true, MOUNT_ATTR_NOATIME },
  { "ratime", K_RATIME, true, MOUNT_ATTR_RELATIME },
  { "rrelatime", K_RATIME, true, MOUNT_ATTR_RELATIME },
  { "rnorelatime", K_RATIME, true, MOUNT_ATTR_RELATIME },
  { "rstrictatime", K_RATIME, true, MOUNT_ATTR_STRICTATIME },
  { "rnostrictatime", K_RATIME, true, MOUNT_ATTR_RELATIME },

  { "private", K_PROP, true, MS_PRIVATE },
  { "rprivate", K_RPROP, true, MS_PRIVATE },
  { "shared", K_PROP, true, MS_SHARED },
  { "rshared", K_RPROP, true, MS_SHARED },
  { "slave", K_PROP, true, MS_SLAVE },
  { "rslave", K_RPROP, true, MS_SLAVE },
  { "unbindable", K_PROP, true, MS_UNBINDABLE },
  { "runbindable", K_RPROP, true, MS_UNBINDABLE },

  { "sync", K_SB, true, MOUNTOPTS_SB_SYNC },
  { "dirsync", K_SB, true, MOUNTOPTS_SB_DIRSYNC },
  { "mand", K_SB, true, MOUNTOPTS_SB_MAND },
  { "async", K_SB, false, MOUNTOPTS_SB_SYNC },
  { "nomand", K_SB, false, MOUNTOPTS_SB_MAND },
  { "lazytime", K_SB, true, MOUNTOPTS_SB_LAZYTIME },
  { "nolazytime", K_SB, false, MOUNTOPTS_SB_LAZYTIME },
  /* MS_SILENT only keeps mount(2)'s messages out of the kernel log; with fsopen(2) they go to the
   * fs-context fd, which mount.c reads into the error and never to the log: nothing to do */
  { "silent", K_NOP, true, 0 },
  { "loud", K_NOP, true, 0 },
  /* MS_POSIXACL has no fs-context flag: ext4, btrfs, f2fs... parse "acl"/"noacl" themselves, and
   * a filesystem without ACL support refuses them (the fs-context log is in the error) */
  { "acl", K_DATA, true, 0 },
  { "noacl", K_DATA, true, 0 },
};

static int
cmp_name (const void *a, const void *b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* opt_table's names (all, or those of `features`), sorted into the static `names` */
static const char *const *
sorted_names (const char **names, bool features)
{
  size_t n = 0;
  if (names[0])
    return names;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (opt_table); i++)
    if (!features || opt_table[i].kind != K_TMPCOPYUP)
      names[n++] = opt_table[i].name;
  if (features)
    names[n++] = "defaults";
  qsort (names, n, sizeof (names[0]), cmp_name);
  return names;
}

const char *const *
mount_opts_names (void)
{
  static const char *names[ASBX_ARRAY_SIZE (opt_table) + 1];
  return sorted_names (names, false);
}

const char *const *
mount_opts_feature_names (void)
{
  static const char *names[ASBX_ARRAY_SIZE (opt_table) + 2];
  return sorted_names (names, true);
}

static const struct opt_def *
lookup (const char *name)
{
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (opt_table); i++)
    if (strcmp (opt_table[i].name, name) == 0)
      return &opt_table[i];
  return NULL;
}

static void
apply_bit (uint64_t *set, uint64_t *clr, bool on, uint64_t bit)
{
  if (on)
    {
      *set |= bit;
      *clr &= ~bit;
    }
  else
    {
      *clr |= bit;
      *set &= ~bit;
    }
}

/* the atime mode is a 3-bit field: clear the whole field and set the mode */
static void
apply_atime (uint64_t *set, uint64_t *clr, uint64_t mode)
{
  *set = (*set & ~(uint64_t) MOUNT_ATTR__ATIME) | mode;
  *clr |= MOUNT_ATTR__ATIME;
}

static void
append_data (char **data, const char *opt)
{
  char *n = *data ? xasprintf ("%s,%s", *data, opt) : xstrdup (opt);
  free (*data);
  *data = n;
}

static void
apply_def (struct mount_opts *o, const struct opt_def *d)
{
  switch (d->kind)
    {
    case K_ATTR: apply_bit (&o->attr_set, &o->attr_clr, d->set, d->value); break;
    case K_RATTR: apply_bit (&o->rattr_set, &o->rattr_clr, d->set, d->value); break;
    case K_ATIME: apply_atime (&o->attr_set, &o->attr_clr, d->value); break;
    case K_RATIME: apply_atime (&o->rattr_set, &o->rattr_clr, d->value); break;
    case K_PROP:
    case K_RPROP:
      o->propagation = d->value;
      o->propagation_recursive = d->kind == K_RPROP;
      break;
    case K_SB:
      if (d->set)
        o->sb_set |= (unsigned) d->value;
      else
        o->sb_set &= ~(unsigned) d->value;
      break;
    case K_NOP: break;
    case K_DATA: append_data (&o->data, d->name); break;
    case K_BIND: o->bind = true; break;
    case K_RBIND: o->bind = o->recursive = true; break;
    case K_REMOUNT: o->remount = true; break;
    case K_IDMAP: o->idmap = true; break;
    case K_RIDMAP: o->ridmap = true; break;
    case K_TMPCOPYUP: o->tmpcopyup = true; break;
    }
}

int
mount_opts_parse (char *const *options, size_t n, struct mount_opts *out, asbx_err_t *err)
{
  struct mount_opts o = { 0 };

  for (size_t i = 0; i < n; i++)
    {
      const char *opt = options[i];
      const struct opt_def *d;

      if (opt == NULL || *opt == '\0')
        {
          mount_opts_free (&o);
          return asbx_error (err, EINVAL, "options[%zu]: empty mount option", i);
        }
      d = lookup (opt);
      if (d)
        apply_def (&o, d);
      else
        append_data (&o.data, opt);
    }
  *out = o;
  return 0;
}

void
mount_opts_free (struct mount_opts *o)
{
  free (o->data);
  o->data = NULL;
}
