/*
 * probe: a small static program copied into every integration-test rootfs as /probe.
 *
 * It reports what the kernel shows the process from the inside (ids, capabilities, seccomp,
 * namespaces, mounts, rlimits, fds, environment...) as one JSON object, and runs a few active
 * checks (write a file, stat a path, read a sysctl) so tests assert on what the container can
 * observe rather than on what the runtime claims. It links statically so it needs nothing from
 * the rootfs, and writes JSON by hand so it depends on no library.
 *
 * Usage: probe report | write PATH [DATA] | openw PATH | mapx PATH | stat PATH | readlink PATH | exit N |
 *        sleep SEC | ls DIR | catfile PATH | sysctl KEY | clock | kill PID SIG |
 *        syscall NAME|NR [ARG...] | int80 NR [ARG...] | escape NAME | escape list | exewatch SEC |
 *        read PATH | link OLD NEW | rename OLD NEW | symlink TARGET NEW | mkdir PATH | exec PATH [ARG...] |
 *        forks N
 * Active checks print one JSON object; a failed syscall is reported by errno name and makes the
 * probe exit 1, success exits 0.
 *
 * Files: probe.h (shared declarations), probe_json.c (JSON writer, file helpers), probe_report.c,
 * probe_fs.c, probe_proc.c, probe_escape.c, probe_unix.c (one action group each); this file holds
 * the usage line and the dispatch.
 */
#include "probe.h"

int
usage (void)
{
  fputs ("usage: probe report | write PATH [DATA] | openw PATH | mapx PATH | stat PATH | readlink PATH |"
         " exit N | sleep SEC | ls DIR | catfile PATH | sysctl KEY | clock | syscall NAME|NR [ARG..] |"
         " int80 NR [ARG..] | escape NAME | escape list | exewatch SEC | read PATH | link OLD NEW |"
         " rename OLD NEW | symlink TARGET NEW | mkdir PATH | exec PATH [ARG..] | forks N |"
         " unix MODE PATH [CWD] | unixrace ALLOWED DENIED N | unixhold SEC | unixsteal PID FD PATH\n",
         stderr);
  return 2;
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    return usage ();
  const char *c = argv[1];
  int rc;
  if (strcmp (c, "report") == 0)
    rc = cmd_report ();
  else if (strcmp (c, "write") == 0 && argc >= 3)
    rc = cmd_write (argv[2], argc >= 4 ? argv[3] : "probe\n");
  else if (strcmp (c, "openw") == 0 && argc == 3)
    rc = cmd_openw (argv[2]);
  else if (strcmp (c, "mapx") == 0 && argc == 3)
    rc = cmd_mapx (argv[2]);
  else if (strcmp (c, "stat") == 0 && argc == 3)
    rc = cmd_stat (argv[2]);
  else if (strcmp (c, "readlink") == 0 && argc == 3)
    rc = cmd_readlink (argv[2]);
  else if (strcmp (c, "exit") == 0 && argc == 3)
    return atoi (argv[2]);
  else if (strcmp (c, "sleep") == 0 && argc == 3)
    rc = cmd_sleep (argv[2]);
  else if (strcmp (c, "ls") == 0 && argc == 3)
    rc = cmd_ls (argv[2]);
  else if (strcmp (c, "catfile") == 0 && argc == 3)
    rc = cmd_catfile (argv[2]);
  else if (strcmp (c, "sysctl") == 0 && argc == 3)
    rc = cmd_sysctl (argv[2]);
  else if (strcmp (c, "clock") == 0)
    rc = cmd_clock ();
  else if (strcmp (c, "syscall") == 0 && argc >= 3)
    rc = cmd_syscall (argc - 2, argv + 2);
  else if (strcmp (c, "int80") == 0 && argc >= 3)
    rc = cmd_int80 (argc - 2, argv + 2);
  else if (strcmp (c, "escape") == 0 && argc == 3 && strcmp (argv[2], "list") == 0)
    rc = cmd_escape_list ();
  else if (strcmp (c, "escape") == 0 && argc == 3)
    rc = cmd_escape (argv[2]);
  else if (strcmp (c, "forks") == 0 && argc == 3)
    rc = cmd_forks (argv[2]);
  else if (strcmp (c, "read") == 0 && argc == 3)
    rc = cmd_read (argv[2]);
  else if ((strcmp (c, "link") == 0 || strcmp (c, "rename") == 0 || strcmp (c, "symlink") == 0) && argc == 4)
    rc = cmd_pathop (c, argc - 2, argv + 2);
  else if ((strcmp (c, "mkdir") == 0 && argc == 3) || (strcmp (c, "exec") == 0 && argc >= 3))
    rc = cmd_pathop (c, argc - 2, argv + 2);
  else if (strcmp (c, "unix") == 0 && (argc == 4 || argc == 5))
    rc = cmd_unix (argv[2], argv[3], argc == 5 ? argv[4] : NULL);
  else if (strcmp (c, "unixhold") == 0 && argc == 3)
    rc = cmd_unixhold (argv[2]);
  else if (strcmp (c, "unixsteal") == 0 && argc == 5)
    rc = cmd_unixsteal (argv[2], argv[3], argv[4]);
  else if (strcmp (c, "unixrace") == 0 && argc == 5)
    rc = cmd_unixrace (argv[2], argv[3], argv[4]);
  else if (strcmp (c, "exewatch") == 0 && argc == 3)
    rc = cmd_exewatch (argv[2]);
  else
    return usage ();
  fflush (stdout);
  return rc;
}
