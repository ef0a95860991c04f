/* sandbox_summary.c - the denial summary `agentsbx sandbox` prints at the end (see the header).
 *
 * Mechanism: the audit log of this run is the only source (the monitor wrote it from the kernel's
 * reports); we read it back once the monitor has finished (sandbox.c waits for it), parse each
 * line with yajl_tree and aggregate. Threat model: the lines hold container-controlled text
 * (paths, exe); they were sanitised by audit.c (valid UTF-8, control characters escaped in JSON)
 * and after parsing we still print control characters as '?' so a path cannot drive the user's
 * terminal. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/sandbox_summary.h"

#define TARGETS_N 64
#define MAX_LOG (16u << 20)

struct target
{
  char *what;
  unsigned long n;
};

struct kind_sum
{
  const char *kind;
  unsigned long total;
  struct target t[TARGETS_N];
  size_t n;
};

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
kind_add (struct kind_sum *k, const char *what)
{
  k->total++;
  for (size_t i = 0; i < k->n; i++)
    if (strcmp (k->t[i].what, what) == 0)
      {
        k->t[i].n++;
        return;
      }
  if (k->n < TARGETS_N)
    k->t[k->n++] = (struct target){ .what = xstrdup (what), .n = 1 };
}

static void
print_safe (FILE *out, const char *s)
{
  for (; *s; s++)
    fputc ((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, out);
}

static void
kind_print (FILE *out, struct kind_sum *k)
{
  /* top 3 by count (selection: n is small) */
  fprintf (out, "agentsbx sandbox: denied %s: %lu (", k->kind, k->total);
  for (int shown = 0; shown < 3; shown++)
    {
      size_t best = k->n;
      for (size_t i = 0; i < k->n; i++)
        if (k->t[i].n && (best == k->n || k->t[i].n > k->t[best].n))
          best = i;
      if (best == k->n)
        break;
      fputs (shown ? ", " : "", out);
      print_safe (out, k->t[best].what);
      fprintf (out, " x%lu", k->t[best].n);
      k->t[best].n = 0;
    }
  fputs (k->total > 0 && k->n == 0 ? "?)\n" : ")\n", out);
}

/* one denial record into its kind's sums: "TARGET ACCESS" */
static void
add_denial (struct kind_sum *sums, size_t nsums, yajl_val v, unsigned long *suppressed)
{
  const char *kind = get_str (v, "kind");
  long long sup = get_int (v, "suppressed");
  if (sup > 0)
    *suppressed += (unsigned long) sup;
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
  for (size_t i = 0; i < nsums; i++)
    if (strcmp (sums[i].kind, kind) == 0)
      {
        kind_add (&sums[i], what);
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

int
sandbox_summary (const char *path, FILE *out)
{
  struct kind_sum sums[] = { { .kind = "fs" }, { .kind = "net" }, { .kind = "syscall" } };
  cleanup_free char *buf = read_log (path);
  cleanup_free char *limit = NULL, *reason = NULL, *kernel = NULL;
  unsigned long suppressed = 0;
  int lines = 0;
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
      const char *ev = v ? get_str (v, "event") : NULL;
      if (ev && strcmp (ev, "denial") == 0)
        add_denial (sums, ASBX_ARRAY_SIZE (sums), v, &suppressed);
      else if (ev && strcmp (ev, "limit") == 0 && get_str (v, "limit") && !limit
               && strcmp (get_str (v, "limit"), "audit") != 0) /* the quota's own reports carry no value */
        limit = xasprintf ("%s %lld reached (used %lld)", get_str (v, "limit"), get_int (v, "value"),
                           get_int (v, "used"));
      else if (ev && strcmp (ev, "lifecycle") == 0 && get_str (v, "exitReason"))
        {
          free (reason);
          reason = xstrdup (get_str (v, "exitReason"));
        }
      else if (ev && strcmp (ev, "policy") == 0 && get_str (v, "kernelDenials")
               && strncmp (get_str (v, "kernelDenials"), "landlock", 8) != 0)
        {
          free (kernel);
          kernel = xstrdup (get_str (v, "kernelDenials"));
        }
      yajl_tree_free (v);
    }
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (sums); i++)
    {
      if (sums[i].total)
        {
          kind_print (out, &sums[i]);
          lines++;
        }
      for (size_t j = 0; j < sums[i].n; j++)
        free (sums[i].t[j].what);
    }
  if (suppressed && ++lines)
    fprintf (out, "agentsbx sandbox: %lu more denials not logged (cap per container)\n", suppressed);
  if (reason && strcmp (reason, "exited") != 0 && ++lines)
    fprintf (out, "agentsbx sandbox: stopped by the policy: %s%s%s\n", reason, limit ? ": " : "", limit ? limit : "");
  if (kernel && ++lines)
    fprintf (out, "agentsbx sandbox: kernel denials reported: %s\n", kernel);
  return lines;
}
