/* audit_html.c - see audit_html.h. The page is rendered here, row by row, so it shows the whole
 * timeline without script; the inline script only hides rows (filters) and reads the fragment.
 * Threat model: records hold container-controlled strings; each goes through html_text (the five
 * HTML metacharacters escaped, control characters as U+FFFD) and lands only in element text or a
 * double-quoted attribute, never in script or style. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "runtime/audit_html.h"

#define MAX_EVENTS 32

struct counts
{
  const char *event[MAX_EVENTS];
  unsigned long n[MAX_EVENTS];
  size_t kinds;
  unsigned long total, denied, allowed, skipped;
  char first[40], last[40];
};

static void
html_text (FILE *out, const char *s)
{
  for (; *s; s++)
    switch (*s)
      {
      case '&': fputs ("&amp;", out); break;
      case '<': fputs ("&lt;", out); break;
      case '>': fputs ("&gt;", out); break;
      case '"': fputs ("&quot;", out); break;
      case '\'': fputs ("&#39;", out); break;
      default:
        if ((unsigned char) *s < 0x20 || *s == 0x7f)
          fputs ("\xef\xbf\xbd", out);
        else
          fputc (*s, out);
      }
}

static const char *
str_of (yajl_val v, const char *key)
{
  const char *path[] = { key, NULL };
  yajl_val x = yajl_tree_get (v, path, yajl_t_string);
  return x ? YAJL_GET_STRING (x) : NULL;
}

/* "denied", "allowed" or "" from the record's own fields (docs/policy.md §6) */
static const char *
decision_of (yajl_val v, const char *event)
{
  const char *d = str_of (v, "decision"), *a = str_of (v, "action");
  if (strcmp (event, "denial") == 0)
    return "denied";
  if (d
      && (strcmp (d, "refused") == 0 || strcmp (d, "dropped") == 0 || strcmp (d, "deny") == 0
          || strcmp (d, "denied") == 0))
    return "denied";
  if (d && (strcmp (d, "allowed") == 0 || strncmp (d, "allow", 5) == 0))
    return "allowed";
  if (strcmp (event, "limit") == 0 && a && (strcmp (a, "kill") == 0 || strcmp (a, "refused") == 0))
    return "denied";
  return "";
}

static void
count_event (struct counts *c, const char *event)
{
  for (size_t i = 0; i < c->kinds; i++)
    if (strcmp (c->event[i], event) == 0)
      {
        c->n[i]++;
        return;
      }
  if (c->kinds < MAX_EVENTS)
    {
      c->event[c->kinds] = xstrdup (event); /* the parsed tree is freed line by line */
      c->n[c->kinds++] = 1;
    }
}

/* the record's other fields as "key=value" (strings bare, the rest as compact JSON) */
static void
details (FILE *out, yajl_val v)
{
  static const char *const skip[] = { "ts", "container", "event", "decision", NULL };
  bool first = true;
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      const char *k = v->u.object.keys[i];
      bool skipped = false;
      for (const char *const *s = skip; *s && !skipped; s++)
        skipped = strcmp (*s, k) == 0;
      if (skipped)
        continue;
      fputs (first ? "" : " ", out);
      first = false;
      fputs ("<span class=\"k\">", out);
      html_text (out, k);
      fputs ("</span>=", out);
      yajl_val x = v->u.object.values[i];
      if (YAJL_IS_STRING (x))
        html_text (out, YAJL_GET_STRING (x) ? YAJL_GET_STRING (x) : "");
      else
        {
          yajl_gen g = json_gen_new (0);
          json_gen_value (g, x);
          cleanup_free char *t = json_gen_finish (g, false, NULL);
          html_text (out, t);
        }
    }
}

static const char STYLE[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}"
    "table{border-collapse:collapse;width:100%}td,th{padding:3px 6px;border-bottom:1px solid #ddd;"
    "vertical-align:top;text-align:left}td:first-child{white-space:nowrap}td.d{font-family:monospace;word-break:break-"
    "all}"
    "tr.denied td{background:#fde8e8}tr.allowed td.dec{color:#176b2c}tr.denied td.dec{color:#a11;"
    "font-weight:bold}.k{color:#555}.counts span{display:inline-block;margin:0 1em .4em 0;padding:2px 8px;"
    "border-radius:4px;background:#eef}.counts span.bad{background:#fde8e8}#filters{margin:1em 0}"
    "#filters label{margin-right:1em}tr[hidden]{display:none}";

/* The filters: rows are hidden, never removed; the fragment presets them (#denied,
 * #event=a,b, #q=text) so a link can point at a view. */
static const char SCRIPT[] =
    "(function(){var rows=[].slice.call(document.querySelectorAll('#timeline tbody tr'));"
    "var boxes=[].slice.call(document.querySelectorAll('input[data-filter-event]'));"
    "var den=document.getElementById('only-denied'),q=document.getElementById('q');"
    "function apply(){var on={};boxes.forEach(function(b){on[b.dataset.filterEvent]=b.checked;});"
    "var t=q.value.toLowerCase(),n=0;rows.forEach(function(r){var show=on[r.dataset.event]!==false&&"
    "(!den.checked||r.dataset.decision==='denied')&&(!t||r.textContent.toLowerCase().indexOf(t)>=0);"
    "r.hidden=!show;if(show)n++;});document.getElementById('shown').textContent=n;}"
    "var h=decodeURIComponent(location.hash.slice(1));h.split('&').forEach(function(p){"
    "if(p==='denied')den.checked=true;else if(p.indexOf('event=')===0){var w=p.slice(6).split(',');"
    "boxes.forEach(function(b){b.checked=w.indexOf(b.dataset.filterEvent)>=0;});}"
    "else if(p.indexOf('q=')===0)q.value=p.slice(2);});"
    "boxes.forEach(function(b){b.addEventListener('change',apply);});den.addEventListener('change',apply);"
    "q.addEventListener('input',apply);apply();})();";

int
audit_html_write (const char *id, const char *log, size_t len, FILE *out)
{
  struct counts c = { 0 };
  cleanup_free char *text = xmalloc (len + 1);
  cleanup_free char *copy = NULL;
  memcpy (text, log, len);
  text[len] = '\0';
  copy = xstrdup (text);

  /* pass 1: the counts (shown above the table) */
  char *save = NULL;
  for (char *line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      yajl_val v = yajl_tree_parse (line, NULL, 0);
      const char *ev = v && YAJL_IS_OBJECT (v) ? str_of (v, "event") : NULL;
      if (!ev)
        c.skipped++;
      else
        {
          const char *dec = decision_of (v, ev);
          c.total++;
          c.denied += strcmp (dec, "denied") == 0;
          c.allowed += strcmp (dec, "allowed") == 0;
          count_event (&c, ev);
          const char *ts = str_of (v, "ts");
          if (ts && !*c.first)
            snprintf (c.first, sizeof c.first, "%s", ts);
          if (ts)
            snprintf (c.last, sizeof c.last, "%s", ts);
        }
      yajl_tree_free (v);
    }

  fputs ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
         "script-src 'unsafe-inline'\">\n<title>agentsbx audit: ",
         out);
  html_text (out, id);
  fprintf (out, "</title>\n<style>%s</style></head>\n<body>\n<h1>agentsbx audit: <span id=\"container\">", STYLE);
  html_text (out, id);
  fputs ("</span></h1>\n<p class=\"range\">", out);
  html_text (out, c.first);
  fputs (" &ndash; ", out);
  html_text (out, c.last);
  fprintf (out,
           "</p>\n<div class=\"counts\"><span id=\"count-total\" data-count=\"%lu\">records: %lu</span>"
           "<span id=\"count-denied\" class=\"bad\" data-count=\"%lu\">denied: %lu</span>"
           "<span id=\"count-allowed\" data-count=\"%lu\">allowed: %lu</span>",
           c.total, c.total, c.denied, c.denied, c.allowed, c.allowed);
  for (size_t i = 0; i < c.kinds; i++)
    {
      fputs ("<span class=\"event-count\" data-event=\"", out);
      html_text (out, c.event[i]);
      fprintf (out, "\" data-count=\"%lu\">", c.n[i]);
      html_text (out, c.event[i]);
      fprintf (out, ": %lu</span>", c.n[i]);
    }
  if (c.skipped)
    fprintf (out, "<span id=\"count-skipped\" class=\"bad\" data-count=\"%lu\">not JSON: %lu</span>", c.skipped,
             c.skipped);
  fputs ("</div>\n<div id=\"filters\">", out);
  for (size_t i = 0; i < c.kinds; i++)
    {
      fputs ("<label><input type=\"checkbox\" checked data-filter-event=\"", out);
      html_text (out, c.event[i]);
      fputs ("\"> ", out);
      html_text (out, c.event[i]);
      fputs ("</label>", out);
    }
  fprintf (out,
           "<label><input type=\"checkbox\" id=\"only-denied\"> denied only</label>"
           "<label>search <input type=\"search\" id=\"q\"></label> shown: <span id=\"shown\">%lu</span></div>\n"
           "<table id=\"timeline\"><thead><tr><th>time</th><th>event</th><th>decision</th><th>details</th>"
           "</tr></thead>\n<tbody>\n",
           c.total);

  /* pass 2: the timeline */
  save = NULL;
  for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      yajl_val v = yajl_tree_parse (line, NULL, 0);
      const char *ev = v && YAJL_IS_OBJECT (v) ? str_of (v, "event") : NULL;
      if (ev)
        {
          const char *dec = decision_of (v, ev), *ts = str_of (v, "ts"), *raw = str_of (v, "decision");
          fputs ("<tr data-event=\"", out);
          html_text (out, ev);
          fprintf (out, "\" data-decision=\"%s\" class=\"%s\"><td>", dec, dec);
          html_text (out, ts ? ts : "");
          fputs ("</td><td>", out);
          html_text (out, ev);
          fputs ("</td><td class=\"dec\">", out);
          html_text (out, raw ? raw : dec);
          fputs ("</td><td class=\"d\">", out);
          details (out, v);
          fputs ("</td></tr>\n", out);
        }
      yajl_tree_free (v);
    }
  fprintf (out, "</tbody></table>\n<script>%s</script>\n</body></html>\n", SCRIPT);
  for (size_t i = 0; i < c.kinds; i++)
    free ((char *) c.event[i]);
  return fflush (out) == 0 && !ferror (out) ? 0 : -1;
}
