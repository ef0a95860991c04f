/* features_host.c - the host's policy capabilities for `agentsbx features` (see the header).
 *
 * Each probe does what the enforcement does, in a child that dies right after: an nftables table
 * loaded in a new network namespace (never the host's), unshare(CLONE_NEWUSER) as an unprivileged
 * uid. A probe the kernel refuses says so with the errno; nothing is inferred from uname. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "linux/audit_netlink.h"
#include "linux/cgroup.h"
#include "linux/landlock_ruleset.h"
#include "linux/nft.h"
#include "monitor/pasta.h"
#include "runtime/features_host.h"
#include "runtime/vm.h"

#define NOBODY 65534

static void
put (struct features_host *h, const char *k, const char *v)
{
  h->keys = xrealloc (h->keys, (h->n + 1) * sizeof *h->keys);
  h->values = xrealloc (h->values, (h->n + 1) * sizeof *h->values);
  h->keys[h->n] = xstrdup (k);
  h->values[h->n] = xstrdup (v);
  h->n++;
}

/* "true", or "false" plus KEY.error = why */
static void
put_bool (struct features_host *h, const char *k, const char *why_not)
{
  put (h, k, why_not ? "false" : "true");
  if (why_not)
    {
      cleanup_free char *ek = xasprintf ("%s.error", k);
      put (h, ek, why_not);
    }
}

/* Run fn in a child; its error text (if any) comes back through a pipe. Returns NULL when fn
 * returned 0, else a heap message. */
static char *
in_child (int (*fn) (char *msg, size_t len))
{
  int p[2];
  char msg[512] = "";

  if (pipe2 (p, O_CLOEXEC) < 0)
    return xasprintf ("pipe: %s", strerror (errno));
  pid_t pid = fork ();
  if (pid < 0)
    {
      int e = errno;
      close (p[0]);
      close (p[1]);
      return xasprintf ("fork: %s", strerror (e));
    }
  if (pid == 0)
    {
      close (p[0]);
      int r = fn (msg, sizeof msg);
      if (r < 0 && write (p[1], msg, strlen (msg)) < 0)
        _exit (2);
      _exit (r < 0 ? 1 : 0);
    }
  close (p[1]);
  size_t len = 0;
  ssize_t n;
  while (len < sizeof msg - 1 && ((n = read (p[0], msg + len, sizeof msg - 1 - len)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0)
      len += (size_t) n;
  msg[len] = '\0';
  close (p[0]);
  int st = 0;
  while (waitpid (pid, &st, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED (st) && WEXITSTATUS (st) == 0)
    return NULL;
  return xstrdup (*msg ? msg : "probe child failed");
}

static int
nft_probe (char *msg, size_t len)
{
  asbx_err_t err = NULL;
  int flags = CLONE_NEWNET | (geteuid () != 0 ? CLONE_NEWUSER : 0);

  if (unshare (flags) < 0)
    {
      snprintf (msg, len, "unshare(%s): %s", geteuid () ? "CLONE_NEWUSER|CLONE_NEWNET" : "CLONE_NEWNET",
                strerror (errno));
      return -1;
    }
  if (linux_nft_load ("add table inet agentsbx_probe\nadd chain inet agentsbx_probe c { type filter hook output "
                      "priority 0; policy accept; }\n",
                      &err)
      < 0)
    {
      snprintf (msg, len, "%s", err->msg);
      asbx_error_free (&err);
      return -1;
    }
  return 0;
}

static void
sysctl_note (char *msg, size_t len, const char *path, const char *forbids)
{
  char buf[32] = "";
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read (fd, buf, sizeof buf - 1) : -1;
  if (n <= 0)
    return;
  buf[n] = '\0';
  buf[strcspn (buf, "\n")] = '\0';
  if (strcmp (buf, forbids) == 0)
    {
      size_t used = strlen (msg);
      snprintf (msg + used, len - used, "; %s is %s", path, buf);
    }
}

static int
userns_probe (char *msg, size_t len)
{
  if (geteuid () == 0
      && (setgroups (0, NULL) < 0 || setresgid (NOBODY, NOBODY, NOBODY) < 0 || setresuid (NOBODY, NOBODY, NOBODY) < 0))
    {
      snprintf (msg, len, "drop to uid %d: %s", NOBODY, strerror (errno));
      return -1;
    }
  if (unshare (CLONE_NEWUSER) == 0)
    return 0;
  snprintf (msg, len, "unshare(CLONE_NEWUSER) as uid %u: %s", (unsigned) geteuid (), strerror (errno));
  sysctl_note (msg, len, "/proc/sys/kernel/unprivileged_userns_clone", "0");
  sysctl_note (msg, len, "/proc/sys/user/max_user_namespaces", "0");
  sysctl_note (msg, len, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1");
  return -1;
}

static const char *
seccomp_notify_missing (void)
{
  unsigned action = SECCOMP_RET_USER_NOTIF;
  if (syscall (SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0)
    return NULL;
  return errno == EOPNOTSUPP ? "SECCOMP_RET_USER_NOTIF not available (Linux >= 5.0)" : strerror (errno);
}

static void
cgroup_probe (struct features_host *h)
{
  enum cgroup_layout l;
  asbx_err_t err = NULL;

  if (cgroup_layout_detect (&l, &err) < 0)
    {
      put (h, "io.agentsbx.cgroup.layout", "none");
      put (h, "io.agentsbx.cgroup.layout.error", err->msg);
      asbx_error_free (&err);
      return;
    }
  put (h, "io.agentsbx.cgroup.layout",
       l == CGROUP_LAYOUT_UNIFIED  ? "unified"
       : l == CGROUP_LAYOUT_HYBRID ? "hybrid"
                                   : "legacy");
  char buf[512] = "";
  if (l == CGROUP_LAYOUT_UNIFIED)
    {
      cleanup_close int fd = open ("/sys/fs/cgroup/cgroup.controllers", O_RDONLY | O_CLOEXEC);
      ssize_t n = fd >= 0 ? read (fd, buf, sizeof buf - 1) : -1;
      buf[n > 0 ? n : 0] = '\0';
      buf[strcspn (buf, "\n")] = '\0';
    }
  else
    {
      /* v1 (and hybrid's v1 half): the controllers the kernel has bound to a hierarchy */
      FILE *f = fopen ("/proc/cgroups", "re");
      char line[128], name[64];
      int hier, num, enabled;
      while (f && fgets (line, sizeof line, f))
        if (sscanf (line, "%63s %d %d %d", name, &hier, &num, &enabled) == 4 && name[0] != '#' && hier > 0 && enabled
            && strlen (buf) + strlen (name) + 2 < sizeof buf)
          {
            strcat (buf, *buf ? " " : "");
            strcat (buf, name);
          }
      if (f)
        (void) fclose (f);
    }
  put (h, "io.agentsbx.cgroup.controllers", buf);
}

void
features_host_probe (struct features_host *h)
{
  asbx_err_t err = NULL;
  char num[32];
  int abi = linux_landlock_abi ();

  *h = (struct features_host){ 0 };
  put (h, "io.agentsbx.version", PACKAGE_VERSION);
  snprintf (num, sizeof num, "%d", abi > 0 ? abi : 0);
  put (h, "io.agentsbx.landlock.abi", num);
  /* the monitor's egress terminates TLS for network.credentials and network.http hosts
   * (src/monitor/tls_relay.c): built in, nothing to probe */
  put (h, "io.agentsbx.egress.tls", "intercept");
  put_bool (h, "io.agentsbx.seccomp.notify", seccomp_notify_missing ());
  cleanup_free char *nft = in_child (nft_probe);
  put_bool (h, "io.agentsbx.nftables", nft);
  if (pasta_available (&err) < 0)
    {
      put_bool (h, "io.agentsbx.pasta", err->msg);
      asbx_error_free (&err);
    }
  else
    put_bool (h, "io.agentsbx.pasta", NULL);
  int audit = linux_audit_enabled (&err);
  if (audit < 0)
    {
      put (h, "io.agentsbx.audit.enabled", "unavailable");
      put (h, "io.agentsbx.audit.enabled.error", err->msg);
      asbx_error_free (&err);
    }
  else
    {
      snprintf (num, sizeof num, "%d", audit);
      put (h, "io.agentsbx.audit.enabled", num);
    }
  put_bool (h, "io.agentsbx.landlock.denials.reported",
            abi < 7      ? "Landlock ABI < 7 has no audit records"
            : audit < 0  ? "kernel audit state unknown (AUDIT_GET refused)"
            : audit == 0 ? "kernel audit is disabled (auditctl -e 1 or auditd)"
                         : NULL);
  cleanup_free char *userns = in_child (userns_probe);
  put_bool (h, "io.agentsbx.userns.unprivileged", userns);
  cgroup_probe (h);
  put (h, "io.agentsbx.checkpoint.enabled", "true");
  /* the isolation tiers (runtime/vm.h): vm needs qemu-system-x86_64 and a cached guest kernel */
  struct vm_host vh;
  bool vm = vm_host_probe (&vh);
  put (h, "io.agentsbx.isolation", vm ? "container,vm" : "container");
  if (vm)
    put (h, "io.agentsbx.isolation.vm.accel", vh.kvm ? "kvm" : "tcg");
  else
    put (h, "io.agentsbx.isolation.vm.error",
         !vh.qemu ? "qemu-system-x86_64 is not in PATH"
                  : "no guest kernel of Linux 6.8 or newer in " VM_DEFAULT_CACHE
                    " (contrib/vm/fetch-kernel.sh) or $AGENTSBX_VM_CACHE");
  vm_host_free (&vh);
}

void
features_host_free (struct features_host *h)
{
  for (size_t i = 0; i < h->n; i++)
    {
      free (h->keys[i]);
      free (h->values[i]);
    }
  free (h->keys);
  free (h->values);
  *h = (struct features_host){ 0 };
}
