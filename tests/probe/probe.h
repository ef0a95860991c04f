/*
 * probe: declarations shared by the probe's files (the JSON writer, the helpers and each
 * action's entry point). Each action group lives in its own probe_*.c; probe.c dispatches.
 */
#ifndef PROBE_H
#define PROBE_H

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* probe_json.c: errno names, the JSON writer (one object on stdout), file helpers */
const char *errno_name (int e);
void jstr (const char *s);
void sep (void);
void key (const char *k);
void obj_open (void);
void obj_close (void);
void arr_open (void);
void arr_close (void);
void vstr (const char *s);
void vint (long long v);
void vuint (unsigned long long v);
void vbool (int b);
void kstr (const char *k, const char *s);
void kint (const char *k, long long v);
char *read_file (const char *path, size_t *len);
void chomp (char *s);

/* probe_report.c */
void report_clocks (void);
void kfile (const char *k, const char *path);
int cmd_report (void);

/* probe_fs.c; result() prints {"op","path","result"} and returns the exit code */
int result (const char *what, const char *path, int rc);
int cmd_write (const char *path, const char *data);
int cmd_mapx (const char *path);
int cmd_openw (const char *path);
int cmd_stat (const char *path);
int cmd_readlink (const char *path);
int cmd_ls (const char *path);
int cmd_catfile (const char *path);
int cmd_read (const char *path);
int cmd_pathop (const char *op, int argc, char **argv);

/* probe_proc.c */
int cmd_sysctl (const char *k);
int cmd_sleep (const char *secs);
int cmd_clock (void);
int cmd_syscall (int argc, char **argv);
int cmd_int80 (int argc, char **argv);
int cmd_forks (const char *count);
int cmd_exewatch (const char *secs);

/* probe_escape.c */
int cmd_escape (const char *name);
int cmd_escape_list (void);

/* probe_unix.c */
int cmd_unix (const char *mode, const char *path, const char *cwd);
int cmd_unixrace (const char *allowed, const char *denied, const char *n_s);
int cmd_unixhold (const char *sec);
int cmd_unixsteal (const char *pid_s, const char *fd_s, const char *path);

/* probe.c: prints the usage line, returns 2 */
int usage (void);

#endif
