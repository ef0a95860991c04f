/* log.c - text or JSON-lines log (runc's --log/--log-format). Each record is one write() of a
 * complete line so concurrent writers (runtime, init child through the sync pipe) never interleave. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <yajl/yajl_gen.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "util.h"

static int log_fd = 2;
static enum asbx_log_format log_format = ASBX_LOG_TEXT;
static int log_debug_on = 0;

static const char *const level_names[] = { "error", "warning", "info", "debug" };

int
asbx_log_init (const char *path, enum asbx_log_format format, int debug, asbx_err_t *err)
{
  log_format = format;
  log_debug_on = debug;
  if (path && *path)
    {
      int fd = open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
      if (fd < 0)
        return asbx_error (err, errno, "open log file `%s`", path);
      if (log_fd > 2)
        close (log_fd);
      log_fd = fd;
    }
  return 0;
}

int
asbx_log_fd (void)
{
  return log_fd;
}

int
asbx_log_debug_enabled (void)
{
  return log_debug_on;
}

static void
rfc3339_now (char *buf, size_t len)
{
  struct timeval tv;
  struct tm tm;
  gettimeofday (&tv, NULL);
  gmtime_r (&tv.tv_sec, &tm);
  snprintf (buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
            tm.tm_min, tm.tm_sec, (long) tv.tv_usec);
}

static void
emit (enum asbx_log_level level, const char *msg)
{
  char ts[64];
  int saved = errno;

  rfc3339_now (ts, sizeof ts);
  if (log_format == ASBX_LOG_JSON)
    {
      yajl_gen g = json_gen_new (0);
      size_t len;
      yajl_gen_map_open (g);
      yajl_gen_string (g, (const unsigned char *) "level", 5);
      yajl_gen_string (g, (const unsigned char *) level_names[level], strlen (level_names[level]));
      yajl_gen_string (g, (const unsigned char *) "msg", 3);
      yajl_gen_string (g, (const unsigned char *) msg, strlen (msg));
      yajl_gen_string (g, (const unsigned char *) "time", 4);
      yajl_gen_string (g, (const unsigned char *) ts, strlen (ts));
      yajl_gen_map_close (g);
      cleanup_free char *line = json_gen_finish (g, true, &len);
      write_all (log_fd, line, len);
    }
  else
    {
      cleanup_free char *line = NULL;
      if (log_fd == 2)
        line = level == ASBX_LOG_ERROR ? xasprintf ("agentsbx: %s\n", msg)
                                       : xasprintf ("agentsbx: %s: %s\n", level_names[level], msg);
      else
        line = xasprintf ("%s %s %s\n", ts, level_names[level], msg);
      write_all (log_fd, line, strlen (line));
    }
  errno = saved;
}

void
asbx_log (enum asbx_log_level level, const char *fmt, ...)
{
  va_list ap;
  cleanup_free char *msg = NULL;

  if (level == ASBX_LOG_DEBUG && !log_debug_on)
    return;
  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) < 0)
    msg = NULL;
  va_end (ap);
  if (msg)
    emit (level, msg);
}

void
asbx_log_error_once (const asbx_err_t e)
{
  const char *msg = e && e->msg ? e->msg : "unknown error";
  emit (ASBX_LOG_ERROR, msg);
  if (log_fd != 2)
    {
      cleanup_free char *line = xasprintf ("agentsbx: %s\n", msg);
      write_all (2, line, strlen (line));
    }
}
