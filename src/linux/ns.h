/* ns.h - Linux namespaces: the spec's type names, new vs joined, id mappings, time offsets.
 * Sources: runtime-spec config-linux.md "Namespaces", "User namespace mappings", "Offset for Time
 * Namespace"; namespaces(7), setns(2), unshare(2), user_namespaces(7), time_namespaces(7). */
#ifndef ASBX_LINUX_NS_H
#define ASBX_LINUX_NS_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

#define ASBX_NS_MAX 8

/* One entry per namespace named in linux.namespaces. `fd` is an nsfs fd opened (and checked to
 * be a namespace of the right type with NS_GET_NSTYPE) when a path was given, else -1. */
struct ns_entry
{
  int clone_flag; /* CLONE_NEWPID ... */
  const char *type;
  int fd;
};

struct ns_plan
{
  struct ns_entry entries[ASBX_NS_MAX];
  size_t len;
  unsigned long new_flags;  /* namespaces to create */
  unsigned long join_flags; /* namespaces to join by path */
};

/* Map a spec namespace type ("network") to its CLONE_NEW* flag; 0 when unknown. */
int ns_flag_from_type (const char *type);

/* Build the plan from linux.namespaces: open every path (O_RDONLY|O_CLOEXEC), verify its type.
 * Errors name the entry: "linux.namespaces[2] (network): open /run/netns/x: ENOENT".
 * The caller owns the fds (ns_plan_close). 0 / -1 with *err. */
int ns_plan_build (const struct oci_linux *linux_, struct ns_plan *plan, asbx_err_t *err);
void ns_plan_close (struct ns_plan *plan);

/* Whether the user namespace of the process behind `pidfd` is a strict descendant of the
 * caller's own: then no process of it holds any capability in the caller's user namespace
 * (user_namespaces(7): capabilities reach only the namespace a process is in and its
 * descendants), so none may ptrace, or open the /proc/PID/{root,cwd,fd,exe} of, a non-dumpable
 * process that still has the caller's credentials (ptrace_may_access). 1 yes, 0 no (the same
 * namespace, an ancestor, or a sibling); -1 with errno when the kernel cannot tell
 * (PIDFD_GET_USER_NAMESPACE needs Linux 6.11: ENOTTY/EINVAL; NS_GET_PARENT). Callers treat -1 as 0. */
int ns_userns_below_ours (int pidfd);

/* setns() into every namespace with a path: user first (so later joins are permitted by the
 * owning user namespace), then the rest, mount last but before pid. 0 / -1 with *err. */
int ns_join_all (const struct ns_plan *plan, asbx_err_t *err);

/* Write uid_map and gid_map of `pid` from the spec mappings (/proc/PID/{uid,gid}_map).
 * Runs in the parent user namespace. A caller with euid != 0 writes a single-id map of its own
 * id itself (denying setgroups first for the gid map); any other map goes through newuidmap /
 * newgidmap (Debian's uidmap package, looked up in PATH), which check it against /etc/subuid and
 * /etc/subgid (issue 17). 0 / -1 with *err naming linux.uidMappings/gidMappings (and the
 * helper's message when it refused). */
int ns_write_id_maps (pid_t pid, const struct oci_linux *linux_, asbx_err_t *err);

/* Write /proc/self/timens_offsets (must happen after unshare(CLONE_NEWTIME) and before any
 * process enters the namespace, i.e. before the next fork). 0 / -1 with *err. */
int ns_write_time_offsets (const struct oci_linux *linux_, asbx_err_t *err);

#endif
