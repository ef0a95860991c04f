/* nft.c - load nftables commands with libnftables, in the current or a given network namespace.
 *
 * Mechanism: libnftables parses the text and sends one nf_tables netlink batch, which the
 * kernel applies atomically: a ruleset with an error changes nothing. The netlink socket
 * belongs to the namespace it was opened in, so for another namespace the calling thread
 * enters it with setns(2) around each run and returns to its own; the process must be
 * single-threaded (or call this from one thread only), which the container init and the
 * monitor are. A caller that may not enter the namespace (not root: it belongs to a user
 * namespace we own) gets a helper child that lives there with its own context and runs the
 * command lists sent to it (see "remote" below). Measured (a user's sandbox, 30 lookups of an
 * allowed name, each answer one `add element`): a fresh child and context per run cost ~15 ms a
 * lookup; the long-lived helper about what root's in-process context costs.
 * Threat model: the text is ours (policy compiler output, numeric addresses from the DNS stub);
 * nothing the container controls reaches the parser except answer addresses, which the stub
 * formats with inet_ntop. No include paths, so the parser opens no files for us. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <nftables/libnftables.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/netns_call.h"
#include "linux/nft.h"

/* libnftables is not linked: with its five dependencies (libmnl, libnftnl, libxtables,
 * libjansson, libgmp) it cost every `run` and `exec` six more shared objects to map and relocate
 * and 0.64 MiB of resident memory, although only policies with a network table use it (issue
 * 20: the start path). linux_nft_new loads it (dlopen) before it needs it; the functions below
 * go through this table, typed by libnftables' own prototypes. */
#define NFT_SONAME "libnftables.so.1"
#define NFT_FUNCS(X)                                                                                                   \
  X (nft_ctx_buffer_error)                                                                                             \
  X (nft_ctx_buffer_output)                                                                                            \
  X (nft_ctx_free)                                                                                                     \
  X (nft_ctx_get_error_buffer)                                                                                         \
  X (nft_ctx_get_output_buffer)                                                                                        \
  X (nft_ctx_new)                                                                                                      \
  X (nft_run_cmd_from_buffer)

static struct
{
/* NOLINTNEXTLINE(bugprone-macro-parentheses): n is the member name, a declarator */
#define NFT_FIELD(n) __typeof__ (n) *n;
  NFT_FUNCS (NFT_FIELD)
#undef NFT_FIELD
} nft_api;

static pthread_once_t nft_once = PTHREAD_ONCE_INIT;
/* why the load failed, "" once it succeeded; written only by nft_load_once, under nft_once */
static char nft_failure[512] = "not loaded";

static void
nft_load_once (void)
{
  void *h = dlopen (NFT_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    {
      snprintf (nft_failure, sizeof nft_failure, "load %s (apt-get install -y libnftables1): %s", NFT_SONAME,
                dlerror ());
      return;
    }
#define NFT_LOOKUP(n)                                                                                                  \
  if ((nft_api.n = (__typeof__ (n) *) dlsym (h, #n)) == NULL)                                                          \
    {                                                                                                                  \
      snprintf (nft_failure, sizeof nft_failure, "load %s: no %s: %s", NFT_SONAME, #n, dlerror ());                    \
      return;                                                                                                          \
    }
  NFT_FUNCS (NFT_LOOKUP)
#undef NFT_LOOKUP
  nft_failure[0] = '\0';
}

/* dlopen NFT_SONAME once and fill nft_api: 0, or -1 with *err (ENOENT: not installed, or a
 * function missing). Thread-safe (pthread_once): the monitor's DNS stub makes its context at
 * the first query. */
static int
nft_lib_load (asbx_err_t *err)
{
  pthread_once (&nft_once, nft_load_once);
  if (nft_failure[0] == '\0')
    return 0;
  return asbx_error (err, ENOENT, "nft: the policy's network table needs libnftables: %s", nft_failure);
}

int
linux_nft_preload (asbx_err_t *err)
{
  return nft_lib_load (err);
}

#define nft_ctx_buffer_error (*nft_api.nft_ctx_buffer_error)
#define nft_ctx_buffer_output (*nft_api.nft_ctx_buffer_output)
#define nft_ctx_free (*nft_api.nft_ctx_free)
#define nft_ctx_get_error_buffer (*nft_api.nft_ctx_get_error_buffer)
#define nft_ctx_get_output_buffer (*nft_api.nft_ctx_get_output_buffer)
#define nft_ctx_new (*nft_api.nft_ctx_new)
#define nft_run_cmd_from_buffer (*nft_api.nft_run_cmd_from_buffer)

struct linux_nft
{
  struct nft_ctx *ctx; /* NULL when remote */
  int netns_fd;        /* -1 = current namespace */
  int self_fd;         /* our own namespace, to return to; -1 when netns_fd is -1 */
  bool remote;         /* we may not enter netns_fd: runs are the helper child's */
  pid_t pid;           /* remote: the helper */
  int sk;              /* remote: our end of its socketpair, else -1 */
  char *out;           /* remote: the last run's output */
};

static int remote_start (struct linux_nft *n, asbx_err_t *err);

struct linux_nft *
linux_nft_new (int netns_fd, asbx_err_t *err)
{
  /* before the fork of the remote helper, which inherits the mapping */
  if (nft_lib_load (err) < 0)
    return NULL;
  struct linux_nft *n = xmalloc0 (sizeof *n);
  n->netns_fd = n->self_fd = n->sk = -1;
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
  /* entering our own namespace first: could we come back (see linux/netns_call.c)? */
  if (n->netns_fd >= 0 && (setns (n->self_fd, CLONE_NEWNET) < 0 || setns (n->netns_fd, CLONE_NEWNET) < 0))
    {
      if (errno == EPERM)
        {
          /* not root: the namespace belongs to a child of our user namespace: a helper's */
          if (remote_start (n, err) == 0)
            return n;
          linux_nft_free (n);
          return NULL;
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
  if (n->sk >= 0)
    close (n->sk); /* the helper exits at EOF */
  if (n->pid > 0)
    while (waitpid (n->pid, NULL, 0) < 0 && errno == EINTR)
      ;
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

/* ---- remote: a helper child inside the namespace (a non-root caller) ----
 * The child joins the namespace's owner user namespace and the namespace for good
 * (linux/netns_call.h), makes one libnftables context there and serves runs over a stream
 * socketpair: request u32 length + text; reply struct remote_reply + msg + output. It exits at
 * EOF (linux_nft_free) and is SIGKILLed when the thread that made it dies (PR_SET_PDEATHSIG). */
struct remote_reply
{
  int32_t r;
  int32_t errnum;
  uint32_t msg_len;
  uint32_t out_len;
};

static int
read_exact (int fd, void *buf, size_t len)
{
  for (size_t got = 0; got < len;)
    {
      ssize_t n = read (fd, (char *) buf + got, len - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return errno = n == 0 ? EPIPE : errno, -1;
      got += (size_t) n;
    }
  return 0;
}

static int
send_exact (int fd, const void *buf, size_t len)
{
  for (size_t sent = 0; sent < len;)
    {
      ssize_t n = send (fd, (const char *) buf + sent, len - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -1;
      sent += (size_t) n;
    }
  return 0;
}

static int
remote_reply (int sk, int r, const asbx_err_t e, const char *out)
{
  const char *msg = r < 0 && e ? e->msg : "";
  struct remote_reply rep = { .r = r,
                              .errnum = e ? e->errnum : 0,
                              .msg_len = (uint32_t) strlen (msg),
                              .out_len = out ? (uint32_t) strlen (out) : 0 };
  if (send_exact (sk, &rep, sizeof rep) < 0 || send_exact (sk, msg, rep.msg_len) < 0)
    return -1;
  return send_exact (sk, out ? out : "", rep.out_len);
}

/* keep only fds a and b (>= 3) of everything the caller had open */
static void
close_all_but (int a, int b)
{
  int lo = a < b ? a : b, hi = a < b ? b : a;
  if (lo > 3)
    syscall (SYS_close_range, 3u, (unsigned) lo - 1, 0u);
  if (hi > lo + 1)
    syscall (SYS_close_range, (unsigned) lo + 1, (unsigned) hi - 1, 0u);
  syscall (SYS_close_range, (unsigned) hi + 1, ~0u, 0u);
}

static void __attribute__ ((noreturn)) remote_serve (int sk, int netns_fd, pid_t parent)
{
  asbx_err_t e = NULL;
  struct linux_nft *n = NULL;
  uint32_t len;

  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid () != parent)
    _exit (1);
  close_all_but (sk, netns_fd);
  if (linux_netns_enter_owner (netns_fd, &e) == 0)
    n = linux_nft_new (-1, &e);
  if (remote_reply (sk, n ? 0 : -1, e, NULL) < 0 || !n)
    _exit (1);
  while (read_exact (sk, &len, sizeof len) == 0)
    {
      char *cmds = malloc ((size_t) len + 1);
      if (!cmds || read_exact (sk, cmds, len) < 0)
        _exit (1);
      cmds[len] = '\0';
      asbx_error_free (&e);
      (void) nft_ctx_get_output_buffer (n->ctx); /* start from an empty buffer */
      int r = linux_nft_run (n, cmds, &e);
      free (cmds);
      if (remote_reply (sk, r, e, r == 0 ? nft_ctx_get_output_buffer (n->ctx) : NULL) < 0)
        _exit (1);
    }
  _exit (0);
}

/* the reply to the last request: r, or -1 with *err (the child's error, or a broken channel) */
static int
remote_read (struct linux_nft *n, asbx_err_t *err)
{
  struct remote_reply rep;
  if (read_exact (n->sk, &rep, sizeof rep) < 0)
    return asbx_error (err, errno, "nft: the helper in the container's network namespace is gone");
  char *msg = xmalloc ((size_t) rep.msg_len + 1), *out = xmalloc ((size_t) rep.out_len + 1);
  int r = read_exact (n->sk, msg, rep.msg_len) < 0 || read_exact (n->sk, out, rep.out_len) < 0 ? -1 : 0;
  msg[r == 0 ? rep.msg_len : 0] = out[r == 0 ? rep.out_len : 0] = '\0';
  free (n->out);
  n->out = out;
  if (r < 0)
    asbx_error (err, errno, "nft: the helper in the container's network namespace is gone");
  else if (rep.r < 0)
    {
      asbx_error (err, 0, "%s", msg[0] ? msg : "nft: the helper failed");
      (*err)->errnum = rep.errnum;
      r = -1;
    }
  free (msg);
  return r;
}

static int
remote_start (struct linux_nft *n, asbx_err_t *err)
{
  int sp[2];
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
    return asbx_error (err, errno, "nft: socketpair");
  pid_t parent = getpid ();
  n->pid = fork ();
  if (n->pid < 0)
    {
      int e = errno;
      close (sp[0]);
      close (sp[1]);
      return asbx_error (err, e, "nft: fork the helper");
    }
  if (n->pid == 0)
    remote_serve (sp[1], n->netns_fd, parent);
  close (sp[1]);
  n->sk = sp[0];
  n->remote = true;
  return remote_read (n, err) < 0 ? asbx_error_wrap (err, "nft: the helper in the container's network namespace") : 0;
}

static int
remote_run (struct linux_nft *n, const char *cmds, asbx_err_t *err)
{
  uint32_t len = (uint32_t) strlen (cmds);
  if (send_exact (n->sk, &len, sizeof len) < 0 || send_exact (n->sk, cmds, len) < 0)
    return asbx_error (err, errno, "nft: the helper in the container's network namespace is gone");
  return remote_read (n, err);
}

int
linux_nft_run (struct linux_nft *n, const char *cmds, asbx_err_t *err)
{
  int r, saved;

  if (n->remote)
    return remote_run (n, cmds, err);
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

/* The descriptor socket(2) will return next: the lowest free one (eventfd takes it and gives it
 * back; no path is opened). -1 when none is free. */
static int
lowest_free_fd (void)
{
  int fd = eventfd (0, EFD_CLOEXEC);
  if (fd >= 0)
    close (fd);
  return fd;
}

/* fd is an nfnetlink (nf_tables) socket */
static bool
is_nfnetlink (int fd)
{
  int dom = 0, proto = 0;
  socklen_t l1 = sizeof dom, l2 = sizeof proto;
  return fd >= 0 && getsockopt (fd, SOL_SOCKET, SO_DOMAIN, &dom, &l1) == 0
         && getsockopt (fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l2) == 0 && dom == AF_NETLINK
         && proto == NETLINK_NETFILTER;
}

int
linux_nft_load_close_at_exec (const char *cmds, asbx_err_t *err)
{
  if (nft_lib_load (err) < 0)
    return -1;
  /* libnftables 1.0.x opens its socket first thing in nft_ctx_new: it takes this descriptor,
   * which was free, so a netlink socket found there afterwards is the context's own */
  int sock = lowest_free_fd ();
  struct linux_nft *n = linux_nft_new (-1, err);
  if (!n)
    return -1;
  int r = linux_nft_run (n, cmds, err);
  /* another layout (a later libnftables): no duplicate, the close below waits as before */
  int keep = is_nfnetlink (sock) ? fcntl (sock, F_DUPFD_CLOEXEC, 3) : -1;
  linux_nft_free (n);
  (void) keep; /* deliberately left open: closed by the kernel at execve (O_CLOEXEC) or exit */
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
