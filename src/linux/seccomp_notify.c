/* seccomp_notify.c - the listenerPath handshake of SCMP_ACT_NOTIFY (config-linux.md "Seccomp",
 * runtime.md "containerProcessState").
 *
 * Mechanism: the runtime connects to the listener's AF_UNIX stream socket and sends, in one
 * sendmsg, the containerProcessState JSON as payload and the seccomp notify fd as SCM_RIGHTS.
 * Ordering: connect during create, while host paths are reachable (before pivot_root), so a
 * missing listener fails `create`; send right after the filter is loaded, then close both fds
 * before execve (the listener fd is close-on-exec anyway: the container never holds it).
 * Threat model: the payload is built by us from our own state; metadata is the user's string,
 * escaped by yajl. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/fdpass.h"
#include "core/json.h"
#include "core/util.h"
#include "linux/seccomp_bpf.h"

int
linux_seccomp_listener_connect (const char *path, asbx_err_t *err)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  cleanup_close int fd = -1;

  if (path == NULL || path[0] != '/')
    return asbx_error (err, EINVAL, "linux.seccomp.listenerPath: expected an absolute path");
  if (strlen (path) >= sizeof sun.sun_path)
    return asbx_error (err, ENAMETOOLONG, "linux.seccomp.listenerPath: `%s` is longer than %zu bytes", path,
                       sizeof sun.sun_path - 1);
  strcpy (sun.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return asbx_error (err, errno, "linux.seccomp.listenerPath: socket");
  while (connect (fd, (struct sockaddr *) &sun, sizeof sun) < 0)
    if (errno != EINTR)
      return asbx_error (err, errno, "linux.seccomp.listenerPath: connect `%s`", path);
  return steal_fd (&fd);
}

static void
gen_key (yajl_gen g, const char *k)
{
  yajl_gen_string (g, (const unsigned char *) k, strlen (k));
}

char *
linux_seccomp_process_state (const char *state_json, const char *metadata, asbx_err_t *err)
{
  char ebuf[128] = "";
  yajl_val st = yajl_tree_parse (state_json ? state_json : "", ebuf, sizeof ebuf);
  const char *pid_path[] = { "pid", NULL };
  const char *ver_path[] = { "ociVersion", NULL };
  char *out;

  if (st == NULL || !YAJL_IS_OBJECT (st))
    {
      if (st)
        yajl_tree_free (st);
      asbx_error (err, EINVAL, "seccomp listener: the container state is not a JSON object");
      return NULL;
    }
  yajl_val pid = yajl_tree_get (st, pid_path, yajl_t_number);
  yajl_val ver = yajl_tree_get (st, ver_path, yajl_t_string);
  yajl_gen g = json_gen_new (0);
  yajl_gen_map_open (g);
  gen_key (g, "ociVersion");
  gen_key (g, ver ? ver->u.string : "1.3.0");
  gen_key (g, "fds");
  yajl_gen_array_open (g);
  gen_key (g, "seccompFd");
  yajl_gen_array_close (g);
  gen_key (g, "pid");
  if (pid)
    yajl_gen_number (g, pid->u.number.r, strlen (pid->u.number.r));
  else
    yajl_gen_integer (g, 0);
  if (metadata && *metadata)
    {
      gen_key (g, "metadata");
      gen_key (g, metadata);
    }
  gen_key (g, "state");
  json_gen_value (g, st);
  yajl_gen_map_close (g);
  out = json_gen_finish (g, false, NULL);
  yajl_tree_free (st);
  return out;
}

int
linux_seccomp_listener_send (int sock, int notify_fd, const char *json, asbx_err_t *err)
{
  size_t len = strlen (json);
  ssize_t w = fdpass_send (sock, notify_fd, json, len);
  if (w < 0)
    return asbx_error (err, errno, "seccomp listener: send the notify fd and the container state");
  if ((size_t) w != len)
    return asbx_error (err, EIO, "seccomp listener: short write (%zd of %zu bytes)", w, len);
  return 0;
}
