/* test_model.c - the container model (src/spec/model.h): the effective process, resources,
 * namespaces and root a few narrowings give, the parsed spec left as it was, and the runtime's
 * mapping of a compiled plan onto a narrowing (runtime/policy_apply.h policy_model_narrowing). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "runtime/policy_apply.h"
#include "spec/model.h"

#define CONFIG(NAMESPACES, RESOURCES)                                                                                  \
  "{\"ociVersion\":\"1.2.0\",\"root\":{\"path\":\"rootfs\"},"                                                          \
  "\"process\":{\"cwd\":\"/\",\"args\":[\"sh\"],\"env\":[\"PATH=/bin\"],"                                              \
  "\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":4096,\"hard\":8192}],"                                            \
  "\"capabilities\":{\"bounding\":[\"CAP_KILL\",\"CAP_NET_RAW\",\"CAP_CHOWN\",\"CAP_MKNOD\",\"CAP_SYS_ADMIN\"],"       \
  "\"effective\":[\"CAP_KILL\",\"CAP_NET_RAW\",\"CAP_CHOWN\"]}},"                                                      \
  "\"linux\":{\"namespaces\":[" NAMESPACES "]" RESOURCES "}}"

static struct oci_spec *
parse (const char *json)
{
  asbx_err_t err = NULL;
  struct oci_spec *s = oci_spec_parse (json, strlen (json), "config.json", &err);
  if (!s)
    fail_msg ("parse: %s", err->msg);
  return s;
}

static bool
has (char **v, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (v[i], name) == 0)
      return true;
  return false;
}

static const struct oci_rlimit *
rlimit (const struct oci_process *p, const char *type)
{
  for (size_t i = 0; i < p->rlimits_len; i++)
    if (strcmp (p->rlimits[i].type, type) == 0)
      return &p->rlimits[i];
  return NULL;
}

static struct spec_model *
build (const struct oci_spec *spec, const struct spec_narrowing *plan, const struct spec_model_host *host)
{
  struct spec_model *m = NULL;
  asbx_err_t err = NULL;
  if (spec_model_build (spec, plan, host, &m, &err) < 0)
    fail_msg ("build: %s", err->msg);
  assert_ptr_equal (m->view.process, m->process);
  assert_ptr_equal (m->view.linux_->namespaces, m->namespaces);
  assert_ptr_equal (m->view.linux_->resources, m->resources);
  assert_int_equal (m->view.root->readonly, m->root_readonly);
  assert_ptr_equal (m->view.mounts, spec->mounts);
  return m;
}

/* no policy: the model is the spec (a copy of its process, its own resources and namespaces) */
static void
test_plain (void **state)
{
  (void) state;
  struct oci_spec *spec = parse (CONFIG ("{\"type\":\"mount\"}", ",\"resources\":{\"pids\":{\"limit\":10}}"));
  struct spec_narrowing off = { 0 };
  struct spec_model_host host = { 0 };
  struct spec_model *m = build (spec, &off, &host);
  assert_ptr_not_equal (m->process, spec->process);
  assert_string_equal (m->process->args[0], "sh");
  assert_int_equal (m->process->capabilities->bounding_len, 5);
  assert_false (m->process->no_new_privileges);
  assert_ptr_equal (m->resources, spec->linux_->resources);
  assert_int_equal (m->namespaces_len, 1);
  assert_false (m->root_readonly);
  spec_model_free (m);
  m = build (spec, NULL, &host);
  assert_int_equal (m->process->env_len, 1);
  spec_model_free (m);
  oci_spec_free (spec);
}

/* a restrictive plan narrows the model's copies; the parsed spec keeps every value */
static void
test_narrowed (void **state)
{
  (void) state;
  struct oci_spec *spec = parse (
      CONFIG ("{\"type\":\"mount\"},{\"type\":\"pid\"}", ",\"resources\":{\"memory\":{\"limit\":1073741824}}"));
  char *allow[] = { (char *) "CAP_KILL", (char *) "CAP_NET_RAW", (char *) "CAP_CHOWN", (char *) "CAP_MKNOD", NULL };
  struct spec_narrowing plan = { .active = true,
                                 .rootfs_readonly = true,
                                 .restrict_caps = true,
                                 .caps_allow = allow,
                                 .caps_allow_len = 4,
                                 .isolate_net = true,
                                 .memory_bytes = 512 << 20,
                                 .pids = 64,
                                 .cpus = 0.5,
                                 .open_files = 1024,
                                 .file_size_bytes = 1 << 20 };
  struct spec_model_host host = { 0 };
  struct spec_model *m = build (spec, &plan, &host);
  const struct oci_capabilities *c = m->process->capabilities;

  assert_true (m->process->no_new_privileges);
  /* allow ∩ spec, minus the network capabilities (mode none) and the host-file ones */
  assert_int_equal (c->bounding_len, 1);
  assert_string_equal (c->bounding[0], "CAP_KILL");
  assert_null (c->bounding[1]);
  assert_int_equal (c->effective_len, 1);
  assert_int_equal (rlimit (m->process, "RLIMIT_NOFILE")->hard, 1024);
  assert_int_equal (rlimit (m->process, "RLIMIT_NOFILE")->soft, 1024);
  assert_int_equal (rlimit (m->process, "RLIMIT_FSIZE")->hard, 1 << 20);
  assert_int_equal (m->resources->memory->limit, 512 << 20);
  assert_true (m->resources->has_pids);
  assert_int_equal (m->resources->pids_limit, 64);
  assert_int_equal (m->resources->cpu->quota, 50000);
  assert_int_equal (m->resources->cpu->period, 100000);
  assert_int_equal (m->namespaces_len, 3);
  assert_string_equal (m->namespaces[2].type, "network");
  assert_null (m->namespaces[2].path);
  assert_true (m->root_readonly);
  const char *path = "x";
  assert_true (spec_model_netns (m, &path));
  assert_null (path);

  /* the parsed spec is as config.json said */
  assert_false (spec->process->no_new_privileges);
  assert_int_equal (spec->process->capabilities->bounding_len, 5);
  assert_int_equal (spec->process->rlimits_len, 1);
  assert_int_equal (spec->process->rlimits[0].hard, 8192);
  assert_int_equal (spec->linux_->resources->memory->limit, 1073741824);
  assert_false (spec->linux_->resources->has_pids);
  assert_null (spec->linux_->resources->cpu);
  assert_int_equal (spec->linux_->namespaces_len, 2);
  assert_false (spec->root->readonly);
  spec_model_free (m);
  oci_spec_free (spec);
}

/* the spec's smaller values stay; an isolating user namespace keeps CAP_CHOWN; a joined network
 * namespace is kept, not doubled; socket activation adds its variables */
static void
test_spec_smaller (void **state)
{
  (void) state;
  struct oci_spec *spec = parse (
      CONFIG ("{\"type\":\"mount\"},{\"type\":\"pid\"},{\"type\":\"network\",\"path\":\"/run/netns/x\"}",
              ",\"resources\":{\"memory\":{\"limit\":1048576},\"pids\":{\"limit\":5},"
              "\"cpu\":{\"quota\":50000,\"period\":200000}}"));
  struct spec_narrowing plan = {
    .active = true, .isolate_net = true, .memory_bytes = 512 << 20, .pids = 64, .cpus = 1
  };
  struct spec_model_host host = { .userns_isolating = true, .listen_fds = 2 };
  struct spec_model *m = build (spec, &plan, &host);
  const struct oci_capabilities *c = m->process->capabilities;

  assert_int_equal (m->resources->memory->limit, 1048576);
  assert_int_equal (m->resources->pids_limit, 5);
  assert_int_equal (m->resources->cpu->quota, 50000);
  assert_int_equal (m->resources->cpu->period, 200000);
  assert_true (has (c->bounding, c->bounding_len, "CAP_CHOWN"));
  assert_true (has (c->bounding, c->bounding_len, "CAP_SYS_ADMIN"));
  assert_false (has (c->bounding, c->bounding_len, "CAP_MKNOD"));
  assert_false (has (c->bounding, c->bounding_len, "CAP_NET_RAW"));
  assert_int_equal (rlimit (m->process, "RLIMIT_NOFILE")->hard, 8192);
  assert_null (rlimit (m->process, "RLIMIT_FSIZE"));
  assert_int_equal (m->namespaces_len, 3);
  const char *path = NULL;
  assert_true (spec_model_netns (m, &path));
  assert_string_equal (path, "/run/netns/x");
  assert_int_equal (m->process->env_len, 3);
  assert_string_equal (m->process->env[1], "LISTEN_FDS=2");
  assert_string_equal (m->process->env[2], "LISTEN_PID=1");
  assert_null (m->process->env[3]);
  assert_int_equal (spec->process->env_len, 1);
  spec_model_free (m);
  oci_spec_free (spec);
}

/* an active plan needs a new mount namespace of the container's own */
static void
test_mount_ns (void **state)
{
  (void) state;
  struct spec_narrowing plan = { .active = true };
  struct spec_model_host host = { 0 };
  const char *bad[] = { CONFIG ("{\"type\":\"pid\"}", ""),
                        CONFIG ("{\"type\":\"mount\",\"path\":\"/proc/1/ns/mnt\"}", "") };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (bad); i++)
    {
      struct oci_spec *spec = parse (bad[i]);
      struct spec_model *m = (struct spec_model *) 1;
      asbx_err_t err = NULL;
      assert_int_equal (spec_model_build (spec, &plan, &host, &m, &err), -1);
      assert_null (m);
      assert_int_equal (err->errnum, EINVAL);
      assert_non_null (strstr (err->msg, "linux.namespaces"));
      assert_non_null (strstr (err->msg, "mount"));
      asbx_error_free (&err);
      /* without a policy the same spec is fine (runc runs both forms) */
      assert_int_equal (spec_model_build (spec, NULL, &host, &m, &err), 0);
      spec_model_free (m);
      oci_spec_free (spec);
    }
}

/* exec's process goes through the same narrowing */
static void
test_exec_process (void **state)
{
  (void) state;
  struct oci_spec *spec = parse (CONFIG ("{\"type\":\"mount\"}", ""));
  struct oci_process *p = oci_process_dup (spec->process);
  char *allow[] = { (char *) "CAP_SYS_ADMIN", NULL };
  struct spec_narrowing plan = { .active = true, .restrict_caps = true, .caps_allow = allow, .caps_allow_len = 1 };
  spec_narrow_process (p, &plan, false);
  assert_true (p->no_new_privileges);
  assert_int_equal (p->capabilities->bounding_len, 1);
  assert_string_equal (p->capabilities->bounding[0], "CAP_SYS_ADMIN");
  assert_int_equal (p->capabilities->effective_len, 0);
  assert_null (p->capabilities->effective[0]);
  assert_int_equal (spec->process->capabilities->bounding_len, 5);
  oci_process_free (p);
  oci_spec_free (spec);
}

/* the runtime's mapping of a compiled plan onto the narrowing (runtime/policy_apply.h) */
static void
test_from_plan (void **state)
{
  (void) state;
  char *allow[] = { (char *) "CAP_KILL", NULL };
  struct policy_plan plan = { .active = true,
                              .rootfs_readonly = true,
                              .restrict_caps = true,
                              .caps_allow = allow,
                              .caps_allow_len = 1,
                              .net_mode = POLICY_NET_FILTERED,
                              .memory_bytes = 7,
                              .pids = 8,
                              .cpus = 0.25,
                              .open_files = 9,
                              .file_size_bytes = 10 };
  struct spec_narrowing n;
  policy_model_narrowing (&plan, &n);
  assert_true (n.active && n.rootfs_readonly && n.restrict_caps && n.isolate_net);
  assert_ptr_equal (n.caps_allow, allow);
  assert_int_equal (n.caps_allow_len, 1);
  assert_int_equal (n.memory_bytes, 7);
  assert_int_equal (n.pids, 8);
  assert_true (n.cpus == 0.25);
  assert_int_equal (n.open_files, 9);
  assert_int_equal (n.file_size_bytes, 10);
  plan.net_mode = POLICY_NET_NONE;
  policy_model_narrowing (&plan, &n);
  assert_true (n.isolate_net);
  plan.net_mode = POLICY_NET_OPEN;
  policy_model_narrowing (&plan, &n);
  assert_false (n.isolate_net);
  plan.active = false;
  policy_model_narrowing (&plan, &n);
  assert_false (n.active);
  assert_int_equal (n.memory_bytes, 0);
  assert_null (n.caps_allow);
  policy_model_narrowing (NULL, &n);
  assert_false (n.active);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_plain),    cmocka_unit_test (test_narrowed),     cmocka_unit_test (test_spec_smaller),
    cmocka_unit_test (test_mount_ns), cmocka_unit_test (test_exec_process), cmocka_unit_test (test_from_plan),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
