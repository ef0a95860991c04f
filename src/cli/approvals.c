/* approvals.c - `agentsbx approvals ID` (the pending questions), `agentsbx approve ID QID
 * [--always]`, `agentsbx deny ID QID` (POLICY.md §5): a short-lived client of the monitor's
 * approval broker on <root>/<id>/approvals.sock (protocol in monitor/approvals.h). The socket is
 * reached through an fd of the state dir (no length limit of sun_path on the root's path). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/state.h"

#define REPLY_TIMEOUT_MS 10000 /* an upper bound against a hung monitor, never a measure */

static int
broker_connect (const struct asbx_global *g, const char *id, asbx_err_t *err)
{
  cleanup_free char *dir = xasprintf ("%s/%s", g->root, id);
  cleanup_close int dfd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  if (dfd < 0)
    return asbx_error (err, errno, "container `%s` does not exist", id);
  snprintf (sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/approvals.sock", dfd);
  cleanup_close int s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return asbx_error (err, errno, "socket");
  if (connect (s, (struct sockaddr *) &sa, sizeof sa) < 0)
    return asbx_error (err, errno,
                       errno == ENOENT ? "container `%s` has no approval broker (approvals.network is not `ask`, "
                                         "or the container has exited)"
                                       : "connect to the approval broker of `%s`",
                       id);
  return steal_fd (&s);
}

/* Read one line (without '\n') into a heap string; NULL on EOF/timeout with *err. */
static char *
read_line (int s, char *buf, size_t cap, size_t *len, asbx_err_t *err)
{
  for (;;)
    {
      char *nl = memchr (buf, '\n', *len);
      if (nl)
        {
          size_t n = (size_t) (nl - buf);
          char *line = xmalloc (n + 1);
          memcpy (line, buf, n);
          line[n] = '\0';
          memmove (buf, nl + 1, *len - n - 1);
          *len -= n + 1;
          return line;
        }
      struct pollfd p = { .fd = s, .events = POLLIN };
      if (*len == cap || poll (&p, 1, REPLY_TIMEOUT_MS) <= 0)
        {
          asbx_error (err, ETIMEDOUT, "the approval broker did not answer");
          return NULL;
        }
      ssize_t n = read (s, buf + *len, cap - *len);
      if (n <= 0)
        {
          asbx_error (err, n < 0 ? errno : 0, "the approval broker closed the connection");
          return NULL;
        }
      *len += (size_t) n;
    }
}

static yajl_val
get (yajl_val v, const char *key)
{
  const char *path[] = { key, NULL };
  return yajl_tree_get (v, path, yajl_t_any);
}

static void
print_question (yajl_val v)
{
  yajl_val id = get (v, "id"), host = get (v, "host"), port = get (v, "port"), pid = get (v, "pid"),
           exe = get (v, "exe");
  printf ("%-6s %-40s %-6s %-8s %s\n", id && YAJL_IS_NUMBER (id) ? YAJL_GET_NUMBER (id) : "-",
          host && YAJL_IS_STRING (host) ? YAJL_GET_STRING (host) : "-",
          port && YAJL_IS_NUMBER (port) ? YAJL_GET_NUMBER (port) : "-",
          pid && YAJL_IS_NUMBER (pid) ? YAJL_GET_NUMBER (pid) : "-",
          exe && YAJL_IS_STRING (exe) ? YAJL_GET_STRING (exe) : "-");
}

int
cli_approvals (struct asbx_global *g, int argc, char **argv)
{
  asbx_err_t err = NULL;
  bool json = argc == 3 && strcmp (argv[1], "--json") == 0;
  char buf[8192];
  size_t len = 0;

  if (argc == 2 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    {
      printf ("usage: agentsbx approvals [--json] CONTAINER_ID\nlist the questions waiting for an approver\n");
      return 0;
    }
  if (argc != 2 && !json)
    return cli_usage ("approvals", "expected: approvals [--json] CONTAINER_ID");
  const char *id = argv[argc - 1];
  if (asbx_id_validate (id, &err) < 0)
    return cli_fail (&err);
  cleanup_close int s = broker_connect (g, id, &err);
  if (s < 0 || write_all (s, "{\"list\":true}\n", 14) < 0)
    return s < 0 ? cli_fail (&err) : cli_fail ((asbx_error (&err, errno, "write to the approval broker"), &err));
  if (!json)
    printf ("%-6s %-40s %-6s %-8s %s\n", "QID", "HOST", "PORT", "PID", "EXE");
  /* questions arrive on connect and again for the list: print each id once */
  long long seen[64];
  size_t nseen = 0;
  for (;;)
    {
      cleanup_free char *line = read_line (s, buf, sizeof buf, &len, &err);
      if (!line)
        return cli_fail (&err);
      yajl_val v = yajl_tree_parse (line, NULL, 0);
      if (v && get (v, "listed"))
        {
          yajl_tree_free (v);
          return 0;
        }
      yajl_val idv = v ? get (v, "id") : NULL;
      bool dup = false;
      if (idv && YAJL_IS_INTEGER (idv))
        {
          for (size_t i = 0; i < nseen; i++)
            dup = dup || seen[i] == YAJL_GET_INTEGER (idv);
          if (!dup && nseen < 64)
            seen[nseen++] = YAJL_GET_INTEGER (idv);
        }
      if (v && !dup && get (v, "kind"))
        {
          if (json)
            printf ("%s\n", line);
          else
            print_question (v);
        }
      yajl_tree_free (v);
    }
}

static int
answer (struct asbx_global *g, const char *verb, int argc, char **argv, bool allow)
{
  asbx_err_t err = NULL;
  bool always = false;
  int pos = 1;
  char buf[8192];
  size_t len = 0;
  uint64_t qid;

  for (; pos < argc && argv[pos][0] == '-'; pos++)
    {
      if (allow && strcmp (argv[pos], "--always") == 0)
        always = true;
      else if (strcmp (argv[pos], "--help") == 0 || strcmp (argv[pos], "-h") == 0)
        {
          printf (allow ? "usage: agentsbx approve [--always] CONTAINER_ID QID\nallow the name asked in question QID "
                          "once (this lookup), or --always (added to the container's allowlist)\n"
                        : "usage: agentsbx deny CONTAINER_ID QID\nrefuse the name asked in question QID\n");
          return 0;
        }
      else
        return cli_usage (verb, "unknown option `%s`", argv[pos]);
    }
  if (argc - pos == 3 && allow && strcmp (argv[pos + 2], "--always") == 0)
    always = true, argc--;
  if (argc - pos != 2)
    return cli_usage (verb, "expected: %s CONTAINER_ID QID", verb);
  const char *id = argv[pos];
  if (asbx_id_validate (id, &err) < 0)
    return cli_fail (&err);
  if (parse_u64 (argv[pos + 1], &qid) < 0 || qid == 0)
    return cli_usage (verb, "QID must be a question number (agentsbx approvals %s)", id);
  cleanup_close int s = broker_connect (g, id, &err);
  if (s < 0)
    return cli_fail (&err);
  cleanup_free char *msg = xasprintf ("{\"id\":%llu,\"decision\":\"%s\"}\n", (unsigned long long) qid,
                                      !allow   ? "deny"
                                      : always ? "allow-always"
                                               : "allow-once");
  if (write_all (s, msg, strlen (msg)) < 0)
    {
      asbx_error (&err, errno, "write to the approval broker");
      return cli_fail (&err);
    }
  for (;;)
    {
      cleanup_free char *line = read_line (s, buf, sizeof buf, &len, &err);
      if (!line)
        return cli_fail (&err);
      yajl_val v = yajl_tree_parse (line, NULL, 0);
      yajl_val ok = v ? get (v, "ok") : NULL, idv = v ? get (v, "id") : NULL, e = v ? get (v, "error") : NULL;
      if (!ok || !idv || !YAJL_IS_INTEGER (idv) || (uint64_t) YAJL_GET_INTEGER (idv) != qid)
        {
          yajl_tree_free (v); /* a question streamed to us, not the reply */
          continue;
        }
      if (!YAJL_IS_TRUE (ok))
        asbx_error (&err, 0, "question %llu of `%s`: %s", (unsigned long long) qid, id,
                    e && YAJL_IS_STRING (e) ? YAJL_GET_STRING (e) : "refused by the broker");
      yajl_tree_free (v);
      return err ? cli_fail (&err) : 0;
    }
}

int
cli_approve (struct asbx_global *g, int argc, char **argv)
{
  return answer (g, "approve", argc, argv, true);
}

int
cli_deny (struct asbx_global *g, int argc, char **argv)
{
  return answer (g, "deny", argc, argv, false);
}
