/* state.c - state directory, lock and status; see state.h.
 *
 * Threat model: the state root is root-owned 0700; ids are validated so a path can never leave
 * <root>. PID reuse: every use of the recorded pid re-checks its start time. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "linux/cgroup.h"
#include "runtime/egress_share.h"
#include "runtime/state.h"

void
asbx_state_free (struct asbx_state *st)
{
  free (st->id);
  free (st->bundle);
  free (st->rootfs);
  free (st->created);
  free (st->cgroup_path);
  for (size_t i = 0; i < st->annotations.len; i++)
    {
      free (st->annotations.keys[i]);
      free (st->annotations.values[i]);
    }
  free (st->annotations.keys);
  free (st->annotations.values);
  memset (st, 0, sizeof *st);
}

int
asbx_id_validate (const char *id, asbx_err_t *err)
{
  size_t n = id ? strlen (id) : 0;
  if (n == 0)
    return asbx_error (err, 0, "container id cannot be empty");
  if (n > 1024 || strcmp (id, ".") == 0 || strcmp (id, "..") == 0)
    return asbx_error (err, 0, "invalid container id `%s`", id);
  for (const char *c = id; *c; c++)
    if (!(isalnum ((unsigned char) *c) || *c == '_' || *c == '+' || *c == '-' || *c == '.'))
      return asbx_error (err, 0, "invalid container id `%s`: only [A-Za-z0-9_+.-] allowed", id);
  return 0;
}

/* mkdir -p with mode 0700 for every missing component, as runc's os.MkdirAll(root, 0700):
 * engines pass a --root whose parents may not exist yet (containerd's shim passes
 * <exec-root>/runtime-runc/<namespace> for Docker). */
static int
mkdir_parents (const char *root)
{
  char buf[PATH_MAX];
  if (strlen (root) >= sizeof buf)
    return (errno = ENAMETOOLONG), -1;
  strcpy (buf, root);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/')
      {
        *p = '\0';
        if (mkdir (buf, 0700) < 0 && errno != EEXIST)
          return -1;
        *p = '/';
      }
  return mkdir (buf, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

int
asbx_root_open (const char *root, bool create, asbx_err_t *err)
{
  int fd;
  if (create && mkdir_parents (root) < 0)
    return asbx_error (err, errno, "create state root `%s`", root);
  fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return asbx_error (err, errno, "open state root `%s`", root);
  return fd;
}

static int
lock_dir (int fd, const char *id, asbx_err_t *err)
{
  while (flock (fd, LOCK_EX) < 0)
    if (errno != EINTR)
      return asbx_error (err, errno, "lock container `%s`", id);
  return 0;
}

int
asbx_state_dir_create (int rootfd, const char *id, asbx_err_t *err)
{
  cleanup_close int fd = -1;
  if (mkdirat (rootfd, id, 0700) < 0)
    {
      if (errno == EEXIST)
        return asbx_error (err, 0, "container with id `%s` already exists", id);
      return asbx_error (err, errno, "create state directory for `%s`", id);
    }
  fd = openat (rootfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return asbx_error (err, errno, "open state directory for `%s`", id);
  if (lock_dir (fd, id, err) < 0)
    return -1;
  return steal_fd (&fd);
}

int
asbx_state_dir_open (int rootfd, const char *id, asbx_err_t *err)
{
  cleanup_close int fd = openat (rootfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    {
      if (errno == ENOENT)
        return asbx_error (err, 0, "container `%s` does not exist", id);
      return asbx_error (err, errno, "open state directory of `%s`", id);
    }
  if (lock_dir (fd, id, err) < 0)
    return -1;
  return steal_fd (&fd);
}

int
asbx_state_dir_remove (int rootfd, const char *id, asbx_err_t *err)
{
  egress_share_forget (rootfd, id); /* a network namespace's egress it owned */
  cleanup_close int fd = openat (rootfd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  cleanup_closedir DIR *d = NULL;
  struct dirent *de;

  if (fd < 0)
    return errno == ENOENT ? 0 : asbx_error (err, errno, "open state directory of `%s`", id);
  d = fdopendir (fd);
  if (!d)
    return asbx_error (err, errno, "read state directory of `%s`", id);
  fd = -1; /* owned by d */
  while ((de = readdir (d)))
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (unlinkat (dirfd (d), de->d_name, 0) < 0 && errno != ENOENT)
        return asbx_error (err, errno, "remove `%s/%s`", id, de->d_name);
    }
  if (unlinkat (rootfd, id, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return asbx_error (err, errno, "remove state directory of `%s`", id);
  return 0;
}

#define GS(g, s) yajl_gen_string (g, (const unsigned char *) (s), strlen (s))

int
asbx_state_write (int dirfd, const struct asbx_state *st, asbx_err_t *err)
{
  yajl_gen g = json_gen_new (0);
  cleanup_free char *buf = NULL;
  size_t len;
  cleanup_close int fd = -1;
  int ret = 0;

  yajl_gen_map_open (g);
  json_gen_kv (g, "id", st->id);
  GS (g, "pid");
  yajl_gen_integer (g, st->pid);
  GS (g, "pidStart");
  yajl_gen_integer (g, (long long) st->pid_start);
  json_gen_kv (g, "bundle", st->bundle);
  json_gen_kv (g, "rootfs", st->rootfs);
  json_gen_kv (g, "created", st->created);
  json_gen_kv (g, "cgroupPath", st->cgroup_path);
  GS (g, "cgroupMask");
  yajl_gen_integer (g, (long long) st->cgroup_mask);
  GS (g, "systemdCgroup");
  yajl_gen_bool (g, st->systemd_cgroup);
  GS (g, "owner");
  yajl_gen_integer (g, st->owner);
  GS (g, "annotations");
  yajl_gen_map_open (g);
  for (size_t i = 0; i < st->annotations.len; i++)
    json_gen_kv (g, st->annotations.keys[i], st->annotations.values[i]);
  yajl_gen_map_close (g);
  yajl_gen_map_close (g);
  buf = json_gen_finish (g, false, &len);

  fd = openat (dirfd, "state.json.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || write_all (fd, buf, len) < 0 || fsync (fd) < 0)
    ret = asbx_error (err, errno, "write state.json");
  else if (renameat (dirfd, "state.json.tmp", dirfd, "state.json") < 0)
    ret = asbx_error (err, errno, "rename state.json");
  return ret;
}

static char *
tree_str (yajl_val root, const char *key)
{
  const char *path[] = { key, NULL };
  yajl_val v = yajl_tree_get (root, path, yajl_t_string);
  return v ? xstrdup (YAJL_GET_STRING (v)) : NULL;
}

static long long
tree_int (yajl_val root, const char *key)
{
  const char *path[] = { key, NULL };
  yajl_val v = yajl_tree_get (root, path, yajl_t_number);
  return v && YAJL_IS_INTEGER (v) ? YAJL_GET_INTEGER (v) : 0;
}

int
asbx_state_read (int dirfd, struct asbx_state *st, asbx_err_t *err)
{
  cleanup_free char *data = NULL;
  char ebuf[256];
  yajl_val root, ann;
  const char *ann_path[] = { "annotations", NULL };
  const char *sd_path[] = { "systemdCgroup", NULL };

  memset (st, 0, sizeof *st);
  if (read_file_at (dirfd, "state.json", 1 << 20, &data, NULL, err) < 0)
    return -1;
  root = yajl_tree_parse (data, ebuf, sizeof ebuf);
  if (!root || !YAJL_IS_OBJECT (root))
    {
      yajl_tree_free (root);
      return asbx_error (err, 0, "state.json: corrupt state file (expected a JSON object)");
    }
  st->id = tree_str (root, "id");
  st->pid = (pid_t) tree_int (root, "pid");
  st->pid_start = (uint64_t) tree_int (root, "pidStart");
  st->bundle = tree_str (root, "bundle");
  st->rootfs = tree_str (root, "rootfs");
  st->created = tree_str (root, "created");
  st->cgroup_path = tree_str (root, "cgroupPath");
  st->cgroup_mask = (unsigned long) tree_int (root, "cgroupMask");
  st->systemd_cgroup = YAJL_IS_TRUE (yajl_tree_get (root, sd_path, yajl_t_true));
  st->owner = (uid_t) tree_int (root, "owner");
  ann = yajl_tree_get (root, ann_path, yajl_t_object);
  if (ann)
    {
      size_t n = ann->u.object.len;
      st->annotations.keys = xmalloc0 (sizeof (char *) * (n + 1));
      st->annotations.values = xmalloc0 (sizeof (char *) * (n + 1));
      for (size_t i = 0; i < n; i++)
        if (YAJL_IS_STRING (ann->u.object.values[i]))
          {
            st->annotations.keys[st->annotations.len] = xstrdup (ann->u.object.keys[i]);
            st->annotations.values[st->annotations.len++] = xstrdup (YAJL_GET_STRING (ann->u.object.values[i]));
          }
    }
  yajl_tree_free (root);
  if (st->id == NULL || st->pid <= 0 || st->bundle == NULL)
    {
      asbx_state_free (st);
      return asbx_error (err, 0, "state.json: corrupt state file (missing id, pid or bundle)");
    }
  return 0;
}

uint64_t
asbx_pid_start_time (pid_t pid)
{
  char data[4096];
  char *p;
  unsigned long long start = 0;
  char state;

  if (read_proc_small (pid, "stat", data, sizeof data) < 0)
    return 0;
  /* comm may contain spaces and ')': fields start after the last ')' */
  p = strrchr (data, ')');
  if (!p)
    return 0;
  /* field 3 is state; start time is field 22 */
  if (sscanf (p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &state, &start)
      != 2)
    return 0;
  if (state == 'Z' || state == 'X')
    return 0;
  return start;
}

bool
asbx_state_alive (const struct asbx_state *st)
{
  uint64_t s = asbx_pid_start_time (st->pid);
  return s != 0 && s == st->pid_start;
}

enum asbx_status
asbx_state_status (int dirfd, const struct asbx_state *st)
{
  struct stat sb;
  if (!asbx_state_alive (st))
    return ASBX_STATUS_STOPPED;
  if (fstatat (dirfd, "start.sock", &sb, AT_SYMLINK_NOFOLLOW) == 0)
    return ASBX_STATUS_CREATED;
  if (st->cgroup_path && cgroup_is_frozen (st->cgroup_path, NULL) == 1)
    return ASBX_STATUS_PAUSED;
  return ASBX_STATUS_RUNNING;
}

const char *
asbx_status_name (enum asbx_status s)
{
  static const char *const names[] = {
    [ASBX_STATUS_CREATING] = "creating", [ASBX_STATUS_CREATED] = "created", [ASBX_STATUS_RUNNING] = "running",
    [ASBX_STATUS_PAUSED] = "paused",     [ASBX_STATUS_STOPPED] = "stopped",
  };
  return (unsigned) s < ASBX_ARRAY_SIZE (names) ? names[s] : "unknown";
}

/* The lifecycle's one table (runc's state_linux.go keeps the same rules as a type per state):
 * for each operation, the statuses it may start from and, for those that run hooks, the
 * status the hooks' state says (runtime.md "Lifecycle"); -1 = the op has no hooks. */
#define ST(x) (1u << ASBX_STATUS_##x)
static const struct
{
  unsigned from; /* mask of ST() */
  int to;        /* enum asbx_status, or -1 */
} transitions[] = {
  /* prestart/createRuntime/createContainer hooks see "created", as runc's do */
  [ASBX_OP_CREATE] = { ST (CREATING), ASBX_STATUS_CREATED },
  [ASBX_OP_START] = { ST (CREATED), ASBX_STATUS_RUNNING },
  /* running and paused need --force (SIGKILL first) */
  [ASBX_OP_DELETE] = { ST (CREATED) | ST (STOPPED), ASBX_STATUS_STOPPED },
  [ASBX_OP_EXEC] = { ST (RUNNING), -1 },
  [ASBX_OP_EXEC_PAUSED] = { ST (RUNNING) | ST (PAUSED), -1 },
  [ASBX_OP_CHECKPOINT] = { ST (RUNNING) | ST (PAUSED), -1 },
  /* runc: update needs a container that is not stopped; pause and resume then read the freezer */
  [ASBX_OP_CGROUP] = { ST (CREATED) | ST (RUNNING) | ST (PAUSED), -1 },
};
#undef ST

bool
asbx_status_allows (enum asbx_status s, enum asbx_op op)
{
  return (unsigned) op < ASBX_ARRAY_SIZE (transitions) && (transitions[op].from & (1u << s)) != 0;
}

enum asbx_status
asbx_status_after (enum asbx_op op)
{
  return transitions[op].to >= 0 ? (enum asbx_status) transitions[op].to : ASBX_STATUS_RUNNING;
}

void
asbx_container_close (struct asbx_opened *o)
{
  if (o->dirfd >= 0)
    close (o->dirfd);
  if (o->rootfd >= 0)
    close (o->rootfd);
  o->dirfd = o->rootfd = -1;
  asbx_state_free (&o->st);
}

int
asbx_container_open (const char *root, const char *id, struct asbx_opened *o, asbx_err_t *err)
{
  o->rootfd = o->dirfd = -1;
  o->has_state = false;
  memset (&o->st, 0, sizeof o->st);
  if (asbx_id_validate (id, err) < 0)
    return -1;
  o->rootfd = asbx_root_open (root, false, err);
  if (o->rootfd < 0)
    {
      if ((*err)->errnum == ENOENT)
        {
          asbx_error_free (err);
          return asbx_error (err, 0, "container `%s` does not exist", id);
        }
      return -1;
    }
  o->dirfd = asbx_state_dir_open (o->rootfd, id, err);
  if (o->dirfd < 0)
    return -1;
  if (asbx_state_read (o->dirfd, &o->st, err) < 0)
    {
      if ((*err)->errnum != ENOENT)
        return asbx_error_wrap (err, "container `%s`", id);
      asbx_error_free (err);
      return 0;
    }
  o->has_state = true;
  return 0;
}
