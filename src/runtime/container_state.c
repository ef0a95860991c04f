/* container_state.c - the container's records as others read them: the OCI state JSON (for
 * `state` and the hooks' stdin), `list`, and the `creating` record that lets `delete --force`
 * clean up after a create that died before state.json existed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/log.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "linux/cgroup.h"
#include "runtime/container.h"
#include "runtime/container_internal.h"
#include "monitor/monitor.h"
#include "runtime/state.h"

char *
state_json (const char *id, enum asbx_status status, pid_t pid, const char *bundle, const struct oci_map *ann,
            asbx_err_t *err)
{
  struct oci_state st = {
    .oci_version = OCI_VERSION,
    .id = id,
    .status = asbx_status_name (status),
    .pid = pid,
    .bundle = bundle,
    .annotations = ann,
  };
  return oci_state_to_json (&st, false, err);
}

/* Until state.json exists, a `creating` file in the state dir names the cgroup this create
 * made (path and created-mask), so that `delete --force` can clean up after a create that was
 * killed (SIGKILL at any step: tests/escape/test_robustness.py): the init is in that cgroup. */
void
creating_record (int dirfd, const char *cgroup_path, unsigned long cgroup_mask)
{
  cleanup_close int fd = -1;
  cleanup_free char *line = NULL;
  if (!cgroup_path || !cgroup_mask)
    return;
  fd = openat (dirfd, "creating", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  line = xasprintf ("%lx %s", cgroup_mask, cgroup_path);
  if (fd >= 0)
    (void) write_all (fd, line, strlen (line));
}

/* delete --force of an entry without state.json: kill what the dead create left in its cgroup
 * and remove the cgroup; best effort (the state dir goes anyway). */
void
creating_cleanup (int dirfd)
{
  cleanup_free char *raw = NULL;
  asbx_err_t e = NULL;
  unsigned long mask;
  int off = 0;
  size_t len;
  if (read_file_at (dirfd, "creating", 8192, &raw, &len, &e) < 0)
    {
      asbx_error_free (&e);
      return;
    }
  if (sscanf (raw, "%lx %n", &mask, &off) != 1 || off == 0 || raw[off] != '/')
    return;
  if (cgroup_kill_all (raw + off, SIGKILL, &e) < 0)
    asbx_error_free (&e);
  if (cgroup_remove (raw + off, mask, 10000, &e) < 0)
    {
      log_warning ("delete: %s", e->msg);
      asbx_error_free (&e);
    }
}

char *
asbx_container_state_json (const struct asbx_global *g, const char *id, asbx_err_t *err)
{
  struct asbx_opened o;
  char *ret = NULL;

  if (asbx_container_open (g->root, id, &o, err) < 0)
    goto out;
  if (!o.has_state)
    {
      asbx_error (err, 0, "container `%s` is being created", id);
      goto out;
    }
  const enum asbx_status status = asbx_state_status (o.dirfd, &o.st);
  char *reason = monitor_exit_reason (o.dirfd);
  if (reason)
    {
      /* a policy monitor recorded why the container ended (wallclock, cpu, failed-execs, ...) */
      struct oci_map *a = &o.st.annotations;
      for (size_t i = 0; i < a->len; i++)
        if (strcmp (a->keys[i], "io.agentsbx.exitReason") == 0)
          {
            /* never let config.json's annotations forge the monitor's verdict */
            free (a->keys[i]);
            free (a->values[i]);
            a->keys[i] = a->keys[--a->len];
            a->values[i] = a->values[a->len];
            break;
          }
      a->keys = xrealloc (a->keys, sizeof (char *) * (a->len + 2));
      a->values = xrealloc (a->values, sizeof (char *) * (a->len + 2));
      a->keys[a->len] = xstrdup ("io.agentsbx.exitReason");
      a->values[a->len++] = reason;
      a->keys[a->len] = a->values[a->len] = NULL;
    }
  struct oci_state st = {
    .oci_version = OCI_VERSION,
    .id = id,
    .status = asbx_status_name (status),
    .pid = status == ASBX_STATUS_STOPPED ? 0 : o.st.pid,
    .bundle = o.st.bundle,
    /* runc's extra fields, which tools read from `state` (not part of the hooks' state) */
    .rootfs = o.st.rootfs,
    .created = o.st.created,
    .owner = "",
    .annotations = &o.st.annotations,
  };
  ret = oci_state_to_json (&st, true, err);
out:
  asbx_container_close (&o);
  return ret;
}

/* list's OWNER: the name of the uid that created the container (runc prints the state dir's
 * owner's name), or the number when passwd has none */
static const char *
owner_name (uid_t uid, char *buf, size_t n)
{
  struct passwd *pw = getpwuid (uid);
  if (pw && pw->pw_name)
    return pw->pw_name;
  snprintf (buf, n, "#%u", (unsigned) uid);
  return buf;
}

static void
list_print_json_entry (yajl_gen gen, const struct asbx_state *st, enum asbx_status status)
{
  char ob[24];
#define S(x) yajl_gen_string (gen, (const unsigned char *) (x), strlen (x))
  yajl_gen_map_open (gen);
  S ("ociVersion");
  S (OCI_VERSION);
  S ("id");
  S (st->id);
  S ("pid");
  yajl_gen_integer (gen, status == ASBX_STATUS_STOPPED ? 0 : st->pid);
  S ("status");
  S (asbx_status_name (status));
  S ("bundle");
  S (st->bundle);
  S ("rootfs");
  S (st->rootfs ? st->rootfs : "");
  S ("created");
  S (st->created ? st->created : "");
  S ("owner");
  S (owner_name (st->owner, ob, sizeof ob));
  S ("annotations");
  yajl_gen_map_open (gen);
  for (size_t i = 0; i < st->annotations.len; i++)
    {
      S (st->annotations.keys[i]);
      S (st->annotations.values[i]);
    }
  yajl_gen_map_close (gen);
  yajl_gen_map_close (gen);
#undef S
}

int
asbx_container_list (const struct asbx_global *g, const char *format, bool quiet, asbx_err_t *err)
{
  cleanup_close int rootfd = open (g->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_closedir DIR *d = NULL;
  struct dirent *de;
  bool json = format && strcmp (format, "json") == 0;
  yajl_gen gen = NULL;
  char ob[24];

  if (format && !json && strcmp (format, "table") != 0)
    return asbx_error (err, 0, "invalid --format `%s`: expected table or json", format);
  if (rootfd >= 0)
    {
      int dfd = dup (rootfd);
      d = dfd >= 0 ? fdopendir (dfd) : NULL;
      if (!d)
        return asbx_error (err, errno, "read state root `%s`", g->root);
    }
  else if (errno != ENOENT)
    return asbx_error (err, errno, "open state root `%s`", g->root);
  if (json)
    {
      gen = json_gen_new (0);
      yajl_gen_array_open (gen);
    }
  else if (!quiet)
    printf ("%-12s %-8s %-10s %-40s %-30s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER");
  while (d && (de = readdir (d)))
    {
      struct asbx_state st;
      asbx_err_t e = NULL;
      if (de->d_name[0] == '.')
        continue;
      cleanup_close int dfd = openat (rootfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (dfd < 0 || asbx_state_read (dfd, &st, &e) < 0)
        {
          asbx_error_free (&e);
          continue; /* being created, or not ours */
        }
      const enum asbx_status status = asbx_state_status (dfd, &st);
      if (quiet)
        printf ("%s\n", st.id);
      else if (json)
        list_print_json_entry (gen, &st, status);
      else
        printf ("%-12s %-8d %-10s %-40s %-30s %s\n", st.id, status == ASBX_STATUS_STOPPED ? 0 : st.pid,
                asbx_status_name (status), st.bundle, st.created ? st.created : "",
                owner_name (st.owner, ob, sizeof ob));
      asbx_state_free (&st);
    }
  if (json)
    {
      yajl_gen_array_close (gen);
      cleanup_free char *text = json_gen_finish (gen, true, NULL);
      if (!quiet)
        fputs (text, stdout);
    }
  return 0;
}
