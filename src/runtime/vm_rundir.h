/* vm_rundir.h - the vm tier's run directory (<root>/vm/<id>): what the host writes there for
 * QEMU and the guest, and how root reads and removes it afterwards. The directory is QEMU's
 * uid's while it runs, so everything in it is the attacker's as far as root is concerned:
 * reads and removal go through fds and never follow a symlink (outside attack 11). Internal to
 * runtime/vm*.c. */
#ifndef ASBX_RUNTIME_VM_RUNDIR_H
#define ASBX_RUNTIME_VM_RUNDIR_H

#include <stddef.h>
#include <sys/types.h>

#include "core/error.h"

/* Write `text` to dir/name (created 0644, O_NOFOLLOW). 0, or -1 with *err. */
int vm_rundir_write (const char *dir, const char *name, const char *text, asbx_err_t *err);

/* rm -r of dir through fds (oci_remove_at), never following a symlink; a failure is a warning. */
void vm_rundir_remove (const char *dir);

/* The regular file dir/name QEMU wrote (console.log, status), beneath the directory's fd,
 * O_NOFOLLOW|O_NONBLOCK, at most `max` bytes: a heap string (*len bytes), or NULL when absent,
 * not a regular file, or a symlink. */
char *vm_rundir_read (const char *dir, const char *name, size_t max, size_t *len);

/* dir, dir/share and their entries to QEMU's uid/gid. 0, or -1 with *err. */
int vm_rundir_chown (const char *dir, uid_t uid, gid_t gid, asbx_err_t *err);

/* The last 3000 bytes of the guest's console.log as a warning (nothing when empty). */
void vm_rundir_console_tail (const char *dir);

/* The guest's status line: "exit N" sets *status (0); "error MESSAGE" or nothing is -1 with
 * *err (the console's tail logged when nothing was reported). */
int vm_rundir_status (const char *dir, int *status, asbx_err_t *err);

#endif
