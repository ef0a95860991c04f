/* fuzz_sync.c - libFuzzer entry point for the parent<->child sync frames (src/runtime/sync.c).
 *
 * The bytes are sent as one SOCK_SEQPACKET message, as a dying or hostile child could send
 * them, and read back with sync_recv for every expected type: it must return a message or an
 * error (set, one line for framing errors), never read past the frame or leave the text
 * unterminated. No source change in sync.c is needed: sync_recv is already the validator.
 * Build and run: tests/fuzz/run-all.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/sync.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static struct sync_msg msg;

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  int sp[2];
  if (size > sizeof msg || socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
    return 0;
  for (int expect = SYNC_GO; expect <= SYNC_ERROR; expect++)
    {
      asbx_err_t err = NULL;
      if (send (sp[0], data, size, 0) < 0)
        break;
      int r = sync_recv (sp[1], (enum sync_type) expect, &msg, &err);
      if (r < 0 && (err == NULL || err->msg == NULL))
        abort ();
      if (r == 0 && (msg.type != (uint32_t) expect || strnlen (msg.text, sizeof msg.text) == sizeof msg.text))
        abort ();
      asbx_error_free (&err);
    }
  close (sp[0]);
  close (sp[1]);
  return 0;
}
