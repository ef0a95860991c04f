/* audit.c - `agentsbx audit ID [--json | --html] [--follow]`: print a container's audit log
 * (<audit dir>/<id>.jsonl, POLICY.md §6; the dir: --audit-dir, else the host config's auditDir,
 * else /var/log/agentsbx, as the monitor resolved it at create). --json passes the lines through unchanged; without it
 * each record becomes one line "TS EVENT key=value ...". --follow keeps reading as the monitor
 * appends and stops after the last session's `exited` record (or on SIGINT).
 * The log outlives `delete`, so this verb never needs the container's state dir. Only whole
 * lines are printed: a record is one write(2), but a reader may still see one in flight. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/audit_html.h"
#include "runtime/audit_log.h"
#include "runtime/state.h"

/* a terminal control: C0, DEL, or C1 (raw 0x80-0x9f, or as UTF-8 C2 80..C2 9F) at s */
static size_t
control_len (const unsigned char *s)
{
  if (*s < 0x20 || *s == 0x7f || (*s >= 0x80 && *s <= 0x9f))
    return 1;
  if (s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f)
    return 2;
  return 0;
}

static bool
has_control (const char *s)
{
  for (; *s; s++)
    if (control_len ((const unsigned char *) s))
      return true;
  return false;
}

static void
print_value (yajl_val v)
{
  if (YAJL_IS_STRING (v))
    {
      const char *s = YAJL_GET_STRING (v);
      if (!s)
        s = "";
      /* values are the agent's (argv, paths, names): a control sequence would reach the
       * reader's terminal (outside retest: an OSC title and a clear screen in an argv without
       * spaces were printed raw), so any of them means quoted and escaped */
      if (*s && !strpbrk (s, " \t\n\"'\\") && !has_control (s))
        fputs (s, stdout);
      else
        {
          putchar ('"');
          while (*s)
            {
              size_t c = control_len ((const unsigned char *) s);
              if (*s == '"' || *s == '\\')
                printf ("\\%c", *s);
              else if (c)
                for (size_t k = 0; k < c; k++)
                  printf ("\\x%02x", (unsigned char) s[k]); /* never let a value start a new line */
              else
                putchar (*s);
              s += c > 1 ? c : 1;
            }
          putchar ('"');
        }
    }
  else if (YAJL_IS_NUMBER (v))
    fputs (YAJL_GET_NUMBER (v), stdout);
  else if (YAJL_IS_TRUE (v))
    fputs ("true", stdout);
  else if (YAJL_IS_FALSE (v))
    fputs ("false", stdout);
  else if (YAJL_IS_ARRAY (v))
    {
      putchar ('[');
      for (size_t i = 0; i < v->u.array.len; i++)
        {
          if (i)
            putchar (' ');
          print_value (v->u.array.values[i]);
        }
      putchar (']');
    }
  else if (YAJL_IS_OBJECT (v))
    fputs ("{...}", stdout);
  else
    fputs ("null", stdout);
}

/* Print one record for people; returns true when it is a lifecycle `exited` record. */
static bool
print_human (const char *line)
{
  char errbuf[128];
  yajl_val v = yajl_tree_parse (line, errbuf, sizeof errbuf);
  bool exited = false;

  if (!v || !YAJL_IS_OBJECT (v))
    {
      printf ("(unreadable record) %s\n", line);
      yajl_tree_free (v);
      return false;
    }
  const char *ts = "", *event = "?";
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      const char *k = v->u.object.keys[i];
      yajl_val x = v->u.object.values[i];
      if (strcmp (k, "ts") == 0 && YAJL_IS_STRING (x))
        ts = YAJL_GET_STRING (x);
      else if (strcmp (k, "event") == 0 && YAJL_IS_STRING (x))
        event = YAJL_GET_STRING (x);
    }
  printf ("%s %-9s", ts, event);
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      const char *k = v->u.object.keys[i];
      yajl_val x = v->u.object.values[i];
      if (strcmp (k, "ts") == 0 || strcmp (k, "event") == 0 || strcmp (k, "container") == 0)
        continue;
      const char *sv = YAJL_IS_STRING (x) ? YAJL_GET_STRING (x) : NULL;
      if (strcmp (event, "lifecycle") == 0 && strcmp (k, "state") == 0 && sv)
        {
          exited = strcmp (sv, "exited") == 0;
          printf (" %s", sv);
          continue;
        }
      printf (" %s=", k);
      print_value (x);
    }
  putchar ('\n');
  yajl_tree_free (v);
  return exited;
}

static bool
is_exited_record (const char *line)
{
  return strstr (line, "\"event\":\"lifecycle\"") && strstr (line, "\"state\":\"exited\"");
}

/* Print every whole line in buf[0..*len); keep the unfinished tail. *last_exited tracks whether
 * the last record printed was an `exited` one. */
static void
print_lines (char *buf, size_t *len, bool json, bool *last_exited)
{
  size_t start = 0;
  for (size_t i = 0; i < *len; i++)
    {
      if (buf[i] != '\n')
        continue;
      buf[i] = '\0';
      const char *line = buf + start;
      if (*line)
        {
          if (json)
            printf ("%s\n", line);
          else
            print_human (line);
          *last_exited = is_exited_record (line);
        }
      start = i + 1;
    }
  memmove (buf, buf + start, *len - start);
  *len -= start;
  fflush (stdout);
}

int
cli_audit (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, 0, 'j' },
    { "follow", no_argument, 0, 'f' },
    { "html", no_argument, 0, 'H' },
    { "help", no_argument, 0, 'h' },
    { 0, 0, 0, 0 },
  };
  bool json = false, follow = false, html = false, last_exited = false;
  asbx_err_t err = NULL;
  int c;

  while ((c = getopt_long_only (argc, argv, "+hf", opts, NULL)) != -1)
    switch (c)
      {
      case 'j': json = true; break;
      case 'f': follow = true; break;
      case 'H': html = true; break;
      case 'h':
        printf ("usage: agentsbx audit [--json | --html] [--follow] CONTAINER_ID\n"
                "print the container's audit log (kept after delete); --json: the JSON lines as written;\n"
                "--html: one self-contained HTML page (counts, timeline, filters);\n"
                "--follow: keep printing new records until the container has exited\n");
        return 0;
      default: return cli_usage ("audit", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind != argc - 1)
    return cli_usage ("audit", "expected exactly one argument: the container id");
  if (html && (json || follow))
    return cli_usage ("audit", "--html writes one page of the whole log: not with --json or --follow");
  const char *id = argv[optind];
  if (asbx_id_validate (id, &err) < 0)
    return cli_fail (&err);
  cleanup_free char *path = runtime_audit_log_path (g->audit_dir, g->config_path, id, &err);
  if (!path)
    return cli_fail (&err);
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    {
      if (errno == ENOENT)
        asbx_error (&err, 0, "no audit log for container `%s` (%s does not exist)", id, path);
      else
        asbx_error (&err, errno, "open audit log `%s`", path);
      return cli_fail (&err);
    }
  size_t cap = 1 << 16, len = 0;
  cleanup_free char *buf = xmalloc (cap);
  for (;;)
    {
      if (len == cap)
        buf = xrealloc (buf, cap *= 2);
      ssize_t n = read (fd, buf + len, cap - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          asbx_error (&err, errno, "read audit log `%s`", path);
          return cli_fail (&err);
        }
      if (n > 0)
        {
          len += (size_t) n;
          if (!html)
            print_lines (buf, &len, json, &last_exited);
          continue;
        }
      if (html)
        {
          if (audit_html_write (id, buf, len, stdout) < 0)
            {
              asbx_error (&err, errno, "audit: write the page");
              return cli_fail (&err);
            }
          return 0;
        }
      /* end of file: done, unless following a session that has not exited yet */
      if (!follow || (last_exited && len == 0))
        break;
      nanosleep (&(struct timespec){ 0, 100L * 1000 * 1000 }, NULL);
    }
  return 0;
}
