/* spec.c - `spec`: write a default config.json (runtime-spec 1.2) into the bundle, refusing to
 * overwrite one. The content follows what runc's `spec` writes (the field's convention), with
 * --rootless adding a user namespace that maps the caller's ids and dropping what an
 * unprivileged user cannot set up (network/cgroup namespaces, the cgroup mount, gid=5 on devpts). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/cleanup.h"
#include "core/util.h"

static const char spec_head[] =
    "{\n"
    "\t\"ociVersion\": \"1.3.0\",\n"
    "\t\"process\": {\n"
    "\t\t\"terminal\": true,\n"
    "\t\t\"user\": {\n\t\t\t\"uid\": 0,\n\t\t\t\"gid\": 0\n\t\t},\n"
    "\t\t\"args\": [\n\t\t\t\"sh\"\n\t\t],\n"
    "\t\t\"env\": [\n"
    "\t\t\t\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\",\n"
    "\t\t\t\"TERM=xterm\"\n"
    "\t\t],\n"
    "\t\t\"cwd\": \"/\",\n"
    "\t\t\"capabilities\": {\n"
    "\t\t\t\"bounding\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
    "\t\t\t\"effective\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
    "\t\t\t\"permitted\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"]\n"
    "\t\t},\n"
    "\t\t\"rlimits\": [\n\t\t\t{\n\t\t\t\t\"type\": \"RLIMIT_NOFILE\",\n\t\t\t\t\"hard\": 1024,\n"
    "\t\t\t\t\"soft\": 1024\n\t\t\t}\n\t\t],\n"
    "\t\t\"noNewPrivileges\": true\n"
    "\t},\n"
    "\t\"root\": {\n\t\t\"path\": \"rootfs\",\n\t\t\"readonly\": true\n\t},\n"
    "\t\"hostname\": \"agentsbx\",\n"
    "\t\"mounts\": [\n"
    "\t\t{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},\n"
    "\t\t{\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\",\n"
    "\t\t \"options\": [\"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\"]},\n";

static const char spec_devpts_root[] =
    "\t\t{\"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\",\n"
    "\t\t \"options\": [\"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\", \"mode=0620\", \"gid=5\"]},\n";
static const char spec_devpts_rootless[] =
    "\t\t{\"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\",\n"
    "\t\t \"options\": [\"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\", \"mode=0620\"]},\n";

static const char spec_mid[] =
    "\t\t{\"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\",\n"
    "\t\t \"options\": [\"nosuid\", \"noexec\", \"nodev\", \"mode=1777\", \"size=65536k\"]},\n"
    "\t\t{\"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\",\n"
    "\t\t \"options\": [\"nosuid\", \"noexec\", \"nodev\"]},\n";

static const char spec_sys_root[] =
    "\t\t{\"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\",\n"
    "\t\t \"options\": [\"nosuid\", \"noexec\", \"nodev\", \"ro\"]},\n"
    "\t\t{\"destination\": \"/sys/fs/cgroup\", \"type\": \"cgroup\", \"source\": \"cgroup\",\n"
    "\t\t \"options\": [\"nosuid\", \"noexec\", \"nodev\", \"relatime\", \"ro\"]}\n"
    "\t],\n";
static const char spec_sys_rootless[] = "\t\t{\"destination\": \"/sys\", \"type\": \"none\", \"source\": \"/sys\",\n"
                                        "\t\t \"options\": [\"rbind\", \"nosuid\", \"noexec\", \"nodev\", \"ro\"]}\n"
                                        "\t],\n";

static const char spec_linux_head[] = "\t\"linux\": {\n";
static const char spec_resources[] =
    "\t\t\"resources\": {\n\t\t\t\"devices\": [\n\t\t\t\t{\"allow\": false, \"access\": \"rwm\"}\n\t\t\t]\n\t\t},\n";
static const char spec_ns_root[] = "\t\t\"namespaces\": [\n"
                                   "\t\t\t{\"type\": \"pid\"},\n\t\t\t{\"type\": \"network\"},\n"
                                   "\t\t\t{\"type\": \"ipc\"},\n\t\t\t{\"type\": \"uts\"},\n"
                                   "\t\t\t{\"type\": \"mount\"},\n\t\t\t{\"type\": \"cgroup\"}\n\t\t],\n";
static const char spec_ns_rootless[] = "\t\t\"namespaces\": [\n"
                                       "\t\t\t{\"type\": \"pid\"},\n\t\t\t{\"type\": \"ipc\"},\n"
                                       "\t\t\t{\"type\": \"uts\"},\n\t\t\t{\"type\": \"mount\"},\n"
                                       "\t\t\t{\"type\": \"user\"}\n\t\t],\n";
static const char spec_tail[] =
    "\t\t\"maskedPaths\": [\n"
    "\t\t\t\"/proc/acpi\", \"/proc/asound\", \"/proc/kcore\", \"/proc/keys\", \"/proc/latency_stats\",\n"
    "\t\t\t\"/proc/timer_list\", \"/proc/timer_stats\", \"/proc/sched_debug\", \"/sys/firmware\",\n"
    "\t\t\t\"/proc/scsi\"\n"
    "\t\t],\n"
    "\t\t\"readonlyPaths\": [\n"
    "\t\t\t\"/proc/bus\", \"/proc/fs\", \"/proc/irq\", \"/proc/sys\", \"/proc/sysrq-trigger\"\n"
    "\t\t]\n"
    "\t}\n"
    "}\n";

int
cli_spec (struct asbx_global *g, int argc, char **argv)
{
  static const struct option opts[] = { { "bundle", required_argument, 0, 'b' },
                                        { "rootless", no_argument, 0, 'r' },
                                        { "help", no_argument, 0, 'h' },
                                        { 0, 0, 0, 0 } };
  const char *bundle = ".";
  bool rootless = false;
  int c;
  while ((c = getopt_long_only (argc, argv, "+b:h", opts, NULL)) != -1)
    switch (c)
      {
      case 'b': bundle = optarg; break;
      case 'r': rootless = true; break;
      case 'h': printf ("usage: agentsbx spec [--bundle DIR] [--rootless]\n"); return 0;
      default: return cli_usage ("spec", "unknown option `%s`", argv[optind - 1]);
      }
  if (optind != argc)
    return cli_usage ("spec", "takes no arguments");

  cleanup_free char *path = xasprintf ("%s/config.json", bundle);
  cleanup_free char *maps = rootless ? xasprintf (
                                "\t\t\"uidMappings\": [{\"containerID\": 0, \"hostID\": %u, \"size\": 1}],\n"
                                "\t\t\"gidMappings\": [{\"containerID\": 0, \"hostID\": %u, \"size\": 1}],\n",
                                getuid (), getgid ())
                                     : xstrdup ("");
  cleanup_free char *doc = xasprintf ("%s%s%s%s%s%s%s%s", spec_head, rootless ? spec_devpts_rootless : spec_devpts_root,
                                      spec_mid, rootless ? spec_sys_rootless : spec_sys_root, spec_linux_head, maps,
                                      rootless ? spec_ns_rootless : spec_resources, rootless ? "" : spec_ns_root);
  cleanup_free char *full = xasprintf ("%s%s", doc, spec_tail);
  /* O_EXCL: never overwrite an existing config.json (runc refuses too) */
  cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    {
      if (errno == EEXIST)
        fprintf (stderr, "agentsbx spec: File %s exists. Remove it first\n", path);
      else
        fprintf (stderr, "agentsbx spec: create `%s`: %s\n", path, strerror (errno));
      return 1;
    }
  if (write_all (fd, full, strlen (full)) < 0)
    {
      fprintf (stderr, "agentsbx spec: write `%s`: %s\n", path, strerror (errno));
      unlink (path);
      return 1;
    }
  (void) g;
  return 0;
}
