/* cgroup_devices_bpf.c - linux.resources.devices on cgroup v2: a BPF_PROG_TYPE_CGROUP_DEVICE
 * program compiled from the effective rule list and attached with BPF_CGROUP_DEVICE.
 *
 * Mechanism: cgroup v2 has no devices files; the kernel runs the cgroup's device programs on
 * every open/mknod of a device node (include/uapi/linux/bpf.h struct bpf_cgroup_dev_ctx,
 * kernel/bpf/cgroup.c __cgroup_bpf_check_dev_permission). The context is
 * { u32 access_type = (access << 16) | dev_type; u32 major; u32 minor; }; returning 1 allows,
 * 0 denies (EPERM). The program is built here instruction by instruction (no libbpf).
 * Semantics: last matching rule wins (the spec's order), so rules are emitted last-first and
 * the first match returns; nothing matched = deny. An allow rule matches when every requested
 * access bit is in the rule; a deny rule when any requested bit is in it (a deny of "w" must
 * refuse an O_RDWR open). The verifier refuses unreachable code, so emission stops after a rule
 * that matches everything.
 * Ordering: the new program is attached before the old ones are detached (BPF_F_ALLOW_MULTI):
 * during an update both run, and both must allow, so there is no moment without a filter. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/cgroup_internal.h"

#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define LDX_W(d, s, o) INSN (BPF_LDX | BPF_MEM | BPF_W, d, s, o, 0)
#define ALU32_K(op, d, i) INSN (BPF_ALU | (op) | BPF_K, d, 0, 0, i)
#define MOV64_X(d, s) INSN (BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV64_K(d, i) INSN (BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define JMP_K(op, d, i, o) INSN (BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define EXIT() INSN (BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

/* Emit one rule into blk (at most 10 insns); returns the count and sets *always when the rule
 * has no condition. Jumps are written with off = -1 and patched to "end of block". */
static size_t
emit_rule (const struct cgroup_dev_rule *r, struct bpf_insn *blk, bool *always)
{
  size_t k = 0;

  if (r->type != 'a')
    blk[k++] = JMP_K (BPF_JNE, 2, r->type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR, -1);
  if (r->access != 7)
    {
      blk[k++] = MOV64_X (1, 3);
      if (r->allow)
        {
          blk[k++] = ALU32_K (BPF_AND, 1, (int32_t) (~r->access & 7u));
          blk[k++] = JMP_K (BPF_JNE, 1, 0, -1);
        }
      else
        {
          blk[k++] = ALU32_K (BPF_AND, 1, (int32_t) r->access);
          blk[k++] = JMP_K (BPF_JEQ, 1, 0, -1);
        }
    }
  if (r->type != 'a' && r->major >= 0)
    blk[k++] = JMP_K (BPF_JNE, 4, (int32_t) r->major, -1);
  if (r->type != 'a' && r->minor >= 0)
    blk[k++] = JMP_K (BPF_JNE, 5, (int32_t) r->minor, -1);
  *always = k == 0;
  blk[k++] = MOV64_K (0, r->allow ? 1 : 0);
  blk[k++] = EXIT ();
  for (size_t j = 0; j < k; j++)
    if (BPF_CLASS (blk[j].code) == BPF_JMP && BPF_OP (blk[j].code) != BPF_EXIT && blk[j].off == -1)
      blk[j].off = (int16_t) (k - j - 1);
  return k;
}

int
cgroup_devices_bpf_build (const struct cgroup_dev_rule *r, size_t n, void **insns, size_t *ninsns, asbx_err_t *err)
{
  struct bpf_insn *p = xmalloc ((n * 10 + 8) * sizeof *p);
  size_t k = 0;
  bool always = false;

  if (n > 4096)
    {
      free (p);
      return asbx_error (err, E2BIG, "linux.resources.devices: too many rules (%zu)", n);
    }
  p[k++] = LDX_W (2, 1, 0);              /* r2 = access_type */
  p[k++] = ALU32_K (BPF_AND, 2, 0xffff); /* r2 = device type */
  p[k++] = LDX_W (3, 1, 0);              /* r3 = access_type */
  p[k++] = ALU32_K (BPF_RSH, 3, 16);     /* r3 = access bits */
  p[k++] = LDX_W (4, 1, 4);              /* r4 = major */
  p[k++] = LDX_W (5, 1, 8);              /* r5 = minor */
  for (size_t i = n; i-- > 0 && !always;)
    k += emit_rule (&r[i], p + k, &always);
  if (!always)
    {
      p[k++] = MOV64_K (0, 0); /* default deny */
      p[k++] = EXIT ();
    }
  *insns = p;
  *ninsns = k;
  return 0;
}

static int
sys_bpf (int cmd, union bpf_attr *a)
{
  return (int) syscall (SYS_bpf, cmd, a, sizeof *a);
}

static int
load (const struct bpf_insn *p, size_t n, asbx_err_t *err)
{
  static char log[8192];
  union bpf_attr a;
  int fd;

  memset (&a, 0, sizeof a);
  a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  a.insns = (uintptr_t) p;
  a.insn_cnt = (uint32_t) n;
  a.license = (uintptr_t) "GPL";
  a.log_buf = (uintptr_t) log;
  a.log_size = sizeof log;
  a.log_level = 1;
  log[0] = '\0';
  fd = sys_bpf (BPF_PROG_LOAD, &a);
  if (fd < 0)
    return asbx_error (err, errno, "linux.resources.devices: load the cgroup device program (%zu insns)%s%.300s", n,
                       log[0] ? ": verifier: " : "", log);
  return fd;
}

int
cgroup_devices_bpf_attach (int cgroup_dirfd, const struct cgroup_dev_rule *r, size_t n, asbx_err_t *err)
{
  cleanup_free void *insns = NULL;
  cleanup_close int prog = -1, cg = -1;
  uint32_t old_ids[64], old_cnt = 64, flags = 0;
  union bpf_attr a;
  size_t ninsns = 0;

  if (cgroup_devices_bpf_build (r, n, &insns, &ninsns, err) < 0)
    return -1;
  prog = load (insns, ninsns, err);
  if (prog < 0)
    return -1;
  /* bpf() refuses O_PATH fds: reopen the directory for reading */
  cg = openat (cgroup_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg < 0)
    return asbx_error (err, errno, "linux.resources.devices: open cgroup directory");
  memset (&a, 0, sizeof a);
  a.query.target_fd = (uint32_t) cg;
  a.query.attach_type = BPF_CGROUP_DEVICE;
  a.query.prog_ids = (uintptr_t) old_ids;
  a.query.prog_cnt = old_cnt;
  if (sys_bpf (BPF_PROG_QUERY, &a) < 0)
    return asbx_error (err, errno, "linux.resources.devices: query attached device programs");
  old_cnt = a.query.prog_cnt;
  flags = a.query.attach_flags;
  memset (&a, 0, sizeof a);
  a.target_fd = (uint32_t) cg;
  a.attach_bpf_fd = (uint32_t) prog;
  a.attach_type = BPF_CGROUP_DEVICE;
  a.attach_flags = BPF_F_ALLOW_MULTI;
  if (old_cnt && !(flags & BPF_F_ALLOW_MULTI))
    return asbx_error (err, EBUSY,
                       "linux.resources.devices: the cgroup already has a device program attached "
                       "without BPF_F_ALLOW_MULTI");
  if (sys_bpf (BPF_PROG_ATTACH, &a) < 0)
    return asbx_error (err, errno, "linux.resources.devices: attach the device program (BPF_CGROUP_DEVICE)");
  for (uint32_t i = 0; i < old_cnt && i < 64; i++)
    {
      union bpf_attr g;
      int ofd;
      memset (&g, 0, sizeof g);
      g.prog_id = old_ids[i];
      ofd = sys_bpf (BPF_PROG_GET_FD_BY_ID, &g);
      if (ofd < 0)
        continue; /* already gone */
      memset (&a, 0, sizeof a);
      a.target_fd = (uint32_t) cg;
      a.attach_bpf_fd = (uint32_t) ofd;
      a.attach_type = BPF_CGROUP_DEVICE;
      if (sys_bpf (BPF_PROG_DETACH, &a) < 0)
        log_debug ("devices: detach old program %u: %s", old_ids[i], strerror (errno));
      close (ofd);
    }
  return 0;
}
