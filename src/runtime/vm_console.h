/* vm_console.h - the guest's serial console, kept bounded on the host (outside attack 15: QEMU's
 * `-serial file:` appended whatever the guest wrote to /dev/ttyS0 to <root>/vm/<id>/console.log,
 * 6.5 MiB in 30 s from one `dd`, with no cap for the run's life).
 *
 * QEMU writes the console to a socket (a `pipe` chardev on VM_JAIL_CONSOLE_FD); a thread of the
 * runner (`run`, `sandbox` or the supervisor) reads it into console.log, which root created
 * before QEMU ran and writes through its own fd: the first VM_CONSOLE_HEAD bytes as they come
 * (the boot), then only the last VM_CONSOLE_TAIL bytes in memory, written after a line naming
 * how much was dropped when the console closes (QEMU's end). The file never exceeds
 * VM_CONSOLE_HEAD + VM_CONSOLE_TAIL and a line. Internal to runtime/vm*.c. */
#ifndef ASBX_RUNTIME_VM_CONSOLE_H
#define ASBX_RUNTIME_VM_CONSOLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define VM_CONSOLE_HEAD (512u << 10)
#define VM_CONSOLE_TAIL (256u << 10)

struct vm_console
{
  int rd;  /* our end of the socket, -1 when none */
  int log; /* console.log, root's fd */
  pthread_t thread;
  bool running;  /* the thread was started and not yet joined */
  uint64_t seen; /* bytes the guest wrote */
  char *tail;    /* ring of the last VM_CONSOLE_TAIL bytes once the head is full */
  size_t tail_pos, tail_len;
};

/* Create dir/console.log (O_EXCL, O_NOFOLLOW, 0644) and a socketpair: *qemu_end (close-on-exec,
 * the caller's: dup2 it to VM_JAIL_CONSOLE_FD in QEMU's child, close it after the fork) and
 * ours. 0, or -1 with *err (nothing is left open). */
int vm_console_open (struct vm_console *c, const char *dir, int *qemu_end, asbx_err_t *err);

/* Start the reader thread (every signal blocked in it). 0 / -1 with *err. */
int vm_console_start (struct vm_console *c, asbx_err_t *err);

/* Once QEMU has ended: wait for the reader to reach EOF and write the tail, then close
 * everything. Safe to call twice and on a console that was never opened ({ .rd = -1 }). */
void vm_console_finish (struct vm_console *c);

#endif
