/* setup.c - `agentsbx setup` (see setup.h). The file is read once through an fd opened with
 * O_NOFOLLOW (a symlinked config is refused: rename(2) would replace the link, not its target),
 * the new text is computed in memory, compared with the old (semantically for JSON, byte for byte
 * for TOML) so that a second run changes nothing, and written with rename(2) so an engine never
 * reads half a file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "core/cleanup.h"
#include "core/json.h"
#include "core/util.h"
#include "runtime/setup.h"
#include "runtime/setup_toml.h"

#define MAX_CONFIG (4u << 20)
#define BEGIN_MARK "# BEGIN agentsbx setup"
#define END_MARK "# END agentsbx setup"
#define WRAPPER_MARK "# agentsbx setup: the runtime class"

struct ctx
{
  const struct asbx_setup_opts *o;
  const char *path;   /* the config file */
  const char *engine; /* "docker", ... */
  char bin[PATH_MAX]; /* the runtime written */
  const char *wdir;   /* profile wrappers */
};

struct text
{
  char *s;
  size_t len;
};

static int
read_config (const char *path, struct text *t, bool *exists, struct stat *st, asbx_err_t *err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  *exists = fd >= 0;
  *t = (struct text){ .s = xstrdup (""), .len = 0 };
  if (fd < 0 && errno == ENOENT)
    return 0;
  if (fd < 0 && errno == ELOOP)
    return asbx_error (err, ELOOP, "setup: %s is a symbolic link: give its target with --config", path);
  if (fd < 0 || fstat (fd, st) < 0)
    return asbx_error (err, errno, "setup: open %s", path);
  if (!S_ISREG (st->st_mode) || st->st_size > (off_t) MAX_CONFIG)
    return asbx_error (err, 0, "setup: %s: expected a regular file of at most 4 MiB", path);
  free (t->s);
  t->s = xmalloc ((size_t) st->st_size + 1);
  for (;;)
    {
      ssize_t n = read (fd, t->s + t->len, (size_t) st->st_size - t->len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return asbx_error (err, errno, "setup: read %s", path);
      if (n == 0)
        break;
      t->len += (size_t) n;
      if (t->len == (size_t) st->st_size)
        break;
    }
  t->s[t->len] = '\0';
  if (strlen (t->s) != t->len)
    return asbx_error (err, 0, "setup: %s: expected text, found a NUL byte", path);
  return 0;
}

/* data -> path via path.agentsbx-tmp + rename; mode/owner of `like` (NULL: `mode`, root's) */
static int
write_atomic (const char *path, const char *data, size_t len, const struct stat *like, mode_t mode, asbx_err_t *err)
{
  cleanup_free char *tmp = xasprintf ("%s.agentsbx-tmp", path);
  (void) unlink (tmp); /* a leftover of an interrupted run: ours by name */
  int fd = open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, like ? like->st_mode & 07777 : mode);
  if (fd < 0)
    return asbx_error (err, errno, "setup: create %s", tmp);
  bool ok = write_all (fd, data, len) == 0 && (!like || fchown (fd, like->st_uid, like->st_gid) == 0)
            && (!like || fchmod (fd, like->st_mode & 07777) == 0) && fsync (fd) == 0;
  int e = errno;
  ok = close (fd) == 0 && ok;
  if (!ok || rename (tmp, path) < 0)
    {
      e = ok ? errno : e;
      (void) unlink (tmp);
      return asbx_error (err, e, "setup: write %s", path);
    }
  return 0;
}

static bool
blank (const char *s)
{
  return s[strspn (s, " \t\r\n")] == '\0';
}

/* ---------------------------------------------------------------------------------------------
 * Docker: daemon.json's "runtimes" map */

static bool
docker_ours (const char *name, yajl_val v)
{
  const char *path[] = { "path", NULL };
  yajl_val p = yajl_tree_get (v, path, yajl_t_string);
  if (strcmp (name, "agentsbx") != 0 && strncmp (name, "agentsbx-", 9) != 0)
    return false;
  const char *s = p ? YAJL_GET_STRING (p) : NULL;
  if (!s)
    return false;
  const char *base = strrchr (s, '/');
  return strcmp (base ? base + 1 : s, "agentsbx") == 0;
}

static yajl_val
parse_json (const struct ctx *x, const char *text, asbx_err_t *err)
{
  char ebuf[256];
  yajl_val v = yajl_tree_parse (blank (text) ? "{}" : text, ebuf, sizeof ebuf);
  if (!v)
    {
      ebuf[strcspn (ebuf, "\n")] = '\0';
      asbx_error (err, 0, "setup: %s: not JSON: %s", x->path, ebuf);
      return NULL;
    }
  if (!YAJL_IS_OBJECT (v))
    {
      yajl_tree_free (v);
      asbx_error (err, 0, "setup: %s: expected a JSON object at the top", x->path);
      return NULL;
    }
  return v;
}

static char *
canonical (yajl_val v)
{
  yajl_gen g = json_gen_new (0);
  json_gen_value (g, v);
  return json_gen_finish (g, false, NULL);
}

static void
docker_entry (yajl_gen g, const struct ctx *x, const char *profile)
{
  cleanup_free char *name = profile ? xasprintf ("agentsbx-%s", profile) : xstrdup ("agentsbx");
  json_gen_str (g, name);
  yajl_gen_map_open (g);
  json_gen_kv (g, "path", x->bin);
  if (profile)
    {
      cleanup_free char *arg = xasprintf ("--profile=%s", profile);
      json_gen_str (g, "runtimeArgs");
      yajl_gen_array_open (g);
      json_gen_str (g, arg);
      yajl_gen_array_close (g);
    }
  yajl_gen_map_close (g);
}

static void
docker_runtimes (yajl_gen g, const struct ctx *x, yajl_val rt)
{
  json_gen_str (g, "runtimes");
  yajl_gen_map_open (g);
  for (size_t i = 0; rt && i < rt->u.object.len; i++)
    if (!docker_ours (rt->u.object.keys[i], rt->u.object.values[i]))
      {
        json_gen_str (g, rt->u.object.keys[i]);
        json_gen_value (g, rt->u.object.values[i]);
      }
  if (!x->o->undo)
    {
      docker_entry (g, x, NULL);
      for (size_t i = 0; i < x->o->nprofiles; i++)
        docker_entry (g, x, x->o->profiles[i]);
    }
  yajl_gen_map_close (g);
}

/* the new daemon.json, or NULL with *err */
static char *
docker_edit (const struct ctx *x, const char *text, asbx_err_t *err)
{
  yajl_val v = parse_json (x, text, err), rt = NULL;
  size_t others = 0;
  if (!v)
    return NULL;
  for (size_t i = 0; i < v->u.object.len; i++)
    if (strcmp (v->u.object.keys[i], "runtimes") == 0)
      rt = v->u.object.values[i];
  if (rt && !YAJL_IS_OBJECT (rt))
    {
      yajl_tree_free (v);
      asbx_error (err, 0, "setup: %s: runtimes: expected an object", x->path);
      return NULL;
    }
  for (size_t i = 0; rt && i < rt->u.object.len; i++)
    {
      const char *k = rt->u.object.keys[i];
      bool ours = docker_ours (k, rt->u.object.values[i]);
      others += !ours;
      bool wanted = strcmp (k, "agentsbx") == 0;
      for (size_t j = 0; j < x->o->nprofiles && !wanted; j++)
        wanted = strncmp (k, "agentsbx-", 9) == 0 && strcmp (k + 9, x->o->profiles[j]) == 0;
      if (!x->o->undo && wanted && !ours)
        {
          yajl_tree_free (v);
          asbx_error (err, 0,
                      "setup: %s: runtimes.%s: an entry whose path is not an agentsbx binary: remove it or "
                      "choose another --profile",
                      x->path, k);
          return NULL;
        }
    }
  yajl_gen g = json_gen_new (JSON_GEN_PRETTY);
  yajl_gen_map_open (g);
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      if (strcmp (v->u.object.keys[i], "runtimes") != 0)
        {
          json_gen_str (g, v->u.object.keys[i]);
          json_gen_value (g, v->u.object.values[i]);
        }
      else if (!x->o->undo || others)
        docker_runtimes (g, x, rt);
    }
  if (!rt && !x->o->undo)
    docker_runtimes (g, x, NULL);
  yajl_gen_map_close (g);
  yajl_tree_free (v);
  return json_gen_finish (g, false, NULL); /* beautify ends the document with a newline */
}

/* whether two daemon.json texts hold the same document */
static bool
json_same (const struct ctx *x, const char *a, const char *b)
{
  asbx_err_t e = NULL;
  yajl_val va = parse_json (x, a, &e), vb = va ? parse_json (x, b, &e) : NULL;
  bool same = false;
  if (va && vb)
    {
      cleanup_free char *ca = canonical (va), *cb = canonical (vb);
      same = strcmp (ca, cb) == 0;
    }
  asbx_error_free (&e);
  yajl_tree_free (va);
  yajl_tree_free (vb);
  return same;
}

/* ---------------------------------------------------------------------------------------------
 * TOML: one marked block of whole lines */

/* [*start, *end) of the block (from its BEGIN line through its END line), false when none */
static bool
find_block (const char *s, size_t *start, size_t *end)
{
  for (const char *p = s; p; p = strchr (p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp (p, BEGIN_MARK, sizeof BEGIN_MARK - 1) == 0)
      {
        for (const char *q = p; q; q = strchr (q, '\n'), q = q ? q + 1 : NULL)
          if (strncmp (q, END_MARK, sizeof END_MARK - 1) == 0)
            {
              const char *nl = strchr (q, '\n');
              *start = (size_t) (p - s);
              *end = nl ? (size_t) (nl + 1 - s) : strlen (s);
              return true;
            }
        return false;
      }
  return false;
}

static char *
without_block (const char *s)
{
  size_t a, b;
  if (!find_block (s, &a, &b))
    return xstrdup (s);
  return xasprintf ("%.*s%s", (int) a, s, s + b);
}

static char *
wrapper_path (const struct ctx *x, const char *profile)
{
  return xasprintf ("%s/agentsbx-%s", x->wdir, profile);
}

/* the runtime a profile's entry names: the binary, or the wrapper adding --profile */
static char *
entry_binary (const struct ctx *x, const char *profile)
{
  return profile ? wrapper_path (x, profile) : xstrdup (x->bin);
}

static long
toml_int_value (const char *s, const struct toml_def *d)
{
  const char *eq = memchr (s + d->line_start, '=', d->line_end - d->line_start);
  return eq ? strtol (eq + 1, NULL, 10) : -1;
}

/* one runtime entry: *block with the entry of runtime `name` (its key: table) appended, heap */
typedef char *(*entry_fn) (const char *block, const char *table, const char *name, const char *bin);

static char *
containerd_entry (const char *block, const char *table, const char *name, const char *bin)
{
  (void) name;
  return xasprintf ("%s[%s]\n  runtime_type = \"io.containerd.runc.v2\"\n  pod_annotations = "
                    "[\"io.agentsbx.*\"]\n  container_annotations = [\"io.agentsbx.*\"]\n[%s.options]\n  "
                    "BinaryName = \"%s\"\n",
                    block, table, table, bin);
}

static char *
podman_entry (const char *block, const char *table, const char *name, const char *bin)
{
  (void) table;
  return xasprintf ("%s%s = [\"%s\"]\n", block, name, bin);
}

/* block (taken) with one entry per runtime (agentsbx, then agentsbx-PROFILE for each --profile)
 * and the end mark: the finished block, heap; NULL with *err when the file already defines one
 * of those keys (prefix + name) outside agentsbx's block */
static char *
add_entries (const struct ctx *x, const struct toml_doc *doc, char *block, const char *prefix, entry_fn entry,
             asbx_err_t *err)
{
  for (size_t i = 0; i <= x->o->nprofiles; i++)
    {
      const char *prof = i ? x->o->profiles[i - 1] : NULL;
      cleanup_free char *name = prof ? xasprintf ("agentsbx-%s", prof) : xstrdup ("agentsbx");
      cleanup_free char *key = xasprintf ("%s%s", prefix, name);
      cleanup_free char *bin = entry_binary (x, prof);
      const struct toml_def *c = toml_conflict (doc, key);
      if (c)
        {
          free (block);
          asbx_error (err, 0,
                      "setup: %s: `%s` (outside agentsbx's block) already defines the runtime %s: remove it and "
                      "run setup again",
                      x->path, c->path, name);
          return NULL;
        }
      char *nb = entry (block, key, name, bin);
      free (block);
      block = nb;
    }
  char *nb = xasprintf ("%s%s\n", block, END_MARK);
  free (block);
  return nb;
}

static char *
containerd_block (const struct ctx *x, const struct toml_doc *doc, const char *base, asbx_err_t *err)
{
  const struct toml_def *ver = toml_find (doc, "version");
  long v = ver ? toml_int_value (base, ver) : (blank (base) ? 2 : 1);
  const char *cri = v == 1   ? "plugins.cri"
                    : v == 2 ? "plugins.\"io.containerd.grpc.v1.cri\""
                    : v == 3 ? "plugins.\"io.containerd.cri.v1.runtime\""
                             : NULL;
  for (size_t i = 0; !ver && v == 1 && i < doc->n; i++)
    if (strncmp (doc->defs[i].path, "plugins.\"io.containerd.", 21) == 0)
      {
        asbx_error (err, 0,
                    "setup: %s: `%s` is a config version 2 name but the file has no `version = 2` (containerd "
                    "then reads it as version 1 and ignores that table): add it first",
                    x->path, doc->defs[i].path);
        return NULL;
      }
  if (!cri)
    {
      asbx_error (err, 0, "setup: %s: version = %ld: expected containerd config version 1, 2 or 3", x->path, v);
      return NULL;
    }
  char *block = xasprintf ("%s (`agentsbx setup containerd --undo` removes this block)\n%s", BEGIN_MARK,
                           !ver && blank (base) ? "version = 2\n" : "");
  cleanup_free char *prefix = xasprintf ("%s.containerd.runtimes.", cri);
  return add_entries (x, doc, block, prefix, containerd_entry, err);
}

/* the block and where it goes (*at: an offset in base) */
static char *
podman_block (const struct ctx *x, const struct toml_doc *doc, const char *base, size_t *at, asbx_err_t *err)
{
  const struct toml_def *hdr = toml_find (doc, "engine.runtimes");
  if (hdr && (!hdr->header || hdr->array))
    hdr = NULL;
  if (!hdr)
    {
      const struct toml_def *c = toml_conflict (doc, "engine.runtimes");
      if (c)
        {
          asbx_error (err, 0,
                      "setup: %s: `%s` defines engine.runtimes without an [engine.runtimes] table: add "
                      "the entries there by hand (agentsbx-setup(8))",
                      x->path, c->path);
          return NULL;
        }
    }
  *at = hdr ? hdr->line_end : strlen (base);
  char *block = xasprintf ("%s (`agentsbx setup podman --undo` removes this block)\n%s", BEGIN_MARK,
                           hdr ? "" : "[engine.runtimes]\n");
  return add_entries (x, doc, block, "engine.runtimes.", podman_entry, err);
}

static char *
toml_edit (const struct ctx *x, const char *text, asbx_err_t *err)
{
  cleanup_free char *base = without_block (text), *msg = NULL;
  struct toml_doc doc;
  if (toml_scan (base, strlen (base), &doc, &msg) < 0)
    {
      asbx_error (err, 0, "setup: %s: not TOML: %s", x->path, msg);
      return NULL;
    }
  if (x->o->undo)
    {
      toml_doc_free (&doc);
      return xstrdup (base);
    }
  size_t at = strlen (base);
  char *block = x->o->engine == ASBX_SETUP_PODMAN ? podman_block (x, &doc, base, &at, err)
                                                  : containerd_block (x, &doc, base, err);
  toml_doc_free (&doc);
  if (!block)
    return NULL;
  bool nl = at > 0 && base[at - 1] != '\n';
  char *out = xasprintf ("%.*s%s%s%s", (int) at, base, nl ? "\n" : "", block, base + at);
  free (block);
  return out;
}

/* ---------------------------------------------------------------------------------------------
 * profile wrappers (the runc v2 shim and Podman take no per-runtime arguments) */

static int
write_wrappers (const struct ctx *x, asbx_err_t *err)
{
  if (x->o->engine == ASBX_SETUP_DOCKER || x->o->nprofiles == 0)
    return 0;
  if (mkdir (x->wdir, 0755) < 0 && errno != EEXIST)
    return asbx_error (err, errno, "setup: create %s", x->wdir);
  for (size_t i = 0; i < x->o->nprofiles; i++)
    {
      cleanup_free char *p = wrapper_path (x, x->o->profiles[i]);
      cleanup_free char *body = xasprintf (
          "#!/bin/sh\n%s %s (removed by `agentsbx setup %s --undo`)\nexec '%s' --profile='%s' \"$@\"\n", WRAPPER_MARK,
          x->o->profiles[i], x->engine, x->bin, x->o->profiles[i]);
      if (write_atomic (p, body, strlen (body), NULL, 0755, err) < 0)
        return -1;
    }
  return 0;
}

/* every quoted path in the block naming one of our wrappers (its marker line) is removed */
static void
remove_wrappers (const struct ctx *x, const char *text, bool dry)
{
  size_t a, b;
  if (x->o->engine == ASBX_SETUP_DOCKER || !find_block (text, &a, &b))
    return;
  cleanup_free char *blk = xasprintf ("%.*s", (int) (b - a), text + a);
  for (char *q = strchr (blk, '"'); q; q = strchr (q + 1, '"'))
    {
      char *e = strchr (q + 1, '"');
      if (!e)
        break;
      *e = '\0';
      const char *base = strrchr (q + 1, '/');
      char head[256] = "";
      cleanup_close int fd = base && strncmp (base + 1, "agentsbx-", 9) == 0
                                 ? open (q + 1, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                                 : -1;
      ssize_t n = fd >= 0 ? read (fd, head, sizeof head - 1) : -1;
      head[n > 0 ? n : 0] = '\0';
      const char *l2 = strchr (head, '\n');
      if (l2 && strncmp (l2 + 1, WRAPPER_MARK, sizeof WRAPPER_MARK - 1) == 0)
        {
          if (dry)
            fprintf (stderr, "agentsbx setup: dry run: would remove %s\n", q + 1);
          else if (unlink (q + 1) == 0)
            fprintf (stderr, "agentsbx setup: removed %s\n", q + 1);
        }
      q = e;
    }
}

/* ---------------------------------------------------------------------------------------------
 */

static const char *
default_config (enum asbx_setup_engine e, char *buf, size_t len)
{
  if (e == ASBX_SETUP_DOCKER)
    return "/etc/docker/daemon.json";
  if (e == ASBX_SETUP_CONTAINERD)
    return "/etc/containerd/config.toml";
  if (geteuid () == 0)
    return "/etc/containers/containers.conf";
  const char *xdg = getenv ("XDG_CONFIG_HOME"), *home = getenv ("HOME");
  if (xdg && *xdg == '/')
    snprintf (buf, len, "%s/containers/containers.conf", xdg);
  else
    snprintf (buf, len, "%s/.config/containers/containers.conf", home ? home : "");
  return buf;
}

static const char *
reload_hint (enum asbx_setup_engine e)
{
  if (e == ASBX_SETUP_DOCKER)
    return "now run: systemctl reload docker   (dockerd re-reads its runtimes on SIGHUP)";
  if (e == ASBX_SETUP_CONTAINERD)
    return "now run: systemctl restart containerd";
  return "nothing to restart: podman reads containers.conf at every command";
}

static int
check_opts (const struct ctx *x, asbx_err_t *err)
{
  for (size_t i = 0; i < x->o->nprofiles; i++)
    {
      const char *p = x->o->profiles[i];
      if (!*p || p[0] == '.' || p[strspn (p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")])
        return asbx_error (err, 0, "setup: --profile `%s`: expected a profile name ([A-Za-z0-9._-])", p);
    }
  if (strpbrk (x->bin, " \t\n'\"\\"))
    return asbx_error (err, 0,
                       "setup: runtime path `%s`: expected a path without spaces, quotes or backslashes (Docker "
                       "writes it unquoted into a script)",
                       x->bin);
  if (x->bin[0] != '/')
    return asbx_error (err, 0, "setup: runtime path `%s`: expected an absolute path", x->bin);
  return 0;
}

int
asbx_setup (const struct asbx_setup_opts *o, asbx_err_t *err)
{
  static const char *const names[] = { "docker", "podman", "containerd" };
  char cfgbuf[PATH_MAX];
  struct ctx x = { .o = o, .engine = names[o->engine] };
  struct text cur = { 0 }, bak = { 0 };
  struct stat st = { 0 }, bst = { 0 };
  bool exists = false, bexists = false;
  int ret = -1;
  char *next = NULL;

  x.path = o->config ? o->config : default_config (o->engine, cfgbuf, sizeof cfgbuf);
  x.wdir = o->wrapper_dir ? o->wrapper_dir : "/usr/local/libexec/agentsbx";
  if (o->binary)
    snprintf (x.bin, sizeof x.bin, "%s", o->binary);
  else if (!realpath ("/proc/self/exe", x.bin))
    return asbx_error (err, errno, "setup: resolve /proc/self/exe");
  if (check_opts (&x, err) < 0)
    return -1;
  cleanup_free char *bpath = xasprintf ("%s.agentsbx-backup", x.path);
  if (read_config (x.path, &cur, &exists, &st, err) < 0 || read_config (bpath, &bak, &bexists, &bst, err) < 0)
    goto out;
  next = o->engine == ASBX_SETUP_DOCKER ? docker_edit (&x, cur.s, err) : toml_edit (&x, cur.s, err);
  if (!next)
    goto out;
  bool json = o->engine == ASBX_SETUP_DOCKER;
  bool same = (!exists && o->undo) || (json ? exists && json_same (&x, cur.s, next) : strcmp (cur.s, next) == 0);
  /* undo: the backup is the file as it was when nothing else changed since setup */
  bool restore = o->undo && bexists
                 && (json ? json_same (&x, next, bak.s)
                          : strcmp (next, bak.s) == 0
                                || (strlen (next) == bak.len + 1 && strncmp (next, bak.s, bak.len) == 0));
  bool remove_file = o->undo && !bexists && exists && (json ? json_same (&x, next, "{}") : blank (next))
                     && !blank (cur.s);
  if (same && !restore)
    {
      fprintf (stderr, "agentsbx setup: %s: %s (nothing changed)\n", x.path,
               o->undo ? "no agentsbx entry to remove" : "already set up");
      if (!o->undo && !o->dry_run && write_wrappers (&x, err) < 0)
        goto out;
      ret = 0;
      goto out;
    }
  const char *final = restore ? bak.s : next;
  if (o->dry_run)
    {
      if (remove_file)
        fprintf (stderr, "agentsbx setup: dry run: would remove %s (setup created it)\n", x.path);
      else
        {
          fputs (final, stdout);
          fprintf (stderr, "agentsbx setup: dry run: %s would be written as above%s; nothing changed\n", x.path,
                   restore ? " (its backup, byte for byte)" : "");
        }
      if (o->undo)
        remove_wrappers (&x, cur.s, true);
      ret = 0;
      goto out;
    }
  if (!o->undo)
    {
      if (exists && !bexists && write_atomic (bpath, cur.s, cur.len, &st, 0600, err) < 0)
        goto out;
      if (write_wrappers (&x, err) < 0)
        goto out;
    }
  if (remove_file ? unlink (x.path) < 0 && errno != ENOENT
                  : write_atomic (x.path, final, strlen (final), exists ? &st : NULL, 0644, err) < 0)
    {
      if (remove_file)
        asbx_error (err, errno, "setup: remove %s", x.path);
      goto out;
    }
  if (o->undo)
    {
      remove_wrappers (&x, cur.s, false);
      if (restore && unlink (bpath) < 0)
        fprintf (stderr, "agentsbx setup: warning: remove %s: %s\n", bpath, strerror (errno));
      fprintf (stderr, "agentsbx setup: %s: %s\n", x.path,
               restore       ? "restored from its backup (unchanged since setup)"
               : remove_file ? "removed (setup had created it)"
                             : "agentsbx's entries removed (the file changed since setup: the backup is kept)");
    }
  else
    fprintf (stderr, "agentsbx setup: %s: runtime agentsbx%s%s added (runtime %s)%s%s\n", x.path,
             o->nprofiles ? " and one per --profile" : "", "", x.bin, exists && !bexists ? "; backup: " : "",
             exists && !bexists ? bpath : "");
  fprintf (stderr, "agentsbx setup: %s\n", reload_hint (o->engine));
  ret = 0;
out:
  free (next);
  free (cur.s);
  free (bak.s);
  return ret;
}
