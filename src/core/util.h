/* util.h - small helpers: allocation that aborts on OOM, fd I/O that retries EINTR, files. */
#ifndef ASBX_CORE_UTIL_H
#define ASBX_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

void *xmalloc (size_t n);
void *xmalloc0 (size_t n);
void *xrealloc (void *p, size_t n);
char *xstrdup (const char *s); /* NULL -> NULL */
char *xasprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* Now (CLOCK_REALTIME) as RFC 3339 UTC with nanoseconds, "2026-12-01T21:10:25.123456789Z"
 * (the OCI state's `created`, meta.json's `created`). Heap. */
char *asbx_rfc3339_now (void);

/* write/read all bytes, retrying on EINTR and short counts. Return 0 / -1 with errno set. */
int write_all (int fd, const void *buf, size_t len);
/* Read until EOF into a NUL-terminated heap buffer (caller frees). max = refuse above this many
 * bytes (E2BIG). Returns 0 / -1 with errno. */
int read_all_fd (int fd, size_t max, char **out, size_t *len);
/* Read a whole file relative to dirfd (AT_FDCWD ok). Errors name the path. */
int read_file_at (int dirfd, const char *path, size_t max, char **out, size_t *len, asbx_err_t *err);
/* Write a string to an existing file (open O_WRONLY, no create) - for /proc and cgroup files. */
int write_file_at (int dirfd, const char *path, const char *data, size_t len, asbx_err_t *err);

/* Read the small procfs file /proc/PID/NAME (status, stat, ...) with one read(2) into buf,
 * NUL-terminated: at most size - 1 bytes, the rest is cut (procfs hands such files out whole
 * in one read). Returns the byte count (> 0), or -1: errno of open/read, or ENODATA when the
 * read returned nothing. Source: proc(5). */
ssize_t read_proc_small (pid_t pid, const char *name, char *buf, size_t size);

/* Write pid as decimal text to path, atomically: a temporary "PATH.OURPID.tmp" renamed over
 * path (runc's --pid-file, which tools read while we write it). The temporary file never stays
 * behind. 0 / -1 with *err "write --pid-file `PATH`" and the errno of open/write/rename. */
int write_pid_file (const char *path, pid_t pid, asbx_err_t *err);

/* Parse a decimal number strictly (whole string, no sign for unsigned). 0 / -1 (EINVAL/ERANGE) */
int parse_u64 (const char *s, uint64_t *out);
int parse_i64 (const char *s, int64_t *out);

/* monotonic clock in nanoseconds */
uint64_t now_ns (void);

#endif
