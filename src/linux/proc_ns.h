/* proc_ns.h - the processes of one namespace, found through /proc (proc(5): /proc/PID/ns/). */
#ifndef ASBX_LINUX_PROC_NS_H
#define ASBX_LINUX_PROC_NS_H

#include <sys/stat.h>
#include <sys/types.h>

/* Called for each process in the namespace: procfd is an fd of /proc (valid for the call only),
 * pid the process's id in the caller's pid namespace. Return 0 to go on, nonzero to stop. */
typedef int (*linux_proc_ns_fn) (int procfd, pid_t pid, void *arg);

/* Walk /proc and call fn for every process whose /proc/PID/ns/<kind> ("net", "pid", "mnt",
 * ... as in proc(5)) is the namespace `ns` (st_dev and st_ino of an fstat of a namespace fd or
 * a stat of a /proc/X/ns/ link: nsfs identifies a namespace by that pair, ioctl_ns(2)). A
 * process that exits during the walk, or whose ns link the caller may not follow (ptrace access
 * mode, another user's process for a non-root caller), is skipped: it is not the caller's to
 * count. The walk is not atomic: a process started or ended meanwhile may or may not be seen.
 * Returns 0 when every entry was looked at, fn's nonzero value when fn stopped the walk, or -1
 * with errno set when /proc cannot be opened. */
int linux_proc_each_in_ns (const char *kind, const struct stat *ns, linux_proc_ns_fn fn, void *arg);

#endif
