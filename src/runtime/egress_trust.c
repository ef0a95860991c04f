/* egress_trust.c - the container's trust store under interception; see egress_trust.h.
 *
 * Threat model: the rootfs is the container's (symlinks, fifos, huge files): every path is
 * resolved with openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS) beneath the rootfs fd (the
 * fallback resolver of linux/pathsafe.h without openat2), the distro bundle is read only when it
 * is a regular file and only up to EGRESS_TRUST_MAX, and the mounts go onto the fds resolved,
 * never onto re-resolved strings. The bundle only adds a certificate the container's tools trust
 * for the intercepted hosts (its CA's name constraints): nothing of the host is exposed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "linux/mount.h"
#include "linux/pathsafe.h"
#include "runtime/egress_trust.h"

#define EGRESS_TRUST_MAX (16u << 20) /* a distro bundle is ~200 KiB */
#define RESOLVE_ROOT (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)

static const char *const trust_paths[] = EGRESS_TRUST_PATHS;
#define N_TRUST (sizeof trust_paths / sizeof trust_paths[0])

/* an fd of the regular file at `path` beneath rootfd, or -1 */
static int
open_regular (int rootfd, const char *path, int flags)
{
  struct stat st;
  /* openat2 takes no other flag with O_PATH (EINVAL) */
  int extra = flags & O_PATH ? O_CLOEXEC : O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  int fd = ps_openat2 (rootfd, path, (uint64_t) (flags | extra), 0, RESOLVE_ROOT);
  if (fd >= 0 && (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)))
    {
      close (fd);
      fd = -1;
    }
  return fd;
}

char *
egress_trust_path (int rootfd)
{
  for (size_t i = 0; i < N_TRUST; i++)
    {
      cleanup_close int fd = open_regular (rootfd, trust_paths[i], O_PATH);
      if (fd >= 0)
        return xstrdup (trust_paths[i]);
    }
  return NULL;
}

/* Whether the open file at fd is a CA bundle, empty or with a PEM certificate in its first
 * 16 KiB: a trust path the image made a symlink to something else (its /etc/shadow) is neither
 * read into the bundle nor hidden under it. */
static bool
looks_like_bundle (int fd, const struct stat *st)
{
  static const char begin[] = "-----BEGIN CERTIFICATE-----";
  char buf[16384 + 1];
  if (st->st_size == 0)
    return true;
  ssize_t n = pread (fd, buf, sizeof buf - 1, 0);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  return memmem (buf, (size_t) n, begin, sizeof begin - 1) != NULL;
}

/* no distro bundle: an empty /etc/ssl/certs/ca-certificates.crt as the target, when the rootfs
 * lets us create it; its fd (O_PATH) or -1 */
static int
make_fallback_target (int rootfd)
{
  cleanup_close int dir = ps_openat2 (rootfd, "/etc/ssl/certs", O_PATH | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_ROOT);
  if (dir < 0)
    {
      log_warning ("policy network: the rootfs has no CA bundle and no /etc/ssl/certs: the container's tools will "
                   "not trust the egress interception (SSL_CERT_FILE and the like are not set)");
      return -1;
    }
  cleanup_close int wdir = openat (dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = wdir < 0 ? -1
                    : openat (wdir, "ca-certificates.crt", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    log_warning ("policy network: the rootfs has no CA bundle and /etc/ssl/certs/ca-certificates.crt cannot be "
                 "created (%s): the container's tools will not trust the egress interception",
                 strerror (errno));
  return fd;
}

/* the bundle file in a detached tmpfs: its mount fd */
static int
bundle_fs (const char *distro, size_t distro_len, const char *ca_pem, asbx_err_t *err)
{
  static const char mark[] = "\n# agentsbx: the egress CA of this container (network.credentials, network.http)\n";
  size_t size = distro_len + strlen (ca_pem) + sizeof mark + 65536;
  cleanup_free char *opts = xasprintf ("size=%zu,mode=755", size);
  cleanup_close int fs = mnt_new_fs ("tmpfs", "tmpfs", opts, 0,
                                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
  if (fs < 0)
    return asbx_error_wrap (err, "policy network: CA bundle");
  cleanup_close int f = openat (fs, "ca-bundle.crt", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (f < 0 || (distro_len && write_all (f, distro, distro_len) < 0) || write_all (f, mark, sizeof mark - 1) < 0
      || write_all (f, ca_pem, strlen (ca_pem)) < 0)
    return asbx_error (err, errno, "policy network: write the CA bundle");
  return steal_fd (&fs);
}

int
egress_trust_apply (int rootfd, const char *ca_pem, char **bundle_path, asbx_err_t *err)
{
  int targets[N_TRUST + 1];
  const char *names[N_TRUST + 1];
  struct stat seen[N_TRUST + 1];
  size_t n = 0;
  cleanup_free char *distro = NULL;
  size_t distro_len = 0;
  cleanup_close int fs = -1;
  int r = -1;

  *bundle_path = NULL;
  if (ca_pem == NULL)
    return 0;
  for (size_t i = 0; i < N_TRUST; i++)
    {
      int fd = open_regular (rootfd, trust_paths[i], O_RDONLY);
      struct stat st;
      bool dup = false;
      if (fd < 0)
        continue;
      if (fstat (fd, &st) < 0)
        {
          close (fd);
          continue;
        }
      for (size_t j = 0; j < n && !dup; j++)
        dup = seen[j].st_dev == st.st_dev && seen[j].st_ino == st.st_ino;
      if (!dup && !looks_like_bundle (fd, &st))
        {
          log_warning ("policy network: %s in the rootfs is not a CA bundle (no PEM certificate): left as it is",
                       trust_paths[i]);
          close (fd);
          continue;
        }
      if (!dup && distro == NULL && read_all_fd (fd, EGRESS_TRUST_MAX, &distro, &distro_len) < 0)
        {
          asbx_error (err, errno, "policy network: read the rootfs's CA bundle %s", trust_paths[i]);
          close (fd);
          goto out;
        }
      if (dup)
        {
          close (fd);
          continue;
        }
      seen[n] = st;
      names[n] = trust_paths[i];
      targets[n++] = fd;
    }
  if (n == 0 && (targets[0] = make_fallback_target (rootfd)) >= 0)
    names[n++] = trust_paths[0];
  if (n == 0)
    return 0;
  /* the distro text ends with a newline before the CA's block */
  if (distro_len && distro[distro_len - 1] != '\n')
    {
      distro = xrealloc (distro, distro_len + 2);
      distro[distro_len++] = '\n';
    }
  fs = bundle_fs (distro, distro_len, ca_pem, err);
  if (fs < 0)
    goto out;
  for (size_t i = 0; i < n; i++)
    {
      cleanup_close int file = mnt_clone (fs, "ca-bundle.crt", false, err);
      if (file < 0 || mnt_setattr (file, false, MOUNT_ATTR_RDONLY, 0, 0, err) < 0
          || mnt_attach (file, targets[i], err) < 0)
        {
          asbx_error_wrap (err, "policy network: bind the CA bundle over %s", names[i]);
          goto out;
        }
      log_debug ("policy network: the egress CA bundle is bound over %s", names[i]);
    }
  *bundle_path = xstrdup (names[0]);
  r = 0;
out:
  for (size_t i = 0; i < n; i++)
    close (targets[i]);
  return r;
}

void
egress_trust_env (struct oci_process *p, const char *bundle_path)
{
  static const char *const vars[] = { "SSL_CERT_FILE",  "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                      "GIT_SSL_CAINFO", "PIP_CERT",           "NODE_EXTRA_CA_CERTS" };
  if (p == NULL || bundle_path == NULL)
    return;
  for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++)
    {
      size_t klen = strlen (vars[v]);
      char *kv = xasprintf ("%s=%s", vars[v], bundle_path);
      bool done = false;
      for (size_t i = 0; i < p->env_len && !done; i++)
        if (strncmp (p->env[i], vars[v], klen) == 0 && p->env[i][klen] == '=')
          {
            free (p->env[i]);
            p->env[i] = kv;
            done = true;
          }
      if (done)
        continue;
      p->env = xrealloc (p->env, (p->env_len + 2) * sizeof (char *));
      p->env[p->env_len++] = kv;
      p->env[p->env_len] = NULL;
    }
}
