/* egress_table.c - the policy's nftables table into a container's network namespace (see the
 * header). One loader for the init and the monitor, so the two can never load different text or
 * check the target differently. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "linux/nft.h"
#include "monitor/egress_table.h"
#include "policy/nft_ruleset.h"

static const char *
mode_name (const struct policy_plan *plan)
{
  return plan->net_mode == POLICY_NET_NONE ? "none" : "filtered";
}

int
egress_table_load (const struct policy_plan *plan, int netns, const struct stat *never, asbx_err_t *err)
{
  cleanup_free char *ruleset = NULL;
  struct stat ns;
  int r;

  if (plan->net_outside)
    return 0; /* a vm-tier guest: the host's table filters the VM's NIC (runtime/vm_net.h) */
  if (policy_nft_ruleset (plan, &ruleset, err) < 0)
    return asbx_error_wrap (err, "network.mode %s: the nftables table", mode_name (plan));
  if (!ruleset)
    return 0;
  if ((netns >= 0 ? fstat (netns, &ns) : stat ("/proc/self/ns/net", &ns)) < 0)
    return asbx_error (err, errno, "network.mode %s: stat the container's network namespace", mode_name (plan));
  if (never && ns.st_dev == never->st_dev && ns.st_ino == never->st_ino)
    return asbx_error (err, EINVAL,
                       "network.mode %s: the target is the runtime's own network namespace; refusing to load the "
                       "nftables table there",
                       mode_name (plan));
  if (netns < 0)
    r = linux_nft_load_close_at_exec (ruleset, err); /* the init: it execs the container's process next */
  else
    {
      struct linux_nft *n = linux_nft_new (netns, err);
      if (!n)
        return asbx_error_wrap (err, "network.mode %s: the nftables table", mode_name (plan));
      r = linux_nft_run (n, ruleset, err);
      linux_nft_free (n);
    }
  if (r < 0)
    return asbx_error_wrap (err, "network.mode %s: load the nftables table into the container's network namespace",
                            mode_name (plan));
  return 0;
}
