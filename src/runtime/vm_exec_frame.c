/* vm_exec_frame.c - the frames of exec into a VM (vm_exec.h) and their non-blocking buffers,
 * shared by the host's supervisor and client and the guest's init. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "runtime/vm_exec.h"

static void
reserve (struct vm_exec_buf *b, size_t more)
{
  if (b->len + more <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more)
    cap *= 2;
  b->data = xrealloc (b->data, cap);
  b->cap = cap;
}

void
vm_exec_buf_frame (struct vm_exec_buf *b, uint32_t sid, uint8_t type, const void *p, size_t len)
{
  struct vm_exec_frame f = { .sid = sid, .type = type, .len = (uint32_t) len };
  reserve (b, sizeof f + len);
  memcpy (b->data + b->len, &f, sizeof f);
  if (len)
    memcpy (b->data + b->len + sizeof f, p, len);
  b->len += sizeof f + len;
}

int
vm_exec_buf_flush (struct vm_exec_buf *b, int fd)
{
  size_t off = 0;
  while (off < b->len)
    {
      ssize_t w = write (fd, b->data + off, b->len - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        break;
      if (w < 0)
        return -1;
      off += (size_t) w;
    }
  memmove (b->data, b->data + off, b->len - off);
  b->len -= off;
  return 0;
}

int
vm_exec_buf_fill (struct vm_exec_buf *b, int fd)
{
  if (b->len >= VM_EXEC_BUF_HIGH + sizeof (struct vm_exec_frame) + VM_EXEC_MAX_PAYLOAD)
    return 0; /* the reader has not taken its frames: backpressure (vm_exec.h) */
  reserve (b, 65536);
  for (;;)
    {
      ssize_t r = read (fd, b->data + b->len, b->cap - b->len);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0 && errno == EAGAIN)
        return 0;
      if (r <= 0)
        {
          if (r == 0)
            errno = 0;
          return -1;
        }
      b->len += (size_t) r;
      return 1;
    }
}

int
vm_exec_buf_next (const struct vm_exec_buf *b, struct vm_exec_frame *f, const char **payload)
{
  if (b->len < sizeof *f)
    return 0;
  memcpy (f, b->data, sizeof *f);
  if (f->len > VM_EXEC_MAX_PAYLOAD || f->type < VX_OPEN || f->type > VX_EXIT)
    {
      errno = EPROTO;
      return -1;
    }
  if (b->len < sizeof *f + f->len)
    return 0;
  *payload = b->data + sizeof *f;
  return 1;
}

void
vm_exec_buf_consume (struct vm_exec_buf *b, const struct vm_exec_frame *f)
{
  size_t n = sizeof *f + f->len;
  memmove (b->data, b->data + n, b->len - n);
  b->len -= n;
}

void
vm_exec_buf_free (struct vm_exec_buf *b)
{
  free (b->data);
  *b = (struct vm_exec_buf){ 0 };
}
