/* nft.h - nftables through libnftables (the kernel's nf_tables netlink API, in one transaction
 * per call), optionally in another network namespace. The ruleset text comes from
 * src/policy/nft_ruleset.c; this module only loads it. */
#ifndef ASBX_LINUX_NFT_H
#define ASBX_LINUX_NFT_H

#include <stdint.h>

#include "core/error.h"

struct linux_nft;

/* A libnftables context whose commands run in the network namespace `netns_fd` (an fd of
 * /proc/PID/ns/net; duplicated, the caller keeps its own), or in the caller's current one when
 * netns_fd is -1. Needs CAP_NET_ADMIN over that namespace (and CAP_SYS_ADMIN for setns).
 * A caller whose setns(2) there is refused (EPERM: not root, the namespace belongs to a user
 * namespace it owns, issue 17) gets a context whose every run forks a child that joins that user
 * namespace and the network namespace (linux/netns_call.h) and runs the commands in a fresh
 * libnftables context there. Returns NULL with *err (ENOMEM, or the dup/open errno). Not
 * thread-safe: each run switches the calling thread's network namespace and back (setns(2)). */
struct linux_nft *linux_nft_new (int netns_fd, asbx_err_t *err);
void linux_nft_free (struct linux_nft *n);

/* Run nft commands (ruleset text, `add element ...`): all of them in one kernel transaction,
 * all or nothing. 0, or -1 with *err carrying libnftables' own message ("Error: Could not
 * process rule: Operation not permitted ..."), errno EPERM when CAP_NET_ADMIN is missing,
 * EINVAL otherwise. */
int linux_nft_run (struct linux_nft *n, const char *cmds, asbx_err_t *err);

/* The packets of named counter `name` in `table inet <table>` (`list counter`, in n's namespace)
 * into *packets. 0, or -1 with *err as linux_nft_run (ENOENT-like text when the table or the
 * counter does not exist), EPROTO when the listing has no count. */
int linux_nft_counter (struct linux_nft *n, const char *table, const char *name, uint64_t *packets, asbx_err_t *err);

/* Load libnftables now (dlopen, once per process) without making a context: for a caller that
 * must have it mapped before it looks at its own loaded objects (runtime/vm_cpio.c copies them
 * into the guest's initramfs, whose agentsbx loads the container's table). 0, or -1 with *err
 * (ENOENT: not installed) as linux_nft_new. */
int linux_nft_preload (asbx_err_t *err);

/* One-shot: run `cmds` in the current network namespace. 0 / -1 with *err as above. */
int linux_nft_load (const char *cmds, asbx_err_t *err);

/* linux_nft_load for a process that execs (or exits) next, e.g. the container's init: the same,
 * except that the context's netlink socket is closed by the kernel at that execve (a
 * close-on-exec duplicate is kept) instead of now. The last close of an nf_tables socket after a
 * commit waits until the RCU grace period that frees the commit has passed (the kernel's
 * nft_rcv_nl_event flushes the destroy work on NETLINK_URELEASE): 9-22 ms of sleep measured on a
 * loaded 2-CPU VM, <0.3 ms of CPU. The init has its pivot_root, Landlock carve and the monitor's
 * start to get through meanwhile. The duplicate never reaches the program exec'd (O_CLOEXEC), nor
 * a hook's (same); a child forked without exec holds a copy until it exits. When the socket
 * cannot be told apart (a libnftables that opens it elsewhere) the close happens now, as in
 * linux_nft_load. 0 / -1 with *err as linux_nft_load. */
int linux_nft_load_close_at_exec (const char *cmds, asbx_err_t *err);

#endif
