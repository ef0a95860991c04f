/* idmap.c - idmapped bind mounts (runtime-spec 1.2 mounts[].uidMappings/gidMappings and the
 * `idmap` / `ridmap` options; issue 15).
 *
 * Sources: mount_setattr(2) MOUNT_ATTR_IDMAP, Documentation/filesystems/idmappings.rst,
 * user_namespaces(7). An idmapped mount needs a user namespace carrying the mapping (its fd is
 * the attr's userns_fd) and CAP_SYS_ADMIN over the user namespace that owns the source
 * filesystem - the host's for a host directory. So P (host root, host user and mount namespace)
 * makes every idmapped mount before anything is spawned: a throw-away child unshares a user
 * namespace, P writes the mapping into it and keeps an fd of it, clones the source
 * (open_tree OPEN_TREE_CLONE) and sets MOUNT_ATTR_IDMAP on the detached clone. The init inherits
 * the detached mounts (fork keeps fds) and attaches them in the container's mount namespace like
 * any bind (linux/rootfs.c), with or without a user namespace of its own.
 *
 * Mapping semantics (idmappings.rst): an ID `containerID` on disk appears as `hostID`. Without
 * mappings on the mount, `idmap`/`ridmap` take the container's linux.uidMappings/gidMappings (the
 * common "make root-owned files the container root's" case, as crun). `idmap` (and mappings
 * without an option) map the top mount only, `ridmap` every submount of an rbind too (runc). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/idmap.h"
#include "linux/mount.h"
#include "linux/mountopts.h"
#include "linux/ns.h"

int
linux_userns_with_maps (const struct oci_linux *maps, asbx_err_t *err)
{
  int up[2], down[2];
  char c = 0;
  if (pipe2 (up, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "pipe");
  if (pipe2 (down, O_CLOEXEC) < 0)
    {
      close (up[0]);
      close (up[1]);
      return asbx_error (err, errno, "pipe");
    }
  pid_t pid = fork ();
  if (pid == 0)
    {
      /* the namespace holder: unshare, say so, wait for EOF, exit */
      close (up[0]);
      close (down[1]);
      char r = unshare (CLONE_NEWUSER) == 0 ? 1 : 0;
      if (write (up[1], &r, 1) != 1 || !r)
        _exit (1);
      while (read (down[0], &r, 1) < 0 && errno == EINTR)
        ;
      _exit (0);
    }
  close (up[1]);
  close (down[0]);
  int fd = -1;
  if (pid < 0)
    asbx_error (err, errno, "fork");
  else if (read (up[0], &c, 1) != 1 || !c)
    asbx_error (err, EPERM, "unshare a user namespace for the mount's id mapping");
  else if (ns_write_id_maps (pid, maps, err) == 0)
    {
      char p[64];
      snprintf (p, sizeof p, "/proc/%d/ns/user", (int) pid);
      fd = open (p, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        asbx_error (err, errno, "open %s", p);
    }
  close (up[0]);
  close (down[1]); /* EOF: the holder exits; the namespace lives on through fd */
  if (pid > 0)
    while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
      ;
  return fd;
}

/* The detached, idmapped clone for mounts[i] */
static int
idmap_one (const struct oci_spec *spec, const char *bundle, const struct oci_mount *m, const struct mount_opts *o,
           asbx_err_t *err)
{
  const struct oci_linux *cl = spec->linux_;
  struct oci_linux maps = { 0 };
  bool bind = o->bind || (m->type && strcmp (m->type, "bind") == 0);
  if (!bind)
    return asbx_error (err, EINVAL, "idmapped mounts must be bind mounts (type bind or option bind/rbind)");
  if (!m->source || !*m->source)
    return asbx_error (err, EINVAL, "bind mount without a source");
  if (m->uid_mappings_len || m->gid_mappings_len)
    {
      if (!m->uid_mappings_len || !m->gid_mappings_len)
        return asbx_error (err, EINVAL, "uidMappings and gidMappings must be given together");
      maps.uid_mappings = m->uid_mappings;
      maps.uid_mappings_len = m->uid_mappings_len;
      maps.gid_mappings = m->gid_mappings;
      maps.gid_mappings_len = m->gid_mappings_len;
    }
  else if (cl && cl->uid_mappings_len && cl->gid_mappings_len)
    {
      maps.uid_mappings = cl->uid_mappings;
      maps.uid_mappings_len = cl->uid_mappings_len;
      maps.gid_mappings = cl->gid_mappings;
      maps.gid_mappings_len = cl->gid_mappings_len;
    }
  else
    return asbx_error (err, EINVAL,
                       "option %s without uidMappings/gidMappings needs the container's linux.uidMappings and "
                       "linux.gidMappings",
                       o->ridmap ? "ridmap" : "idmap");
  cleanup_free char *src = m->source[0] == '/' ? xstrdup (m->source) : xasprintf ("%s/%s", bundle, m->source);
  cleanup_close int userns = linux_userns_with_maps (&maps, err);
  if (userns < 0)
    return -1;
  cleanup_close int mfd = mnt_clone (AT_FDCWD, src, o->recursive, err);
  if (mfd < 0)
    return -1;
  struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t) userns };
  if (mount_setattr (mfd, "", AT_EMPTY_PATH | (o->ridmap ? AT_RECURSIVE : 0), &attr, sizeof attr) < 0)
    return asbx_error (err, errno,
                       "mount_setattr(MOUNT_ATTR_IDMAP) on `%s`%s (the filesystem must support idmapped mounts; "
                       "a mount can be idmapped only once)",
                       src, o->ridmap ? " (recursive)" : "");
  return steal_fd (&mfd);
}

int
linux_idmap_prepare (const struct oci_spec *spec, const char *bundle, const char *name,
                     struct linux_mount_src **srcs_out, asbx_err_t *err)
{
  struct linux_mount_src *srcs = NULL;
  *srcs_out = NULL;
  for (size_t i = 0; i < spec->mounts_len; i++)
    {
      const struct oci_mount *m = &spec->mounts[i];
      struct mount_opts o;
      if (mount_opts_parse (m->options, m->options_len, &o, err) < 0)
        {
          linux_mount_srcs_free (srcs, i);
          return asbx_error_wrap (err, "%s: mounts[%zu] (%s)", name, i, m->destination ? m->destination : "");
        }
      if (!o.idmap && !o.ridmap && !m->uid_mappings_len && !m->gid_mappings_len)
        {
          mount_opts_free (&o);
          continue;
        }
      if (!srcs)
        srcs = linux_mount_srcs_new (spec->mounts_len);
      int fd = idmap_one (spec, bundle, m, &o, err);
      mount_opts_free (&o);
      if (fd < 0)
        {
          linux_mount_srcs_free (srcs, spec->mounts_len);
          return asbx_error_wrap (err, "%s: mounts[%zu] (%s)", name, i, m->destination ? m->destination : "");
        }
      srcs[i] = (struct linux_mount_src){ .fd = fd, .kind = LINUX_MOUNT_SRC_IDMAP };
    }
  *srcs_out = srcs;
  return 0;
}
