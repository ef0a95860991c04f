/* lsm_procattr.h - LSM labels: process.apparmorProfile (AppArmor change-onexec),
 * process.selinuxLabel (SELinux exec context), linux.mountLabel (the `context=` mount option).
 * Sources: runtime-spec config.md "Process" / config-linux.md "Mount Label"; apparmor(7)
 * aa_change_onexec(2); setexeccon(3); proc(5) /proc/[pid]/attr. One header for the AppArmor and
 * SELinux halves (apparmor.c, selinux.c), which share the procfs-fd writer (lsm_procattr.c).
 *
 * runc's rule when the LSM is not enabled on the host: a label asked for is ignored (debug log).
 * When it is enabled and this build lacks the library, asking for a label is an error. */
#ifndef ASBX_LINUX_LSM_PROCATTR_H
#define ASBX_LINUX_LSM_PROCATTR_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

/* Write `data` to /proc/thread-self/attr/<attr> ("exec", "apparmor/exec") through an fd
 * opened beneath a verified procfs: "/proc" is opened O_PATH and checked with fstatfs
 * (PROC_SUPER_MAGIC), the attribute is opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS)
 * and checked again, so a fake /proc in the rootfs (a directory, a tmpfs, a symlink) cannot
 * redirect the write. `proc_root` is normally "/proc" (tests pass others). 0 / -1 with *err
 * (EXDEV: not procfs). */
int linux_lsm_write_attr (const char *proc_root, const char *attr, const char *data, size_t len, asbx_err_t *err);

/* AppArmor enabled on the host (/sys/module/apparmor/parameters/enabled is "Y"). */
bool linux_apparmor_enabled (void);
/* The change-onexec command libapparmor writes: "exec <profile>". Heap string. */
char *linux_apparmor_exec_command (const char *profile);
/* Apply process.apparmorProfile for the next execve. NULL/"" or AppArmor disabled: no-op (debug
 * log, runc). Enabled without libapparmor in the build: error. 0 / -1 with *err. */
int linux_apparmor_apply (const char *profile, asbx_err_t *err);

/* SELinux enabled on the host (selinuxfs mounted with an enforce file). */
bool linux_selinux_enabled (void);
/* Apply process.selinuxLabel as the exec context (setexeccon's attr/exec). Same rules. */
int linux_selinux_apply (const char *label, asbx_err_t *err);
/* Mount data with linux.mountLabel appended as context="<label>" (quoted: MLS ranges contain
 * commas), separated by "," from `data` (may be NULL/""). Heap string. Pure: callers decide
 * (linux_selinux_mount_data) whether SELinux is enabled. */
char *linux_selinux_context_option (const char *data, const char *label);
/* What the mount code calls: the data with the context option when a label is set and SELinux is
 * enabled, else a copy of `data` (runc ignores the label when SELinux is off). Heap or NULL. */
char *linux_selinux_mount_data (const char *data, const char *label);

/* Confirm with the LSM's own library that it is enabled: dlopen `soname` (e.g.
 * "libapparmor.so.1"), call its `int symbol (void)` (aa_is_enabled(3), is_selinux_enabled(3))
 * and return whether it answered 1. When the library or the symbol cannot be loaded, the kernel's
 * files already consulted (`kernel_files`, named in the debug log) are trusted: true. Callers
 * check the symbol's type against the library's header at compile time. */
bool linux_lsm_library_confirms (const char *soname, const char *symbol, const char *kernel_files);

/* Answer (and cache for the rest of the process and its forked children) whether AppArmor and
 * SELinux are enabled, for the labels that are requested (NULL/"": not asked). Called by the
 * runtime before it forks the container's processes, so that the cached answer is the host's
 * (/sys/module/apparmor, /sys/fs/selinux, and libapparmor/libselinux loaded with dlopen only
 * when a label is requested and the kernel files say the LSM is on), never what a container's
 * /sys says after pivot_root. No errors: a failed check reads as "not enabled" (runc's rule). */
void linux_lsm_probe (const char *apparmor_profile, const char *selinux_label, const char *mount_label);

#endif
