/* setup.h - `agentsbx setup docker|podman|containerd`: add (or, with undo, remove) agentsbx's
 * runtime entries in an engine's configuration file, idempotently, keeping a backup, touching no
 * other key; see docs/engines.md and agentsbx-setup(8). */
#ifndef ASBX_RUNTIME_SETUP_H
#define ASBX_RUNTIME_SETUP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

enum asbx_setup_engine
{
  ASBX_SETUP_DOCKER,
  ASBX_SETUP_PODMAN,
  ASBX_SETUP_CONTAINERD,
};

struct asbx_setup_opts
{
  enum asbx_setup_engine engine;
  const char *config;      /* the engine's file; NULL = its default (agentsbx-setup(8)) */
  const char *binary;      /* the runtime path written; NULL = this executable (/proc/self/exe) */
  const char *wrapper_dir; /* profile wrappers (podman, containerd); NULL = /usr/local/libexec/agentsbx */
  char **profiles;         /* a runtime "agentsbx-P" per profile P, with the ceiling --profile=P */
  size_t nprofiles;
  bool undo;    /* remove what setup added (every agentsbx entry of ours, whatever the profiles) */
  bool dry_run; /* print the file that would be written on stdout; change nothing */
};

/* Edit the engine's file as described in agentsbx-setup(8): Docker's daemon.json through yajl
 * (parsed, the "runtimes" map edited, re-generated; any other key kept as parsed), containerd's
 * config.toml and Podman's containers.conf by adding or removing one marked block of whole lines
 * (setup_toml.h says why, and refuses a document that already defines the entries elsewhere).
 * The first setup copies the file to FILE.agentsbx-backup (mode kept); undo writes that backup
 * back byte for byte when nothing else changed since (and removes it), else removes only our
 * entries. Writes through a temporary file and rename(2) in the same directory, keeping the
 * mode and owner. Prints what it did and the one command that makes the engine read the file on
 * stderr. 0, or -1 with *err naming the file and what was wrong (errno 0: not JSON/TOML, or an
 * entry of the same name that is not ours; ELOOP: FILE is a symbolic link; else the syscall's). */
int asbx_setup (const struct asbx_setup_opts *o, asbx_err_t *err);

#endif
