/* policy_hostfiles.c - no host privilege through what a policy container writes; see the header.
 *
 * Why these rules (inode(7), capabilities(7), chmod(2), open(2), mknod(2)):
 * - S_ISUID/S_ISGID reach a file only through a mode argument (chmod family, O_CREAT/O_TMPFILE
 *   open, creat, mknod; mkdir's are ignored by the kernel but refused alike) or by inheriting a
 *   setgid directory, which itself needs one of these calls. A write or chown by a process
 *   without CAP_FSETID clears them again.
 * - security.capability (file capabilities) can be written only with CAP_SETFCAP.
 * - device nodes need CAP_MKNOD (in the initial user namespace).
 * - a file changes owner only by chown (CAP_CHOWN for another uid, or a group the caller is not
 *   in) or by being created by a process of that uid; in a user namespace the kernel only lets
 *   mapped ids through, so without one (or with one mapping host root) CAP_CHOWN goes.
 * Hard links and renames of the host's own setuid files cannot reach the workspace: it is its
 * own mount in the container, and link(2)/rename(2) across mounts fail with EXDEV. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "runtime/policy_hostfiles.h"

#define MODE_BIT(name, argi, bit)                                                                                      \
  {                                                                                                                    \
    name, argi, "SCMP_CMP_MASKED_EQ", (bit), (bit), EPERM                                                              \
  }
#define MODE_RULES(name, argi) MODE_BIT (name, argi, S_ISUID), MODE_BIT (name, argi, S_ISGID)

const struct policy_syscall_rule policy_hostfile_rules[] = {
  MODE_RULES ("chmod", 1),
  MODE_RULES ("fchmod", 1),
  MODE_RULES ("fchmodat", 2),
  MODE_RULES ("fchmodat2", 2),
  MODE_RULES ("open", 2),
  MODE_RULES ("openat", 3),
  MODE_RULES ("creat", 1),
  MODE_RULES ("mkdir", 1),
  MODE_RULES ("mkdirat", 2),
  MODE_RULES ("mknod", 1),
  MODE_RULES ("mknodat", 2),
  { "openat2", -1, NULL, 0, 0, ENOSYS },
  /* a nested user namespace gives every capability back over the inodes its ids map: with
   * CAP_SETFCAP there a file capability (v3, for its root) could be written; the kernel already
   * refuses to map host uid 0 without CAP_SETFCAP (user_namespaces(7)) */
  { "unshare", 0, "SCMP_CMP_MASKED_EQ", CLONE_NEWUSER, CLONE_NEWUSER, EPERM },
  { "clone", 0, "SCMP_CMP_MASKED_EQ", CLONE_NEWUSER, CLONE_NEWUSER, EPERM },
  { "clone3", -1, NULL, 0, 0, ENOSYS }, /* its flags are in memory; libc falls back to clone */
  { "io_uring_setup", -1, NULL, 0, 0, EPERM },
  { "io_uring_enter", -1, NULL, 0, 0, EPERM },
  { "io_uring_register", -1, NULL, 0, 0, EPERM },
};
const size_t policy_hostfile_rules_len = sizeof policy_hostfile_rules / sizeof policy_hostfile_rules[0];

/* The id of the runtime's own user namespace that is host id 0 (through `map`, the runtime's
 * /proc/self/uid_map or gid_map): *id, and true when some extent covers host 0. -1 when the map
 * cannot be read. */
static int
runtime_id_of_host_root (const char *map, uint64_t *id)
{
  cleanup_fclose FILE *f = fopen (map, "re");
  unsigned long long in, out, count;

  if (!f)
    return -1;
  while (fscanf (f, "%llu %llu %llu", &in, &out, &count) == 3)
    if (out == 0 && count > 0)
      {
        *id = in;
        return 1;
      }
  return 0;
}

/* No extent of `m` (ids of the runtime's namespace) covers the one that is host id 0. */
static bool
mapping_excludes_host_root (const struct oci_id_mapping *m, size_t len, const char *map)
{
  uint64_t root = 0;
  int r = runtime_id_of_host_root (map, &root);

  if (r < 0 || len == 0)
    return false;
  if (r == 0)
    return true; /* host id 0 is not even mapped into the runtime's namespace */
  for (size_t i = 0; i < len; i++)
    if (root >= m[i].host_id && root - m[i].host_id < m[i].size)
      return false;
  return true;
}

bool
policy_userns_isolating (const struct oci_linux *l)
{
  const struct oci_namespace *user = NULL;

  for (size_t i = 0; l && i < l->namespaces_len; i++)
    if (strcmp (l->namespaces[i].type, "user") == 0)
      user = &l->namespaces[i];
  if (!user || (user->path && *user->path))
    return false;
  return mapping_excludes_host_root (l->uid_mappings, l->uid_mappings_len, "/proc/self/uid_map")
         && mapping_excludes_host_root (l->gid_mappings, l->gid_mappings_len, "/proc/self/gid_map");
}
