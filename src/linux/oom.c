/* oom.c - process.oomScoreAdj.
 *
 * Mechanism: /proc/<pid>/oom_score_adj (proc(5)), range -1000..1000. Lowering the value below
 * the process's current one needs CAP_SYS_RESOURCE; the kernel answers EACCES, which we turn
 * into a message naming the field and the current value (a bare EACCES says nothing).
 * Ordering: called by the runtime on the container's init (pid) or by init on itself (pid 0),
 * before the uid change. The pid is the caller's child, so the /proc/<pid> path is stable. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/process.h"

int
linux_oom_score_adj_apply (const struct oci_process *proc, pid_t pid, asbx_err_t *err)
{
  char path[64], val[16];
  cleanup_free char *cur = NULL;
  cleanup_close int fd = -1;
  int64_t curv = 0;

  if (proc == NULL || !proc->has_oom_score_adj)
    return 0;
  if (proc->oom_score_adj < -1000 || proc->oom_score_adj > 1000)
    return asbx_error (err, EINVAL, "process.oomScoreAdj: %d is outside -1000..1000", proc->oom_score_adj);
  if (pid > 0)
    snprintf (path, sizeof path, "/proc/%d/oom_score_adj", (int) pid);
  else
    snprintf (path, sizeof path, "/proc/self/oom_score_adj");

  fd = open (path, O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return asbx_error (err, errno, "process.oomScoreAdj: open `%s`", path);
  /* in the init this runs after pivot_root: /proc is whatever config.json mounted there, and a
   * bind of a host directory would take the write (found by tests/escape) */
  struct statfs sfs;
  if (fstatfs (fd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
    return asbx_error (err, EXDEV, "process.oomScoreAdj: `%s` is not on procfs", path);
  if (read_all_fd (fd, 64, &cur, NULL) == 0)
    {
      cur[strcspn (cur, "\n")] = '\0';
      if (parse_i64 (cur, &curv) == 0 && curv == proc->oom_score_adj)
        return 0; /* already there: no write, no privilege question */
    }
  snprintf (val, sizeof val, "%d", proc->oom_score_adj);
  if (pwrite (fd, val, strlen (val), 0) < 0)
    {
      int saved = errno;
      if ((saved == EACCES || saved == EPERM) && proc->oom_score_adj < curv)
        return asbx_error (err, saved,
                           "process.oomScoreAdj: cannot lower to %d (current %lld): lowering needs "
                           "CAP_SYS_RESOURCE",
                           proc->oom_score_adj, (long long) curv);
      return asbx_error (err, saved, "process.oomScoreAdj: write %d to `%s`", proc->oom_score_adj, path);
    }
  return 0;
}
