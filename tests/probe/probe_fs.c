/*
 * probe file actions: write, openw, mapx, stat, readlink, ls, catfile, read and the path
 * operations (link, rename, symlink, mkdir, exec); each prints one JSON object.
 */
#include "probe.h"

int
result (const char *what, const char *path, int rc)
{
  int e = errno;
  obj_open ();
  kstr ("op", what);
  kstr ("path", path);
  kstr ("result", rc < 0 ? errno_name (e) : "ok");
  obj_close ();
  putchar ('\n');
  return rc < 0 ? 1 : 0;
}

int
cmd_write (const char *path, const char *data)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int rc = fd;
  if (fd >= 0)
    {
      ssize_t w = write (fd, data, strlen (data));
      rc = w < 0 ? -1 : 0;
      int e = errno;
      close (fd);
      errno = e;
    }
  return result ("write", path, rc);
}

/* Maps the first page of a file PROT_READ|PROT_EXEC (what ld.so and dlopen do with a library's
 * code): refused with EPERM on a noexec mount (mm/mmap.c do_mmap, path_noexec). */
int
cmd_mapx (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  int rc = fd;
  if (fd >= 0)
    {
      void *p = mmap (NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
      rc = p == MAP_FAILED ? -1 : 0;
      int e = errno;
      if (p != MAP_FAILED)
        munmap (p, 4096);
      close (fd);
      errno = e;
    }
  return result ("mapx", path, rc);
}

/* Opens for writing without creating, truncating or writing: checks that a path cannot be
 * opened writable (e.g. a host binary) without ever modifying it. */
int
cmd_openw (const char *path)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  int e = errno;
  if (fd >= 0)
    close (fd);
  errno = e;
  return result ("openw", path, fd);
}

int
cmd_stat (const char *path)
{
  struct stat st;
  if (lstat (path, &st) < 0)
    return result ("stat", path, -1);
  const char *type = S_ISREG (st.st_mode)    ? "file"
                     : S_ISDIR (st.st_mode)  ? "dir"
                     : S_ISLNK (st.st_mode)  ? "symlink"
                     : S_ISCHR (st.st_mode)  ? "char"
                     : S_ISBLK (st.st_mode)  ? "block"
                     : S_ISFIFO (st.st_mode) ? "fifo"
                     : S_ISSOCK (st.st_mode) ? "socket"
                                             : "unknown";
  obj_open ();
  kstr ("op", "stat");
  kstr ("path", path);
  kstr ("result", "ok");
  kstr ("type", type);
  kint ("mode", st.st_mode & 07777);
  kint ("uid", st.st_uid);
  kint ("gid", st.st_gid);
  kint ("size", st.st_size);
  kint ("major", major (st.st_rdev));
  kint ("minor", minor (st.st_rdev));
  kint ("dev", st.st_dev);
  kint ("ino", st.st_ino);
  obj_close ();
  putchar ('\n');
  return 0;
}

int
cmd_readlink (const char *path)
{
  char target[PATH_MAX];
  ssize_t r = readlink (path, target, sizeof (target) - 1);
  if (r < 0)
    return result ("readlink", path, -1);
  target[r] = 0;
  obj_open ();
  kstr ("op", "readlink");
  kstr ("path", path);
  kstr ("result", "ok");
  kstr ("target", target);
  obj_close ();
  putchar ('\n');
  return 0;
}

int
cmd_ls (const char *path)
{
  DIR *d = opendir (path);
  if (!d)
    return result ("ls", path, -1);
  obj_open ();
  kstr ("op", "ls");
  kstr ("path", path);
  kstr ("result", "ok");
  key ("entries");
  arr_open ();
  struct dirent *de;
  while ((de = readdir (d)))
    if (strcmp (de->d_name, ".") && strcmp (de->d_name, ".."))
      vstr (de->d_name);
  arr_close ();
  obj_close ();
  putchar ('\n');
  closedir (d);
  return 0;
}

int
cmd_catfile (const char *path)
{
  size_t len;
  char *s = read_file (path, &len);
  if (!s)
    {
      fprintf (stderr, "probe: %s: %s\n", path, errno_name (errno));
      return 1;
    }
  fwrite (s, 1, len, stdout);
  free (s);
  return 0;
}

/* ---- path operations for the policy tests (added for tests/integration/test_policy_*) ---- */

/* read PATH: {"op":"read","path","result","data"} with the first 256 bytes of the file. */
int
cmd_read (const char *path)
{
  size_t len;
  char *s = read_file (path, &len);
  if (!s)
    return result ("read", path, -1);
  if (len > 256)
    s[256] = 0;
  obj_open ();
  kstr ("op", "read");
  kstr ("path", path);
  kstr ("result", "ok");
  kstr ("data", s);
  obj_close ();
  putchar ('\n');
  free (s);
  return 0;
}

/* link OLD NEW | rename OLD NEW | symlink TARGET NEW | mkdir PATH | exec PATH [ARG...]:
 * one syscall each, reported as {"op","path","result"} (path = the second name; exec reports
 * only when execve failed, else the program runs). */
int
cmd_pathop (const char *op, int argc, char **argv)
{
  int rc;
  if (strcmp (op, "link") == 0)
    rc = link (argv[0], argv[1]);
  else if (strcmp (op, "rename") == 0)
    rc = rename (argv[0], argv[1]);
  else if (strcmp (op, "symlink") == 0)
    rc = symlink (argv[0], argv[1]);
  else if (strcmp (op, "mkdir") == 0)
    return result (op, argv[0], mkdir (argv[0], 0755));
  else if (strcmp (op, "exec") == 0)
    {
      fflush (stdout);
      execv (argv[0], argv);
      return result (op, argv[0], -1);
    }
  else
    return 2;
  (void) argc;
  return result (op, argv[1], rc);
}
