/* features.c - the `features` document (runtime-spec features.md): what this build accepts.
 * Every list comes from the table its mechanism uses: mount options from linux/mountopts.c,
 * capabilities from policy/doc.c, seccomp names and flags from linux/seccomp_bpf.c, memory-policy
 * names from linux/mempolicy.c; the io.agentsbx.* annotations from features_host.c's probes (which
 * fork throwaway children). No container, no host state is touched. */
#include <seccomp.h>
#include <stdio.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"
#include "linux/mountopts.h"
#include "linux/process.h"
#include "linux/seccomp_bpf.h"
#include "policy/doc.h"
#include "runtime/features.h"
#include "runtime/features_host.h"

char *
runtime_features_json (asbx_err_t *err)
{
  static const char *const hooks[] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop", NULL
  };
  static const char *const namespaces[] = { "cgroup", "ipc", "mount", "network", "pid", "time", "user", "uts", NULL };
  /* ours: this host's policy capabilities (features_host.h), then the linked libseccomp */
  struct features_host host;
  char scmpver[32];
  const struct scmp_version *sv = seccomp_version ();
  snprintf (scmpver, sizeof scmpver, "%u.%u.%u", sv->major, sv->minor, sv->micro);
  features_host_probe (&host);
  cleanup_free char **ann_keys = xmalloc ((host.n + 1) * sizeof *ann_keys);
  cleanup_free char **ann_values = xmalloc ((host.n + 1) * sizeof *ann_values);
  for (size_t i = 0; i < host.n; i++)
    {
      ann_keys[i] = host.keys[i];
      ann_values[i] = host.values[i];
    }
  ann_keys[host.n] = (char *) "io.github.seccomp.libseccomp.version";
  ann_values[host.n] = scmpver;
  struct oci_map annotations = { .keys = ann_keys, .values = ann_values, .len = host.n + 1 };
  struct oci_features_input in = {
    .oci_version_min = "1.0.0",
    .oci_version_max = "1.3.0",
    .hooks = hooks,
    .mount_options = mount_opts_feature_names (), /* the one option table: linux/mountopts.c */
    .namespaces = namespaces,
    .capabilities = pdoc_caps, /* the one capability table: policy/doc.c */
    .cgroup_v1 = true,
    .cgroup_v2 = true,
#ifdef HAVE_LIBSYSTEMD
    .cgroup_systemd = true, /* linux/cgroup_systemd.c: transient scopes over sd-bus (dlopen) */
#else
    .cgroup_systemd = false,
#endif
    .cgroup_systemd_user = false, /* rootless user.slice / user bus: not built */
    .cgroup_rdma = true,          /* linux/cgroup_rdma.c: rdma.max on v2, rdma.max on the v1 hierarchy */
    .seccomp_enabled = true,
    .seccomp_actions = linux_seccomp_action_names,
    .seccomp_operators = linux_seccomp_operator_names,
    .seccomp_archs = linux_seccomp_arch_names,
    .seccomp_known_flags = linux_seccomp_flag_names,
    .seccomp_supported_flags = linux_seccomp_supported_flags (),
  /* features.md: "support is compiled in", whatever the host runs (linux/apparmor.c, selinux.c) */
#ifdef HAVE_APPARMOR
    .apparmor_enabled = true,
#else
    .apparmor_enabled = false,
#endif
#ifdef HAVE_SELINUX
    .selinux_enabled = true,
#else
    .selinux_enabled = false,
#endif
    .intel_rdt_enabled = false,
    .mount_extensions_idmap = true, /* linux/idmap.c: MOUNT_ATTR_IDMAP, with or without a user namespace */
    .memory_policy_modes = linux_mempolicy_mode_names, /* linux/mempolicy.c: set_mempolicy(2) */
    .memory_policy_flags = linux_mempolicy_flag_names,
    .annotations = &annotations,
  };
  char *json = oci_features_to_json (&in, err);
  features_host_free (&host);
  return json;
}
