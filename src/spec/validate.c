/* validate.c - config.json semantic checks before anything is created. Pure: no syscalls; the
 * host's LSM state comes in as struct spec_host (probed by the runtime, container_create.c),
 * and the mechanism modules' own value checks (process.scheduler, linux.memoryPolicy) are run
 * by the runtime right after this (create_check). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "spec/validate.h"

/* Is a namespace of this runtime-spec type ("mount", "user", ...) listed; *has_path: joined */
static bool
ns_listed (const struct oci_linux *l, const char *type, bool *has_path)
{
  for (size_t i = 0; l && i < l->namespaces_len; i++)
    if (l->namespaces[i].type && strcmp (l->namespaces[i].type, type) == 0)
      {
        if (has_path)
          *has_path = l->namespaces[i].path && *l->namespaces[i].path;
        return true;
      }
  return false;
}

static int
validate_process (const struct oci_process *p, const char *name, asbx_err_t *err)
{
  if (p == NULL)
    return asbx_error (err, 0, "%s: process: required", name);
  if (p->args_len == 0 || p->args[0] == NULL || p->args[0][0] == '\0')
    return asbx_error (err, 0, "%s: process.args: expected at least one argument", name);
  if (p->cwd == NULL || p->cwd[0] != '/')
    return asbx_error (err, 0, "%s: process.cwd: expected an absolute path", name);
  if (p->exec_cpu_affinity)
    return asbx_error (err, 0, "%s: process.execCPUAffinity: not supported by this build", name);
  return 0;
}

static int
validate_lsm (const struct oci_spec *s, const struct spec_host *host, const char *name, asbx_err_t *err)
{
  /* runc: a label asked for while the LSM is not enabled is ignored (debug message) */
  if (s->process->apparmor_profile && *s->process->apparmor_profile)
    {
#ifndef HAVE_APPARMOR
      if (host->apparmor_enabled)
        return asbx_error (err, 0, "%s: process.apparmorProfile: AppArmor is enabled but this build lacks libapparmor",
                           name);
#endif
      if (!host->apparmor_enabled)
        log_debug ("process.apparmorProfile `%s` ignored: AppArmor is not enabled", s->process->apparmor_profile);
    }
  const char *labels[] = { s->process->selinux_label, s->linux_ ? s->linux_->mount_label : NULL };
  const char *fields[] = { "process.selinuxLabel", "linux.mountLabel" };
  for (int i = 0; i < 2; i++)
    if (labels[i] && *labels[i])
      {
#ifndef HAVE_SELINUX
        if (host->selinux_enabled)
          return asbx_error (err, 0, "%s: %s: SELinux is enabled but this build lacks libselinux", name, fields[i]);
#endif
        /* fail closed: linux_selinux_mount_data() exists but the mount code does not call it yet */
        if (host->selinux_enabled && i == 1)
          return asbx_error (err, 0, "%s: linux.mountLabel: not applied to mounts by this build yet", name);
        if (host->selinux_enabled)
          continue;
        log_debug ("%s `%s` ignored: SELinux is not enabled", fields[i], labels[i]);
      }
  return 0;
}

static int
validate_linux (const struct oci_spec *s, const char *name, asbx_err_t *err)
{
  const struct oci_linux *l = s->linux_;
  bool has_path = false;

  if (l == NULL)
    return asbx_error (err, 0, "%s: linux: required (namespaces, mounts)", name);
  if (!ns_listed (l, "mount", &has_path))
    {
      /* the runtime's mount namespace (runc's "no mount entry"): the container chroots into the
       * rootfs there; what would change the shared namespace itself is refused */
      if (s->root && s->root->readonly)
        return asbx_error (err, 0,
                           "%s: root.readonly: needs a new mount namespace (remounting \"/\" read-only in the "
                           "runtime's namespace would make the host's mount read-only)",
                           name);
      /* runc's rule too: masks in a shared namespace are the container's to undo */
      if (l->masked_paths_len || l->readonly_paths_len)
        return asbx_error (err, 0,
                           "%s: linux.%s: needs a new mount namespace (unable to restrict entries in the "
                           "runtime's mount namespace)",
                           name, l->masked_paths_len ? "maskedPaths" : "readonlyPaths");
      if (l->rootfs_propagation && *l->rootfs_propagation)
        return asbx_error (err, 0,
                           "%s: linux.rootfsPropagation: needs a new mount namespace (it would change the "
                           "propagation of the runtime's \"/\")",
                           name);
    }
  bool user = ns_listed (l, "user", &has_path);
  if ((l->uid_mappings_len || l->gid_mappings_len) && !user)
    return asbx_error (err, 0, "%s: linux.uidMappings: mappings given without a user namespace", name);
  if (user && !has_path && (l->uid_mappings_len == 0 || l->gid_mappings_len == 0))
    return asbx_error (err, 0, "%s: linux.uidMappings: a new user namespace needs uid and gid mappings", name);
  if (user && has_path && (l->uid_mappings_len || l->gid_mappings_len))
    return asbx_error (err, 0, "%s: linux.uidMappings: cannot be set when joining an existing user namespace", name);
  if (l->has_time_offsets_boottime || l->has_time_offsets_monotonic)
    if (!ns_listed (l, "time", &has_path) || has_path)
      return asbx_error (err, 0, "%s: linux.timeOffsets: needs a new time namespace", name);
  if ((s->hostname && *s->hostname) && !ns_listed (l, "uts", NULL))
    return asbx_error (err, 0, "%s: hostname: unable to set hostname without a private UTS namespace", name);
  if ((s->domainname && *s->domainname) && !ns_listed (l, "uts", NULL))
    return asbx_error (err, 0, "%s: domainname: unable to set domainname without a private UTS namespace", name);
  if (l->intel_rdt)
    return asbx_error (err, 0, "%s: linux.intelRdt: not supported", name);
  if (l->personality)
    return asbx_error (err, 0, "%s: linux.personality: not supported by this build yet", name);
  if (l->net_devices_len)
    return asbx_error (err, 0, "%s: linux.netDevices: not supported by this build yet", name);
  return 0;
}

int
spec_validate (const struct oci_spec *s, const struct spec_host *host, const char *name, asbx_err_t *err)
{
  if (s->root == NULL || s->root->path == NULL || s->root->path[0] == '\0')
    return asbx_error (err, 0, "%s: root.path: required", name);
  if (validate_process (s->process, name, err) < 0)
    return -1;
  if (validate_linux (s, name, err) < 0)
    return -1;
  if (validate_lsm (s, host, name, err) < 0)
    return -1;
  for (size_t i = 0; i < s->mounts_len; i++)
    if (s->mounts[i].destination == NULL || s->mounts[i].destination[0] == '\0')
      return asbx_error (err, 0, "%s: mounts[%zu].destination: required", name, i);
  if (s->hooks)
    {
      const struct
      {
        const char *n;
        const struct oci_hook *h;
        size_t len;
      } lists[] = {
        { "prestart", s->hooks->prestart, s->hooks->prestart_len },
        { "createRuntime", s->hooks->create_runtime, s->hooks->create_runtime_len },
        { "createContainer", s->hooks->create_container, s->hooks->create_container_len },
        { "startContainer", s->hooks->start_container, s->hooks->start_container_len },
        { "poststart", s->hooks->poststart, s->hooks->poststart_len },
        { "poststop", s->hooks->poststop, s->hooks->poststop_len },
      };
      for (size_t k = 0; k < ASBX_ARRAY_SIZE (lists); k++)
        for (size_t i = 0; i < lists[k].len; i++)
          {
            if (!lists[k].h[i].path || lists[k].h[i].path[0] != '/')
              return asbx_error (err, 0, "%s: hooks.%s[%zu].path: expected an absolute path", name, lists[k].n, i);
            if (lists[k].h[i].has_timeout && lists[k].h[i].timeout <= 0)
              return asbx_error (err, 0, "%s: hooks.%s[%zu].timeout: expected a value greater than zero", name,
                                 lists[k].n, i);
          }
    }
  return 0;
}
