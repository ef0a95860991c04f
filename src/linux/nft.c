/* nft.c - load nftables commands with libnftables, in the current or a given network namespace.
 *
 * Mechanism: libnftables parses the text and sends one nf_tables netlink batch, which the
 * kernel applies atomically: a ruleset with an error changes nothing. The netlink socket
 * belongs to the namespace it was opened in, so for another namespace the calling thread
 * enters it with setns(2) around each run and returns to its own; the process must be
 * single-threaded (or call this from one thread only), which the container init and the
 * monitor are. A caller that may not enter the namespace (not root: it belongs to a user
 * namespace we own) runs each command list in a child that does (linux/netns_call.h), with a
 * fresh context each time.
 * Threat model: the text is ours (policy compiler output, numeric addresses from the DNS stub);
 * nothing the container controls reaches the parser except answer addresses, which the stub
 * formats with inet_ntop. No include paths, so the parser opens no files for us. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <nftables/libnftables.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/netns_call.h"
#include "linux/nft.h"

struct linux_nft
{
  struct nft_ctx *ctx; /* NULL when remote */
  int netns_fd;        /* -1 = current namespace */
  int self_fd;         /* our own namespace, to return to; -1 when netns_fd is -1 */
  bool remote;         /* we may not enter netns_fd: each run is a child's (linux/netns_call.h) */
  char *out;           /* remote: the last run's output */
};

struct linux_nft *
linux_nft_new (int netns_fd, asbx_err_t *err)
{
  struct linux_nft *n = xmalloc0 (sizeof *n);
  n->netns_fd = n->self_fd = -1;
  if (netns_fd >= 0)
    {
      n->netns_fd = fcntl (netns_fd, F_DUPFD_CLOEXEC, 3);
      n->self_fd = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
      if (n->netns_fd < 0 || n->self_fd < 0)
        {
          asbx_error (err, errno, "nft: open network namespace fds");
          linux_nft_free (n);
          return NULL;
        }
    }
  /* libnftables opens its netlink socket in nft_ctx_new (1.0.x) or at the first command
   * (other versions): create it inside the target namespace, and run inside it too */
  if (n->netns_fd >= 0 && setns (n->netns_fd, CLONE_NEWNET) < 0)
    {
      if (errno == EPERM)
        {
          /* not root: the namespace is our user namespace's child's, entered by a child */
          n->remote = true;
          return n;
        }
      asbx_error (err, errno, "nft: enter the network namespace");
      linux_nft_free (n);
      return NULL;
    }
  n->ctx = nft_ctx_new (NFT_CTX_DEFAULT);
  if (n->netns_fd >= 0 && setns (n->self_fd, CLONE_NEWNET) < 0)
    abort (); /* see linux_nft_run */
  if (!n->ctx)
    {
      asbx_error (err, ENOMEM, "nft: nft_ctx_new");
      linux_nft_free (n);
      return NULL;
    }
  /* messages come back to us, never on the container's stderr */
  nft_ctx_buffer_output (n->ctx);
  nft_ctx_buffer_error (n->ctx);
  return n;
}

void
linux_nft_free (struct linux_nft *n)
{
  if (!n)
    return;
  if (n->ctx)
    nft_ctx_free (n->ctx);
  if (n->netns_fd >= 0)
    close (n->netns_fd);
  if (n->self_fd >= 0)
    close (n->self_fd);
  free (n->out);
  free (n);
}

/* libnftables' error text, trimmed to its first line that says something */
static char *
first_error (struct nft_ctx *ctx)
{
  const char *e = nft_ctx_get_error_buffer (ctx);
  if (!e || !*e)
    return xstrdup ("unknown error");
  size_t len = strcspn (e, "\n");
  char *s = xmalloc (len + 1);
  memcpy (s, e, len);
  s[len] = '\0';
  return s;
}

/* linux_netns_fn: one run in a fresh context, in the child that entered the namespace */
static int
run_remote (void *arg, int *fds, size_t nfds, char **out, asbx_err_t *err)
{
  struct linux_nft *n = linux_nft_new (-1, err);
  (void) fds;
  (void) nfds;
  if (!n)
    return -1;
  int r = linux_nft_run (n, arg, err);
  const char *o = nft_ctx_get_output_buffer (n->ctx);
  if (r == 0 && o && *o)
    *out = xstrdup (o);
  linux_nft_free (n);
  return r;
}

int
linux_nft_run (struct linux_nft *n, const char *cmds, asbx_err_t *err)
{
  int r, saved;

  if (n->remote)
    {
      free (n->out);
      n->out = NULL;
      return linux_netns_call (n->netns_fd, run_remote, (void *) cmds, NULL, 0, &n->out, err);
    }
  if (n->netns_fd >= 0 && setns (n->netns_fd, CLONE_NEWNET) < 0)
    return asbx_error (err, errno, "nft: enter the container's network namespace");
  r = nft_run_cmd_from_buffer (n->ctx, cmds);
  saved = errno;
  if (n->netns_fd >= 0 && setns (n->self_fd, CLONE_NEWNET) < 0)
    {
      /* we would go on in the wrong namespace: nothing sane is left to do (fail closed) */
      abort ();
    }
  if (r != 0)
    {
      cleanup_free char *msg = first_error (n->ctx);
      int e = strstr (msg, "Operation not permitted") ? EPERM : (saved ? saved : EINVAL);
      return asbx_error (err, e, "nft: %s", msg);
    }
  log_debug ("nft: ran %zu bytes of commands", strlen (cmds));
  return 0;
}

int
linux_nft_load (const char *cmds, asbx_err_t *err)
{
  struct linux_nft *n = linux_nft_new (-1, err);
  int r;
  if (!n)
    return -1;
  r = linux_nft_run (n, cmds, err);
  linux_nft_free (n);
  return r;
}

int
linux_nft_counter (struct linux_nft *n, const char *table, const char *name, uint64_t *packets, asbx_err_t *err)
{
  char cmd[256];
  const char *out, *p;

  *packets = 0;
  if ((size_t) snprintf (cmd, sizeof cmd, "list counter inet %s %s", table, name) >= sizeof cmd)
    return asbx_error (err, EINVAL, "nft: counter name too long");
  if (!n->remote)
    (void) nft_ctx_get_output_buffer (n->ctx); /* start from an empty buffer */
  if (linux_nft_run (n, cmd, err) < 0)
    return -1;
  /* "table inet T {\n\tcounter C {\n\t\tpackets N bytes M\n\t}\n}\n" */
  out = n->remote ? n->out : nft_ctx_get_output_buffer (n->ctx);
  p = out ? strstr (out, "packets ") : NULL;
  if (!p || sscanf (p, "packets %" SCNu64, packets) != 1)
    return asbx_error (err, EPROTO, "nft: no packet count in the listing of counter %s", name);
  return 0;
}
