/* sync.c - framing for the parent/child messages drawn in sync.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "runtime/sync.h"

/* indexed by enum sync_type: designated, so a type added to sync.h cannot shift the names */
static const char *const names[] = {
  [0] = "?",
  [SYNC_GO] = "GO",
  [SYNC_USERNS_READY] = "USERNS_READY",
  [SYNC_USERNS_MAPPED] = "USERNS_MAPPED",
  [SYNC_PID] = "PID",
  [SYNC_CREATE_RUNTIME] = "CREATE_RUNTIME",
  [SYNC_HOOKS_DONE] = "HOOKS_DONE",
  [SYNC_READY] = "READY",
  [SYNC_PINS] = "PINS",
  [SYNC_PINS_DONE] = "PINS_DONE",
  [SYNC_ERROR] = "ERROR",
};

int
sync_send (int fd, enum sync_type type, int32_t value, const char *text, asbx_err_t *err)
{
  struct sync_msg m;
  size_t len = offsetof (struct sync_msg, text);
  memset (&m, 0, len);
  m.type = type;
  m.value = value;
  if (text)
    {
      size_t tl = strnlen (text, sizeof m.text - 1);
      memcpy (m.text, text, tl);
      m.text[tl] = '\0';
      len += tl + 1;
    }
  for (;;)
    {
      ssize_t w = send (fd, &m, len, MSG_NOSIGNAL);
      if (w >= 0)
        return 0;
      if (errno != EINTR)
        return asbx_error (err, errno, "sync: send %s", names[type]);
    }
}

int
sync_recv (int fd, enum sync_type expect, struct sync_msg *msg, asbx_err_t *err)
{
  ssize_t r;
  do
    r = recv (fd, msg, sizeof *msg, 0);
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return asbx_error (err, errno, "sync: receive");
  if (r == 0)
    return asbx_error (err, 0, "container init exited unexpectedly (waiting for %s)", names[expect]);
  if ((size_t) r < offsetof (struct sync_msg, text) || msg->type == 0 || msg->type > SYNC_ERROR)
    return asbx_error (err, 0, "sync: malformed message");
  if ((size_t) r == offsetof (struct sync_msg, text))
    msg->text[0] = '\0';
  msg->text[sizeof msg->text - 1] = '\0';
  if (msg->type == SYNC_ERROR && expect != SYNC_ERROR)
    return asbx_error (err, 0, "%s", msg->text);
  if (msg->type != (uint32_t) expect)
    return asbx_error (err, 0, "sync: expected %s, got %s", names[expect], names[msg->type]);
  return 0;
}

void
sync_fail (int fd, asbx_err_t *err)
{
  sync_send (fd, SYNC_ERROR, 0, err && *err ? (*err)->msg : "unknown error", NULL);
  _exit (1);
}
