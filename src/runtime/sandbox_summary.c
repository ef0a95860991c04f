/* sandbox_summary.c - the summary `agentsbx sandbox` prints at the end (see the header).
 *
 * Mechanism: the audit log of this run is the only source (the monitor wrote it from the kernel's
 * reports); we read it back once the monitor has finished (sandbox.c waits for it), parse each
 * line with yajl_tree and aggregate. Threat model: the lines hold container-controlled text
 * (paths, exe); they were sanitised by audit.c (valid UTF-8, control characters escaped in JSON),
 * yajl_tree_parse validates UTF-8 again, and after parsing we still print control characters as
 * '?' in the text form so a path cannot drive the user's terminal (the JSON form escapes them). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "runtime/sandbox_summary.h"

#define MAX_LOG (16u << 20)
#define JSON_TOP 10

static const char *
get_str (yajl_val v, const char *key)
{
  const char *path[] = { key, NULL };
  yajl_val x = yajl_tree_get (v, path, yajl_t_string);
  return x ? YAJL_GET_STRING (x) : NULL;
}

static long long
get_int (yajl_val v, const char *key)
{
  const char *path[] = { key, NULL };
  yajl_val x = yajl_tree_get (v, path, yajl_t_number);
  return x && YAJL_IS_INTEGER (x) ? YAJL_GET_INTEGER (x) : -1;
}

static void
kind_add (struct sandbox_sum_kind *k, const char *what)
{
  k->total++;
  for (size_t i = 0; i < k->n; i++)
    if (strcmp (k->t[i].what, what) == 0)
      {
        k->t[i].n++;
        return;
      }
  if (k->n < SANDBOX_SUM_TARGETS)
    {
      k->t[k->n] = (struct sandbox_sum_target){ .what = xstrdup (what), .n = 1, .order = k->n };
      k->n++;
    }
}

/* by count, descending; equal counts in the order first seen */
static int
target_cmp (const void *a, const void *b)
{
  const struct sandbox_sum_target *x = a, *y = b;
  if (x->n != y->n)
    return x->n < y->n ? 1 : -1;
  return x->order < y->order ? -1 : x->order > y->order;
}

static void
print_safe (FILE *out, const char *s)
{
  for (; *s; s++)
    fputc ((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, out);
}

static void
kind_print (FILE *out, const struct sandbox_sum_kind *k)
{
  fprintf (out, "agentsbx sandbox: denied %s: %lu (", k->kind, k->total);
  for (size_t i = 0; i < k->n && i < 3; i++)
    {
      fputs (i ? ", " : "", out);
      print_safe (out, k->t[i].what);
      fprintf (out, " x%lu", k->t[i].n);
    }
  fputs (k->total > 0 && k->n == 0 ? "?)\n" : ")\n", out);
}

/* one denial record into its kind's sums: "TARGET ACCESS" */
static void
add_denial (struct sandbox_sum *s, yajl_val v)
{
  const char *kind = get_str (v, "kind");
  long long sup = get_int (v, "suppressed");
  if (sup > 0)
    s->suppressed += (unsigned long) sup;
  if (!kind)
    return;
  const char *target = get_str (v, "syscall");
  if (!target)
    target = get_str (v, "path");
  if (!target)
    target = get_str (v, "addr");
  const char *access = get_str (v, "access");
  cleanup_free char *what = xasprintf ("%s%s%s", target ? target : "?", access && !get_str (v, "syscall") ? " " : "",
                                       access && !get_str (v, "syscall") ? access : "");
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->kinds); i++)
    if (strcmp (s->kinds[i].kind, kind) == 0)
      {
        kind_add (&s->kinds[i], what);
        return;
      }
}

static char *
read_log (const char *path)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return NULL;
  size_t len = 0, cap = 65536;
  char *buf = xmalloc (cap + 1);
  for (;;)
    {
      ssize_t n = read (fd, buf + len, cap - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      len += (size_t) n;
      if (len == cap && cap < MAX_LOG)
        {
          cap *= 2;
          buf = xrealloc (buf, cap + 1);
        }
      else if (len == cap)
        break;
    }
  buf[len] = '\0';
  return buf;
}

static void
add_record (struct sandbox_sum *s, yajl_val v)
{
  const char *ev = get_str (v, "event");
  if (!ev)
    return;
  if (strcmp (ev, "denial") == 0)
    add_denial (s, v);
  else if (strcmp (ev, "limit") == 0 && get_str (v, "limit") && !s->limit
           && strcmp (get_str (v, "limit"), "audit") != 0) /* the quota's own reports carry no value */
    {
      s->limit = xstrdup (get_str (v, "limit"));
      s->limit_value = get_int (v, "value");
      s->limit_used = get_int (v, "used");
    }
  else if (strcmp (ev, "lifecycle") == 0 && get_str (v, "exitReason"))
    {
      free (s->reason);
      s->reason = xstrdup (get_str (v, "exitReason"));
    }
  else if (strcmp (ev, "policy") == 0 && get_str (v, "kernelDenials")
           && strncmp (get_str (v, "kernelDenials"), "landlock", 8) != 0)
    {
      free (s->kernel);
      s->kernel = xstrdup (get_str (v, "kernelDenials"));
    }
}

int
sandbox_summary_read (const char *path, struct sandbox_sum *s)
{
  *s = (struct sandbox_sum){ .kinds = { { .kind = "fs" }, { .kind = "net" }, { .kind = "syscall" } } };
  cleanup_free char *buf = read_log (path);
  if (!buf)
    return -1;
  /* the run's records start at the last "created" lifecycle record */
  char *start = buf;
  for (char *p = strstr (buf, "\"state\":\"created\""); p; p = strstr (p + 1, "\"state\":\"created\""))
    {
      char *bol = p;
      while (bol > buf && bol[-1] != '\n')
        bol--;
      start = bol;
    }
  char *save = NULL;
  for (char *line = strtok_r (start, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      yajl_val v = yajl_tree_parse (line, NULL, 0);
      if (v)
        add_record (s, v);
      yajl_tree_free (v);
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->kinds); i++)
    qsort (s->kinds[i].t, s->kinds[i].n, sizeof s->kinds[i].t[0], target_cmp);
  return 0;
}

static bool
stopped_by_policy (const struct sandbox_sum *s, bool stopped)
{
  return s->reason && strcmp (s->reason, "exited") != 0 && !stopped;
}

bool
sandbox_summary_notable (const struct sandbox_sum *s, bool stopped)
{
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->kinds); i++)
    if (s->kinds[i].total)
      return true;
  return s->suppressed || s->limit || stopped_by_policy (s, stopped);
}

static char *
limit_text (const struct sandbox_sum *s)
{
  return xasprintf ("%s %lld reached (used %lld)", s->limit, s->limit_value, s->limit_used);
}

int
sandbox_summary_text (const struct sandbox_sum *s, bool stopped, FILE *out)
{
  int lines = 0;

  if (!sandbox_summary_notable (s, stopped))
    return 0;
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->kinds); i++)
    if (s->kinds[i].total)
      {
        kind_print (out, &s->kinds[i]);
        lines++;
      }
  if (s->suppressed && ++lines)
    fprintf (out, "agentsbx sandbox: %lu more denials not logged (cap per container)\n", s->suppressed);
  cleanup_free char *limit = s->limit ? limit_text (s) : NULL;
  if (stopped_by_policy (s, stopped) && ++lines)
    fprintf (out, "agentsbx sandbox: stopped by the policy: %s%s%s\n", s->reason, limit ? ": " : "",
             limit ? limit : "");
  else if (limit && ++lines) /* e.g. pids.max refused forks and the command coped */
    fprintf (out, "agentsbx sandbox: limit reached: %s\n", limit);
  if (s->kernel && ++lines)
    fprintf (out, "agentsbx sandbox: kernel denials reported: %s\n", s->kernel);
  return lines;
}

static void
gen_int (yajl_gen g, const char *k, long long v)
{
  json_gen_str (g, k);
  yajl_gen_integer (g, v);
}

static void
gen_kind (yajl_gen g, const struct sandbox_sum_kind *k)
{
  json_gen_str (g, k->kind);
  yajl_gen_map_open (g);
  gen_int (g, "total", (long long) k->total);
  json_gen_str (g, "top");
  yajl_gen_array_open (g);
  for (size_t i = 0; i < k->n && i < JSON_TOP; i++)
    {
      yajl_gen_map_open (g);
      json_gen_kv (g, "target", k->t[i].what);
      gen_int (g, "count", (long long) k->t[i].n);
      yajl_gen_map_close (g);
    }
  yajl_gen_array_close (g);
  yajl_gen_map_close (g);
}

int
sandbox_summary_json (const struct sandbox_sum *s, const struct sandbox_sum_run *run, FILE *out)
{
  yajl_gen g = json_gen_new (0);

  yajl_gen_map_open (g);
  json_gen_kv (g, "id", run->id);
  gen_int (g, "exitStatus", run->exit_status);
  json_gen_kv (g, "exitReason", s->reason);
  gen_int (g, "stopSignal", run->stop_signal);
  json_gen_str (g, "forcedKill");
  yajl_gen_bool (g, run->forced_kill);
  json_gen_kv (g, "auditLog", run->audit_log);
  json_gen_str (g, "denials");
  if (run->log_read)
    {
      yajl_gen_map_open (g);
      for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->kinds); i++)
        gen_kind (g, &s->kinds[i]);
      yajl_gen_map_close (g);
      gen_int (g, "notLogged", (long long) s->suppressed);
    }
  else
    {
      yajl_gen_null (g);
      json_gen_str (g, "notLogged");
      yajl_gen_null (g);
    }
  json_gen_str (g, "limit");
  if (s->limit)
    {
      yajl_gen_map_open (g);
      json_gen_kv (g, "limit", s->limit);
      gen_int (g, "value", s->limit_value);
      gen_int (g, "used", s->limit_used);
      yajl_gen_map_close (g);
    }
  else
    yajl_gen_null (g);
  json_gen_kv (g, "kernelDenials", s->kernel);
  yajl_gen_map_close (g);
  size_t len;
  cleanup_free char *text = json_gen_finish (g, true, &len);
  return fwrite (text, 1, len, out) == len && fflush (out) == 0 ? 0 : -1;
}

void
sandbox_summary_free (struct sandbox_sum *s)
{
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (s->kinds); i++)
    for (size_t j = 0; j < s->kinds[i].n; j++)
      free (s->kinds[i].t[j].what);
  free (s->limit);
  free (s->reason);
  free (s->kernel);
  *s = (struct sandbox_sum){ 0 };
}
