/* doc.h - internal to src/policy: one parsed, validated policy document.
 *
 * Every field carries a `set` flag, because "not written" and "written empty" differ: in a
 * request an unset field inherits the ceiling, in `extends` it inherits the base, and in the
 * effective policy an unset field means "not restricted by the policy" (plain OCI behaviour).
 * Paths are stored without their `?` marker (flag `optional`) and without a trailing "/" "**". */
#ifndef ASBX_POLICY_DOC_H
#define ASBX_POLICY_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct pdoc_path
{
  char *path;     /* absolute, normalised; for `~/x` rules the suffix "x" */
  bool optional;  /* written with a leading `?` */
  bool each_home; /* written `~/x`: /root/x and /home/<each>/x (deny lists only) */
  char *origin;   /* "profile agent: filesystem.denyRead[3]" */
};

struct pdoc_paths
{
  bool set;
  struct pdoc_path *v;
  size_t len;
};

struct pdoc_strs
{
  bool set;
  char **v; /* NULL-terminated */
  size_t len;
};

struct pdoc_u64
{
  bool set;
  uint64_t v;
};

/* network.credentials[i] (issue 19): a header the egress adds to every request to `host` */
struct pdoc_cred
{
  char *host;   /* exact host name, lower case (pval_domain, no wildcard) */
  char *header; /* an HTTP field name (RFC 9110 token), as written */
  char *value;  /* template as written: text and ${secret:NAME} references, checked */
  char *origin; /* "profile x: network.credentials[0]" */
};

struct pdoc_creds
{
  bool set;
  struct pdoc_cred *v;
  size_t len;
};

/* network.http[i].allow[j] */
struct pdoc_http_allow
{
  struct pdoc_strs methods; /* upper-case tokens; unset = any */
  struct pdoc_strs paths;   /* fnmatch(3) patterns starting with '/' (or "*"); unset = any */
};

/* network.http[i] (issue 19): request rules for one intercepted host */
struct pdoc_http
{
  char *host;
  struct pdoc_http_allow *allow;
  size_t allow_len;
  bool allow_set;          /* `allow` written (an empty list allows nothing) */
  uint64_t max_body_bytes; /* 0 = no cap */
  char *origin;            /* "profile x: network.http[0]" */
};

struct pdoc_https
{
  bool set;
  struct pdoc_http *v;
  size_t len;
};

enum pdoc_fs_list
{
  PDOC_ALLOW_READ,
  PDOC_DENY_READ,
  PDOC_ALLOW_WRITE,
  PDOC_DENY_WRITE,
  PDOC_ALLOW_EXEC,
  PDOC_TMPFS,
  PDOC_FS_LISTS
};

enum pdoc_limit
{
  PDOC_MEMORY_BYTES,
  PDOC_PIDS,
  PDOC_OPEN_FILES,
  PDOC_FILE_SIZE_BYTES,
  PDOC_WALL_CLOCK_SECONDS,
  PDOC_CPU_SECONDS,
  PDOC_FAILED_EXECS,
  PDOC_LIMITS
};

struct pdoc
{
  char *source;  /* "profile agent", "/etc/x.json", "annotation io.agentsbx.policy" */
  char *extends; /* as written (already applied after pdoc_load) */

  bool has_fs; /* a filesystem section with rules (filesystem.workspace alone does not set it) */
  struct pdoc_paths fs[PDOC_FS_LISTS];
  /* filesystem.workspace (issue 18): the container path of the workspace mount (NULL unset,
   * else absolute and normalised) and its mode (-1 unset, else enum policy_ws_mode) */
  char *ws_path;
  int ws_mode;
  /* isolation (issue 22): -1 unset, else enum policy_isolation */
  int isolation;

  bool has_net;
  int net_mode;            /* -1 unset, else enum policy_net_mode */
  int allow_local_binding; /* -1 unset, 0, 1 */
  struct pdoc_strs allowed_domains, denied_domains, allowed_cidrs;
  struct pdoc_strs allow_unix_sockets; /* network.allowUnixSockets: absolute, normalized paths */
  struct pdoc_creds credentials;       /* network.credentials */
  struct pdoc_https http;              /* network.http */
  bool ports_set;
  uint16_t *ports;
  size_t ports_len;

  bool deny_groups_set;
  unsigned deny_groups;
  int deny_wx_memory; /* syscalls.denyWriteExecMemory: -1 unset, 0, 1 */

  struct pdoc_strs caps_allow;

  struct pdoc_u64 limits[PDOC_LIMITS];
  bool cpus_set;
  double cpus;

  int approvals_network; /* -1 unset, else enum policy_approval */
  struct pdoc_u64 approvals_timeout;
  int on_timeout_allow; /* -1 unset, 0 deny, 1 allow */

  bool audit_set;
  unsigned audit_events;
  int audit_on_full; /* audit.onFull: -1 unset, 0 kill, 1 continue */

  struct pdoc_strs degrade;
};

/* names as written in documents, indexed by the enums above */
extern const char *const pdoc_fs_names[PDOC_FS_LISTS];
extern const char *const pdoc_limit_names[PDOC_LIMITS];
extern const char *const pdoc_audit_names[8];  /* bit i = 1u << i */
extern const char *const pdoc_caps[];          /* NULL-terminated, index = capability number */
extern const char *const pdoc_degrade_names[]; /* NULL-terminated */

/* Looks up a profile's text by name: built-in or site. Returns the JSON (heap, *len set) and a
 * description of where it came from (*where, heap: "built-in", "/etc/agentsbx/profiles/x.json"),
 * NULL with *err set when it does not exist or cannot be read. */
typedef char *(*pdoc_lookup_fn) (void *ud, const char *name, size_t *len, char **where, asbx_err_t *err);

/* Parse and validate `len` bytes of policy JSON named `source` (for messages), then apply
 * `extends` through `lookup` (chains allowed, cycles and depth > 8 refused).
 * Returns a new document or NULL with *err set ("SOURCE: JSON.PATH: message"). */
struct pdoc *pdoc_load (const char *json, size_t len, const char *source, pdoc_lookup_fn lookup, void *ud,
                        asbx_err_t *err);

/* Same, with the chain of profile names being expanded (for cycle detection). */
struct pdoc *pdoc_load_chain (const char *json, size_t len, const char *source, pdoc_lookup_fn lookup, void *ud,
                              const char **chain, size_t depth, asbx_err_t *err);

/* A profile by name through `lookup` (name validated: [A-Za-z0-9._-], no leading dot). */
struct pdoc *pdoc_load_profile (const char *name, pdoc_lookup_fn lookup, void *ud, const char **chain, size_t depth,
                                asbx_err_t *err);

/* Valid profile name? */
bool pdoc_profile_name_ok (const char *name);

void pdoc_free (struct pdoc *d);
struct pdoc *pdoc_new (const char *source);

/* deep copies and list helpers (merge.c) */
void pdoc_paths_copy (struct pdoc_paths *dst, const struct pdoc_paths *src);
void pdoc_paths_clear (struct pdoc_paths *p);
void pdoc_paths_add (struct pdoc_paths *p, const struct pdoc_path *e);
void pdoc_strs_copy (struct pdoc_strs *dst, const struct pdoc_strs *src);
void pdoc_strs_clear (struct pdoc_strs *s);
void pdoc_creds_copy (struct pdoc_creds *dst, const struct pdoc_creds *src);
void pdoc_creds_clear (struct pdoc_creds *c);
void pdoc_creds_add (struct pdoc_creds *c, const struct pdoc_cred *e); /* deep copy */
void pdoc_https_copy (struct pdoc_https *dst, const struct pdoc_https *src);
void pdoc_https_clear (struct pdoc_https *h);
void pdoc_https_add (struct pdoc_https *h, const struct pdoc_http *e); /* deep copy, duplicates kept once */
void pdoc_strs_add (struct pdoc_strs *s, const char *v);
bool pdoc_strs_has (const struct pdoc_strs *s, const char *v);

/* Apply `base` under `d` (extends): fields d does not set come from base; deny lists, denied
 * domains, syscall groups and audit events are unions. */
void pdoc_inherit (struct pdoc *d, const struct pdoc *base);

/* Fill in the defaults a present section implies (POLICY.md §2; docs/policy.md "defaults"). */
void pdoc_normalize (struct pdoc *d);

/* ceiling ∩ request (merge.c). `ceiling_name` is how widening messages name the ceiling
 * (`profile "agent"`). With clamp false, any widening fails with one line per widened field;
 * with clamp true, widened values are narrowed and one line per field is appended to *clamps.
 * Returns the effective document or NULL with *err set. */
struct pdoc *pdoc_intersect (const struct pdoc *ceiling, const struct pdoc *request, const char *ceiling_name,
                             bool clamp, char ***clamps, size_t *clamps_len, asbx_err_t *err);

/* The rules of network.credentials/network.http on an effective (normalised) document, which
 * no single field can check (docs/policy.md "Credentials"): credentials and http rules need
 * network.mode filtered (the egress relay is in the path only then); a credential rides TLS only
 * and HTTP rules are checked on TLS only, so network.ports may hold no port but 443 while there
 * is either. 0, or -1 with *err
 * naming the credential's origin and the field. */
int pdoc_check_egress (const struct pdoc *d, asbx_err_t *err);

/* Canonical JSON of a document (sorted fields, normalised values) - effective_json. Heap. */
char *pdoc_to_json (const struct pdoc *d, bool pretty);
/* Emit into a caller's yajl_gen (void * to keep yajl out of this header's users). */
void pdoc_gen (void *gen, const struct pdoc *d);

/* values (values.c): each returns 0, or -1 with a message (heap) in *why */
int pval_size (const char *s, uint64_t *out, char **why);     /* "2GiB", "512MiB", "100KB", "4096B" */
int pval_duration (const char *s, uint64_t *out, char **why); /* "90s", "30m", "2h", "1d"; both <= INT64_MAX */
int pval_domain (const char *s, char **norm, char **why);     /* lowercased, trailing dot dropped */
int pval_cidr (const char *s, char **norm, char **why);       /* canonical "a.b.c.d/n[:port]", "[v6]/n[:port]" */
int pval_path (const char *s, struct pdoc_path *out, bool home_ok, char **why);
/* does hierarchy `outer` contain path `inner` (equal or below)? */
bool pval_path_covers (const char *outer, const char *inner);
/* does domain pattern `outer` allow everything `inner` names? */
bool pval_domain_covers (const char *outer, const char *inner);
/* does cidr `outer` contain cidr `inner` (and its port)? both canonical */
bool pval_cidr_covers (const char *outer, const char *inner);

#endif
