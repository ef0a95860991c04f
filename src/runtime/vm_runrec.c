/* vm_runrec.c - the run directory's owner record (vm_runrec.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "runtime/state.h"
#include "runtime/vm.h"
#include "runtime/vm_cgroup.h"
#include "runtime/vm_runrec.h"

#define RUNREC_MAX 8192

static char *
rec_path (const char *state_root, const char *id)
{
  return xasprintf ("%s/vm/%s.run", state_root, id);
}

static bool
alive (pid_t pid, unsigned long long start)
{
  return pid > 0 && start && asbx_pid_start_time (pid) == start;
}

int
vm_runrec_claim (const char *state_root, const char *id, asbx_err_t *err)
{
  cleanup_free char *p = rec_path (state_root, id);
  for (int tries = 0; tries < 2; tries++)
    {
      cleanup_close int fd = open (p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd >= 0)
        {
          cleanup_free char *line = xasprintf ("runner %d %llu\n", (int) getpid (),
                                               (unsigned long long) asbx_pid_start_time (getpid ()));
          if (write_all (fd, line, strlen (line)) < 0)
            {
              int e = errno;
              unlink (p);
              return asbx_error (err, e, "isolation vm: write %s", p);
            }
          return 0;
        }
      if (errno != EEXIST)
        return asbx_error (err, errno, "isolation vm: create %s", p);
      if (!vm_runrec_reap_stale (state_root, id))
        break;
    }
  cleanup_free char *rec = NULL;
  asbx_err_t e = NULL;
  int pid = 0;
  if (read_file_at (AT_FDCWD, p, RUNREC_MAX, &rec, NULL, &e) < 0)
    asbx_error_free (&e);
  else
    (void) sscanf (rec, "runner %d", &pid);
  return asbx_error (err, EBUSY, "isolation vm: container `%s` is in use by a running VM (its runner, pid %d)", id,
                     pid);
}

void
vm_runrec_qemu (const char *state_root, const char *id, pid_t qemu, const char *cgroup)
{
  cleanup_free char *p = rec_path (state_root, id);
  cleanup_close int fd = open (p, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  cleanup_free char *line = xasprintf ("qemu %d %llu %s\n", (int) qemu, (unsigned long long) asbx_pid_start_time (qemu),
                                       cgroup ? cgroup : "");
  if (fd < 0 || write_all (fd, line, strlen (line)) < 0)
    log_warning ("isolation vm: record QEMU in %s: %s", p, strerror (errno));
}

void
vm_runrec_release (const char *state_root, const char *id)
{
  cleanup_free char *p = rec_path (state_root, id);
  if (unlink (p) < 0 && errno != ENOENT)
    log_warning ("isolation vm: remove %s: %s", p, strerror (errno));
}

bool
vm_runrec_live_other (const char *state_root, const char *id)
{
  cleanup_free char *p = rec_path (state_root, id);
  cleanup_free char *rec = NULL;
  asbx_err_t e = NULL;
  int rpid = 0;
  unsigned long long rstart = 0;
  if (read_file_at (AT_FDCWD, p, RUNREC_MAX, &rec, NULL, &e) < 0)
    {
      asbx_error_free (&e);
      return false;
    }
  return sscanf (rec, "runner %d %llu", &rpid, &rstart) == 2 && rpid != getpid () && alive (rpid, rstart);
}

void
vm_runrec_kill_qemu (pid_t qpid, unsigned long long start)
{
  cleanup_close int pfd = (int) syscall (SYS_pidfd_open, qpid, 0);
  /* the pidfd pins the pid: still QEMU (start time) before it is signalled */
  if (pfd >= 0 && alive (qpid, start))
    {
      struct pollfd pl = { .fd = pfd, .events = POLLIN };
      syscall (SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
      if (poll (&pl, 1, 10000) <= 0)
        log_warning ("isolation vm: QEMU (pid %d) did not end after SIGKILL", (int) qpid);
    }
}

bool
vm_runrec_reap_stale (const char *state_root, const char *id)
{
  cleanup_free char *p = rec_path (state_root, id);
  cleanup_free char *rec = NULL;
  asbx_err_t e = NULL;
  if (read_file_at (AT_FDCWD, p, RUNREC_MAX, &rec, NULL, &e) < 0)
    {
      asbx_error_free (&e);
      return false;
    }
  int rpid = 0, qpid = 0, off = 0;
  unsigned long long rstart = 0, qstart = 0;
  char *q = strstr (rec, "\nqemu ");
  if (sscanf (rec, "runner %d %llu", &rpid, &rstart) != 2)
    rpid = 0; /* a torn record (the runner was killed as it wrote): stale */
  if (alive (rpid, rstart))
    return false;
  if (q && sscanf (q + 1, "qemu %d %llu %n", &qpid, &qstart, &off) >= 2)
    {
      vm_runrec_kill_qemu (qpid, qstart);
      if (off > 0)
        {
          char *nl = strchr (q + 1 + off, '\n');
          if (nl)
            *nl = '\0';
          vm_cgroup_remove_record (q + 1 + off);
        }
    }
  vm_run_dir_remove (state_root, id); /* and the record */
  log_debug ("isolation vm: reaped the stale run of `%s` (runner pid %d gone)", id, rpid);
  return true;
}
