/* test_ocispec.c - unit tests of libocispec: config.json / process.json parsing (every field,
 * every error class with its exact message), state and features serialisation.
 * Pure code, no root. Fixtures under TEST_DATA_DIR/ocispec. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "libocispec/oci_spec.h"

#ifndef TEST_DATA_DIR
#define TEST_DATA_DIR "tests/unit/data"
#endif

static char *
fixture_path (const char *name)
{
  return xasprintf ("%s/ocispec/%s", TEST_DATA_DIR, name);
}

static struct oci_spec *
parse_ok (const char *json)
{
  asbx_err_t err = NULL;
  struct oci_spec *s = oci_spec_parse (json, strlen (json), NULL, &err);
  if (s == NULL)
    fail_msg ("unexpected error: %s", err->msg);
  assert_null (err);
  return s;
}

/* Parse must fail with exactly `msg` (and errnum EINVAL). */
static void
expect_error (const char *json, const char *msg)
{
  asbx_err_t err = NULL;
  struct oci_spec *s = oci_spec_parse (json, strlen (json), "config.json", &err);
  if (s != NULL)
    {
      oci_spec_free (s);
      fail_msg ("expected error \"%s\" for %s", msg, json);
    }
  assert_non_null (err);
  if (strcmp (err->msg, msg) != 0)
    fail_msg ("for %s\n  expected: %s\n  got:      %s", json, msg, err->msg);
  assert_int_equal (err->errnum, EINVAL);
  assert_null (strchr (err->msg, '\n'));
  asbx_error_free (&err);
}

/* A minimal config with `body` appended inside the top object. */
static char *
cfg (const char *body)
{
  return xasprintf ("{\"ociVersion\":\"1.2.0\"%s%s}", *body ? "," : "", body);
}

#define EXPECT(body, msg)                                                                                              \
  do                                                                                                                   \
    {                                                                                                                  \
      cleanup_free char *_j = cfg (body);                                                                              \
      expect_error (_j, msg);                                                                                          \
    }                                                                                                                  \
  while (0)

static void
test_runc_spec (void **state)
{
  (void) state;
  cleanup_free char *path = fixture_path ("runc-spec.json");
  asbx_err_t err = NULL;
  struct oci_spec *s = oci_spec_parse_file (path, &err);
  assert_non_null (s);
  assert_string_equal (s->oci_version, "1.0.2-dev");
  assert_non_null (s->process);
  assert_true (s->process->terminal);
  assert_true (s->process->has_user);
  assert_int_equal (s->process->user.uid, 0);
  assert_int_equal (s->process->args_len, 1);
  assert_string_equal (s->process->args[0], "sh");
  assert_null (s->process->args[1]);
  assert_int_equal (s->process->env_len, 2);
  assert_string_equal (s->process->cwd, "/");
  assert_non_null (s->process->capabilities);
  assert_true (s->process->capabilities->has_bounding);
  assert_false (s->process->capabilities->has_inheritable);
  assert_int_equal (s->process->capabilities->bounding_len, 3);
  assert_string_equal (s->process->capabilities->ambient[2], "CAP_NET_BIND_SERVICE");
  assert_int_equal (s->process->rlimits_len, 1);
  assert_string_equal (s->process->rlimits[0].type, "RLIMIT_NOFILE");
  assert_int_equal (s->process->rlimits[0].hard, 1024);
  assert_true (s->process->no_new_privileges);
  assert_string_equal (s->root->path, "rootfs");
  assert_true (s->root->readonly);
  assert_string_equal (s->hostname, "runc");
  assert_int_equal (s->mounts_len, 7);
  assert_string_equal (s->mounts[1].destination, "/dev");
  assert_int_equal (s->mounts[1].options_len, 4);
  assert_string_equal (s->mounts[6].type, "cgroup");
  assert_non_null (s->linux_);
  assert_int_equal (s->linux_->namespaces_len, 5);
  assert_string_equal (s->linux_->namespaces[4].type, "mount");
  assert_null (s->linux_->namespaces[4].path);
  assert_int_equal (s->linux_->resources->devices_len, 1);
  assert_false (s->linux_->resources->devices[0].allow);
  assert_false (s->linux_->resources->devices[0].has_major);
  assert_int_equal (s->linux_->resources->devices[0].major, -1);
  assert_string_equal (s->linux_->resources->devices[0].access, "rwm");
  assert_int_equal (s->linux_->masked_paths_len, 10);
  assert_int_equal (s->linux_->readonly_paths_len, 5);
  assert_null (s->hooks);
  assert_int_equal (s->annotations.len, 0);
  oci_spec_free (s);

  path = (free (path), fixture_path ("runc-spec-rootless.json"));
  s = oci_spec_parse_file (path, &err);
  assert_non_null (s);
  assert_int_equal (s->linux_->uid_mappings_len, 1);
  assert_int_equal (s->linux_->uid_mappings[0].size, 1);
  oci_spec_free (s);
}

static void
check_full_process (const struct oci_process *p)
{
  assert_true (p->has_console_size);
  assert_int_equal (p->console_height, 25);
  assert_int_equal (p->console_width, 80);
  assert_int_equal (p->user.uid, 1000);
  assert_int_equal (p->user.gid, 1001);
  assert_true (p->user.has_umask);
  assert_int_equal (p->user.umask, 18);
  assert_int_equal (p->user.additional_gids_len, 3);
  assert_int_equal (p->user.additional_gids[2], UINT32_MAX);
  assert_string_equal (p->user.username, "agent");
  assert_string_equal (p->command_line, "sh -c echo");
  assert_string_equal (p->cwd, "/work");
  assert_true (p->capabilities->has_inheritable);
  assert_int_equal (p->capabilities->inheritable_len, 0);
  assert_non_null (p->capabilities->inheritable);
  assert_null (p->capabilities->inheritable[0]);
  assert_int_equal (p->rlimits_len, 3);
  assert_true (p->rlimits[2].soft == UINT64_MAX);
  assert_true (p->rlimits[2].hard == UINT64_MAX);
  assert_string_equal (p->apparmor_profile, "agent-profile");
  assert_true (p->has_oom_score_adj);
  assert_int_equal (p->oom_score_adj, -998);
  assert_string_equal (p->scheduler->policy, "SCHED_DEADLINE");
  assert_int_equal (p->scheduler->nice, -5);
  assert_int_equal (p->scheduler->priority, 10);
  assert_string_equal (p->scheduler->flags[0], "SCHED_FLAG_RESET_ON_FORK");
  assert_true (p->scheduler->has_runtime && p->scheduler->has_deadline && p->scheduler->has_period);
  assert_int_equal (p->scheduler->period, 300000);
  assert_string_equal (p->selinux_label, "system_u:system_r:container_t:s0");
  assert_string_equal (p->io_priority->class_, "IOPRIO_CLASS_BE");
  assert_int_equal (p->io_priority->priority, 4);
  assert_string_equal (p->exec_cpu_affinity->initial, "0-1");
  assert_string_equal (p->exec_cpu_affinity->final, "1");
}

static void
check_full_resources (const struct oci_resources *r)
{
  assert_int_equal (r->devices_len, 2);
  assert_true (r->devices[1].allow);
  assert_string_equal (r->devices[1].type, "c");
  assert_int_equal (r->devices[1].major, 10);
  assert_int_equal (r->devices[1].minor, 229);
  assert_true (r->memory->has_limit && r->memory->has_swap && r->memory->has_swappiness);
  assert_int_equal (r->memory->limit, 536870912);
  assert_int_equal (r->memory->swap, -1);
  assert_true (r->memory->has_disable_oom_killer && !r->memory->disable_oom_killer);
  assert_true (r->memory->use_hierarchy && r->memory->check_before_update);
  assert_int_equal (r->cpu->shares, 1024);
  assert_int_equal (r->cpu->quota, 100000);
  assert_int_equal (r->cpu->burst, 1000);
  assert_int_equal (r->cpu->realtime_runtime, 950000);
  assert_string_equal (r->cpu->cpus, "0-1");
  assert_true (r->cpu->has_idle);
  assert_int_equal (r->block_io->weight, 500);
  assert_int_equal (r->block_io->leaf_weight, 300);
  assert_int_equal (r->block_io->weight_device_len, 2);
  assert_false (r->block_io->weight_device[1].has_weight);
  assert_int_equal (r->block_io->throttle_write_iops_device[0].rate, 900);
  assert_int_equal (r->block_io->throttle_read_bps_device[0].rate, 600);
  assert_string_equal (r->hugepage_limits[0].page_size, "2MB");
  assert_int_equal (r->network->class_id, 1048577);
  assert_string_equal (r->network->priorities[0].name, "eth0");
  assert_true (r->has_pids);
  assert_int_equal (r->pids_limit, 32771);
  assert_int_equal (r->rdma_len, 1);
  assert_string_equal (r->rdma[0].device, "mlx5_1");
  assert_int_equal (r->rdma[0].hca_objects, 10000);
  assert_string_equal (oci_map_get (&r->unified, "io.max"), "8:0 rbps=1024");
}

static void
check_full_linux (const struct oci_linux *l)
{
  assert_int_equal (l->namespaces_len, 8);
  assert_string_equal (l->namespaces[1].path, "/proc/1/ns/net");
  assert_int_equal (l->uid_mappings[0].host_id, 1000);
  assert_int_equal (l->gid_mappings[0].size, 32000);
  assert_true (l->has_time_offsets_monotonic && l->has_time_offsets_boottime);
  assert_int_equal (l->time_offsets_monotonic.secs, -86400);
  assert_int_equal (l->time_offsets_monotonic.nanosecs, 500);
  assert_int_equal (l->devices_len, 2);
  assert_int_equal (l->devices[0].file_mode, 438);
  assert_false (l->devices[1].has_major);
  assert_string_equal (l->cgroups_path, "/agents/a1");
  check_full_resources (l->resources);
  assert_string_equal (l->rootfs_propagation, "rslave");
  assert_string_equal (l->seccomp->default_action, "SCMP_ACT_ERRNO");
  assert_int_equal (l->seccomp->default_errno_ret, 1);
  assert_int_equal (l->seccomp->architectures_len, 2);
  assert_string_equal (l->seccomp->listener_path, "/run/seccomp-agent.sock");
  assert_int_equal (l->seccomp->syscalls_len, 3);
  assert_true (l->seccomp->syscalls[1].args[1].value == UINT64_MAX);
  assert_true (l->seccomp->syscalls[1].args[1].has_value_two);
  assert_false (l->seccomp->syscalls[1].args[0].has_value_two);
  assert_int_equal (l->seccomp->syscalls[2].errno_ret, 38);
  assert_string_equal (oci_map_get (&l->sysctl, "net.ipv4.ip_forward"), "1");
  assert_null (oci_map_get (&l->sysctl, "net.ipv4.nope"));
  assert_int_equal (l->masked_paths_len, 2);
  assert_string_equal (l->mount_label, "system_u:object_r:container_file_t:s0");
  assert_string_equal (l->intel_rdt->clos_id, "guaranteed");
  assert_true (l->intel_rdt->has_enable_cmt && l->intel_rdt->enable_cmt);
  assert_string_equal (l->personality->domain, "LINUX32");
  assert_int_equal (l->net_devices_len, 2);
  assert_string_equal (l->net_devices[0].host_name, "eth1");
  assert_string_equal (l->net_devices[0].name, "ceth1");
  assert_null (l->net_devices[1].name);
}

static void
test_full (void **state)
{
  (void) state;
  cleanup_free char *path = fixture_path ("full.json");
  asbx_err_t err = NULL;
  struct oci_spec *s = oci_spec_parse_file (path, &err);
  if (s == NULL)
    fail_msg ("%s", err->msg);
  assert_string_equal (s->domainname, "example.org");
  check_full_process (s->process);
  assert_int_equal (s->mounts_len, 2);
  assert_int_equal (s->mounts[1].uid_mappings[0].host_id, 100000);
  assert_int_equal (s->mounts[1].gid_mappings[0].host_id, 200000);
  assert_int_equal (s->hooks->prestart_len, 1);
  assert_true (s->hooks->prestart[0].has_timeout);
  assert_int_equal (s->hooks->prestart[0].timeout, 5);
  assert_string_equal (s->hooks->prestart[0].env[0], "X=1");
  assert_int_equal (s->hooks->poststart_len, 2);
  assert_string_equal (s->hooks->start_container[0].path, "/usr/bin/sc");
  assert_string_equal (s->hooks->create_runtime[0].path, "/usr/bin/cr");
  assert_string_equal (s->hooks->create_container[0].path, "/usr/bin/cc");
  assert_string_equal (s->hooks->poststop[0].path, "/usr/bin/pst");
  assert_int_equal (s->annotations.len, 2);
  assert_string_equal (s->annotations.keys[0], "io.agentsbx.profile");
  assert_string_equal (oci_map_get (&s->annotations, "com.example.key"), "value");
  check_full_linux (s->linux_);
  oci_spec_free (s);
}

static void
test_process_parse (void **state)
{
  (void) state;
  cleanup_free char *path = fixture_path ("process.json");
  cleanup_free char *buf = NULL;
  size_t len;
  asbx_err_t err = NULL;
  struct oci_process *p;

  assert_int_equal (read_file_at (AT_FDCWD, path, 1 << 20, &buf, &len, &err), 0);
  p = oci_process_parse (buf, len, "process.json", &err);
  assert_non_null (p);
  assert_int_equal (p->args_len, 2);
  assert_string_equal (p->args[1], "-l");
  assert_true (p->capabilities->has_bounding);
  oci_process_free (p);

  p = oci_process_parse ("{\"cwd\":\"x\"}", strlen ("{\"cwd\":\"x\"}"), "p.json", &err);
  assert_null (p);
  assert_string_equal (err->msg, "p.json: cwd: \"x\" is not an absolute path");
  asbx_error_free (&err);
  p = oci_process_parse ("{\"cwd\":\"/\",\"user\":{\"uid\":1}}", strlen ("{\"cwd\":\"/\",\"user\":{\"uid\":1}}"), NULL,
                         &err);
  assert_null (p);
  assert_string_equal (err->msg, "process.json: user.gid: required field missing");
  asbx_error_free (&err);
  oci_process_free (NULL);
}

static void
test_types (void **state)
{
  (void) state;
  EXPECT ("\"process\":{\"cwd\":\"/\",\"rlimits\":[{\"type\":\"A\",\"soft\":1,\"hard\":1},"
          "{\"type\":\"B\",\"soft\":1,\"hard\":1},{\"type\":\"C\",\"soft\":1,\"hard\":\"x\"}]}",
          "config.json: process.rlimits[2].hard: expected unsigned integer");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"rlimits\":[{\"type\":\"A\",\"soft\":-1,\"hard\":1}]}",
          "config.json: process.rlimits[0].soft: expected unsigned integer");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"rlimits\":[{\"type\":\"A\",\"soft\":1.5,\"hard\":1}]}",
          "config.json: process.rlimits[0].soft: expected unsigned integer");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"rlimits\":[{\"type\":\"A\",\"soft\":1e3,\"hard\":1}]}",
          "config.json: process.rlimits[0].soft: expected unsigned integer");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"rlimits\":[{\"type\":\"A\",\"soft\":18446744073709551616,\"hard\":1}]}",
          "config.json: process.rlimits[0].soft: 18446744073709551616 out of range (0 to 18446744073709551615)");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"user\":{\"uid\":4294967296,\"gid\":0}}",
          "config.json: process.user.uid: 4294967296 out of range (0 to 4294967295)");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"user\":{\"uid\":-1,\"gid\":0}}",
          "config.json: process.user.uid: expected unsigned integer");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"user\":{\"uid\":0,\"gid\":0,\"additionalGids\":[1,-2]}}",
          "config.json: process.user.additionalGids[1]: expected unsigned integer");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"oomScoreAdj\":2147483648}",
          "config.json: process.oomScoreAdj: 2147483648 out of range (-2147483648 to 2147483647)");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"oomScoreAdj\":\"1\"}", "config.json: process.oomScoreAdj: expected integer");
  EXPECT ("\"linux\":{\"resources\":{\"memory\":{\"limit\":-9223372036854775809}}}",
          "config.json: linux.resources.memory.limit: -9223372036854775809 out of range (-9223372036854775808 to "
          "9223372036854775807)");
  EXPECT ("\"linux\":{\"resources\":{\"blockIO\":{\"weight\":65536}}}",
          "config.json: linux.resources.blockIO.weight: 65536 out of range (0 to 65535)");
  EXPECT ("\"linux\":{\"resources\":{\"memory\":{\"limit\":12345678901234567890123456789012345678901234567890}}}",
          "config.json: linux.resources.memory.limit: 1234567890123456789012345678901234567890... out of range "
          "(-9223372036854775808 to 9223372036854775807)");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"terminal\":1}", "config.json: process.terminal: expected boolean");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"args\":[\"a\",1]}", "config.json: process.args[1]: expected string");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"args\":[\"a\",null]}", "config.json: process.args[1]: expected string");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"args\":\"sh\"}", "config.json: process.args: expected array");
  EXPECT ("\"hostname\":5", "config.json: hostname: expected string");
  EXPECT ("\"mounts\":{}", "config.json: mounts: expected array");
  EXPECT ("\"mounts\":[\"/proc\"]", "config.json: mounts[0]: expected object");
  EXPECT ("\"process\":[]", "config.json: process: expected object");
  EXPECT ("\"annotations\":{\"io.x\":1}", "config.json: annotations[\"io.x\"]: expected string");
  EXPECT ("\"annotations\":{\"a\\\"b\":true}", "config.json: annotations[\"a\\\"b\"]: expected string");
  EXPECT ("\"linux\":{\"sysctl\":{\"net.x\":1}}", "config.json: linux.sysctl[\"net.x\"]: expected string");
  EXPECT ("\"linux\":{\"rdma\":{}, \"resources\":{\"rdma\":{\"mlx\":{\"hcaHandles\":-1}}}}",
          "config.json: linux.resources.rdma.mlx.hcaHandles: expected unsigned integer");
  EXPECT (
      "\"linux\":{\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
      "\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\",\"valueTwo\":-1}]}]}}",
      "config.json: linux.seccomp.syscalls[0].args[0].valueTwo: expected unsigned integer");
}

static void
test_required_and_enums (void **state)
{
  (void) state;
  expect_error ("{}", "config.json: ociVersion: required field missing");
  expect_error ("{\"ociVersion\":null}", "config.json: ociVersion: required field missing");
  EXPECT ("\"process\":{}", "config.json: process.cwd: required field missing");
  EXPECT ("\"process\":{\"cwd\":\"work\"}", "config.json: process.cwd: \"work\" is not an absolute path");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"user\":{\"uid\":0}}", "config.json: process.user.gid: required field missing");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"rlimits\":[{\"type\":\"A\",\"soft\":1,\"hard\":null}]}",
          "config.json: process.rlimits[0].hard: required field missing");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"consoleSize\":{\"height\":1}}",
          "config.json: process.consoleSize.width: required field missing");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"scheduler\":{\"nice\":1}}",
          "config.json: process.scheduler.policy: required field missing");
  EXPECT ("\"root\":{}", "config.json: root.path: required field missing");
  EXPECT ("\"mounts\":[{\"destination\":\"/a\"},{\"type\":\"tmpfs\"}]",
          "config.json: mounts[1].destination: required field missing");
  EXPECT ("\"hooks\":{\"prestart\":[{\"args\":[]}]}", "config.json: hooks.prestart[0].path: required field missing");
  EXPECT ("\"hooks\":{\"poststart\":[{\"path\":\"hook\"}]}",
          "config.json: hooks.poststart[0].path: \"hook\" is not an absolute path");
  EXPECT ("\"hooks\":{\"poststop\":[{\"path\":\"/h\",\"timeout\":0}]}",
          "config.json: hooks.poststop[0].timeout: must be greater than zero");
  EXPECT ("\"linux\":{\"namespaces\":[{\"type\":\"foo\"}]}",
          "config.json: linux.namespaces[0].type: unknown namespace type \"foo\" (pid network mount ipc uts user "
          "cgroup time)");
  EXPECT ("\"linux\":{\"namespaces\":[{\"path\":\"/x\"}]}",
          "config.json: linux.namespaces[0].type: required field missing");
  EXPECT ("\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"mount\"},{\"type\":\"pid\",\"path\":\"/p\"}]}",
          "config.json: linux.namespaces[2].type: duplicate namespace \"pid\"");
  EXPECT ("\"linux\":{\"devices\":[{\"type\":\"x\",\"path\":\"/dev/x\"}]}",
          "config.json: linux.devices[0].type: unknown device type \"x\" (c b u p)");
  EXPECT ("\"linux\":{\"devices\":[{\"type\":\"c\",\"path\":\"/dev/x\",\"major\":1}]}",
          "config.json: linux.devices[0].minor: required field missing");
  EXPECT ("\"linux\":{\"devices\":[{\"type\":\"c\",\"major\":1,\"minor\":3}]}",
          "config.json: linux.devices[0].path: required field missing");
  EXPECT ("\"linux\":{\"rootfsPropagation\":\"weird\"}",
          "config.json: linux.rootfsPropagation: unknown propagation \"weird\" (shared slave private unbindable)");
  EXPECT ("\"linux\":{\"resources\":{\"devices\":[{\"allow\":true,\"access\":\"rwx\"}]}}",
          "config.json: linux.resources.devices[0].access: \"rwx\" is not a combination of r, w and m");
  EXPECT ("\"linux\":{\"resources\":{\"devices\":[{\"allow\":true,\"type\":\"u\"}]}}",
          "config.json: linux.resources.devices[0].type: unknown device type \"u\" (a c b)");
  EXPECT ("\"linux\":{\"resources\":{\"devices\":[{\"access\":\"r\"}]}}",
          "config.json: linux.resources.devices[0].allow: required field missing");
  EXPECT ("\"linux\":{\"resources\":{\"pids\":{}}}", "config.json: linux.resources.pids.limit: required field missing");
  EXPECT ("\"linux\":{\"timeOffsets\":{\"realtime\":{\"secs\":1}}}",
          "config.json: linux.timeOffsets.realtime: unsupported clock (monotonic, boottime)");
  EXPECT ("\"linux\":{\"uidMappings\":[{\"containerID\":0,\"hostID\":1}]}",
          "config.json: linux.uidMappings[0].size: required field missing");
  EXPECT ("\"linux\":{\"seccomp\":{}}", "config.json: linux.seccomp.defaultAction: required field missing");
  EXPECT ("\"linux\":{\"seccomp\":{\"defaultAction\":\"A\",\"syscalls\":[{\"names\":[\"x\"]}]}}",
          "config.json: linux.seccomp.syscalls[0].action: required field missing");

  /* every propagation runc accepts */
  const char *props[] = { "private", "rprivate", "shared", "rshared", "slave", "rslave", "unbindable", "runbindable" };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (props); i++)
    {
      cleanup_free char *body = xasprintf ("\"linux\":{\"rootfsPropagation\":\"%s\"}", props[i]);
      cleanup_free char *j = cfg (body);
      oci_spec_free (parse_ok (j));
    }
}

static void
test_version (void **state)
{
  (void) state;
  const char *good[] = { "1.0.0",  "1.0.2-dev", "1.1.0+dev",  "1.0.0-rc5", "1.2.0",
                         "1.2.99", "1.3.0",     "1.4.0-rc.1", "1.99.7",    "1.0.1-rc.1+build.5" };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (good); i++)
    {
      cleanup_free char *j = xasprintf ("{\"ociVersion\":\"%s\"}", good[i]);
      struct oci_spec *s = parse_ok (j);
      assert_string_equal (s->oci_version, good[i]);
      oci_spec_free (s);
    }
  expect_error ("{\"ociVersion\":\"2.0.0\"}", "config.json: ociVersion: 2.0.0 not supported (major version 1: 1.y.z)");
  expect_error ("{\"ociVersion\":\"0.6.0\"}", "config.json: ociVersion: 0.6.0 not supported (major version 1: 1.y.z)");
  expect_error ("{\"ociVersion\":\"1.0\"}", "config.json: ociVersion: \"1.0\" is not a version (1.y.z)");
  expect_error ("{\"ociVersion\":\"1.0.0-\"}", "config.json: ociVersion: \"1.0.0-\" is not a version (1.y.z)");
  expect_error ("{\"ociVersion\":\"1.0.0 \"}", "config.json: ociVersion: \"1.0.0 \" is not a version (1.y.z)");
  expect_error ("{\"ociVersion\":\"\"}", "config.json: ociVersion: \"\" is not a version (1.y.z)");
  expect_error ("{\"ociVersion\":1.2}", "config.json: ociVersion: expected string");
}

static void
test_nulls (void **state)
{
  (void) state;
  cleanup_free char *j = cfg ("\"process\":null,\"root\":null,\"hostname\":null,\"mounts\":null,\"hooks\":null,"
                              "\"annotations\":null,\"linux\":{\"sysctl\":null,\"resources\":{\"memory\":{\"limit\":"
                              "null,\"swap\":-1}},\"namespaces\":null,\"seccomp\":null}");
  struct oci_spec *s = parse_ok (j);
  assert_null (s->process);
  assert_null (s->root);
  assert_null (s->hostname);
  assert_null (s->mounts);
  assert_int_equal (s->mounts_len, 0);
  assert_null (s->hooks);
  assert_int_equal (s->annotations.len, 0);
  assert_non_null (s->linux_);
  assert_int_equal (s->linux_->sysctl.len, 0);
  assert_false (s->linux_->resources->memory->has_limit);
  assert_true (s->linux_->resources->memory->has_swap);
  assert_null (s->linux_->seccomp);
  oci_spec_free (s);

  /* empty containers are present, not absent */
  free (j);
  j = cfg ("\"mounts\":[],\"process\":{\"cwd\":\"/\",\"args\":[],\"capabilities\":{\"bounding\":[]}}");
  s = parse_ok (j);
  assert_int_equal (s->mounts_len, 0);
  assert_int_equal (s->process->args_len, 0);
  assert_non_null (s->process->args);
  assert_true (s->process->capabilities->has_bounding);
  assert_false (s->process->capabilities->has_effective);
  assert_false (s->process->has_user);
  oci_spec_free (s);
}

static void
test_duplicates (void **state)
{
  (void) state;
  EXPECT ("\"linux\":{\"sysctl\":{\"net.ipv4.ip_forward\":\"1\",\"kernel.x\":\"2\",\"net.ipv4.ip_forward\":\"0\"}}",
          "config.json: linux.sysctl: duplicate key \"net.ipv4.ip_forward\"");
  expect_error ("{\"ociVersion\":\"1.2.0\",\"ociVersion\":\"1.0.0\"}", "config.json: duplicate key \"ociVersion\"");
  EXPECT ("\"unknown\":[1,{\"a\":1,\"a\":2}]", "config.json: unknown[1]: duplicate key \"a\"");
  EXPECT ("\"process\":{\"cwd\":\"/\",\"cwd\":\"/tmp\"}", "config.json: process: duplicate key \"cwd\"");

  /* a large object takes the sorted path */
  char *body = xstrdup ("\"annotations\":{");
  for (int i = 0; i < 200; i++)
    {
      char *n = xasprintf ("%s\"k%d\":\"v\",", body, i);
      free (body);
      body = n;
    }
  char *n = xasprintf ("%s\"k17\":\"again\"}", body);
  free (body);
  cleanup_free char *j = cfg (n);
  free (n);
  expect_error (j, "config.json: annotations: duplicate key \"k17\"");
}

static char *
nested (size_t depth)
{
  /* {"ociVersion":"1.2.0","x":[[...]]} : the top object is level 1 */
  size_t arrays = depth - 1;
  char *s = xmalloc (64 + 2 * arrays);
  size_t o = (size_t) sprintf (s, "{\"ociVersion\":\"1.2.0\",\"x\":");
  for (size_t i = 0; i < arrays; i++)
    s[o++] = '[';
  for (size_t i = 0; i < arrays; i++)
    s[o++] = ']';
  strcpy (s + o, "}");
  return s;
}

static void
test_depth (void **state)
{
  (void) state;
  cleanup_free char *ok = nested (64);
  oci_spec_free (parse_ok (ok));
  cleanup_free char *bad = nested (65);
  expect_error (bad, "config.json: invalid JSON at line 1, column 90: nesting deeper than 64 levels");
  cleanup_free char *huge = nested (1000000);
  asbx_err_t err = NULL;
  assert_null (oci_spec_parse (huge, strlen (huge), NULL, &err));
  assert_non_null (strstr (err->msg, "nesting deeper than 64 levels"));
  asbx_error_free (&err);
  /* brackets inside strings do not count, escaped quotes do not end strings */
  cleanup_free char *str = cfg (
      "\"x\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"[[\"");
  oci_spec_free (parse_ok (str));
}

static void
test_malformed (void **state)
{
  (void) state;
  expect_error ("", "config.json: empty document");
  expect_error (" \n\t", "config.json: empty document");
  expect_error ("[]", "config.json: expected a JSON object at top level");
  expect_error ("\"x\"", "config.json: expected a JSON object at top level");
  expect_error ("{\"ociVersion\":", "config.json: invalid JSON at line 1, column 15: parse error: premature EOF");
  expect_error ("{\"ociVersion\":\"1.2.0\"} {}",
                "config.json: invalid JSON at line 1, column 24: parse error: trailing garbage");
  expect_error ("{\n \"a\" 1}", "config.json: invalid JSON at line 2, column 6: parse error: object key and value "
                                "must be separated by a colon (':')");
  expect_error ("{\"ociVersion\":\"1.2.0\",\"x\":\"\xff\"}",
                "config.json: invalid JSON at line 1, column 28: lexical error: invalid bytes in UTF8 string.");
  expect_error ("{\"ociVersion\":\"1.2.0\" /* c */}",
                "config.json: invalid JSON at line 1, column 23: comments are not allowed");
  expect_error ("{\"ociVersion\":\"1.2.0\",\"x\":\"a\\u0000b\"}",
                "config.json: invalid JSON at line 1, column 29: \\u0000 in a string");
  expect_error ("{'a':1}", "config.json: invalid JSON at line 1, column 2: lexical error: invalid char in json text.");

  /* an escaped backslash followed by "u0000" is plain text, not a NUL */
  cleanup_free char *bs = cfg ("\"hostname\":\"a\\\\u0000\"");
  struct oci_spec *s = parse_ok (bs);
  assert_string_equal (s->hostname, "a\\u0000");
  oci_spec_free (s);

  /* a raw NUL inside the given length */
  asbx_err_t err = NULL;
  assert_null (oci_spec_parse ("{\"a\":1}\0{}", 10, "c.json", &err));
  assert_string_equal (err->msg, "c.json: invalid JSON at line 1, column 8: NUL byte");
  asbx_error_free (&err);
  /* NULL input */
  assert_null (oci_spec_parse (NULL, 0, "c.json", &err));
  assert_string_equal (err->msg, "c.json: empty document");
  asbx_error_free (&err);
}

/* Every strict prefix of a valid document fails cleanly; the whole one parses. */
static void
test_truncated (void **state)
{
  (void) state;
  cleanup_free char *path = fixture_path ("full.json");
  cleanup_free char *buf = NULL;
  size_t len;
  asbx_err_t err = NULL;

  assert_int_equal (read_file_at (AT_FDCWD, path, 1 << 20, &buf, &len, &err), 0);
  for (size_t i = 0; i < len; i++)
    {
      /* stop before the closing brace's trailing whitespace: those prefixes are complete */
      if (buf[len - 1] == '\n' && i == len - 1)
        break;
      struct oci_spec *s = oci_spec_parse (buf, i, NULL, &err);
      if (s)
        fail_msg ("prefix of %zu bytes parsed", i);
      assert_non_null (err);
      assert_null (strchr (err->msg, '\n'));
      asbx_error_free (&err);
    }
  struct oci_spec *s = oci_spec_parse (buf, len, NULL, &err);
  assert_non_null (s);
  oci_spec_free (s);
}

static void
test_file_errors (void **state)
{
  (void) state;
  asbx_err_t err = NULL;
  char tmpl[] = "/tmp/ocispec-test-XXXXXX";
  int fd;

  assert_null (oci_spec_parse_file ("/nonexistent/config.json", &err));
  assert_int_equal (err->errnum, ENOENT);
  assert_string_equal (err->msg, "open `/nonexistent/config.json`: No such file or directory");
  asbx_error_free (&err);
  assert_null (oci_spec_parse_file ("/tmp", &err));
  assert_string_equal (err->msg, "`/tmp` is not a regular file: Invalid argument");
  asbx_error_free (&err);

  fd = mkstemp (tmpl);
  assert_true (fd >= 0);
  assert_int_equal (ftruncate (fd, 16 * 1024 * 1024 + 1), 0);
  close (fd);
  assert_null (oci_spec_parse_file (tmpl, &err));
  assert_non_null (strstr (err->msg, "larger than 16 MiB"));
  asbx_error_free (&err);
  unlink (tmpl);

  strcpy (tmpl, "/tmp/ocispec-test-XXXXXX");
  fd = mkstemp (tmpl);
  assert_true (fd >= 0);
  assert_int_equal (write_all (fd, "{\"ociVersion\":\"9.0.0\"}", 22), 0);
  close (fd);
  assert_null (oci_spec_parse_file (tmpl, &err));
  cleanup_free char *want = xasprintf ("%s: ociVersion: 9.0.0 not supported (major version 1: 1.y.z)", tmpl);
  assert_string_equal (err->msg, want);
  asbx_error_free (&err);
  unlink (tmpl);
}

static void
test_map_get (void **state)
{
  (void) state;
  assert_null (oci_map_get (NULL, "a"));
  struct oci_map empty = { 0 };
  assert_null (oci_map_get (&empty, "a"));
}

static void
test_state_json (void **state)
{
  (void) state;
  asbx_err_t err = NULL;
  char *k[] = { "io.x", "b" }, *v[] = { "1", "q\"uote" };
  struct oci_map ann = { k, v, 2 };
  struct oci_state st = {
    .oci_version = "1.2.0", .id = "c1", .status = "running", .pid = 42, .bundle = "/b", .annotations = &ann
  };
  char *j = oci_state_to_json (&st, false, &err);
  assert_string_equal (j, "{\"ociVersion\":\"1.2.0\",\"id\":\"c1\",\"status\":\"running\",\"pid\":42,"
                          "\"bundle\":\"/b\",\"annotations\":{\"io.x\":\"1\",\"b\":\"q\\\"uote\"}}");
  free (j);

  /* stopped: pid omitted; empty annotations omitted; runc extras */
  struct oci_map none = { 0 };
  struct oci_state st2 = { .oci_version = "1.2.0",
                           .id = "c1",
                           .status = "stopped",
                           .bundle = "/b",
                           .annotations = &none,
                           .rootfs = "/b/rootfs",
                           .created = "2024-01-01T00:00:00Z",
                           .owner = "" };
  j = oci_state_to_json (&st2, true, &err);
  assert_string_equal (j, "{\n  \"ociVersion\": \"1.2.0\",\n  \"id\": \"c1\",\n  \"status\": \"stopped\",\n"
                          "  \"bundle\": \"/b\",\n  \"rootfs\": \"/b/rootfs\",\n  \"created\": "
                          "\"2024-01-01T00:00:00Z\",\n  \"owner\": \"\"\n}\n");
  free (j);

  /* invalid UTF-8 is an error, not broken JSON */
  struct oci_state st3 = { .oci_version = "1.2.0", .id = "c\xff", .status = "created", .pid = 1, .bundle = "/b" };
  assert_null (oci_state_to_json (&st3, false, &err));
  assert_string_equal (err->msg, "state: a string is not valid UTF-8");
  assert_int_equal (err->errnum, EINVAL);
  asbx_error_free (&err);
}

static void
test_features_json (void **state)
{
  (void) state;
  asbx_err_t err = NULL;
  static const char *const hooks[] = { "prestart", "poststop", NULL };
  static const char *const none[] = { NULL };
  static const char *const ns[] = { "pid", "user", NULL };
  char *k[] = { "org.opencontainers.runc.checkpoint.enabled" }, *v[] = { "false" };
  struct oci_map ann = { k, v, 1 };
  struct oci_features_input in = { .oci_version_min = "1.0.0",
                                   .oci_version_max = "1.2.0",
                                   .hooks = hooks,
                                   .mount_options = none,
                                   .namespaces = ns,
                                   .cgroup_v1 = true,
                                   .cgroup_v2 = true,
                                   .seccomp_enabled = true,
                                   .seccomp_actions = hooks,
                                   .selinux_enabled = true,
                                   .mount_extensions_idmap = true,
                                   .annotations = &ann };
  char *j = oci_features_to_json (&in, &err);
  assert_non_null (j);
  const char *want = "{\n"
                     "    \"ociVersionMin\": \"1.0.0\",\n"
                     "    \"ociVersionMax\": \"1.2.0\",\n"
                     "    \"hooks\": [\n        \"prestart\",\n        \"poststop\"\n    ],\n"
                     "    \"mountOptions\": [\n\n    ],\n"
                     "    \"linux\": {\n"
                     "        \"namespaces\": [\n            \"pid\",\n            \"user\"\n        ],\n"
                     "        \"cgroup\": {\n            \"v1\": true,\n            \"v2\": true,\n"
                     "            \"systemd\": false,\n            \"systemdUser\": false,\n"
                     "            \"rdma\": false\n        },\n"
                     "        \"seccomp\": {\n            \"enabled\": true,\n            \"actions\": [\n"
                     "                \"prestart\",\n                \"poststop\"\n            ]\n        },\n"
                     "        \"apparmor\": {\n            \"enabled\": false\n        },\n"
                     "        \"selinux\": {\n            \"enabled\": true\n        },\n"
                     "        \"intelRdt\": {\n            \"enabled\": false\n        },\n"
                     "        \"mountExtensions\": {\n            \"idmap\": {\n                \"enabled\": true\n"
                     "            }\n        }\n    },\n"
                     "    \"annotations\": {\n"
                     "        \"org.opencontainers.runc.checkpoint.enabled\": \"false\"\n    }\n}";
  if (strcmp (j, want) != 0)
    fail_msg ("got:\n%s", j);
  /* it is valid JSON our own strict parser accepts (as an object with unknown keys) */
  asbx_err_t e2 = NULL;
  cleanup_free char *doc = xasprintf ("{\"ociVersion\":\"1.2.0\",\"f\":%s}", j);
  struct oci_spec *s = oci_spec_parse (doc, strlen (doc), NULL, &e2);
  assert_non_null (s);
  oci_spec_free (s);
  free (j);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_runc_spec),
    cmocka_unit_test (test_full),
    cmocka_unit_test (test_process_parse),
    cmocka_unit_test (test_types),
    cmocka_unit_test (test_required_and_enums),
    cmocka_unit_test (test_version),
    cmocka_unit_test (test_nulls),
    cmocka_unit_test (test_duplicates),
    cmocka_unit_test (test_depth),
    cmocka_unit_test (test_malformed),
    cmocka_unit_test (test_truncated),
    cmocka_unit_test (test_file_errors),
    cmocka_unit_test (test_map_get),
    cmocka_unit_test (test_state_json),
    cmocka_unit_test (test_features_json),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
