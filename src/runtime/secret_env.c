/* secret_env.c - secrets from the runtime's environment, moved into a sealed memfd before the
 * re-exec (see secret_env.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "monitor/secret_tpl.h"
#include "runtime/secret_env.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U /* Linux 6.3 */
#endif

#define SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

static int env_fd = -1;

/* the NAME of an AGENTSBX_SECRET_NAME=VALUE entry (its length in *n), or NULL when e is not one */
static const char *
secret_entry (const char *e, size_t *n)
{
  const size_t pl = strlen (SECRET_ENV_PREFIX);
  if (strncmp (e, SECRET_ENV_PREFIX, pl) != 0)
    return NULL;
  const char *eq = strchr (e + pl, '=');
  *n = eq ? (size_t) (eq - e - pl) : strlen (e + pl);
  return e + pl;
}

/* the rule of monitor/secret_tpl.h for a secret's NAME */
static bool
valid_name (const char *name, size_t n)
{
  return n > 0 && n < 256 && strspn (name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") >= n
         && !(n <= 2 && strncmp (name, "..", n) == 0);
}

bool
secret_env_present (void)
{
  extern char **environ;
  size_t n;
  for (char **e = environ; e && *e; e++)
    if (secret_entry (*e, &n))
      return true;
  return false;
}

/* a sealed memfd holding the records of the valid AGENTSBX_SECRET_* entries of environ, -1 with
 * errno; -2 when there is none */
static int
stash_records (void)
{
  extern char **environ;
  size_t n, total = 0;
  int fd = -2;
  for (char **e = environ; e && *e; e++)
    {
      const char *name = secret_entry (*e, &n);
      if (!name || name[n] != '=' || !valid_name (name, n))
        continue;
      if (fd == -2)
        {
          fd = memfd_create ("agentsbx-secrets", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
          if (fd < 0 && errno == EINVAL)
            fd = memfd_create ("agentsbx-secrets", MFD_CLOEXEC | MFD_ALLOW_SEALING);
          if (fd < 0)
            return -1;
        }
      size_t len = strlen (name) + 1; /* "NAME=VALUE" and its NUL */
      total += len;
      if (total > SECRET_ENV_MAX || write_all (fd, name, len) < 0)
        {
          int e2 = total > SECRET_ENV_MAX ? E2BIG : errno;
          close (fd);
          errno = e2;
          return -1;
        }
    }
  if (fd >= 0 && fcntl (fd, F_ADD_SEALS, SEALS) < 0)
    {
      int e2 = errno;
      close (fd);
      errno = e2;
      return -1;
    }
  return fd;
}

/* remove every AGENTSBX_SECRET_* entry (and the fd variable) from environ: the array is
 * shifted in place, as unsetenv(3) does, also for an entry without '=' that unsetenv cannot name */
static void
drop_from_environ (void)
{
  extern char **environ;
  size_t n;
  unsetenv (SECRET_ENV_FD_VAR);
  for (char **e = environ; e && *e;)
    {
      if (!secret_entry (*e, &n))
        {
          e++;
          continue;
        }
      for (char **d = e; *d; d++)
        d[0] = d[1];
    }
}

int
secret_env_stash (bool keep)
{
  int fd = keep ? stash_records () : -2;
  if (fd == -1)
    return -1;
  drop_from_environ ();
  if (fd >= 0)
    {
      /* the re-executed image takes it: not close-on-exec across that one execve */
      char num[16];
      snprintf (num, sizeof num, "%d", fd);
      if (fcntl (fd, F_SETFD, 0) < 0 || setenv (SECRET_ENV_FD_VAR, num, 1) < 0)
        {
          int e = errno;
          close (fd);
          errno = e;
          return -1;
        }
    }
  return 0;
}

void
secret_env_adopt (void)
{
  const char *v = getenv (SECRET_ENV_FD_VAR);
  char *end = NULL;
  long fd = v ? strtol (v, &end, 10) : -1;
  struct stat st;
  int seals = -1;
  if (v && end && *end == '\0' && fd > 2 && fd < 1L << 20 && fstat ((int) fd, &st) == 0 && S_ISREG (st.st_mode))
    seals = fcntl ((int) fd, F_GET_SEALS); /* -1 (EINVAL) for anything but a memfd */
  if (seals >= 0 && (seals & SEALS) == SEALS && fcntl ((int) fd, F_SETFD, FD_CLOEXEC) == 0)
    env_fd = (int) fd;
  drop_from_environ ();
}

int
secret_env_fd (void)
{
  return env_fd;
}
