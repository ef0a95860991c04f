/* unixsock.c - the seccomp half of the unix-socket confinement (see unixsock.h for the design).
 * Threat model: the process is hostile and multi-threaded; the filter decides only on registers
 * (socket family and type), never on memory. connect(2) itself goes to the monitor, which reads
 * the address once and acts on its own copy (monitor/unixsock.c), so there is no TOCTOU either.
 * Ordering: loaded last, after the OCI filter and the policy's groups filter, right before
 * execve: the init's own connect(2) calls (console socket, listenerPath) happen earlier. */
#include <errno.h>
#include <seccomp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/filter.h>

#include "core/cleanup.h"
#include "core/fdpass.h"
#include "core/util.h"
#include "linux/unixsock.h"

static void
ctx_free (scmp_filter_ctx *ctx)
{
  if (*ctx)
    seccomp_release (*ctx);
}

/* The family argument is an int: the kernel reads its low 32 bits only, so a plain 64-bit
 * comparison would let 0x100000001 through as AF_UNIX (found by an outside tester). */
#define A0_FAMILY(f) SCMP_A0 (SCMP_CMP_MASKED_EQ, 0xffffffffu, (f))

/* Only the families the egress layer sees or that stay on the host: AF_UNIX (confined here),
 * AF_INET/AF_INET6 (nftables, the DNS stub, the relay), AF_NETLINK (glibc's getaddrinfo asks
 * rtnetlink for the addresses). Every other family is refused with EAFNOSUPPORT: AF_VSOCK
 * reached the host's vsock port space past every network rule (found by an outside tester), and
 * AF_TIPC, AF_RDS, AF_CAN, AF_BLUETOOTH, AF_XDP, AF_ALG... are no agent's need. A value with any
 * of the high 32 bits set is refused too (GE on the whole register). AF_PACKET is left to the
 * `raw-sockets` group (its EPERM; this filter, loaded last, would override it) and to CAP_NET_RAW,
 * which no none/filtered container holds. */
static int
deny_other_families (scmp_filter_ctx ctx)
{
  static const int calls[] = { SCMP_SYS (socket), SCMP_SYS (socketpair) };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (calls); i++)
    {
      int r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EAFNOSUPPORT), calls[i], 1, SCMP_A0 (SCMP_CMP_GE, AF_MAX));
      for (int f = 0; r == 0 && f < AF_MAX; f++)
        if (f != AF_UNIX && f != AF_INET && f != AF_INET6 && f != AF_NETLINK && f != AF_PACKET)
          r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EAFNOSUPPORT), calls[i], 1, A0_FAMILY (f));
      if (r < 0)
        return r;
    }
  return 0;
}

/* deny socket/socketpair(AF_UNIX, type) for every type but the allowed ones (the low 4 bits of
 * the type argument are the type; SOCK_NONBLOCK/SOCK_CLOEXEC sit above them) */
static int
deny_unix_types (scmp_filter_ctx ctx, bool allow_stream)
{
  static const int calls[] = { SCMP_SYS (socket), SCMP_SYS (socketpair) };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (calls); i++)
    for (unsigned t = 0; t < 16; t++)
      {
        if (t == SOCK_SEQPACKET || (t == SOCK_STREAM && (allow_stream || calls[i] == SCMP_SYS (socketpair))))
          continue;
        int r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EACCES), calls[i], 2, A0_FAMILY (AF_UNIX),
                                  SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xf, t));
        if (r < 0)
          return r;
      }
  if (!allow_stream)
    {
      /* no pathname connect without the monitor: no new AF_UNIX socket that could connect */
      int r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EACCES), SCMP_SYS (socket), 2, A0_FAMILY (AF_UNIX),
                                SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xf, SOCK_SEQPACKET));
      if (r < 0)
        return r;
    }
  return 0;
}

int
linux_unixsock_filter_compile (bool confine, bool supervised, bool exec_notify, struct linux_seccomp *out,
                               asbx_err_t *err)
{
  __attribute__ ((cleanup (ctx_free))) scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);
  cleanup_close int fd = -1;
  cleanup_free char *buf = NULL;
  size_t len = 0;
  int r;

  if (ctx == NULL)
    return asbx_error (err, ENOMEM, "unix socket filter: seccomp_init");
  /* a foreign ABI (int 0x80, x32) gets ENOSYS for everything: socketcall(2) would hide the
   * family and type from the filter */
  r = seccomp_attr_set (ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO (ENOSYS));
  if (r == 0 && confine)
    r = deny_unix_types (ctx, supervised);
  if (r == 0 && confine)
    r = deny_other_families (ctx);
  if (r == 0 && confine && supervised)
    r = seccomp_rule_add (ctx, SCMP_ACT_NOTIFY, SCMP_SYS (connect), 0);
  /* execve/execveat: the monitor copies filename and argv for the exec record and counts the
   * failed ones (monitor/execfail.h), then answers CONTINUE (monitor/execrec.h) - the caller
   * cannot rewrite its argv before /proc is read */
  if (r == 0 && supervised && exec_notify)
    r = seccomp_rule_add (ctx, SCMP_ACT_NOTIFY, SCMP_SYS (execve), 0);
  if (r == 0 && supervised && exec_notify)
    r = seccomp_rule_add (ctx, SCMP_ACT_NOTIFY, SCMP_SYS (execveat), 0);
  /* io_uring's IORING_OP_CONNECT/SENDMSG never pass through seccomp: no ring at all */
  if (r == 0 && confine)
    r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (io_uring_setup), 0);
  /* an unsupervised `exec` process must not take an unconnected AF_UNIX socket out of the
   * supervised tree (same uid; without Landlock nothing else stops it) and connect it itself */
  if (r == 0 && confine)
    r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (pidfd_getfd), 0);
  if (r < 0)
    return asbx_error (err, -r, "unix socket filter: add the rules");
  fd = memfd_create ("asbx-unixsock", MFD_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "unix socket filter: memfd_create");
  r = seccomp_export_bpf (ctx, fd);
  if (r < 0)
    return asbx_error (err, -r, "unix socket filter: export the BPF program");
  if (lseek (fd, 0, SEEK_SET) < 0 || read_all_fd (fd, 1 << 20, &buf, &len) < 0)
    return asbx_error (err, errno, "unix socket filter: read back the BPF program");
  if (len == 0 || len % sizeof (struct sock_filter) || len / sizeof (struct sock_filter) > BPF_MAXINSNS)
    return asbx_error (err, E2BIG, "unix socket filter: %zu bytes of BPF", len);
  memset (out, 0, sizeof *out);
  out->len = (unsigned short) (len / sizeof (struct sock_filter));
  out->insns = steal_ptr (&buf);
  out->notify = supervised;
  return 0;
}

int
linux_unixsock_install (const struct linux_seccomp *f, int chan, asbx_err_t *err)
{
  cleanup_close int nfd = -1;

  if (f->notify && chan < 0)
    return asbx_error (err, EINVAL, "unix socket filter: no channel to the monitor");
  if (linux_seccomp_load (f, &nfd, err) < 0)
    return asbx_error_wrap (err, "network (unix socket confinement)");
  if (!f->notify)
    return 0;
  /* sendmsg on a connected socket: not intercepted by this filter */
  if (fdpass_send (chan, nfd, "L", 1) < 0)
    return asbx_error (err, errno, "network (unix socket confinement): hand the notify fd to the monitor");
  return 0;
}
