/* workspace_diff.c - `agentsbx workspace diff`: summary lines, unified diffs (GNU diff on fds),
 * JSON lines. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "linux/pathsafe.h"
#include "runtime/workspace_diff.h"
#include "runtime/workspace_meta.h"

#define DIFF_BIN "/usr/bin/diff"
#define TEXT_PROBE 8192

int
ws_open_rel (int layerfd, const char *rel)
{
  struct stat st;
  int fd = ps_openat2 (layerfd, rel, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0,
                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd < 0)
    return -1;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      errno = EINVAL;
      return -1;
    }
  return fd;
}

bool
ws_is_text (int fd)
{
  char buf[TEXT_PROBE];
  ssize_t n;
  if (fd < 0)
    return true;
  do
    n = pread (fd, buf, sizeof buf, 0);
  while (n < 0 && errno == EINTR);
  return n >= 0 && memchr (buf, '\0', (size_t) n) == NULL;
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no surrogates, <= U+10FFFF), 0 if none */
static size_t
utf8_len (const unsigned char *s)
{
  if (s[0] < 0x80)
    return 1;
  size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80)
      return 0;
  if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0)
      || (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
    return 0;
  return n;
}

char *
ws_escape (const char *s)
{
  char *out = xmalloc (4 * strlen (s) + 1), *o = out;
  const unsigned char *p = (const unsigned char *) s;
  while (*p)
    {
      size_t l = utf8_len (p);
      /* C0 and C1 controls, DEL, the escape character itself and bytes that are not UTF-8 */
      if (l == 0 || *p < 0x20 || *p == 0x7f || *p == '\\' || (l == 2 && p[0] == 0xc2 && p[1] < 0xa0))
        {
          o += sprintf (o, "\\x%02x", *p);
          p++;
          continue;
        }
      memcpy (o, p, l);
      o += l;
      p += l;
    }
  *o = '\0';
  return out;
}

/* Is c a control byte the terminal acts on: C0 but TAB and LF, DEL (ECMA-48 C0 and DEL) */
static bool
c0_control (unsigned char c)
{
  return (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f;
}

/* Write b[0..n) to out with every terminal control (c0_control; C1 as UTF-8 C2 80..C2 9F and as
 * raw bytes 0x80..0x9f that are not part of a valid UTF-8 sequence) as \xNN, the rest as it is.
 * b must have 4 readable bytes past n (zero). Returns how many bytes at the end were left
 * unwritten: a UTF-8 sequence cut by the end of the buffer, when !eof (the caller carries them). */
static size_t
filter_controls (FILE *out, const unsigned char *b, size_t n, bool eof)
{
  size_t i = 0;
  while (i < n)
    {
      unsigned char c = b[i];
      if (c < 0x80)
        {
          if (c0_control (c))
            fprintf (out, "\\x%02x", c);
          else
            putc (c, out);
          i++;
          continue;
        }
      size_t want = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 1;
      if (i + want > n && !eof)
        return n - i;
      size_t l = utf8_len (b + i);
      if (l == 0)
        {
          if (c <= 0x9f)
            fprintf (out, "\\x%02x", c);
          else
            putc (c, out); /* not UTF-8 and not C1: Latin-1 text, the terminal shows a replacement */
          i++;
        }
      else if (l == 2 && c == 0xc2 && b[i + 1] < 0xa0)
        {
          fprintf (out, "\\xc2\\x%02x", b[i + 1]);
          i += 2;
        }
      else
        {
          (void) fwrite (b + i, 1, l, out); /* a write error: ferror (out), checked by the caller */
          i += l;
        }
    }
  return 0;
}

char *
ws_json_escape_controls (const char *json)
{
  char *out = xmalloc (6 * strlen (json) + 1), *o = out;
  const unsigned char *p = (const unsigned char *) json;
  while (*p)
    {
      if (*p == 0x7f)
        {
          o += sprintf (o, "\\u007f");
          p++;
        }
      else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0)
        {
          o += sprintf (o, "\\u00%02x", p[1]);
          p += 2;
        }
      else
        *o++ = (char) *p++;
    }
  *o = '\0';
  return out;
}

#define FILTER_BUF 65536

int
ws_unified_diff (FILE *out, int old_fd, int new_fd, const char *old_label, const char *new_label, asbx_err_t *err)
{
  int status;
  int pfd[2];
  fflush (out);
  if (pipe2 (pfd, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "pipe for diff");
  pid_t pid = fork ();
  if (pid < 0)
    {
      int e = errno;
      close (pfd[0]);
      close (pfd[1]);
      return asbx_error (err, e, "fork diff");
    }
  if (pid == 0)
    {
      /* fds 3 and 4 in the child, whatever they were in the parent; stdout is the pipe to our
       * filter: diff prints the agent's bytes, which must not reach the terminal as they are */
      int nul = open ("/dev/null", O_RDONLY | O_CLOEXEC);
      int a = fcntl (old_fd >= 0 ? old_fd : nul, F_DUPFD_CLOEXEC, 10);
      int b = fcntl (new_fd >= 0 ? new_fd : nul, F_DUPFD_CLOEXEC, 10);
      if (nul < 0 || a < 0 || b < 0 || dup2 (pfd[1], 1) < 0 || dup2 (a, 3) < 0 || dup2 (b, 4) < 0)
        _exit (2);
      lseek (3, 0, SEEK_SET);
      lseek (4, 0, SEEK_SET);
      execl (DIFF_BIN, "diff", "-u", "--label", old_label, "--label", new_label, "/dev/fd/3", "/dev/fd/4",
             (char *) NULL);
      _exit (127);
    }
  close (pfd[1]);
  {
    cleanup_free unsigned char *buf = xmalloc (FILTER_BUF + 8);
    size_t have = 0;
    int rerr = 0, werr = 0;
    errno = 0;
    for (;;)
      {
        ssize_t r = read (pfd[0], buf + have, FILTER_BUF - have);
        if (r < 0 && errno == EINTR)
          continue;
        if (r < 0)
          rerr = errno;
        bool eof = r <= 0;
        size_t n = have + (r > 0 ? (size_t) r : 0);
        memset (buf + n, 0, 4);
        size_t keep = filter_controls (out, buf, n, eof);
        if (ferror (out))
          {
            werr = errno ? errno : EIO; /* a reader gone (EPIPE), a full disk: stop, diff gets SIGPIPE */
            break;
          }
        memmove (buf, buf + n - keep, keep);
        have = keep;
        if (eof)
          break;
      }
    close (pfd[0]);
    while (waitpid (pid, &status, 0) < 0)
      if (errno != EINTR)
        return asbx_error (err, errno, "waitpid diff");
    if (rerr)
      return asbx_error (err, rerr, "read the output of %s", DIFF_BIN);
    if (werr)
      return asbx_error (err, werr, "write the diff");
  }
  if (!WIFEXITED (status) || WEXITSTATUS (status) > 1)
    return asbx_error (err, 0, "%s -u failed (status %d)", DIFF_BIN, WIFEXITED (status) ? WEXITSTATUS (status) : -1);
  return 0;
}

void
ws_print_change (FILE *out, const struct ws_change *c)
{
  cleanup_free char *p = ws_escape (c->path);
  fprintf (out, "%-8s %-7s %04o %10llu %s%s  ", ws_op_name (c->op), ws_type_name (c->mode), c->mode & 07777,
           (unsigned long long) c->size, *c->sha256 ? "sha256:" : "", *c->sha256 ? c->sha256 : "-");
  if (c->op == WS_RENAMED)
    {
      cleanup_free char *o = ws_escape (c->old_path);
      fprintf (out, "%s -> %s\n", o, p);
    }
  else if (c->op == WS_MODE)
    fprintf (out, "%s (mode %04o -> %04o)\n", p, c->old_mode & 07777, c->mode & 07777);
  else
    fprintf (out, "%s\n", p);
  if (S_ISLNK (c->mode) && c->target)
    {
      cleanup_free char *t = ws_escape (c->target);
      fprintf (out, "    -> %s\n", t);
    }
}

static void
gen_int (yajl_gen g, const char *k, long long v)
{
  json_gen_str (g, k);
  yajl_gen_integer (g, v);
}

/* A file name as key k: as it is when it is UTF-8; else with U+FFFD for each invalid byte, and
 * the exact bytes in hex as k + "Hex" (a file name is bytes, JSON strings are Unicode) */
static void
gen_name (yajl_gen g, const char *k, const char *name)
{
  const unsigned char *p = (const unsigned char *) name;
  size_t n = strlen (name), o = 0;
  cleanup_free char *out = xmalloc (3 * n + 1);
  bool bad = false;
  for (size_t i = 0; i < n;)
    {
      size_t l = utf8_len (p + i);
      if (l == 0)
        {
          memcpy (out + o, "\xEF\xBF\xBD", 3);
          o += 3;
          i++;
          bad = true;
          continue;
        }
      memcpy (out + o, p + i, l);
      o += l;
      i += l;
    }
  out[o] = '\0';
  json_gen_kv (g, k, out);
  if (bad)
    {
      cleanup_free char *hex = xmalloc (2 * n + 1);
      cleanup_free char *hk = xasprintf ("%sHex", k);
      static const char digits[] = "0123456789abcdef";
      for (size_t i = 0; i < n; i++)
        {
          hex[2 * i] = digits[p[i] >> 4];
          hex[2 * i + 1] = digits[p[i] & 15];
        }
      hex[2 * n] = '\0';
      json_gen_kv (g, hk, hex);
    }
}

static void
gen_sha (yajl_gen g, const char *k, const char *sha)
{
  json_gen_kv (g, k, *sha ? sha : NULL);
}

char *
ws_change_json (const struct ws_change *c)
{
  char mode[8];
  yajl_gen g = json_gen_new (0);
  yajl_gen_map_open (g);
  json_gen_kv (g, "op", ws_op_name (c->op));
  gen_name (g, "path", c->path);
  json_gen_kv (g, "type", ws_type_name (c->mode));
  snprintf (mode, sizeof mode, "%04o", c->mode & 07777);
  json_gen_kv (g, "mode", mode);
  gen_int (g, "size", (long long) c->size);
  gen_sha (g, "sha256", c->sha256);
  if (c->target)
    gen_name (g, "target", c->target);
  if (c->op == WS_RENAMED)
    gen_name (g, "oldPath", c->old_path);
  if (c->has_old && c->op != WS_DELETED)
    {
      json_gen_kv (g, "oldType", ws_type_name (c->old_mode));
      snprintf (mode, sizeof mode, "%04o", c->old_mode & 07777);
      json_gen_kv (g, "oldMode", mode);
      gen_int (g, "oldSize", (long long) c->old_size);
      gen_sha (g, "oldSha256", c->old_sha256);
    }
  yajl_gen_map_close (g);
  return json_gen_finish (g, true, NULL);
}

static bool
selected (const struct ws_change *c, char **paths, size_t n)
{
  if (n == 0)
    return true;
  for (size_t i = 0; i < n; i++)
    if (ws_path_under (c->path, paths[i]) || (c->old_path && ws_path_under (c->old_path, paths[i])))
      return true;
  return false;
}

/* the content part of a change: a unified diff, or sizes and hashes for binary content */
static int
print_content (FILE *out, const struct ws_change *c, const struct ws_view *ov, const struct ws_view *nv,
               asbx_err_t *err)
{
  bool old_reg = c->has_old && S_ISREG (c->old_mode) && c->op != WS_DELETED;
  bool new_reg = S_ISREG (c->mode);
  cleanup_close int ofd = -1;
  cleanup_close int nfd = -1;
  const char *orel = c->op == WS_RENAMED ? c->old_path : c->path;

  if (c->op == WS_MODE || c->op == WS_RENAMED || (!old_reg && !new_reg))
    return 0;
  if (c->op == WS_DELETED)
    {
      new_reg = false;
      old_reg = true;
    }
  if (old_reg)
    ofd = ws_open_rel (c->old_up ? ov->upper : ov->lower, orel);
  if (new_reg && c->op != WS_DELETED)
    nfd = ws_open_rel (c->new_up ? nv->upper : nv->lower, c->path);
  if ((old_reg && ofd < 0) || (new_reg && c->op != WS_DELETED && nfd < 0))
    return ws_error_path (err, errno, "workspace `%s`: open to diff", c->path);
  if (!ws_is_text (ofd) || !ws_is_text (nfd))
    {
      if (c->has_old && c->op != WS_ADDED)
        fprintf (out, "    binary: was %llu bytes sha256:%s\n", (unsigned long long) c->old_size, c->old_sha256);
      if (c->op != WS_DELETED)
        fprintf (out, "    binary: now %llu bytes sha256:%s\n", (unsigned long long) c->size, c->sha256);
      return 0;
    }
  cleanup_free char *p = ws_escape (c->path);
  cleanup_free char *a = c->op == WS_ADDED ? xstrdup ("/dev/null") : xasprintf ("a/%s", p);
  cleanup_free char *b = c->op == WS_DELETED ? xstrdup ("/dev/null") : xasprintf ("b/%s", p);
  return ws_unified_diff (out, ofd, nfd, a, b, err);
}

int
ws_diff (const struct ws_diff_opts *o, FILE *out, asbx_err_t *err)
{
  struct ws_handle h;
  struct ws_changes ch = { 0 };
  cleanup_close int lower = -1;
  cleanup_close int from = -1;
  cleanup_close int to = -1;
  int ret = -1;

  if (ws_handle_open (o->config_path, o->id, &h, err) < 0)
    return -1;
  if ((lower = ws_open_lower (&h, err)) < 0)
    goto out;
  if (o->from && (from = ws_open_snapshot (&h, o->from, err)) < 0)
    goto out;
  if (o->to && (to = ws_open_snapshot (&h, o->to, err)) < 0)
    goto out;
  struct ws_view ov = { from, lower }, nv = { o->to ? to : h.upperfd, lower };
  if (ws_walk (&ov, &nv, h.meta.xattr, &ch, err) < 0)
    goto out;
  ws_find_renames (&ch);
  for (size_t i = 0; i < ch.n; i++)
    {
      const struct ws_change *c = &ch.v[i];
      if (c->renamed || !selected (c, o->paths, o->paths_len))
        continue;
      if (o->json)
        {
          cleanup_free char *line = ws_change_json (c);
          cleanup_free char *safe = ws_json_escape_controls (line);
          fputs (safe, out);
          continue;
        }
      ws_print_change (out, c);
      if (print_content (out, c, &ov, &nv, err) < 0)
        goto out;
    }
  ret = 0;
out:
  if (fflush (out) != 0 && ret == 0)
    ret = asbx_error (err, errno, "write the diff");
  ws_changes_free (&ch);
  ws_handle_free (&h);
  return ret;
}
