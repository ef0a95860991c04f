/* criu.c - `checkpoint` and `restore` (runc's verbs and flags, issue 15) through the CRIU
 * command line (criu(8), Debian's `criu` package; --criu PATH or `criu` in PATH).
 *
 * What is decided before CRIU is asked to do anything, in this order, each a clear error and
 * nothing left behind (no image directory is created):
 *  1. the container: checkpoint needs a running (or paused) container; restore an unused id and
 *     a readable bundle config;
 *  2. an agent policy: refused. CRIU cannot capture a Landlock domain (no kernel interface reads
 *     one back), nor the policy monitor's state (DNS stub, nftables table, approvals, timers): a
 *     restored process would run outside its policy;
 *  3. the host: `criu check` must pass. Its first error is the reason given, with a diagnosis
 *     for the case known on kernels that map a [vvar_vclock] area next to the vDSO (Linux >= 6.13,
 *     6.18 here), which CRIU 3.17 (Debian 12) cannot parse ("vdso: Unexpected rt vDSO area
 *     bounds"; fixed in CRIU by checkpoint-restore/criu#2539): CRIU cannot even start its
 *     kernel-feature detection there, for any process (runc fails the same way).
 * With CRIU working, this build still refuses (ENOTSUP): dumping and restoring a container's
 * mounts, namespaces and cgroups is not implemented (it could not be exercised on the machines
 * this build is tested on) - refused rather than half done. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "policy/policy.h"
#include "runtime/criu.h"
#include "runtime/state.h"
#include "runtime/vm_supervisor.h"

#define CHECK_OUTPUT_MAX 65536
#define CHECK_TIMEOUT_MS 60000

/* run `criu check`, collecting stdout+stderr; returns the exit status (or -1 with *err when it
 * could not run at all) */
static int
run_check (const char *criu, char **out, asbx_err_t *err)
{
  int p[2];
  if (pipe2 (p, O_CLOEXEC) < 0)
    return asbx_error (err, errno, "pipe");
  pid_t pid = fork ();
  if (pid < 0)
    {
      close (p[0]);
      close (p[1]);
      return asbx_error (err, errno, "fork");
    }
  if (pid == 0)
    {
      int null = open ("/dev/null", O_RDONLY);
      if (null < 0 || dup2 (null, 0) < 0 || dup2 (p[1], 1) < 0 || dup2 (p[1], 2) < 0)
        _exit (126);
      char *argv[] = { (char *) criu, (char *) "check", NULL };
      execvp (criu, argv);
      dprintf (2, "agentsbx-exec-failed %d\n", errno);
      _exit (127);
    }
  close (p[1]);
  char *buf = xmalloc0 (CHECK_OUTPUT_MAX + 1);
  size_t len = 0;
  struct timespec t0;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  for (;;)
    {
      struct pollfd pf = { .fd = p[0], .events = POLLIN };
      int r = poll (&pf, 1, CHECK_TIMEOUT_MS);
      if (r == 0)
        {
          kill (pid, SIGKILL); /* a hang guard only */
          break;
        }
      if (r < 0 && errno == EINTR)
        continue;
      ssize_t n = r < 0 ? -1 : read (p[0], buf + len, CHECK_OUTPUT_MAX - len);
      if (n <= 0)
        break;
      len += (size_t) n;
      if (len == CHECK_OUTPUT_MAX)
        break;
    }
  close (p[0]);
  int st = 0;
  while (waitpid (pid, &st, 0) < 0 && errno == EINTR)
    ;
  *out = buf;
  int e;
  const char *mark = strstr (buf, "agentsbx-exec-failed ");
  if (mark && sscanf (mark, "agentsbx-exec-failed %d", &e) == 1)
    return asbx_error (err, e, "CRIU (`%s`) cannot be run (install Debian's `criu` package or give --criu PATH)", criu);
  return WIFEXITED (st) ? WEXITSTATUS (st) : 128 + WTERMSIG (st);
}

/* the line at s, without its newline (heap) */
static char *
xstrndup_line (const char *s)
{
  size_t n = strcspn (s, "\n");
  char *d = xmalloc0 (n + 1);
  memcpy (d, s, n);
  return d;
}

/* CRIU's first two error messages ("Error (file:line): msg"), skipping the "exited, status=N"
 * of its helper processes, joined by "; "; else its last non-empty line (heap) */
static char *
first_error (const char *out)
{
  char *res = NULL;
  int n = 0;
  if (out == NULL)
    return xstrdup ("(no output)");
  for (const char *e = strstr (out, "Error ("); e && n < 2; e = strstr (e + 1, "Error ("))
    {
      const char *msg = strstr (e, "): ");
      cleanup_free char *line = xstrndup_line (msg ? msg + 3 : e);
      if (strncmp (line, "exited, status", 14) == 0)
        continue;
      char *joined = res ? xasprintf ("%s; %s", res, line) : xstrdup (line);
      free (res);
      res = joined;
      n++;
    }
  if (res)
    return res;
  const char *last = NULL;
  for (const char *l = out; *l; l = strchr (l, '\n') ? strchr (l, '\n') + 1 : l + strlen (l))
    if (*l && *l != '\n')
      last = l;
  return last ? xstrndup_line (last) : xstrdup ("(no output)");
}

/* does our own address space have the mapping named `name` ("[vvar_vclock]")? */
static bool
self_maps_has (const char *name)
{
  cleanup_free char *maps = NULL;
  if (read_file_at (AT_FDCWD, "/proc/self/maps", 1 << 20, &maps, NULL, NULL) < 0)
    return false;
  return strstr (maps, name) != NULL;
}

int
criu_preflight (const char *criu, const char *verb, asbx_err_t *err)
{
  cleanup_free char *out = NULL;
  const char *bin = criu && *criu ? criu : "criu";
  int rc = run_check (bin, &out, err);
  if (rc < 0 || out == NULL)
    return asbx_error_wrap (err, "%s", verb);
  if (rc == 0)
    return 0;
  cleanup_free char *why = first_error (out);
  if (strstr (out, "vDSO area bounds") && self_maps_has ("[vvar_vclock]"))
    return asbx_error (err, ENOTSUP,
                       "%s: CRIU cannot work on this host: `%s check` fails (%s): this kernel maps a [vvar_vclock] "
                       "area next to [vdso] (Linux >= 6.13, commit e93d2521b27f \"x86/vdso: Split virtual clock "
                       "pages into dedicated mapping\"), which this CRIU's vDSO parser does not know, so it cannot "
                       "start its kernel-feature detection for any process (runc's checkpoint fails the same way); "
                       "CRIU handles it since checkpoint-restore/criu#2539 (December 2024)",
                       verb, bin, why);
  return asbx_error (err, ENOTSUP, "%s: CRIU cannot work on this host: `%s check` fails (exit %d): %s", verb, bin, rc,
                     why);
}

static void
spec_freep (struct oci_spec **s)
{
  if (*s)
    oci_spec_free (*s);
}
#define cleanup_spec __attribute__ ((cleanup (spec_freep)))

/* an agent policy cannot be checkpointed (see the top of this file) */
static int
refuse_policy (const char *verb, const char *what, asbx_err_t *err)
{
  return asbx_error (err, ENOTSUP,
                     "%s: %s runs under an agent policy: CRIU cannot capture its Landlock domain or the policy "
                     "monitor's state (DNS stub, nftables table, approvals, limits), so a restored process would run "
                     "outside its policy",
                     verb, what);
}

int
asbx_container_checkpoint (const struct asbx_global *g, const struct asbx_checkpoint_opts *o, asbx_err_t *err)
{
  struct asbx_opened oc = { .rootfd = -1, .dirfd = -1 };
  int ret = -1;

  if (asbx_container_open (g->root, o->id, &oc, err) < 0)
    goto out;
  const enum asbx_status status = oc.has_state ? asbx_state_status (oc.dirfd, &oc.st) : ASBX_STATUS_CREATING;
  if (!asbx_status_allows (status, ASBX_OP_CHECKPOINT))
    {
      asbx_error (err, 0, "checkpoint: container `%s` is %s, not running", o->id, asbx_status_name (status));
      goto out;
    }
  if (vm_supervisor_is_vm (oc.dirfd))
    {
      asbx_error (err, EINVAL, "checkpoint: container `%s` runs in the vm tier (isolation vm): not built there", o->id);
      goto out;
    }
  if (faccessat (oc.dirfd, "policy.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
    {
      refuse_policy ("checkpoint", "the container", err);
      goto out;
    }
  if (criu_preflight (g->criu, "checkpoint", err) < 0)
    goto out;
  asbx_error (err, ENOTSUP,
              "checkpoint: dumping a container with CRIU (%s%s) is not implemented by this build (its mounts, "
              "namespaces and cgroups)",
              o->pre_dump ? "pre-dump" : "dump", o->leave_running ? ", leave running" : "");
out:
  asbx_container_close (&oc);
  return ret;
}

int
asbx_container_restore (const struct asbx_global *g, const struct asbx_restore_opts *o, asbx_err_t *err)
{
  char bundle[PATH_MAX];
  cleanup_free char *config_path = NULL;
  cleanup_spec struct oci_spec *spec = NULL;
  struct asbx_opened oc = { .rootfd = -1, .dirfd = -1 };

  if (asbx_id_validate (o->id, err) < 0)
    return -1;
  asbx_err_t e = NULL;
  int exists = asbx_container_open (g->root, o->id, &oc, &e) == 0;
  asbx_error_free (&e);
  asbx_container_close (&oc);
  if (exists)
    return asbx_error (err, 0, "restore: container with id `%s` already exists", o->id);
  if (realpath (o->bundle ? o->bundle : ".", bundle) == NULL)
    return asbx_error (err, errno, "restore: bundle `%s`", o->bundle ? o->bundle : ".");
  config_path = xasprintf ("%s/config.json", bundle);
  spec = oci_spec_parse_file (config_path, err);
  if (!spec)
    return asbx_error_wrap (err, "restore");
  /* the same sources create would use: flags, host config, annotations */
  struct policy_inputs pin = {
    .profile_flag = g->profile,
    .policy_flag = g->policy_file,
    .config_path = g->config_path,
    .annotations = &spec->annotations,
  };
  struct policy_plan *plan = policy_resolve (&pin, err);
  if (!plan)
    return asbx_error_wrap (err, "restore");
  bool active = plan->active;
  policy_plan_free (plan);
  if (active)
    return refuse_policy ("restore", "the bundle", err);
  if (criu_preflight (g->criu, "restore", err) < 0)
    return -1;
  return asbx_error (err, ENOTSUP,
                     "restore: restoring a container with CRIU from `%s` is not implemented by this build (its "
                     "mounts, namespaces and cgroups)",
                     o->image_path);
}
