/* proc_ns.c - the processes of one namespace through /proc (proc_ns.h). One walk for the
 * callers that need it: the egress owner's "nothing runs here yet" check (runtime/egress_share.c),
 * the monitor's CPU time of a pid namespace without a cgroup (monitor/monitor_limits.c) and
 * rootless `ps`/`kill --all` (runtime/rootless_oci.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/cleanup.h"
#include "linux/proc_ns.h"

int
linux_proc_each_in_ns (const char *kind, const struct stat *ns, linux_proc_ns_fn fn, void *arg)
{
  cleanup_closedir DIR *d = opendir ("/proc");
  struct dirent *de;

  if (!d)
    return -1;
  while ((de = readdir (d)) != NULL)
    {
      char link[300], *end;
      struct stat st;
      /* only the numeric entries are processes (/proc/self and thread-self are links to them) */
      if (de->d_name[0] < '1' || de->d_name[0] > '9')
        continue;
      long pid = strtol (de->d_name, &end, 10);
      if (*end || pid <= 0)
        continue;
      snprintf (link, sizeof link, "%s/ns/%s", de->d_name, kind);
      if (fstatat (dirfd (d), link, &st, 0) < 0 || st.st_ino != ns->st_ino || st.st_dev != ns->st_dev)
        continue;
      int r = fn (dirfd (d), (pid_t) pid, arg);
      if (r != 0)
        return r;
    }
  return 0;
}
