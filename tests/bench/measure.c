/* measure.c - bench helper: `measure OUT CMD ARG...` runs CMD with vfork+exec, waits for it with
 * wait4, and writes "<wall ns> <exit code> <ru_maxrss KiB>\n" to OUT.
 *
 * Why a C helper: a process forked from the Python bench carries Python's ~13 MiB RSS high-water
 * mark across execve (the kernel folds the old mm's hiwater into signal->maxrss), so ru_maxrss of
 * a direct child measures Python, not the runtime. This helper is small and static; vfork means the
 * child's pre-exec RSS is the helper's own (~100 KiB). It also keeps Python's fork cost out of the
 * wall time. Built by tests/bench/bench.py into its scratch directory; not part of the product. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
  struct timespec t0, t1;
  struct rusage ru;
  int status;
  pid_t pid;

  if (argc < 3)
    return 2;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  pid = vfork ();
  if (pid == 0)
    {
      execvp (argv[2], argv + 2);
      _exit (127);
    }
  if (pid < 0 || wait4 (pid, &status, 0, &ru) != pid)
    return 2;
  clock_gettime (CLOCK_MONOTONIC, &t1);
  FILE *f = fopen (argv[1], "w");
  if (!f)
    return 2;
  long long ns = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
  int code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  fprintf (f, "%lld %d %ld\n", ns, code, ru.ru_maxrss);
  return fclose (f) == 0 ? 0 : 2;
}
