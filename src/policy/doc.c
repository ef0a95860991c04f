/* doc.c - the policy document model: name tables, list helpers, `extends` inheritance and the
 * defaults a present section implies. Pure data manipulation.
 *
 * Inheritance (`extends`) is composition by one author: a field the document sets replaces the
 * base's value whole, except the lists that only ever restrict (denyRead, denyWrite,
 * deniedDomains, network.http, syscalls.deny, audit.events), which accumulate, so that extending `agent`
 * to add one denied path cannot silently drop agent's credential paths. */
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/doc.h"
#include "policy/plan.h"

const char *const pdoc_fs_names[PDOC_FS_LISTS] = { "allowRead", "denyRead",  "allowWrite",
                                                   "denyWrite", "allowExec", "tmpfs" };
const char *const pdoc_limit_names[PDOC_LIMITS] = { "memoryBytes",      "pids",       "openFiles",  "fileSizeBytes",
                                                    "wallClockSeconds", "cpuSeconds", "failedExecs" };
/* bit i of audit_events = 1u << i, the same values as POLICY_AUDIT_* in plan.h */
const char *const pdoc_audit_names[8] = {
  "lifecycle", "policy", "exec", "network", "dns", "denial", "limit", "approval"
};
/* capability(7) names, index = number (linux/capability.h, up to CAP_CHECKPOINT_RESTORE = 40) */
const char *const pdoc_caps[] = {
  "CAP_CHOWN",
  "CAP_DAC_OVERRIDE",
  "CAP_DAC_READ_SEARCH",
  "CAP_FOWNER",
  "CAP_FSETID",
  "CAP_KILL",
  "CAP_SETGID",
  "CAP_SETUID",
  "CAP_SETPCAP",
  "CAP_LINUX_IMMUTABLE",
  "CAP_NET_BIND_SERVICE",
  "CAP_NET_BROADCAST",
  "CAP_NET_ADMIN",
  "CAP_NET_RAW",
  "CAP_IPC_LOCK",
  "CAP_IPC_OWNER",
  "CAP_SYS_MODULE",
  "CAP_SYS_RAWIO",
  "CAP_SYS_CHROOT",
  "CAP_SYS_PTRACE",
  "CAP_SYS_PACCT",
  "CAP_SYS_ADMIN",
  "CAP_SYS_BOOT",
  "CAP_SYS_NICE",
  "CAP_SYS_RESOURCE",
  "CAP_SYS_TIME",
  "CAP_SYS_TTY_CONFIG",
  "CAP_MKNOD",
  "CAP_LEASE",
  "CAP_AUDIT_WRITE",
  "CAP_AUDIT_CONTROL",
  "CAP_SETFCAP",
  "CAP_MAC_OVERRIDE",
  "CAP_MAC_ADMIN",
  "CAP_SYSLOG",
  "CAP_WAKE_ALARM",
  "CAP_BLOCK_SUSPEND",
  "CAP_AUDIT_READ",
  "CAP_PERFMON",
  "CAP_BPF",
  "CAP_CHECKPOINT_RESTORE",
  NULL,
};
const char *const pdoc_degrade_names[] = { "landlock", "seccomp", "nftables", "cgroup", "pin", NULL };

struct pdoc *
pdoc_new (const char *source)
{
  struct pdoc *d = xmalloc0 (sizeof *d);
  d->source = xstrdup (source);
  d->net_mode = -1;
  d->allow_local_binding = -1;
  d->deny_wx_memory = -1;
  d->approvals_network = -1;
  d->on_timeout_allow = -1;
  d->audit_on_full = -1;
  d->ws_mode = -1;
  d->isolation = -1;
  return d;
}

void
pdoc_paths_clear (struct pdoc_paths *p)
{
  for (size_t i = 0; i < p->len; i++)
    {
      free (p->v[i].path);
      free (p->v[i].origin);
    }
  free (p->v);
  memset (p, 0, sizeof *p);
}

/* Add (deep copy); a path already present is merged: it stays optional only if both are. */
void
pdoc_paths_add (struct pdoc_paths *p, const struct pdoc_path *e)
{
  p->set = true;
  for (size_t i = 0; i < p->len; i++)
    if (p->v[i].each_home == e->each_home && strcmp (p->v[i].path, e->path) == 0)
      {
        p->v[i].optional = p->v[i].optional && e->optional;
        return;
      }
  p->v = xrealloc (p->v, (p->len + 1) * sizeof (*p->v));
  p->v[p->len] = *e;
  p->v[p->len].path = xstrdup (e->path);
  p->v[p->len].origin = xstrdup (e->origin);
  p->len++;
}

void
pdoc_paths_copy (struct pdoc_paths *dst, const struct pdoc_paths *src)
{
  pdoc_paths_clear (dst);
  for (size_t i = 0; i < src->len; i++)
    pdoc_paths_add (dst, &src->v[i]);
  dst->set = src->set;
}

void
pdoc_strs_clear (struct pdoc_strs *s)
{
  asbx_strv_free (s->v);
  memset (s, 0, sizeof *s);
}

bool
pdoc_strs_has (const struct pdoc_strs *s, const char *v)
{
  for (size_t i = 0; i < s->len; i++)
    if (strcmp (s->v[i], v) == 0)
      return true;
  return false;
}

void
pdoc_strs_add (struct pdoc_strs *s, const char *v)
{
  s->set = true;
  if (pdoc_strs_has (s, v))
    return;
  s->v = xrealloc (s->v, (s->len + 2) * sizeof (char *));
  s->v[s->len++] = xstrdup (v);
  s->v[s->len] = NULL;
}

void
pdoc_strs_copy (struct pdoc_strs *dst, const struct pdoc_strs *src)
{
  pdoc_strs_clear (dst);
  for (size_t i = 0; i < src->len; i++)
    pdoc_strs_add (dst, src->v[i]);
  dst->set = src->set;
}

void
pdoc_free (struct pdoc *d)
{
  if (d == NULL)
    return;
  free (d->source);
  free (d->extends);
  free (d->ws_path);
  for (int i = 0; i < PDOC_FS_LISTS; i++)
    pdoc_paths_clear (&d->fs[i]);
  pdoc_strs_clear (&d->allowed_domains);
  pdoc_strs_clear (&d->denied_domains);
  pdoc_strs_clear (&d->allowed_cidrs);
  pdoc_strs_clear (&d->allow_unix_sockets);
  pdoc_creds_clear (&d->credentials);
  pdoc_https_clear (&d->http);
  free (d->ports);
  pdoc_strs_clear (&d->caps_allow);
  pdoc_strs_clear (&d->degrade);
  free (d);
}

static void
inherit_paths (struct pdoc_paths *d, const struct pdoc_paths *base, bool accumulate)
{
  if (!d->set)
    pdoc_paths_copy (d, base);
  else if (accumulate)
    for (size_t i = 0; i < base->len; i++)
      pdoc_paths_add (d, &base->v[i]);
}

static void
inherit_strs (struct pdoc_strs *d, const struct pdoc_strs *base, bool accumulate)
{
  if (!d->set)
    pdoc_strs_copy (d, base);
  else if (accumulate)
    for (size_t i = 0; i < base->len; i++)
      pdoc_strs_add (d, base->v[i]);
}

void
pdoc_inherit (struct pdoc *d, const struct pdoc *b)
{
  d->has_fs = d->has_fs || b->has_fs;
  for (int i = 0; i < PDOC_FS_LISTS; i++)
    inherit_paths (&d->fs[i], &b->fs[i], i == PDOC_DENY_READ || i == PDOC_DENY_WRITE);
  if (d->ws_mode < 0)
    d->ws_mode = b->ws_mode;
  if (d->isolation < 0)
    d->isolation = b->isolation;
  if (d->ws_path == NULL && b->ws_path)
    d->ws_path = xstrdup (b->ws_path);

  d->has_net = d->has_net || b->has_net;
  if (d->net_mode < 0)
    d->net_mode = b->net_mode;
  if (d->allow_local_binding < 0)
    d->allow_local_binding = b->allow_local_binding;
  inherit_strs (&d->allowed_domains, &b->allowed_domains, false);
  inherit_strs (&d->denied_domains, &b->denied_domains, true);
  inherit_strs (&d->allowed_cidrs, &b->allowed_cidrs, false);
  inherit_strs (&d->allow_unix_sockets, &b->allow_unix_sockets, false);
  /* credentials are one author's choice, replaced whole; http rules only restrict: they add up */
  if (!d->credentials.set)
    pdoc_creds_copy (&d->credentials, &b->credentials);
  for (size_t i = 0; i < b->http.len; i++)
    pdoc_https_add (&d->http, &b->http.v[i]);
  if (!d->ports_set && b->ports_set)
    {
      d->ports_set = true;
      d->ports_len = b->ports_len;
      d->ports = xmalloc (b->ports_len * sizeof (*d->ports) + 1);
      memcpy (d->ports, b->ports, b->ports_len * sizeof (*d->ports));
    }

  d->deny_groups_set = d->deny_groups_set || b->deny_groups_set;
  d->deny_groups |= b->deny_groups;
  if (d->deny_wx_memory < 0)
    d->deny_wx_memory = b->deny_wx_memory;
  inherit_strs (&d->caps_allow, &b->caps_allow, false);
  for (int i = 0; i < PDOC_LIMITS; i++)
    if (!d->limits[i].set)
      d->limits[i] = b->limits[i];
  if (!d->cpus_set)
    {
      d->cpus_set = b->cpus_set;
      d->cpus = b->cpus;
    }
  if (d->approvals_network < 0)
    d->approvals_network = b->approvals_network;
  if (!d->approvals_timeout.set)
    d->approvals_timeout = b->approvals_timeout;
  if (d->on_timeout_allow < 0)
    d->on_timeout_allow = b->on_timeout_allow;
  d->audit_set = d->audit_set || b->audit_set;
  d->audit_events |= b->audit_events;
  if (d->audit_on_full < 0)
    d->audit_on_full = b->audit_on_full;
  inherit_strs (&d->degrade, &b->degrade, false);
}

void
pdoc_normalize (struct pdoc *d)
{
  if (d->has_fs)
    {
      if (!d->fs[PDOC_ALLOW_READ].set)
        {
          struct pdoc_path root = { .path = (char *) "/", .origin = (char *) "default: filesystem.allowRead" };
          pdoc_paths_add (&d->fs[PDOC_ALLOW_READ], &root);
        }
      /* allowExec stays unset: "exec anywhere readable" */
      for (int i = 0; i < PDOC_FS_LISTS; i++)
        if (i != PDOC_ALLOW_EXEC)
          d->fs[i].set = true;
    }
  if (d->has_net)
    {
      if (d->net_mode < 0)
        d->net_mode = POLICY_NET_FILTERED;
      if (d->allow_local_binding < 0)
        d->allow_local_binding = 0;
      d->allowed_domains.set = d->denied_domains.set = d->allowed_cidrs.set = true;
      if (!d->ports_set)
        {
          d->ports_set = true;
          d->ports_len = 2;
          d->ports = xmalloc (2 * sizeof (*d->ports));
          d->ports[0] = 80;
          d->ports[1] = 443;
        }
    }
}
