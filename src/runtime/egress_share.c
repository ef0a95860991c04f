/* egress_share.c - one egress per network namespace: the owner's record under the state root
 * and the sharer's checks; see egress_share.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/nft.h"
#include "linux/proc_ns.h"
#include "monitor/egress_table.h"
#include "policy/egress_digest.h"
#include "policy/nft_ruleset.h"
#include "runtime/egress_share.h"
#include "runtime/state.h"

#define RECORD_MAX (64 << 10)

void
egress_share_init (struct egress_share *s)
{
  memset (s, 0, sizeof *s);
  s->lockfd = s->owner_pidfd = -1;
}

void
egress_share_release (struct egress_share *s)
{
  if (s->lockfd >= 0)
    close (s->lockfd); /* drops the flock */
  if (s->owner_pidfd >= 0)
    close (s->owner_pidfd);
  free (s->owner_id);
  free (s->owner_ca_pem);
  free (s->fields);
  egress_share_init (s);
}

/* <root>/@egress, made 0700 on first use; an fd (O_NOFOLLOW: never a link planted there) */
static int
share_dir (int rootfd, asbx_err_t *err)
{
  int fd = openat (rootfd, EGRESS_SHARE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    {
      if (mkdirat (rootfd, EGRESS_SHARE_DIR, 0700) < 0 && errno != EEXIST)
        return asbx_error (err, errno, "egress: mkdir %s in the state root", EGRESS_SHARE_DIR);
      fd = openat (rootfd, EGRESS_SHARE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
  if (fd < 0)
    return asbx_error (err, errno, "egress: open %s in the state root", EGRESS_SHARE_DIR);
  return fd;
}

static int
share_lock (int rootfd, struct egress_share *s, asbx_err_t *err)
{
  if (s->lockfd >= 0)
    return 0;
  cleanup_close int dir = share_dir (rootfd, err);
  if (dir < 0)
    return -1;
  cleanup_close int fd = openat (dir, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return asbx_error (err, errno, "egress: open %s/lock", EGRESS_SHARE_DIR);
  while (flock (fd, LOCK_EX) < 0)
    if (errno != EINTR)
      return asbx_error (err, errno, "egress: flock %s/lock", EGRESS_SHARE_DIR);
  s->lockfd = steal_fd (&fd);
  return 0;
}

static char *
record_name (const struct stat *st)
{
  return xasprintf ("%ju:%ju", (uintmax_t) st->st_dev, (uintmax_t) st->st_ino);
}

/* a parsed record: pointers into the text (which the caller keeps) */
struct record
{
  char *owner;
  pid_t monitor;
  uint64_t start;
  char *fields; /* "FIELD HEX\n" lines */
  char *ca;     /* PEM or NULL */
};

/* owner ID\nmonitor PID START\n<field lines>ca\n<PEM> ; 0 / -1 (malformed) */
static int
record_parse (char *text, struct record *r)
{
  char *nl;
  unsigned long long pid, start;
  memset (r, 0, sizeof *r);
  if (strncmp (text, "owner ", 6) != 0 || !(nl = strchr (text, '\n')))
    return -1;
  *nl = '\0';
  r->owner = text + 6;
  text = nl + 1;
  if (sscanf (text, "monitor %llu %llu\n", &pid, &start) != 2 || !(nl = strchr (text, '\n')) || pid == 0)
    return -1;
  r->monitor = (pid_t) pid;
  r->start = start;
  r->fields = nl + 1;
  char *ca = strstr (r->fields, "\nca\n");
  if (ca)
    {
      ca[1] = '\0'; /* the field lines keep their last '\n' */
      r->ca = ca + 4;
    }
  else if (strncmp (r->fields, "ca\n", 3) == 0)
    return -1; /* no fields at all */
  return 0;
}

/* the first line of `a` that is not in `b` at the same place: its field name (heap), or NULL */
static char *
first_difference (const char *a, const char *b)
{
  for (;;)
    {
      const char *ea = strchr (a, '\n'), *eb = strchr (b, '\n');
      if (!ea && !eb)
        return NULL;
      if (!ea || !eb || ea - a != eb - b || memcmp (a, b, (size_t) (ea - a)) != 0)
        {
          const char *line = ea ? a : b, *end = ea ? ea : eb;
          const char *sp = memrchr (line, ' ', (size_t) (end - line));
          return xasprintf ("%.*s", (int) (sp ? sp - line : end - line), line);
        }
      a = ea + 1;
      b = eb + 1;
    }
}

/* a pidfd of the record's monitor when it is still that process (pid and start time), else -1 */
static int
owner_alive (const struct record *r)
{
  int fd = (int) syscall (SYS_pidfd_open, r->monitor, 0);
  if (fd < 0)
    return -1;
  /* after the pidfd exists: the start time read now is that of the process the pidfd names */
  if (asbx_pid_start_time (r->monitor) != r->start)
    {
      close (fd);
      return -1;
    }
  return fd;
}

/* Does the namespace hold `table inet agentsbx`? A failure to ask (EPERM: this caller has no
 * CAP_NET_ADMIN over it, and so neither has any container it makes) reads as no. */
static bool
table_present (int netns_fd)
{
  asbx_err_t e = NULL;
  struct linux_nft *n = linux_nft_new (netns_fd, &e);
  if (!n)
    {
      asbx_error_free (&e);
      return false;
    }
  int there = linux_nft_run (n, "list table inet " POLICY_NFT_TABLE "\n", &e);
  linux_nft_free (n);
  asbx_error_free (&e);
  return there == 0;
}

/* The first process already in the network namespace `ns` (the nsfs identity of the joined
 * fd), or 0: what an owner of a joined namespace must not find. Processes whose ns link this
 * caller may not read (another user's, for a non-root caller) are not seen; they cannot hold
 * CAP_NET_ADMIN over a namespace of this caller's user namespace either. The caller itself is
 * not an occupant: the vm tier's supervisor joins the namespace before this (runtime/vm_net.h,
 * vm_net_given), to hand it to QEMU and to the hooks. *comm: its name. */
static int
first_pid (int procfd, pid_t pid, void *arg)
{
  (void) procfd;
  if (pid == getpid ())
    return 0;
  *(pid_t *) arg = pid;
  return 1;
}

static pid_t
first_occupant (const struct stat *ns, char *comm, size_t commlen)
{
  pid_t pid = 0;
  if (linux_proc_each_in_ns ("net", ns, first_pid, &pid) <= 0)
    return 0;
  char cpath[64];
  cleanup_free char *text = NULL;
  size_t len = 0;
  snprintf (cpath, sizeof cpath, "/proc/%d/comm", (int) pid);
  snprintf (comm, commlen, "?");
  if (read_file_at (AT_FDCWD, cpath, 64, &text, &len, NULL) == 0 && text)
    snprintf (comm, commlen, "%.*s", (int) strcspn (text, "\n"), text);
  for (char *c = comm; *c; c++)
    if ((unsigned char) *c < ' ' || *c == 0x7f)
      *c = '?'; /* a process names itself: no control character reaches a terminal */
  return pid;
}

/* This create becomes the egress owner of the joined namespace (identity st): nothing may run in
 * it yet (outside attack 10: an `open` container with CAP_NET_ADMIN made first deleted the
 * owner's table after the owner arrived). In a Kubernetes or Podman pod the owner (the pause or
 * infra container) is the first process in the namespace the engine made. */
static int
own_joined (const struct stat *st, const char *netns_path, const char *id, asbx_err_t *err)
{
  char comm[32];
  pid_t pid = first_occupant (st, comm, sizeof comm);
  if (pid == 0)
    return 0;
  return asbx_error (err, EBUSY,
                     "linux.namespaces: network path %s: container `%s` would run the egress of a network namespace "
                     "in which process %d (`%s`) already runs, outside any agentsbx egress: an egress must own its "
                     "namespace before anything runs there - refused (give the container its own network namespace, "
                     "or create it before the others that join it)",
                     netns_path, id, (int) pid, comm);
}

int
egress_share_prepare (int rootfd, const char *id, const struct policy_plan *plan, int netns_fd, const char *netns_path,
                      struct egress_share *s, asbx_err_t *err)
{
  struct stat st;
  struct record r;

  /* every container that joins a namespace is judged, whatever its policy: one without an egress
   * of its own (no policy, network.mode open) in a namespace whose egress is another container's
   * would live under that egress unchecked, and with CAP_NET_ADMIN delete its table (outside
   * attack 07) */
  bool egress = plan && plan->active && (plan->net_mode == POLICY_NET_NONE || plan->net_mode == POLICY_NET_FILTERED);
  if (egress)
    {
      s->fields = policy_egress_fields (plan);
      s->owner = true;
    }
  /* a fresh namespace: nobody joins it before this create returns (an engine joins a container
   * it has created), so the lock is taken only to write the record, and creates of fresh
   * namespaces never wait on each other */
  if (netns_fd < 0)
    return 0;
  if (share_lock (rootfd, s, err) < 0)
    return -1;
  /* the fd the init joins (linux/ns.h ns_plan_build), not the path again */
  if (fstat (netns_fd, &st) < 0)
    return asbx_error (err, errno, "linux.namespaces: network path %s: fstat", netns_path);
  cleanup_free char *name = record_name (&st);
  cleanup_close int dir = share_dir (rootfd, err);
  if (dir < 0)
    return -1;
  cleanup_close int fd = openat (dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    {
      /* no owner under this root: a table there is another root's container's egress (or one
       * of unknown origin), which this create would replace (its init loads its own table) or
       * live under unchecked - refused before anything is loaded (outside attack 07: a failed
       * create from another --root left its wider table over the running owner's) */
      if (table_present (netns_fd))
        return asbx_error (err, EEXIST,
                           "linux.namespaces: network path %s already holds an agentsbx egress (nftables `table inet "
                           "%s`) that no container under this state root owns (one of another --root, or left "
                           "behind): container `%s` cannot join it - refused (run it under the owner's --root with "
                           "the same network policy; a table left behind: `nft delete table inet %s` in that "
                           "namespace)",
                           netns_path, POLICY_NFT_TABLE, id, POLICY_NFT_TABLE);
      return egress ? own_joined (&st, netns_path, id, err) : 0;
    }
  cleanup_free char *text = NULL;
  size_t len;
  if (fd < 0 || read_all_fd (fd, RECORD_MAX, &text, &len) < 0)
    return asbx_error (err, errno, "egress: read %s/%s in the state root", EGRESS_SHARE_DIR, name);
  if (record_parse (text, &r) < 0)
    {
      /* only agentsbx writes there (0700, root's): a broken record is a stale one */
      log_warning ("egress: %s/%s in the state root is not a record; ignored", EGRESS_SHARE_DIR, name);
      return egress ? own_joined (&st, netns_path, id, err) : 0;
    }
  int pidfd = owner_alive (&r);
  if (pidfd < 0)
    {
      log_debug ("egress: the record of %s names container `%s`, whose monitor (pid %d) is gone: stale", netns_path,
                 r.owner, (int) r.monitor);
      return egress ? own_joined (&st, netns_path, id, err) : 0;
    }
  if (!egress)
    {
      close (pidfd);
      return asbx_error (err, EINVAL,
                         "linux.namespaces: network path %s: container `%s` joins the network namespace whose egress "
                         "belongs to container `%s` (its monitor, pid %d) with %s; one namespace has one egress, "
                         "and a container in it must share it with the same network policy - refused",
                         netns_path, id, r.owner, (int) r.monitor,
                         plan && plan->active ? "network.mode open" : "no agent policy");
    }
  cleanup_free char *diff = first_difference (s->fields, r.fields);
  if (diff)
    {
      close (pidfd);
      return asbx_error (err, EINVAL,
                         "linux.namespaces: network path %s: container `%s` joins the network namespace whose egress "
                         "belongs to container `%s` (its monitor, pid %d), but their network policies differ in %s; "
                         "one namespace has one egress - refused (give both the same network policy, or this "
                         "container its own network namespace)",
                         netns_path, id, r.owner, (int) r.monitor, diff);
    }
  s->owner = false;
  s->shared = true;
  s->owner_id = xstrdup (r.owner);
  s->owner_monitor = r.monitor;
  s->owner_pidfd = pidfd;
  s->owner_ca_pem = r.ca && *r.ca ? xstrdup (r.ca) : NULL;
  return 0;
}

int
egress_share_table_ensure (const struct egress_share *s, const struct policy_plan *plan, int netns_fd, asbx_err_t *err)
{
  struct stat self;
  asbx_err_t e = NULL;

  if (!s->shared || netns_fd < 0)
    return 0;
  struct linux_nft *n = linux_nft_new (netns_fd, err);
  if (!n)
    return asbx_error_wrap (err, "egress: the shared namespace's table");
  int there = linux_nft_run (n, "list table inet " POLICY_NFT_TABLE "\n", &e);
  linux_nft_free (n);
  asbx_error_free (&e);
  if (there == 0)
    return 0;
  if (stat ("/proc/self/ns/net", &self) < 0)
    return asbx_error (err, errno, "egress: stat the runtime's network namespace");
  return egress_table_load (plan, netns_fd, &self, err);
}

int
egress_share_record (int rootfd, int state_dirfd, struct egress_share *s, const char *id, pid_t init_pid,
                     pid_t monitor_pid, const char *ca_pem, asbx_err_t *err)
{
  struct stat st;
  char nspath[64];

  if (!s->owner)
    return 0;
  if (share_lock (rootfd, s, err) < 0)
    return -1;
  snprintf (nspath, sizeof nspath, "/proc/%d/ns/net", (int) init_pid);
  if (stat (nspath, &st) < 0)
    return asbx_error (err, errno, "egress: stat %s", nspath);
  uint64_t start = asbx_pid_start_time (monitor_pid);
  if (start == 0)
    return asbx_error (err, ESRCH, "egress: the monitor (pid %d) exited during create", (int) monitor_pid);
  cleanup_free char *name = record_name (&st);
  cleanup_free char *tmp = xasprintf (".%s.%d", name, (int) getpid ());
  cleanup_free char *text = xasprintf ("owner %s\nmonitor %d %" PRIu64 "\n%sca\n%s", id, (int) monitor_pid, start,
                                       s->fields, ca_pem ? ca_pem : "");
  cleanup_close int dir = share_dir (rootfd, err);
  if (dir < 0)
    return -1;
  cleanup_close int fd = openat (dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || write_all (fd, text, strlen (text)) < 0 || renameat (dir, tmp, dir, name) < 0)
    {
      int e = errno;
      unlinkat (dir, tmp, 0);
      return asbx_error (err, e, "egress: write %s/%s in the state root", EGRESS_SHARE_DIR, name);
    }
  /* for egress_share_forget at delete */
  cleanup_close int nf = openat (state_dirfd, EGRESS_SHARE_STATE_FILE,
                                 O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (nf < 0 || write_all (nf, name, strlen (name)) < 0)
    return asbx_error (err, errno, "egress: write %s in the state directory", EGRESS_SHARE_STATE_FILE);
  return 0;
}

void
egress_share_forget (int rootfd, const char *id)
{
  struct egress_share s;
  asbx_err_t e = NULL;
  char name[64];

  /* the name of the record this container wrote (egress_share_record): no walk of the directory */
  cleanup_close int sd = openat (rootfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_close int nf = sd >= 0 ? openat (sd, EGRESS_SHARE_STATE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
  ssize_t n = nf >= 0 ? read (nf, name, sizeof name - 1) : -1;
  if (n <= 0)
    return;
  name[n] = '\0';
  if (strspn (name, "0123456789:") != (size_t) n || !strchr (name, ':'))
    return;
  cleanup_close int dir = openat (rootfd, EGRESS_SHARE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0)
    return;
  egress_share_init (&s);
  if (share_lock (rootfd, &s, &e) < 0)
    {
      asbx_error_free (&e);
      return;
    }
  cleanup_close int fd = openat (dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_free char *text = NULL;
  size_t len;
  struct record r;
  /* the namespace may have a new owner by now (this one's monitor gone): only our own record */
  if (fd >= 0 && read_all_fd (fd, RECORD_MAX, &text, &len) == 0 && record_parse (text, &r) == 0
      && strcmp (r.owner, id) == 0)
    unlinkat (dir, name, 0);
  egress_share_release (&s);
}
