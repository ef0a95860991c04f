/* selfexe.c - run the runtime from a sealed memfd copy of itself (CVE-2019-5736 class).
 *
 * A container process can reach the runtime binary through /proc/<runtime pid>/exe while the
 * runtime is in the container's pid namespace (exec, init before execve). If that file is a
 * sealed, anonymous memfd, opening it for write fails (F_SEAL_WRITE) and the host binary is
 * never exposed. The copy costs one read of the binary (~1 ms) per create/run/exec. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "runtime/container.h"

#define SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

static int
running_sealed (void)
{
  cleanup_close int fd = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  int seals = fcntl (fd, F_GET_SEALS);
  return seals >= 0 && (seals & SEALS) == SEALS;
}

void
asbx_ensure_sealed_exe (char **argv)
{
  extern char **environ;
  cleanup_close int src = -1, mfd = -1;
  struct stat sb;

  if (running_sealed ())
    return;
  src = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (src < 0 || fstat (src, &sb) < 0)
    goto fail;
  mfd = memfd_create ("agentsbx", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mfd < 0)
    goto fail;
  for (off_t left = sb.st_size; left > 0;)
    {
      ssize_t n = sendfile (mfd, src, NULL, (size_t) left);
      if (n <= 0)
        goto fail;
      left -= n;
    }
  if (fcntl (mfd, F_ADD_SEALS, SEALS) < 0)
    goto fail;
  fexecve (mfd, argv, environ);
fail:
  fprintf (stderr, "agentsbx: cannot re-execute from a sealed copy of the binary: %s\n", strerror (errno));
  exit (1);
}
