/* landlock_ruleset.h - Landlock (Documentation/userspace-api/landlock.rst, landlock(7)) as a C API
 * for the policy compiler: probe the ABI, build a ruleset from (fd, rights) path rules, TCP port
 * rules and scopes, and restrict the calling thread.
 * (Named so: src/linux/landlock.h would shadow <linux/landlock.h> under -Isrc.)
 *
 * Rights are named "fs.read_file", "net.bind_tcp", "scope.signal", "log.new_exec_on"... and each
 * has the minimum ABI that introduced it (table in landlock_ruleset.c). Strict mode: a right the
 * running kernel does not support is an error naming it and the ABI it needs. Best-effort mode,
 * only when asked: such rights are dropped and listed by linux_landlock_dropped(). */
#ifndef ASBX_LINUX_LANDLOCK_RULESET_H
#define ASBX_LINUX_LANDLOCK_RULESET_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/* Access-right bits (the kernel's values, uapi <linux/landlock.h>) */
#define ASBX_LL_FS_EXECUTE (1ULL << 0)
#define ASBX_LL_FS_WRITE_FILE (1ULL << 1)
#define ASBX_LL_FS_READ_FILE (1ULL << 2)
#define ASBX_LL_FS_READ_DIR (1ULL << 3)
#define ASBX_LL_FS_REMOVE_DIR (1ULL << 4)
#define ASBX_LL_FS_REMOVE_FILE (1ULL << 5)
#define ASBX_LL_FS_MAKE_CHAR (1ULL << 6)
#define ASBX_LL_FS_MAKE_DIR (1ULL << 7)
#define ASBX_LL_FS_MAKE_REG (1ULL << 8)
#define ASBX_LL_FS_MAKE_SOCK (1ULL << 9)
#define ASBX_LL_FS_MAKE_FIFO (1ULL << 10)
#define ASBX_LL_FS_MAKE_BLOCK (1ULL << 11)
#define ASBX_LL_FS_MAKE_SYM (1ULL << 12)
#define ASBX_LL_FS_REFER (1ULL << 13)                  /* ABI 2 */
#define ASBX_LL_FS_TRUNCATE (1ULL << 14)               /* ABI 3 */
#define ASBX_LL_FS_IOCTL_DEV (1ULL << 15)              /* ABI 5 */
#define ASBX_LL_NET_BIND_TCP (1ULL << 0)               /* ABI 4 */
#define ASBX_LL_NET_CONNECT_TCP (1ULL << 1)            /* ABI 4 */
#define ASBX_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define ASBX_LL_SCOPE_SIGNAL (1ULL << 1)               /* ABI 6 */
#define ASBX_LL_LOG_SAME_EXEC_OFF (1U << 0)            /* ABI 7, landlock_restrict_self flags */
#define ASBX_LL_LOG_NEW_EXEC_ON (1U << 1)              /* ABI 7 */
#define ASBX_LL_LOG_SUBDOMAINS_OFF (1U << 2)           /* ABI 7 */

enum linux_landlock_kind
{
  LINUX_LL_FS,
  LINUX_LL_NET,
  LINUX_LL_SCOPE,
  LINUX_LL_LOG,
};

/* The Landlock ABI of the running kernel (LANDLOCK_CREATE_RULESET_VERSION): >= 1, or 0 when
 * Landlock is not built in or disabled at boot (ENOSYS/EOPNOTSUPP). */
int linux_landlock_abi (void);

/* Right name <-> bit. linux_landlock_right_from_name returns 0 when the name is unknown; *kind
 * and *min_abi (may be NULL) receive the right's class and the ABI that introduced it. */
uint64_t linux_landlock_right_from_name (const char *name, enum linux_landlock_kind *kind, int *min_abi);
const char *linux_landlock_right_name (enum linux_landlock_kind kind, uint64_t bit);

struct linux_landlock;

/* A ruleset handling `fs`, `net` and `scope` rights and restricting with `log_flags`
 * (ASBX_LL_LOG_*), checked against ABI `abi` (pass linux_landlock_abi(); tests pass others).
 * strict: any right or flag newer than `abi` is an error "landlock: fs.ioctl_dev needs ABI 5,
 * the kernel has 3" (EOPNOTSUPP); best effort: it is dropped and recorded. abi == 0 is an error
 * in strict mode, and in best-effort mode a ruleset that drops everything and restricts nothing.
 * The kernel ruleset fd is created here (not in the pure check: linux_landlock_check). Heap
 * object or NULL with *err. */
struct linux_landlock *linux_landlock_new (uint64_t fs, uint64_t net, uint64_t scope, uint32_t log_flags, int abi,
                                           bool best_effort, asbx_err_t *err);

/* Pure part of linux_landlock_new (no syscalls): the rights kept for `abi`, written to *fs_out
 * etc., and a heap list "fs.refer, net.bind_tcp" of dropped ones in *dropped (NULL when none).
 * 0 / -1 with *err in strict mode. */
int linux_landlock_check (uint64_t fs, uint64_t net, uint64_t scope, uint32_t log_flags, int abi, bool best_effort,
                          uint64_t *fs_out, uint64_t *net_out, uint64_t *scope_out, uint32_t *log_out, char **dropped,
                          asbx_err_t *err);

/* Allow `rights` (fs bits, within the handled set) beneath the file or directory `path`, opened
 * with O_PATH|O_CLOEXEC relative to `dirfd` (the caller resolves it inside the container's mount
 * namespace; an fd keeps the rule tied to the object that was checked). Rights that only make
 * sense on directories are refused for a non-directory (EINVAL naming them). In best-effort mode
 * dropped rights are silently masked. 0 / -1 with *err. */
int linux_landlock_allow_path (struct linux_landlock *ll, int dirfd, const char *path, uint64_t rights,
                               asbx_err_t *err);
/* The same with an already-open fd (O_PATH is enough); the fd stays the caller's. */
int linux_landlock_allow_fd (struct linux_landlock *ll, int fd, const char *what, uint64_t rights, asbx_err_t *err);

/* Allow `rights` (net bits) for TCP `port` (ABI >= 4). 0 / -1 with *err. */
int linux_landlock_allow_port (struct linux_landlock *ll, uint16_t port, uint64_t rights, asbx_err_t *err);

/* Enforce on the calling thread: landlock_restrict_self(ruleset, log flags). Needs no_new_privs
 * or CAP_SYS_ADMIN (landlock(7)); the caller sets NNP first. 0 / -1 with *err. */
int linux_landlock_restrict_self (struct linux_landlock *ll, asbx_err_t *err);

/* Rights dropped in best-effort mode ("fs.ioctl_dev, scope.signal"), or NULL. Borrowed. */
const char *linux_landlock_dropped (const struct linux_landlock *ll);

/* Close the ruleset fd and free (NULL-safe). */
void linux_landlock_free (struct linux_landlock *ll);

#endif
