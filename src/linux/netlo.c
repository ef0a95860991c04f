/* netlo.c - the loopback device of a network namespace the runtime created.
 *
 * Mechanism: SIOCGIFFLAGS/SIOCSIFFLAGS on "lo" through a datagram socket made in the current
 * network namespace (netdevice(7)); needs CAP_NET_ADMIN there. Source of the behaviour: runc
 * brings `lo` up in every new network namespace (libcontainer's loopback strategy), and engines
 * and programs expect 127.0.0.1 to work in a container without any network. A namespace that
 * was joined (an engine's, a CNI one) is left as its owner set it up: the caller only calls this
 * for a namespace it created. */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "linux/process.h"

int
linux_netns_loopback_up (asbx_err_t *err)
{
  struct ifreq ifr = { 0 };
  cleanup_close int s = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  if (s < 0)
    return asbx_error (err, errno, "linux.namespaces network: socket for the loopback device");
  snprintf (ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (ioctl (s, SIOCGIFFLAGS, &ifr) < 0)
    return asbx_error (err, errno, "linux.namespaces network: read the flags of `lo`");
  if (ifr.ifr_flags & IFF_UP)
    return 0;
  ifr.ifr_flags |= IFF_UP;
  if (ioctl (s, SIOCSIFFLAGS, &ifr) < 0)
    return asbx_error (err, errno, "linux.namespaces network: bring `lo` up");
  return 0;
}
