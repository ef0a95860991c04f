/* test_audit.c - the audit log writer (monitor/audit.c) and the process-events parser
 * (linux/proc_events.c): line shape, escaping of hostile values, one write(2) per record,
 * O_APPEND across writers, file/dir modes, symlink refusal. No root needed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/proc_events.h"
#include "monitor/audit.h"

static yajl_val
parse_line (const char *line, size_t len)
{
  char errbuf[256];
  cleanup_free char *copy = xmalloc (len + 1);
  memcpy (copy, line, len);
  copy[len] = '\0';
  yajl_val v = yajl_tree_parse (copy, errbuf, sizeof errbuf);
  if (!v)
    fail_msg ("not JSON: %s: %s", errbuf, copy);
  return v;
}

static const char *
get_str (yajl_val v, const char *key)
{
  const char *path[] = { key, NULL };
  yajl_val s = yajl_tree_get (v, path, yajl_t_string);
  return s ? YAJL_GET_STRING (s) : NULL;
}

static void
test_line_shape (void **state)
{
  (void) state;
  struct audit_rec *r = audit_rec_new ("c1", "lifecycle");
  char *argv[] = { "/bin/sh", "-c", "exit 3" };
  audit_rec_str (r, "state", "exited");
  audit_rec_int (r, "exitCode", 137);
  audit_rec_bool (r, "ok", 1);
  audit_rec_str (r, "none", NULL);
  audit_rec_strv (r, "argv", argv, 3);
  size_t len;
  const char *line = audit_rec_line (r, &len);

  assert_int_equal (line[len - 1], '\n');
  assert_ptr_equal (strchr (line, '\n'), line + len - 1); /* exactly one newline, at the end */
  assert_int_equal (strncmp (line, "{\"ts\":\"", 7), 0);  /* ts first, then container, event */
  yajl_val v = parse_line (line, len);
  const char *ts = get_str (v, "ts");
  assert_non_null (ts);
  /* 2025-01-02T03:04:05.123456Z */
  assert_int_equal (strlen (ts), 27);
  assert_int_equal (ts[4], '-');
  assert_int_equal (ts[10], 'T');
  assert_int_equal (ts[19], '.');
  assert_int_equal (ts[26], 'Z');
  assert_string_equal (get_str (v, "container"), "c1");
  assert_string_equal (get_str (v, "event"), "lifecycle");
  assert_string_equal (get_str (v, "state"), "exited");
  const char *p_code[] = { "exitCode", NULL }, *p_argv[] = { "argv", NULL }, *p_none[] = { "none", NULL };
  assert_int_equal (YAJL_GET_INTEGER (yajl_tree_get (v, p_code, yajl_t_number)), 137);
  yajl_val a = yajl_tree_get (v, p_argv, yajl_t_array);
  assert_non_null (a);
  assert_int_equal (a->u.array.len, 3);
  assert_string_equal (YAJL_GET_STRING (a->u.array.values[2]), "exit 3");
  assert_true (YAJL_IS_NULL (yajl_tree_get (v, p_none, yajl_t_any)));
  yajl_tree_free (v);
  /* the line is final: later calls do nothing */
  audit_rec_str (r, "late", "x");
  size_t len2;
  audit_rec_line (r, &len2);
  assert_int_equal (len, len2);
  audit_rec_free (r);
}

static void
test_escaping (void **state)
{
  (void) state;
  /* a container-chosen argv trying to forge a second record, plus quotes, backslash, a control
   * char, invalid UTF-8 (lone continuation byte, overlong '/', surrogate) and valid non-ASCII */
  const char *evil = "x\n{\"event\":\"forged\"}\"\\\x01\x80\xC0\xAF\xED\xA0\x80 \xC3\xA9\xF0\x9F\x98\x80";
  struct audit_rec *r = audit_rec_new ("c1", "exec");
  char *argv[] = { (char *) evil };
  audit_rec_str (r, "path", evil);
  audit_rec_strv (r, "argv", argv, 1);
  size_t len;
  const char *line = audit_rec_line (r, &len);

  assert_ptr_equal (strchr (line, '\n'), line + len - 1);
  yajl_val v = parse_line (line, len);
  const char *path = get_str (v, "path");
  assert_non_null (path);
  const char *want = "x\n{\"event\":\"forged\"}\"\\\x01\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                     "\xEF\xBF\xBD \xC3\xA9\xF0\x9F\x98\x80";
  assert_string_equal (path, want);
  assert_string_equal (get_str (v, "event"), "exec");
  yajl_tree_free (v);
  audit_rec_free (r);
}

/* Each record is one write(2): on a SOCK_SEQPACKET socket every write is one packet, so every
 * packet received must be exactly one whole line. */
static void
test_one_write_per_record (void **state)
{
  (void) state;
  int sp[2];
  assert_int_equal (socketpair (AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
  asbx_err_t err = NULL;
  char big[8192];
  memset (big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  for (int i = 0; i < 3; i++)
    {
      struct audit_rec *r = audit_rec_new ("c1", "exec");
      audit_rec_int (r, "pid", i);
      audit_rec_str (r, "path", i == 1 ? big : "/bin/true");
      assert_int_equal (audit_rec_write (r, sp[0], &err), 0);
    }
  close (sp[0]);
  static char buf[65536];
  for (int i = 0; i < 3; i++)
    {
      ssize_t n = recv (sp[1], buf, sizeof buf, 0);
      assert_true (n > 0);
      assert_int_equal (buf[n - 1], '\n');
      assert_ptr_equal (memchr (buf, '\n', (size_t) n), buf + n - 1);
      yajl_val v = parse_line (buf, (size_t) n);
      yajl_tree_free (v);
    }
  assert_int_equal (recv (sp[1], buf, sizeof buf, 0), 0);
  close (sp[1]);
}

static char *
mkdtemp_s (void)
{
  char *t = xstrdup ("/tmp/test_audit.XXXXXX");
  assert_non_null (mkdtemp (t));
  return t;
}

static void
rm_rf (const char *dir)
{
  cleanup_free char *cmd = xasprintf ("rm -rf '%s'", dir);
  assert_int_equal (system (cmd), 0);
}

static void
test_open_modes_append (void **state)
{
  (void) state;
  cleanup_free char *tmp = mkdtemp_s ();
  cleanup_free char *dir = xasprintf ("%s/a/b", tmp);
  asbx_err_t err = NULL;
  struct stat st;

  int fd = audit_open (dir, "ctr", &err);
  assert_true (fd >= 0);
  assert_int_equal (stat (dir, &st), 0);
  assert_int_equal (st.st_mode & 07777, 0700);
  cleanup_free char *path = audit_path (dir, "ctr");
  assert_int_equal (stat (path, &st), 0);
  assert_int_equal (st.st_mode & 07777, 0600);
  assert_int_equal (audit_rec_write (audit_rec_new ("ctr", "lifecycle"), fd, &err), 0);
  close (fd);
  /* a later container with the same id appends */
  fd = audit_open (dir, "ctr", &err);
  assert_true (fd >= 0);
  assert_int_equal (audit_rec_write (audit_rec_new ("ctr", "limit"), fd, &err), 0);
  close (fd);
  cleanup_free char *text = NULL;
  size_t len;
  assert_int_equal (read_file_at (AT_FDCWD, path, 1 << 20, &text, &len, &err), 0);
  char *second = strchr (text, '\n');
  assert_non_null (second);
  assert_non_null (strstr (text, "\"event\":\"lifecycle\""));
  assert_non_null (strstr (second, "\"event\":\"limit\""));
  assert_ptr_equal (strchr (second + 1, '\n'), text + len - 1);

  /* refused: relative dir, bad ids, a symlink planted as the log, a fifo */
  assert_true (audit_open ("rel/dir", "x", &err) < 0);
  asbx_error_free (&err);
  assert_true (audit_open (dir, "../x", &err) < 0);
  asbx_error_free (&err);
  assert_true (audit_open (dir, "..", &err) < 0);
  asbx_error_free (&err);
  cleanup_free char *link = xasprintf ("%s/evil.jsonl", dir);
  assert_int_equal (symlink ("/etc/passwd", link), 0);
  assert_true (audit_open (dir, "evil", &err) < 0);
  assert_int_equal (err->errnum, ELOOP);
  asbx_error_free (&err);
  cleanup_free char *fifo = xasprintf ("%s/fifo.jsonl", dir);
  assert_int_equal (mkfifo (fifo, 0600), 0);
  assert_true (audit_open (dir, "fifo", &err) < 0); /* ENXIO (no reader), never blocks */
  asbx_error_free (&err);
  rm_rf (tmp);
}

/* Several processes appending to one log: no record is lost or split. */
static void
test_concurrent_writers (void **state)
{
  (void) state;
  cleanup_free char *tmp = mkdtemp_s ();
  enum
  {
    WRITERS = 4,
    RECORDS = 300
  };
  asbx_err_t err = NULL;

  for (int w = 0; w < WRITERS; w++)
    {
      pid_t pid = fork ();
      assert_true (pid >= 0);
      if (pid == 0)
        {
          int fd = audit_open (tmp, "ctr", &err);
          for (int i = 0; fd >= 0 && i < RECORDS; i++)
            {
              struct audit_rec *r = audit_rec_new ("ctr", "exec");
              audit_rec_int (r, "writer", w);
              audit_rec_int (r, "i", i);
              audit_rec_str (r, "pad", "........................................................................");
              if (audit_rec_write (r, fd, &err) < 0)
                _exit (1);
            }
          _exit (fd < 0);
        }
    }
  for (int w = 0; w < WRITERS; w++)
    {
      int st;
      assert_true (wait (&st) > 0);
      assert_int_equal (st, 0);
    }
  cleanup_free char *path = audit_path (tmp, "ctr");
  cleanup_free char *text = NULL;
  size_t len, lines = 0;
  assert_int_equal (read_file_at (AT_FDCWD, path, 1 << 24, &text, &len, &err), 0);
  for (char *s = text, *nl; (nl = strchr (s, '\n')); s = nl + 1)
    {
      yajl_val v = parse_line (s, (size_t) (nl - s));
      yajl_tree_free (v);
      lines++;
    }
  assert_int_equal (lines, WRITERS * RECORDS);
  rm_rf (tmp);
}

/* ---- proc_events_parse ---- */

struct collected
{
  struct proc_ev ev[8];
  size_t n;
};

static void
collect (const struct proc_ev *ev, void *data)
{
  struct collected *c = data;
  if (c->n < 8)
    c->ev[c->n++] = *ev;
}

static size_t
put_event (char *buf, const struct proc_event *pe, unsigned idx)
{
  struct nlmsghdr *nh = (struct nlmsghdr *) buf;
  struct cn_msg *cn = NLMSG_DATA (nh);
  nh->nlmsg_len = NLMSG_LENGTH (sizeof *cn + sizeof *pe);
  nh->nlmsg_type = NLMSG_DONE;
  memset (cn, 0, sizeof *cn);
  cn->id.idx = idx;
  cn->id.val = CN_VAL_PROC;
  cn->len = sizeof *pe;
  memcpy (cn->data, pe, sizeof *pe);
  return NLMSG_ALIGN (nh->nlmsg_len);
}

static void
test_proc_events_parse (void **state)
{
  (void) state;
  static __attribute__ ((aligned (8))) char buf[4096];
  struct proc_event pe;
  struct collected c = { .n = 0 };
  size_t off = 0;

  memset (buf, 0, sizeof buf);
  memset (&pe, 0, sizeof pe);
  pe.what = PROC_EVENT_FORK;
  pe.event_data.fork.parent_tgid = 10;
  pe.event_data.fork.child_pid = 11;
  pe.event_data.fork.child_tgid = 11;
  off += put_event (buf + off, &pe, CN_IDX_PROC);
  memset (&pe, 0, sizeof pe);
  pe.what = PROC_EVENT_UID; /* skipped kind */
  off += put_event (buf + off, &pe, CN_IDX_PROC);
  memset (&pe, 0, sizeof pe);
  pe.what = PROC_EVENT_EXEC; /* foreign connector index: skipped */
  off += put_event (buf + off, &pe, CN_IDX_PROC + 1);
  memset (&pe, 0, sizeof pe);
  pe.what = PROC_EVENT_EXIT;
  pe.event_data.exit.process_pid = 11;
  pe.event_data.exit.process_tgid = 11;
  pe.event_data.exit.exit_code = 3 << 8;
  off += put_event (buf + off, &pe, CN_IDX_PROC);

  assert_int_equal (proc_events_parse (buf, off, collect, &c), 2);
  assert_int_equal (c.ev[0].type, PROC_EV_FORK);
  assert_int_equal (c.ev[0].parent_tgid, 10);
  assert_int_equal (c.ev[0].tgid, 11);
  assert_int_equal (c.ev[1].type, PROC_EV_EXIT);
  assert_true (WIFEXITED (c.ev[1].exit_code));
  assert_int_equal (WEXITSTATUS (c.ev[1].exit_code), 3);
  /* truncated buffers are skipped, never read past the end */
  c.n = 0;
  assert_int_equal (proc_events_parse (buf, 20, collect, &c), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_line_shape),           cmocka_unit_test (test_escaping),
    cmocka_unit_test (test_one_write_per_record), cmocka_unit_test (test_open_modes_append),
    cmocka_unit_test (test_concurrent_writers),   cmocka_unit_test (test_proc_events_parse),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
