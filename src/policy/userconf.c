/* userconf.c - the per-user config of a non-root caller; see userconf.h.
 *
 * Threat model: the file is the caller's own, and the caller could run its command without
 * agentsbx at all, so the file is no boundary against the caller. What it must never do is
 * widen what the host admin's config says for that caller without the caller saying so on the
 * command line (a flag is explicit, a forgotten dotfile is not), nor be writable by another
 * user (who could then steer the caller's sandboxes). So: only narrowing keys, narrowing checked
 * with the same intersection as ceiling ∩ request (merge.c) but never clamped, and the file's
 * owner and mode checked on the opened fd. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "libocispec/oci_json.h"
#include "policy/userconf.h"

#define USERCONF_MAX_FILE (1u << 20)

/* $XDG_CONFIG_HOME/agentsbx/NAME, else $HOME/.config/agentsbx/NAME */
static char *
config_home_file (const char *name)
{
  const char *xdg = getenv ("XDG_CONFIG_HOME"), *home = getenv ("HOME");
  struct passwd *pw;

  if (xdg && xdg[0] == '/')
    return xasprintf ("%s/agentsbx/%s", xdg, name);
  if (!home || home[0] != '/')
    {
      pw = getpwuid (geteuid ());
      home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
  return home ? xasprintf ("%s/.config/agentsbx/%s", home, name) : NULL;
}

char *
userconf_default_path (void)
{
  return config_home_file ("config.json");
}

char *
userconf_default_secrets_dir (void)
{
  return config_home_file ("secrets");
}

/* open + owner/mode check + read. 1 read, 0 absent (and not required), -1 */
static int
read_own_file (const char *path, bool required, char **text, size_t *len, asbx_err_t *err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  struct stat st;

  if (fd < 0 && !required && (errno == ENOENT || errno == ENOTDIR))
    return 0;
  if (fd < 0)
    return asbx_error (err, errno, "user config `%s`", path);
  if (fstat (fd, &st) < 0)
    return asbx_error (err, errno, "user config `%s`: stat", path);
  if (!S_ISREG (st.st_mode))
    return asbx_error (err, 0, "user config `%s`: expected a regular file", path);
  if (st.st_uid != geteuid () || (st.st_mode & (S_IWGRP | S_IWOTH)))
    {
      asbx_error (err, 0,
                  "user config `%s` is owned by uid %u with mode %04o: expected a file of uid %u that neither "
                  "its group nor others can write (chmod go-w, or remove it) - refused",
                  path, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777), (unsigned) geteuid ());
      if (*err)
        (*err)->errnum = EACCES;
      return -1;
    }
  if (read_all_fd (fd, USERCONF_MAX_FILE, text, len) < 0)
    return asbx_error (err, errno, "user config `%s`: read", path);
  return 1;
}

/* why each host-config key is not the user's */
static const char *
system_key_why (const char *key)
{
  static const struct
  {
    const char *key, *why;
  } sys[] = {
    { "onWiden", "how a widening request is handled is the host admin's choice (/etc/agentsbx/config.json)" },
    { "auditDir", "a non-root caller's audit log is $XDG_STATE_HOME/agentsbx (or ~/.local/state/agentsbx), a "
                  "directory only it owns and every sandbox hides; a user config does not move it (use "
                  "--audit-dir DIR for one run)" },
    { "auditSyslog", "syslog forwarding is the host admin's choice (/etc/agentsbx/config.json)" },
    { "enableKernelAudit", "kernel audit is host-wide: only the host config may turn it on" },
    { "upstreamCaFile", "which CAs the egress trusts for upstreams is the host admin's choice "
                        "(/etc/agentsbx/config.json)" },
  };
  for (size_t i = 0; i < ASBX_ARRAY_SIZE (sys); i++)
    if (strcmp (sys[i].key, key) == 0)
      return sys[i].why;
  return NULL;
}

/* the restrict object as a policy document (version 1 when left out) */
static int
load_restrict (struct user_config *u, struct oci_ctx *c, yajl_val v, pdoc_lookup_fn lookup, void *ud, asbx_err_t *err)
{
  if (!YAJL_IS_OBJECT (v))
    return oci_fail_key (c, "restrict", "expected an object (a policy document that narrows the policy in force)");
  yajl_gen g = json_gen_new (0);
  yajl_gen_map_open (g);
  if (!oci_get (v, "version"))
    {
      json_gen_str (g, "version");
      yajl_gen_integer (g, 1);
    }
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      json_gen_str (g, v->u.object.keys[i]);
      json_gen_value (g, v->u.object.values[i]);
    }
  yajl_gen_map_close (g);
  size_t len = 0;
  cleanup_free char *text = json_gen_finish (g, false, &len);
  cleanup_free char *source = xasprintf ("%s: restrict", u->path);
  u->restrict_doc = pdoc_load (text, len, source, lookup, ud, err);
  return u->restrict_doc ? 0 : -1;
}

static int
parse (struct user_config *u, const char *text, size_t len, pdoc_lookup_fn lookup, void *ud, asbx_err_t *err)
{
  struct oci_ctx c;
  yajl_val t;
  int r = 0;

  oci_ctx_init (&c, u->path, err);
  t = oci_json_load (&c, text, len);
  if (t == NULL)
    r = -1;
  for (size_t i = 0; r == 0 && i < t->u.object.len; i++)
    {
      const char *k = t->u.object.keys[i], *why = system_key_why (k);
      if (why)
        r = oci_fail_key (&c, k, "not accepted in a user config, which may only narrow: %s", why);
      else if (strcmp (k, "defaultProfile") != 0 && strcmp (k, "restrict") != 0 && strcmp (k, "secretsDir") != 0)
        r = oci_fail_key (&c, k, "unknown key (a user config accepts defaultProfile, restrict and secretsDir)");
    }
  if (r == 0)
    r = oci_get_string (&c, t, "defaultProfile", &u->default_profile) < 0
                || oci_get_string (&c, t, "secretsDir", &u->secrets_dir) < 0
            ? -1
            : 0;
  if (r == 0 && u->secrets_dir && u->secrets_dir[0] != '/')
    r = oci_fail_key (&c, "secretsDir", "expected an absolute path (a directory of yours, mode 0700)");
  if (r == 0 && u->default_profile && !pdoc_profile_name_ok (u->default_profile))
    r = oci_fail_key (&c, "defaultProfile", "invalid profile name");
  if (r == 0 && oci_get (t, "restrict"))
    r = load_restrict (u, &c, oci_get (t, "restrict"), lookup, ud, err);
  if (t)
    yajl_tree_free (t);
  oci_ctx_release (&c);
  return r;
}

int
userconf_load (struct user_config *u, const char *path, bool required, pdoc_lookup_fn lookup, void *ud, asbx_err_t *err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  int r = read_own_file (path, required, &text, &len, err);

  if (r <= 0)
    return r;
  u->path = xstrdup (path);
  if (parse (u, text, len, lookup, ud, err) < 0)
    {
      userconf_clear (u);
      return -1;
    }
  return 0;
}

void
userconf_clear (struct user_config *u)
{
  free (u->path);
  free (u->default_profile);
  pdoc_free (u->restrict_doc);
  free (u->secrets_dir);
  *u = (struct user_config){ 0 };
}

/* *err (one line per widened field) again, each line as "PREFIX" line, then `tail` */
static int
refuse_lines (asbx_err_t *err, const char *prefix, const char *tail)
{
  cleanup_free char *out = xstrdup ("");
  char *save = NULL;

  if (!err || !*err)
    return -1;
  cleanup_free char *msg = xstrdup ((*err)->msg);
  for (char *l = strtok_r (msg, "\n", &save); l; l = strtok_r (NULL, "\n", &save))
    {
      char *n = xasprintf ("%s%s%s%s", out, *out ? "\n" : "", prefix, l);
      free (out);
      out = n;
    }
  asbx_error_free (err);
  asbx_error (err, 0, "%s\n%s", out, tail);
  if (*err)
    (*err)->errnum = EINVAL;
  return -1;
}

int
userconf_narrow (const struct user_config *u, const struct pdoc *eff, const char *eff_name, struct pdoc **out,
                 asbx_err_t *err)
{
  *out = NULL;
  if (!u->restrict_doc)
    return 0;
  *out = pdoc_intersect (eff, u->restrict_doc, eff_name, false, NULL, NULL, err);
  if (*out)
    return 0;
  cleanup_free char *prefix = xasprintf ("%s: restrict.", u->path);
  return refuse_lines (err, prefix,
                       "a user config may only narrow the policy in force (fewer paths and domains, lower limits, "
                       "more denies): refused");
}

int
userconf_narrow_default (const struct user_config *u, const struct pdoc *sys, const char *sys_name,
                         const struct pdoc *user, struct pdoc **out, asbx_err_t *err)
{
  *out = pdoc_intersect (sys, user, sys_name, false, NULL, NULL, err);
  if (*out)
    return 0;
  cleanup_free char *prefix = xasprintf ("%s: defaultProfile \"%s\": ", u->path, u->default_profile);
  cleanup_free char *tail = xasprintf ("a user config's defaultProfile must narrow the host config's (%s): refused; "
                                       "pass --profile %s to choose it for one run",
                                       sys_name, u->default_profile);
  return refuse_lines (err, prefix, tail);
}
