/* uts.c - hostname and domainname (runtime-spec config.md "Hostname", "Domainname").
 *
 * Mechanism: sethostname(2)/setdomainname(2) in the container's own UTS namespace. Threat
 * model: called in the host UTS namespace they would rename the host, so the caller checks that
 * a new uts namespace exists (spec: "the runtime MUST generate an error" otherwise) before init
 * runs this, inside the namespaces. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "linux/process.h"

int
linux_uts_apply (const struct oci_spec *spec, asbx_err_t *err)
{
  if (spec->hostname && sethostname (spec->hostname, strlen (spec->hostname)) < 0)
    return asbx_error (err, errno, "hostname: sethostname `%s`", spec->hostname);
  if (spec->domainname && setdomainname (spec->domainname, strlen (spec->domainname)) < 0)
    return asbx_error (err, errno, "domainname: setdomainname `%s`", spec->domainname);
  return 0;
}
