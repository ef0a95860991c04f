/* unixsock.c - the monitor's supervision of connect(2) for the unix-socket confinement (see
 * unixsock.h for the mechanism, linux/unixsock.c for the filter).
 * Threat model: the caller is hostile, multi-threaded and may share memory and its fd table;
 * everything the decision uses is copied once (the socket by pidfd_getfd, the address by
 * process_vm_readv) and the connect is done by us on the copy, to the inode we checked, so a
 * change after the check reaches nothing. The notification id is re-validated after each read
 * of the caller (its pid could have been reused). A worker thread per notification: a blocking
 * connect (a TCP handshake, a full backlog) must not stall the monitor's loop.
 * Fail closed: a notification we cannot handle is answered with an errno, never CONTINUE; when
 * the monitor is gone the kernel answers ENOSYS to every connect (no listener). The one CONTINUE:
 * execve/execveat of the exec audit records (monitor/execrec.h), a copy for the log, no decision. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/fdpass.h"
#include "core/log.h"
#include "core/util.h"
#include "monitor/execrec.h"
#include "monitor/unixsock.h"

#define MAX_INFLIGHT 64

/* linux/seccomp.h of 6.6; Debian 12's headers predate it */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW (4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

enum src_kind
{
  SRC_CHAN,   /* a channel on which one notify fd arrives (the init's socketpair, an exec's conn) */
  SRC_LISTEN, /* unixsock.sock in the state dir: `exec` connects here */
  SRC_NOTIFY, /* a seccomp notify fd */
};

struct src
{
  enum src_kind kind;
  int fd;
};

struct unixsock_sup
{
  const struct policy_plan *plan;
  int ep; /* epoll over every source */
  bool own_netns;
};

struct job
{
  struct job *next; /* pool queue */
  struct unixsock_sup *s;
  int nfd;
  struct seccomp_notif req;
  /* filled by prepare(): the copies the decision and the connect use */
  int sock; /* the caller's socket (pidfd_getfd), owned */
  int len;
  int dom;
  struct sockaddr_storage ss;
};

static atomic_int inflight;

/* set in a thread whose root could not be restored after a resolution: it must not serve again */
static __thread bool fs_broken;

/* A few persistent workers, so that the common case (a pathname or blocking connect) costs no
 * thread creation; when none is idle a detached thread is made per job, as many as
 * MAX_INFLIGHT allows. */
#define POOL_SIZE 4
static struct
{
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct job *head, *tail;
  int idle, started;
} pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0 };

bool
unixsock_confined (const struct policy_plan *plan)
{
  return plan && plan->active && plan->net_mode != POLICY_NET_OPEN;
}

bool
unixsock_exec_notified (const struct policy_plan *plan)
{
  return plan && plan->active && (plan->failed_execs || (plan->audit_events & POLICY_AUDIT_EXEC));
}

bool
unixsock_supervised (const struct policy_plan *plan)
{
  return unixsock_confined (plan) || unixsock_exec_notified (plan);
}

static void
src_add (struct unixsock_sup *s, enum src_kind kind, int fd)
{
  struct src *x = xmalloc (sizeof *x);
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = x };
  x->kind = kind;
  x->fd = fd;
  if (epoll_ctl (s->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
    {
      log_debug ("unix socket confinement: epoll_ctl: %s", strerror (errno));
      close (fd);
      free (x);
    }
}

static void
src_drop (struct unixsock_sup *s, struct src *x)
{
  epoll_ctl (s->ep, EPOLL_CTL_DEL, x->fd, NULL);
  close (x->fd);
  free (x);
}

/* unixsock.sock in the state dir (0600, root's: the dir is root-only): `exec` hands the notify
 * fd of its process's filter over a connection to it */
static void
listen_for_exec (struct unixsock_sup *s, int state_dirfd)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  snprintf (a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/" UNIXSOCK_EXEC_SOCKET, state_dirfd);
  unlinkat (state_dirfd, UNIXSOCK_EXEC_SOCKET, 0);
  if (fd < 0 || bind (fd, (struct sockaddr *) &a, sizeof a) < 0
      || fchmodat (state_dirfd, UNIXSOCK_EXEC_SOCKET, 0600, 0) < 0 || listen (fd, 16) < 0)
    {
      /* exec then finds no socket and gets the unsupervised filter (no AF_UNIX at all) */
      log_debug ("unix socket confinement: no %s: %s", UNIXSOCK_EXEC_SOCKET, strerror (errno));
      if (fd >= 0)
        close (fd);
      return;
    }
  src_add (s, SRC_LISTEN, fd);
}

static bool
id_valid (const struct job *j)
{
  __u64 id = j->req.id;
  return ioctl (j->nfd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static int
do_connect (int sock, const void *addr, socklen_t len)
{
  return connect (sock, (const struct sockaddr *) addr, len) < 0 ? errno : 0;
}

/* `path` (absolute, container view) is `dir` or below it */
static bool
under (const char *dir, const char *path)
{
  size_t n = strlen (dir);
  if (n == 1 && dir[0] == '/')
    return true;
  return strncmp (dir, path, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* st_dev is the device of some mount in the monitor's (host) mount namespace */
static bool
host_has_dev (int mountinfo, dev_t dev)
{
  cleanup_free char *buf = NULL;
  size_t len = 0;
  char want[32];

  if (lseek (mountinfo, 0, SEEK_SET) < 0 || read_all_fd (mountinfo, 16 << 20, &buf, &len) < 0)
    return true; /* unknown: not the container's own */
  snprintf (want, sizeof want, " %u:%u ", major (dev), minor (dev));
  for (char *line = buf; line && *line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL)
    {
      /* "ID PARENT MAJ:MIN ROOT ..." */
      char *sp = strchr (line, ' ');
      sp = sp ? strchr (sp + 1, ' ') : NULL;
      if (sp && strncmp (sp, want, strlen (want)) == 0)
        return true;
    }
  return false;
}

/* The socket's mount (by its mount id, in the caller's mountinfo) is a tmpfs whose superblock
 * no mount of the host's namespace shows: a tmpfs the container was given for itself (the
 * sandbox's /tmp, /run, /dev/shm). By mount rather than by st_dev alone: on btrfs a file's st_dev
 * is its subvolume's, which mountinfo need not list. */
static bool
own_tmpfs (int sfd, int caller_mountinfo, int host_mountinfo)
{
  struct statx stx;
  cleanup_free char *buf = NULL;
  size_t len = 0;
  char id[24];
  unsigned maj, min;

  if (statx (sfd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
    return false;
  if (read_all_fd (caller_mountinfo, 16 << 20, &buf, &len) < 0)
    return false;
  snprintf (id, sizeof id, "%llu ", (unsigned long long) stx.stx_mnt_id);
  for (char *line = buf, *next; line && *line; line = next)
    {
      next = strchr (line, '\n');
      if (next)
        *next++ = '\0';
      if (strncmp (line, id, strlen (id)) != 0)
        continue;
      /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS] - FSTYPE SOURCE SUPEROPTS" */
      char *sep = strstr (line, " - ");
      if (!sep || strncmp (sep + 3, "tmpfs ", 6) != 0 || sscanf (line, "%*s %*s %u:%u", &maj, &min) != 2)
        return false;
      return !host_has_dev (host_mountinfo, makedev (maj, min));
    }
  return false;
}

/* Called inside the chroot into the caller's root: is the socket inode sfd/st one the policy
 * lets the container reach? */
static bool
allowed (const struct policy_plan *pl, int sfd, const struct stat *st, int fdsdir, int mountinfo, int caller_mountinfo,
         char *why, size_t whylen)
{
  char num[16], link[PATH_MAX];
  struct stat ns;
  ssize_t n;

  for (size_t i = 0; i < pl->allow_unix_sockets_len; i++)
    if (stat (pl->allow_unix_sockets[i], &ns) == 0 && ns.st_dev == st->st_dev && ns.st_ino == st->st_ino)
      return true;
  snprintf (num, sizeof num, "%d", sfd);
  n = readlinkat (fdsdir, num, link, sizeof link - 1);
  link[n > 0 ? n : 0] = '\0';
  snprintf (why, whylen, "%s", link);
  if (n > 0 && link[0] == '/')
    {
      for (size_t i = 0; i < pl->fs_rules_len; i++)
        if ((pl->fs_rules[i].rights & POLICY_FS_WRITE) && under (pl->fs_rules[i].path, link))
          return true;
      for (size_t i = 0; i < pl->mounts_len; i++)
        if ((pl->mounts[i].kind == POLICY_MOUNT_TMPFS || pl->mounts[i].kind == POLICY_MOUNT_BIND_RW)
            && under (pl->mounts[i].path, link))
          return true;
    }
  return own_tmpfs (sfd, caller_mountinfo, mountinfo);
}

/* The caller's pid as its own procfs shows it (the last NSpid of /proc/PID/status), 0 if unknown:
 * /proc/self in the caller's view is not ours, so "/proc/self/..." is rewritten with it. */
static pid_t
ns_pid (pid_t pid)
{
  char p[64];
  cleanup_free char *buf = NULL;
  size_t len = 0;
  snprintf (p, sizeof p, "/proc/%d/status", (int) pid);
  cleanup_close int fd = open (p, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read_all_fd (fd, 1 << 16, &buf, &len) < 0)
    return 0;
  char *l = strstr (buf, "\nNSpid:");
  if (!l)
    return 0;
  l += 8;
  char *end = strchr (l, '\n');
  if (end)
    *end = '\0';
  char *last = strrchr (l, '\t');
  return (pid_t) atoi (last ? last + 1 : l);
}

/* Resolve `path` as the caller `pid` would (its root, its cwd), check the inode, connect the
 * copy `sock` to exactly that inode. Runs in a worker thread (its fs_struct is unshared). */
static int
connect_pathname (struct job *j, int sock, const char *path)
{
  char p[64], why[PATH_MAX] = "";
  pid_t pid = (pid_t) j->req.pid;
  cleanup_close int hostroot = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int fdsdir = open ("/proc/thread-self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int mountinfo = open ("/proc/thread-self/mountinfo", O_RDONLY | O_CLOEXEC);
  cleanup_close int rootfd = -1, cwdfd = -1, sfd = -1, caller_mi = -1;
  struct stat st;
  bool ok = false;
  int e = 0;

  snprintf (p, sizeof p, "/proc/%d/root", (int) pid);
  rootfd = open (p, O_PATH | O_DIRECTORY | O_CLOEXEC);
  snprintf (p, sizeof p, "/proc/%d/cwd", (int) pid);
  cwdfd = open (p, O_PATH | O_DIRECTORY | O_CLOEXEC);
  snprintf (p, sizeof p, "/proc/%d/mountinfo", (int) pid);
  caller_mi = open (p, O_RDONLY | O_CLOEXEC);
  if (hostroot < 0 || fdsdir < 0 || mountinfo < 0 || rootfd < 0 || cwdfd < 0 || caller_mi < 0)
    return EACCES;
  if (!id_valid (j))
    return ESRCH; /* the pid was reused: those were someone else's root and cwd */
  char rewritten[PATH_MAX];
  static const char *const selves[] = { "/proc/self/", "/proc/thread-self/" };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (selves); i++)
    if (strncmp (path, selves[i], strlen (selves[i])) == 0)
      {
        pid_t np = ns_pid (pid);
        if (np <= 0)
          return ENOENT;
        snprintf (rewritten, sizeof rewritten, "/proc/%d/%s", (int) np, path + strlen (selves[i]));
        path = rewritten;
        break;
      }
  if (unshare (CLONE_FS) < 0 || fchdir (rootfd) < 0 || chroot (".") < 0 || fchdir (cwdfd) < 0)
    e = EACCES;
  else
    {
      sfd = open (path, O_PATH | O_CLOEXEC); /* follows symlinks, as connect(2) does */
      if (sfd < 0)
        e = errno;
      else if (fstat (sfd, &st) < 0 || !S_ISSOCK (st.st_mode))
        e = ECONNREFUSED; /* what connect(2) answers for a non-socket */
      else
        ok = allowed (j->s->plan, sfd, &st, fdsdir, mountinfo, caller_mi, why, sizeof why);
    }
  /* back to the host root for /proc/thread-self; a thread we cannot restore must not go on */
  if (fchdir (hostroot) < 0 || chroot (".") < 0)
    {
      fs_broken = true;
      return EACCES;
    }
  if (e)
    return e;
  if (!ok)
    {
      log_debug ("unix socket confinement: pid %d: connect `%s` (%s) refused", (int) pid, path, why);
      return EACCES;
    }
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  snprintf (a.sun_path, sizeof a.sun_path, "/proc/thread-self/fd/%d", sfd);
  return do_connect (sock, &a, sizeof a);
}

/* In the monitor's thread: copy the caller's socket and address (nothing here blocks). Returns
 * 0 when finish() is to decide and connect, else the errno to answer at once. *quick: finish()
 * neither resolves a path (which needs a thread of its own) nor can block (a non-blocking
 * socket), so it may run right here. */
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9, include/uapi/linux/pidfd.h */
#endif

/* A pidfd for the thread that made the notified call: seccomp_notif.pid is a thread id, and
 * pidfd_open(2) refuses a thread that does not lead its group (ENOENT on 6.18, EINVAL on older
 * kernels) unless PIDFD_THREAD (Linux 6.9) is given - without it, connect(2) from any thread but a process's first
 * failed with ESRCH under none/filtered (curl's and git's threaded resolvers, Python threads). Before 6.9: the group's
 * leader (Tgid of /proc/TID/status), whose fd table the thread shares unless it was cloned without CLONE_FILES (then
 * pidfd_getfd takes another table's fd: the connect then fails or acts on what the leader holds at that number, which
 * the process could pass itself; the id_valid check after the open keeps the thread id from being a reused one). */
static int
thread_pidfd (pid_t tid)
{
  int fd = (int) syscall (SYS_pidfd_open, tid, 0);
  if (fd >= 0 || (errno != EINVAL && errno != ENOENT))
    return fd;
  fd = (int) syscall (SYS_pidfd_open, tid, PIDFD_THREAD);
  if (fd >= 0 || errno != EINVAL)
    return fd;
  char path[64], line[128];
  pid_t tgid = 0;
  snprintf (path, sizeof path, "/proc/%d/status", (int) tid);
  cleanup_fclose FILE *f = fopen (path, "re");
  while (f && fgets (line, sizeof line, f))
    if (sscanf (line, "Tgid: %d", &tgid) == 1)
      break;
  if (tgid <= 0)
    {
      errno = ESRCH;
      return -1;
    }
  return (int) syscall (SYS_pidfd_open, tgid, 0);
}

static int
prepare (struct job *j, bool *quick)
{
  const struct seccomp_data *d = &j->req.data;
  const size_t off = offsetof (struct sockaddr_un, sun_path);
  pid_t pid = (pid_t) j->req.pid;
  socklen_t sl = sizeof j->dom;
  int fl;

  *quick = false;
  if (d->arch != seccomp_arch_native () || d->nr != SYS_connect)
    return EACCES;
  cleanup_close int pidfd = thread_pidfd (pid);
  if (pidfd < 0 || !id_valid (j))
    return ESRCH;
  /* flags must be 0; the kernel makes the new fd close-on-exec itself (receive_fd(O_CLOEXEC)),
   * so a pasta fork in the monitor's main thread never inherits it */
  j->sock = (int) syscall (SYS_pidfd_getfd, pidfd, (int) d->args[0], 0);
  if (j->sock < 0)
    return errno == EBADF ? EBADF : EACCES;
  j->len = (int) d->args[2];
  if (j->len < 0 || (size_t) j->len > sizeof j->ss)
    return EINVAL;
  struct iovec local = { .iov_base = &j->ss, .iov_len = (size_t) j->len };
  struct iovec remote = { .iov_base = (void *) (uintptr_t) d->args[1], .iov_len = (size_t) j->len };
  if (j->len > 0 && process_vm_readv (pid, &local, 1, &remote, 1, 0) != j->len)
    return EFAULT;
  if (!id_valid (j))
    return ESRCH;
  if (getsockopt (j->sock, SOL_SOCKET, SO_DOMAIN, &j->dom, &sl) < 0)
    return errno;
  bool pathname = j->dom == AF_UNIX && j->ss.ss_family == AF_UNIX && (size_t) j->len > off
                  && ((struct sockaddr_un *) &j->ss)->sun_path[0] != '\0';
  /* racy by nature (the caller may clear O_NONBLOCK after this): then the connect below blocks
   * this thread - only this container's own connects wait, a TCP handshake at most ~2 min */
  fl = fcntl (j->sock, F_GETFL);
  *quick = !pathname && fl >= 0 && (fl & O_NONBLOCK);
  return 0;
}

/* Decide on the copies and connect (in a worker thread unless prepare() said quick). */
static int
finish (struct job *j)
{
  const size_t off = offsetof (struct sockaddr_un, sun_path);
  struct sockaddr_un *sun = (struct sockaddr_un *) &j->ss;

  if (j->dom != AF_UNIX || j->ss.ss_family != AF_UNIX || (size_t) j->len <= off)
    return do_connect (j->sock, &j->ss, (socklen_t) j->len); /* the kernel's own answer for the rest */
  if (sun->sun_path[0] == '\0')
    /* abstract: per network namespace; only a namespace of the container's own holds nothing
     * but the container's names */
    return j->s->own_netns ? do_connect (j->sock, &j->ss, (socklen_t) j->len) : EPERM;
  char path[sizeof sun->sun_path + 1];
  size_t n = (size_t) j->len - off;
  memcpy (path, sun->sun_path, n);
  path[n] = '\0';
  return connect_pathname (j, j->sock, path);
}

static void
job_free (struct job *j)
{
  if (j->sock >= 0)
    close (j->sock);
  if (j->nfd >= 0)
    close (j->nfd);
  free (j);
}

static void
respond (int nfd, __u64 id, int e)
{
  struct seccomp_notif_resp resp = { .id = id, .error = e ? -e : 0, .val = 0, .flags = 0 };
  /* ENOENT: the caller was interrupted or died meanwhile */
  if (ioctl (nfd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
    log_debug ("unix socket confinement: answer notification: %s", strerror (errno));
}

static void
run_job (struct job *j)
{
  respond (j->nfd, j->req.id, finish (j));
  job_free (j);
  atomic_fetch_sub (&inflight, 1);
}

static void
block_signals (void)
{
  sigset_t all;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, NULL);
}

/* a one-job thread */
static void *
worker (void *arg)
{
  block_signals ();
  run_job (arg);
  return NULL;
}

/* a persistent worker: its fs_struct is its own (unshare in connect_pathname), restored to the
 * host root after every job; leaves when that restore failed */
static void *
pool_worker (void *arg)
{
  (void) arg;
  block_signals ();
  while (!fs_broken)
    {
      pthread_mutex_lock (&pool.lock);
      pool.idle++;
      while (!pool.head)
        pthread_cond_wait (&pool.cond, &pool.lock);
      struct job *j = pool.head;
      pool.head = j->next;
      if (!pool.head)
        pool.tail = NULL;
      pthread_mutex_unlock (&pool.lock);
      run_job (j);
    }
  pthread_mutex_lock (&pool.lock);
  pool.started--;
  pthread_mutex_unlock (&pool.lock);
  return NULL;
}

static bool
spawn (void *(*fn) (void *), void *arg)
{
  pthread_attr_t attr;
  pthread_t t;
  int r;
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize (&attr, 256 << 10);
  r = pthread_create (&t, &attr, fn, arg);
  pthread_attr_destroy (&attr);
  return r == 0;
}

/* hand j to an idle pool worker (starting the pool as needed), else to a thread of its own */
static bool
submit (struct job *j)
{
  pthread_mutex_lock (&pool.lock);
  while (pool.started < POOL_SIZE && spawn (pool_worker, NULL))
    pool.started++;
  if (pool.idle > 0)
    {
      pool.idle--;
      j->next = NULL;
      if (pool.tail)
        pool.tail->next = j;
      else
        pool.head = j;
      pool.tail = j;
      pthread_cond_signal (&pool.cond);
      pthread_mutex_unlock (&pool.lock);
      return true;
    }
  pthread_mutex_unlock (&pool.lock);
  return spawn (worker, j);
}

/* one notify fd on a channel, then the channel is done */
static void
recv_listener (struct unixsock_sup *s, struct src *x)
{
  char byte;
  int nfd = fdpass_recv (x->fd, &byte, 1, MSG_DONTWAIT);

  if (nfd < 0 && errno == EAGAIN)
    return;
  /* EOF (the process died before exec) or the fd: the channel has served */
  src_drop (s, x);
  if (nfd < 0)
    return;
  /* the caller sleeps until we answer: with SYNC_WAKE_UP (Linux 6.6) the kernel wakes us, and
   * the caller at our reply, on the waker's CPU, a direct hand-over instead of a round through
   * the scheduler's load balancing (every connect and every audited execve of the container
   * waits here). Scheduling only, no decision changes: an older kernel's EINVAL is ignored. */
  if (ioctl (nfd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (__u64) SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) < 0)
    log_debug ("unix socket confinement: SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: %s", strerror (errno));
  src_add (s, SRC_NOTIFY, nfd);
}

/* one notification of x: read it, hand it to a worker thread */
static void
recv_notification (struct src *x, struct unixsock_sup *s)
{
  struct job *j = xmalloc0 (sizeof *j);
  bool quick;
  int e;

  j->s = s;
  j->sock = j->nfd = -1;
  if (ioctl (x->fd, SECCOMP_IOCTL_NOTIF_RECV, &j->req) < 0)
    {
      free (j); /* ENOENT: the caller went away before we read it */
      return;
    }
  if (execrec_is_exec (&j->req))
    {
      /* an execve of the exec audit records (monitor/execrec.h): a copy, then CONTINUE */
      execrec_handle (x->fd, &j->req);
      free (j);
      return;
    }
  /* the job's own fd: the source may be closed (POLLHUP) while a worker still answers */
  j->nfd = fcntl (x->fd, F_DUPFD_CLOEXEC, 3);
  e = j->nfd < 0 ? EAGAIN : prepare (j, &quick);
  if (e || quick)
    {
      respond (x->fd, j->req.id, e ? e : finish (j));
      job_free (j);
      return;
    }
  if (atomic_fetch_add (&inflight, 1) >= MAX_INFLIGHT)
    {
      atomic_fetch_sub (&inflight, 1);
      respond (x->fd, j->req.id, EAGAIN);
      job_free (j);
      return;
    }
  if (!submit (j))
    {
      atomic_fetch_sub (&inflight, 1);
      respond (x->fd, j->req.id, EAGAIN);
      job_free (j);
    }
}

static void
dispatch (struct unixsock_sup *s)
{
  struct epoll_event evs[16];
  int n = epoll_wait (s->ep, evs, ASBX_ARRAY_SIZE (evs), -1);

  for (int i = 0; i < n; i++)
    {
      struct src *x = evs[i].data.ptr;
      if (x->kind == SRC_LISTEN)
        {
          int c = accept4 (x->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (c >= 0)
            src_add (s, SRC_CHAN, c);
        }
      else if (x->kind == SRC_CHAN)
        recv_listener (s, x);
      else if (evs[i].events & EPOLLIN)
        recv_notification (x, s);
      else
        src_drop (s, x); /* EPOLLHUP: no process uses that filter any more */
    }
}

/* The supervisor's own thread: the monitor's loop drains the host-wide process events
 * connector, which under a fork storm elsewhere on the host would delay every connect */
static void *
sup_loop (void *arg)
{
  struct unixsock_sup *s = arg;
  sigset_t all;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, NULL);
  for (;;)
    dispatch (s);
  return NULL;
}

struct unixsock_sup *
unixsock_sup_new (const struct policy_plan *plan, int chan, bool own_netns, int state_dirfd)
{
  struct unixsock_sup *s = xmalloc0 (sizeof *s);
  pthread_attr_t attr;
  pthread_t t;

  s->plan = plan;
  s->own_netns = own_netns;
  s->ep = epoll_create1 (EPOLL_CLOEXEC);
  if (s->ep < 0)
    {
      /* nobody will read the notify fd: the init's connect(2) calls then block until the
       * container ends - fail closed, and say why */
      log_warning ("unix socket confinement: epoll_create1: %s", strerror (errno));
      close (chan);
      return s;
    }
  src_add (s, SRC_CHAN, chan);
  listen_for_exec (s, state_dirfd);
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize (&attr, 256 << 10);
  if (pthread_create (&t, &attr, sup_loop, s) != 0)
    log_warning ("unix socket confinement: no supervisor thread: connect(2) in the container will wait");
  pthread_attr_destroy (&attr);
  return s;
}

int
unixsock_exec_channel (int state_dirfd)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  snprintf (a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/" UNIXSOCK_EXEC_SOCKET, state_dirfd);
  if (fd >= 0 && connect (fd, (struct sockaddr *) &a, sizeof a) == 0)
    return fd;
  if (fd >= 0)
    close (fd);
  return -1;
}
