/* egress_share.h - one egress per network namespace (issue 21): a container whose config.json
 * joins a network namespace (linux.namespaces network with a path: a Kubernetes pod's app
 * container joining the pause container's, a Podman pod's) in which another live container's
 * monitor already runs the agentsbx egress shares that egress instead of starting a second one
 * (whose DNS stub could not bind 127.0.0.1:53 there, and whose table would replace the first's).
 *
 * Per network namespace (the owner's, shared): the nftables table (monitor/egress_table.c), the
 * DNS stub and its sets, the SNI check and the TLS relay (monitor/dnsstub.c, splice.c,
 * tls_relay.c), NFLOG `network` records, pasta, approvals.network `ask` (asked on the owner's
 * approvals socket). Per container (each its own monitor): the seccomp connect supervisor of unix
 * sockets (monitor/unixsock.c), limits, exec and lifecycle records, the egress CA's trust (the
 * sharer's init trusts the OWNER's CA certificate, since the owner's relay mints the leaves).
 *
 * Sharing needs the same compiled egress (policy/egress_digest.h, field by field); otherwise
 * create is refused, naming both containers and the first differing field.
 *
 * Record: <state root>/@egress/<st_dev>:<st_ino> of the namespace's nsfs file, written by the
 * owner's create once its monitor is ready; all reads and writes under the flock of
 * <state root>/@egress/lock. It names the owner, its monitor's pid and start time (a record whose
 * monitor is gone, or whose pid now names another process, is stale and never trusted: the
 * namespace then gets a new owner), the field digests and the owner's egress CA certificate.
 * The namespace lives at least as long as the owner's monitor (its stub holds a socket and an fd
 * there), so the inode cannot be reused while the record is valid.
 *
 * The owner stopping first: every sharer's monitor holds a pidfd of the owner's monitor and
 * kills its own container when it exits (exitReason "killed", "the egress owner ... exited"):
 * a sharer never keeps a namespace whose egress is gone (fail closed). In a pod the sandbox
 * container is the owner and outlives the app containers, so this fires only on a crash. */
#ifndef ASBX_RUNTIME_EGRESS_SHARE_H
#define ASBX_RUNTIME_EGRESS_SHARE_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/plan.h"

#define EGRESS_SHARE_DIR "@egress"              /* '@' is never in a container id */
#define EGRESS_SHARE_STATE_FILE "egress-record" /* in an owner's state dir: its record's name */

struct egress_share
{
  int lockfd;          /* <root>/@egress/lock, held (LOCK_EX) from prepare to release; -1 */
  bool owner;          /* this container runs the namespace's egress (record it once ready) */
  bool shared;         /* this container uses a live owner's egress */
  char *owner_id;      /* shared: the owner's container id */
  pid_t owner_monitor; /* shared: the owner's monitor pid */
  int owner_pidfd;     /* shared: pidfd of the owner's monitor, checked against its start time; -1 */
  char *owner_ca_pem;  /* shared: the owner's egress CA certificate (PEM), or NULL */
  char *fields;        /* our policy_egress_fields */
};

/* Zero *s (fds -1). */
void egress_share_init (struct egress_share *s);

/* At create, in the runtime, before the init is spawned, for an active plan with network.mode
 * none or filtered (anything else: returns 0 and does nothing). For a joined namespace takes the
 * lock, kept until egress_share_release: creates joining namespaces are serialised, so two never
 * both become one namespace's owner (a fresh namespace's create takes it only in
 * egress_share_record: nobody joins a namespace before its create has returned).
 * netns_fd: the nsfs fd of linux.namespaces' network path (ns_plan_build opened it; netns_path is
 * its path, for messages), or -1 for a fresh namespace (then this container is the owner). For a joined one: the record
 * of that namespace is read; a live owner with the same field digests makes this container a sharer (s->shared and the
 * owner_* fields); a live owner with other digests is refused (EINVAL naming both ids, the path and the first differing
 * field; nothing is left); no record or a stale one makes it the owner. 0 / -1 with *err (errno of a failed
 * open/flock/read, EINVAL for a bad record or a mismatch). */
int egress_share_prepare (int rootfd, const char *id, const struct policy_plan *plan, int netns_fd,
                          const char *netns_path, struct egress_share *s, asbx_err_t *err);

/* For a sharer, before its init is spawned: the owner's table may not be in the namespace yet
 * (runtime/init.c network_table_deferred: in a namespace of the owner's own with only `lo`, the
 * owner's monitor loads it right before pasta attaches, at the first DNS activity), and this
 * container's hooks or processes could wire the namespace before that. So when `table inet
 * agentsbx` is missing from netns_fd it is loaded here (monitor/egress_table.h: the same plan
 * fields give the same text as the owner's; the owner's later load replaces it in one
 * transaction). Not a sharer: 0 at once. 0 / -1 with *err. */
int egress_share_table_ensure (const struct egress_share *s, const struct policy_plan *plan, int netns_fd,
                               asbx_err_t *err);

/* For an owner, once its monitor (monitor_pid) is ready: writes the record of the network
 * namespace of init_pid (temp file + rename, under the lock, taken here if prepare did not),
 * ca_pem (may be NULL) included, and the record's name into the container's state directory
 * (state_dirfd, file EGRESS_SHARE_STATE_FILE) for egress_share_forget. Not an owner: 0 at once.
 * 0 / -1 with *err. */
int egress_share_record (int rootfd, int state_dirfd, struct egress_share *s, const char *id, pid_t init_pid,
                         pid_t monitor_pid, const char *ca_pem, asbx_err_t *err);

/* Unlock and free what prepare took (the pidfd too, unless the caller stole it). */
void egress_share_release (struct egress_share *s);

/* Remove the record container `id` wrote as owner (its name read from the state directory
 * <root>/<id>/EGRESS_SHARE_STATE_FILE), if it still names `id`: called by asbx_state_dir_remove
 * (delete, a failed create, the end of a sandbox) before the directory goes. Best effort (a
 * record left behind is stale once the monitor is gone). Takes the lock: the caller must not hold
 * it. */
void egress_share_forget (int rootfd, const char *id);

#endif
