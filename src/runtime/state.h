/* state.h - the runtime's per-container state directory <root>/<id>/ and the OCI status.
 *
 * Layout: <root>/<id>/            (0700; its existence reserves the id)
 *           state.json            our record (atomic rename on write)
 *           config.json           the bundle's config as parsed at create (hooks, annotations)
 *           start.sock            exists while the container is `created`: the init's listening
 *                                 socket; `start` connects to release it
 *           pins                  the host-side pins of masked files (runtime/policy_pin.h), removed
 *                                 by delete
 * A per-container lock (flock on the directory fd) serialises create/start/kill/delete on one id.
 * Status (runtime-spec runtime.md "State"): creating = dir without state.json; stopped = the init
 * process is gone (pid + start time from /proc/PID/stat no longer match); created = alive and
 * start.sock present; paused = alive and its cgroup frozen; running = alive otherwise. */
#ifndef ASBX_RUNTIME_STATE_H
#define ASBX_RUNTIME_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "libocispec/oci_spec.h"

struct asbx_state
{
  char *id;
  pid_t pid;
  uint64_t pid_start; /* field 22 of /proc/PID/stat (clock ticks since boot) */
  char *bundle;
  char *rootfs;
  char *created; /* RFC 3339 UTC */
  char *cgroup_path;
  unsigned long cgroup_mask;
  bool systemd_cgroup;
  uid_t owner;
  struct oci_map annotations; /* copied */
};

void asbx_state_free (struct asbx_state *st);

/* Validate a container id: non-empty, <= 1024 bytes, [A-Za-z0-9_+.-], not "." or "..".
 * (runc's rule). -1 with *err "invalid container id `a/b`". */
int asbx_id_validate (const char *id, asbx_err_t *err);

/* Create <root> (0700) if missing and return an O_DIRECTORY fd of it. */
int asbx_root_open (const char *root, bool create, asbx_err_t *err);

/* Reserve a new id: mkdirat(rootfd, id, 0700) (EEXIST -> "container `x` already exists"),
 * open and lock it. Returns the dir fd (caller owns) or -1. */
int asbx_state_dir_create (int rootfd, const char *id, asbx_err_t *err);

/* Open and lock (LOCK_EX, blocking) an existing container's dir. ENOENT -> "container `x` does
 * not exist". Returns the fd or -1. */
int asbx_state_dir_open (int rootfd, const char *id, asbx_err_t *err);

/* Remove the container's dir (files inside, then the dir) - used by delete and failed create. */
int asbx_state_dir_remove (int rootfd, const char *id, asbx_err_t *err);

/* Write state.json atomically (tmp + rename) in dirfd. */
int asbx_state_write (int dirfd, const struct asbx_state *st, asbx_err_t *err);

/* Read state.json from dirfd. ENOENT means "creating". */
int asbx_state_read (int dirfd, struct asbx_state *st, asbx_err_t *err);

/* An existing container, opened for one operation: its state root, its locked state dir and
 * its state (has_state false: still "creating", or a create that died before recording it). */
struct asbx_opened
{
  int rootfd;
  int dirfd;
  struct asbx_state st;
  bool has_state;
};

/* Validate the id, open the state root and the container's dir (locked for the caller's whole
 * operation) and read its state. "container `x` does not exist" when either is missing.
 * On failure the caller still calls asbx_container_close. 0 / -1 with *err. */
int asbx_container_open (const char *root, const char *id, struct asbx_opened *o, asbx_err_t *err);

/* Close the fds (releasing the lock) and free the state. */
void asbx_container_close (struct asbx_opened *o);

/* Start time of pid from /proc/PID/stat; 0 when the process is gone. */
uint64_t asbx_pid_start_time (pid_t pid);

/* The container's status (runtime-spec runtime.md "State": creating, created, running, stopped;
 * paused as runc and the cgroup freezer add it). */
enum asbx_status
{
  ASBX_STATUS_CREATING, /* state dir without state.json */
  ASBX_STATUS_CREATED,  /* init alive, start.sock present */
  ASBX_STATUS_RUNNING,  /* init alive, released */
  ASBX_STATUS_PAUSED,   /* init alive, its cgroup frozen */
  ASBX_STATUS_STOPPED,  /* init gone (pid + start time no longer match) */
};

/* The operations whose allowed statuses the transition table holds (state.c). */
enum asbx_op
{
  ASBX_OP_CREATE,      /* creating -> created */
  ASBX_OP_START,       /* created -> running */
  ASBX_OP_DELETE,      /* created, stopped -> gone (running and paused need --force) */
  ASBX_OP_EXEC,        /* running */
  ASBX_OP_EXEC_PAUSED, /* exec --ignore-paused: running, paused */
  ASBX_OP_CHECKPOINT,  /* running, paused */
  ASBX_OP_CGROUP,      /* update, pause, resume, ps, events: any live container */
};

/* The OCI name of a status ("creating", "created", "running", "paused", "stopped"); static. */
const char *asbx_status_name (enum asbx_status s);

/* true when the transition table allows op on a container in status s. */
bool asbx_status_allows (enum asbx_status s, enum asbx_op op);

/* The status the state given to an op's hooks names: CREATE created, START running, DELETE
 * stopped (runtime.md "Lifecycle"). Only for those three (the others run no hooks). */
enum asbx_status asbx_status_after (enum asbx_op op);

/* Compute the status of a read state (never CREATING: that is a dir without state.json). */
enum asbx_status asbx_state_status (int dirfd, const struct asbx_state *st);

/* true when st->pid is still the init we started (pid + start time match, not a zombie). */
bool asbx_state_alive (const struct asbx_state *st);

#endif
