/* landlock_ruleset.c - Landlock rulesets: ABI probe, rights-per-ABI table, rules through fds,
 * restrict_self.
 *
 * Mechanism: landlock_create_ruleset(2) with the handled fs/net rights and scopes, then
 * landlock_add_rule(2) per (fd, rights) and (port, rights), then landlock_restrict_self(2). A
 * Landlock domain only ever narrows, survives execve and is inherited by children.
 * Threat model: the rules are bound to the inode behind an fd, so a path swapped after the check
 * cannot widen the rule; what the kernel cannot enforce must never pass silently (strict mode),
 * and best-effort mode says exactly what was dropped.
 * Ordering: build while paths are resolvable in the container's mount namespace (after
 * pivot_root), restrict after no_new_privs, before execve. The uapi structs are declared here
 * because Debian 12's <linux/landlock.h> predates ABI 4-7. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/landlock_ruleset.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2

struct ll_ruleset_attr
{
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct ll_path_beneath_attr
{
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__ ((packed));

struct ll_net_port_attr
{
  uint64_t allowed_access;
  uint64_t port;
};

/* Which right needs which ABI (kernel: security/landlock/limits.h and the uapi history). */
static const struct
{
  const char *name;
  enum linux_landlock_kind kind;
  uint64_t bit;
  int abi;
} rights[] = {
  { "fs.execute", LINUX_LL_FS, ASBX_LL_FS_EXECUTE, 1 },
  { "fs.write_file", LINUX_LL_FS, ASBX_LL_FS_WRITE_FILE, 1 },
  { "fs.read_file", LINUX_LL_FS, ASBX_LL_FS_READ_FILE, 1 },
  { "fs.read_dir", LINUX_LL_FS, ASBX_LL_FS_READ_DIR, 1 },
  { "fs.remove_dir", LINUX_LL_FS, ASBX_LL_FS_REMOVE_DIR, 1 },
  { "fs.remove_file", LINUX_LL_FS, ASBX_LL_FS_REMOVE_FILE, 1 },
  { "fs.make_char", LINUX_LL_FS, ASBX_LL_FS_MAKE_CHAR, 1 },
  { "fs.make_dir", LINUX_LL_FS, ASBX_LL_FS_MAKE_DIR, 1 },
  { "fs.make_reg", LINUX_LL_FS, ASBX_LL_FS_MAKE_REG, 1 },
  { "fs.make_sock", LINUX_LL_FS, ASBX_LL_FS_MAKE_SOCK, 1 },
  { "fs.make_fifo", LINUX_LL_FS, ASBX_LL_FS_MAKE_FIFO, 1 },
  { "fs.make_block", LINUX_LL_FS, ASBX_LL_FS_MAKE_BLOCK, 1 },
  { "fs.make_sym", LINUX_LL_FS, ASBX_LL_FS_MAKE_SYM, 1 },
  { "fs.refer", LINUX_LL_FS, ASBX_LL_FS_REFER, 2 },
  { "fs.truncate", LINUX_LL_FS, ASBX_LL_FS_TRUNCATE, 3 },
  { "fs.ioctl_dev", LINUX_LL_FS, ASBX_LL_FS_IOCTL_DEV, 5 },
  { "net.bind_tcp", LINUX_LL_NET, ASBX_LL_NET_BIND_TCP, 4 },
  { "net.connect_tcp", LINUX_LL_NET, ASBX_LL_NET_CONNECT_TCP, 4 },
  { "scope.abstract_unix_socket", LINUX_LL_SCOPE, ASBX_LL_SCOPE_ABSTRACT_UNIX_SOCKET, 6 },
  { "scope.signal", LINUX_LL_SCOPE, ASBX_LL_SCOPE_SIGNAL, 6 },
  { "log.same_exec_off", LINUX_LL_LOG, ASBX_LL_LOG_SAME_EXEC_OFF, 7 },
  { "log.new_exec_on", LINUX_LL_LOG, ASBX_LL_LOG_NEW_EXEC_ON, 7 },
  { "log.subdomains_off", LINUX_LL_LOG, ASBX_LL_LOG_SUBDOMAINS_OFF, 7 },
};

/* rights that apply to a non-directory file (the kernel refuses the others on a file) */
#define LL_FS_FILE_RIGHTS                                                                                              \
  (ASBX_LL_FS_EXECUTE | ASBX_LL_FS_WRITE_FILE | ASBX_LL_FS_READ_FILE | ASBX_LL_FS_TRUNCATE | ASBX_LL_FS_IOCTL_DEV)

struct linux_landlock
{
  int fd; /* ruleset fd, -1 when nothing is enforceable (best effort on ABI 0) */
  int abi;
  bool best_effort;
  uint64_t fs, net, scope; /* handled, after dropping */
  uint32_t log_flags;
  char *dropped;
};

int
linux_landlock_abi (void)
{
  long r = syscall (SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  return r < 0 ? 0 : (int) r;
}

uint64_t
linux_landlock_right_from_name (const char *name, enum linux_landlock_kind *kind, int *min_abi)
{
  for (size_t i = 0; name && i < ASBX_ARRAY_SIZE (rights); i++)
    if (strcmp (rights[i].name, name) == 0)
      {
        if (kind)
          *kind = rights[i].kind;
        if (min_abi)
          *min_abi = rights[i].abi;
        return rights[i].bit;
      }
  return 0;
}

const char *
linux_landlock_right_name (enum linux_landlock_kind kind, uint64_t bit)
{
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (rights); i++)
    if (rights[i].kind == kind && rights[i].bit == bit)
      return rights[i].name;
  return NULL;
}

static void
append (char **list, const char *name)
{
  char *n = xasprintf ("%s%s%s", *list ? *list : "", *list ? ", " : "", name);
  free (*list);
  *list = n;
}

/* Keep the bits of one kind that `abi` supports; strict: the first unsupported is an error. */
static int
filter_kind (enum linux_landlock_kind kind, uint64_t want, int abi, bool best_effort, uint64_t *out, char **dropped,
             asbx_err_t *err)
{
  uint64_t known = 0;
  *out = 0;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (rights); i++)
    {
      if (rights[i].kind != kind)
        continue;
      known |= rights[i].bit;
      if (!(want & rights[i].bit))
        continue;
      if (rights[i].abi <= abi)
        *out |= rights[i].bit;
      else if (best_effort)
        append (dropped, rights[i].name);
      else
        return asbx_error (err, EOPNOTSUPP, "landlock: %s needs ABI %d, the kernel has %d%s", rights[i].name,
                           rights[i].abi, abi, abi == 0 ? " (Landlock disabled)" : "");
    }
  if (want & ~known)
    return asbx_error (err, EINVAL, "landlock: unknown %s right bits %#llx",
                       kind == LINUX_LL_FS      ? "fs"
                       : kind == LINUX_LL_NET   ? "net"
                       : kind == LINUX_LL_SCOPE ? "scope"
                                                : "log",
                       (unsigned long long) (want & ~known));
  return 0;
}

int
linux_landlock_check (uint64_t fs, uint64_t net, uint64_t scope, uint32_t log_flags, int abi, bool best_effort,
                      uint64_t *fs_out, uint64_t *net_out, uint64_t *scope_out, uint32_t *log_out, char **dropped,
                      asbx_err_t *err)
{
  cleanup_free char *d = NULL;
  uint64_t lg = 0;

  if (abi <= 0 && !best_effort)
    return asbx_error (err, EOPNOTSUPP, "landlock: not available on this kernel (ABI 0)");
  if (filter_kind (LINUX_LL_FS, fs, abi, best_effort, fs_out, &d, err) < 0
      || filter_kind (LINUX_LL_NET, net, abi, best_effort, net_out, &d, err) < 0
      || filter_kind (LINUX_LL_SCOPE, scope, abi, best_effort, scope_out, &d, err) < 0
      || filter_kind (LINUX_LL_LOG, log_flags, abi, best_effort, &lg, &d, err) < 0)
    return -1;
  *log_out = (uint32_t) lg;
  *dropped = steal_ptr (&d);
  return 0;
}

struct linux_landlock *
linux_landlock_new (uint64_t fs, uint64_t net, uint64_t scope, uint32_t log_flags, int abi, bool best_effort,
                    asbx_err_t *err)
{
  struct linux_landlock *ll = xmalloc0 (sizeof *ll);
  ll->fd = -1;
  ll->abi = abi;
  ll->best_effort = best_effort;
  if (linux_landlock_check (fs, net, scope, log_flags, abi, best_effort, &ll->fs, &ll->net, &ll->scope, &ll->log_flags,
                            &ll->dropped, err)
      < 0)
    {
      linux_landlock_free (ll);
      return NULL;
    }
  if (ll->dropped)
    log_debug ("landlock: best effort on ABI %d drops: %s", abi, ll->dropped);
  if (abi <= 0 || (ll->fs == 0 && ll->net == 0 && ll->scope == 0))
    return ll; /* nothing the kernel can enforce: restrict_self becomes a no-op */
  struct ll_ruleset_attr attr = { .handled_access_fs = ll->fs, .handled_access_net = ll->net, .scoped = ll->scope };
  long r = syscall (SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (r < 0)
    {
      asbx_error (err, errno, "landlock: create ruleset (fs %#llx net %#llx scope %#llx)", (unsigned long long) ll->fs,
                  (unsigned long long) ll->net, (unsigned long long) ll->scope);
      linux_landlock_free (ll);
      return NULL;
    }
  ll->fd = (int) r; /* the kernel sets O_CLOEXEC */
  return ll;
}

/* Rights of a rule: must be handled; best effort masks what was dropped. */
static int
rule_rights (const struct linux_landlock *ll, enum linux_landlock_kind kind, uint64_t want, const char *what,
             uint64_t *out, asbx_err_t *err)
{
  uint64_t handled = kind == LINUX_LL_FS ? ll->fs : ll->net;
  uint64_t supported = 0;
  int abi = ll->abi;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (rights); i++)
    if (rights[i].kind == kind && rights[i].abi <= abi)
      supported |= rights[i].bit;
  if (ll->best_effort)
    want &= supported;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (rights); i++)
    if (rights[i].kind == kind && (want & rights[i].bit) && !(handled & rights[i].bit))
      return asbx_error (err, EINVAL, "landlock: rule for %s: %s is not handled by the ruleset", what, rights[i].name);
  *out = want;
  return 0;
}

int
linux_landlock_allow_fd (struct linux_landlock *ll, int fd, const char *what, uint64_t rights_in, asbx_err_t *err)
{
  struct ll_path_beneath_attr pb = { .parent_fd = fd };
  struct stat sb;
  uint64_t allowed;

  if (rule_rights (ll, LINUX_LL_FS, rights_in, what, &allowed, err) < 0)
    return -1;
  pb.allowed_access = allowed;
  if (fstat (fd, &sb) < 0)
    return asbx_error (err, errno, "landlock: fstat `%s`", what);
  if (!S_ISDIR (sb.st_mode) && (pb.allowed_access & ~LL_FS_FILE_RIGHTS))
    {
      for (size_t i = 0; i < ASBX_ARRAY_SIZE (rights); i++)
        if (rights[i].kind == LINUX_LL_FS && (pb.allowed_access & ~LL_FS_FILE_RIGHTS & rights[i].bit))
          return asbx_error (err, EINVAL, "landlock: `%s` is not a directory: %s applies to directories only", what,
                             rights[i].name);
    }
  if (ll->fd < 0 || pb.allowed_access == 0)
    return 0;
  if (syscall (SYS_landlock_add_rule, ll->fd, LL_RULE_PATH_BENEATH, &pb, 0) < 0)
    return asbx_error (err, errno, "landlock: add rule for `%s`", what);
  return 0;
}

int
linux_landlock_allow_path (struct linux_landlock *ll, int dirfd, const char *path, uint64_t rights_in, asbx_err_t *err)
{
  cleanup_close int fd = openat (dirfd, path, O_PATH | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "landlock: open `%s`", path);
  return linux_landlock_allow_fd (ll, fd, path, rights_in, err);
}

int
linux_landlock_allow_port (struct linux_landlock *ll, uint16_t port, uint64_t rights_in, asbx_err_t *err)
{
  struct ll_net_port_attr np = { .port = port };
  char what[32];

  snprintf (what, sizeof what, "tcp port %u", port);
  if (rule_rights (ll, LINUX_LL_NET, rights_in, what, &np.allowed_access, err) < 0)
    return -1;
  if (ll->fd < 0 || np.allowed_access == 0)
    return 0;
  if (syscall (SYS_landlock_add_rule, ll->fd, LL_RULE_NET_PORT, &np, 0) < 0)
    return asbx_error (err, errno, "landlock: add rule for %s", what);
  return 0;
}

int
linux_landlock_restrict_self (struct linux_landlock *ll, asbx_err_t *err)
{
  if (ll->fd < 0)
    {
      log_debug ("landlock: nothing enforceable (ABI %d): not restricting", ll->abi);
      return 0;
    }
  if (syscall (SYS_landlock_restrict_self, ll->fd, ll->log_flags) < 0)
    return asbx_error (err, errno, "landlock: restrict self (log flags %#x)", ll->log_flags);
  return 0;
}

const char *
linux_landlock_dropped (const struct linux_landlock *ll)
{
  return ll->dropped;
}

void
linux_landlock_free (struct linux_landlock *ll)
{
  if (ll == NULL)
    return;
  if (ll->fd >= 0)
    close (ll->fd);
  free (ll->dropped);
  free (ll);
}
