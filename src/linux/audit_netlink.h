/* audit_netlink.h - read the kernel audit stream (netlink NETLINK_AUDIT, multicast group
 * AUDIT_NLGRP_READLOG) for the denials the kernel reports: Landlock (AUDIT_LANDLOCK_ACCESS 1423,
 * AUDIT_LANDLOCK_DOMAIN 1424, Linux >= 6.15, Landlock ABI 7) and seccomp (AUDIT_SECCOMP 1326).
 *
 * Requirements (kernel/audit.c, security/landlock/audit.c, kernel/seccomp.c):
 * - CONFIG_AUDIT and CAP_AUDIT_READ in the initial user namespace to join the group; the group is a
 *   read-only copy: joining it does not change what the kernel logs nor where (auditd, printk).
 * - Landlock logs only while audit is enabled (audit_enabled != 0: `auditctl -e 1`, auditd, or
 *   audit=1 on the kernel command line) and, for the program an init execs, only when the domain
 *   was created with LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON.
 * - seccomp logs an action when the filter was loaded with SECCOMP_FILTER_FLAG_LOG (or the action
 *   is a kill / SCMP_ACT_LOG) and the action is named in /proc/sys/kernel/seccomp/actions_logged;
 *   on this project's kernels that works with audit disabled too.
 * Records are text: "audit(SEC.MSEC:SERIAL): key=value key=\"value\" ..."; untrusted strings
 * (path, exe, comm) are either quoted or hex-encoded (audit_log_untrustedstring). */
#ifndef ASBX_LINUX_AUDIT_NETLINK_H
#define ASBX_LINUX_AUDIT_NETLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define LINUX_AUDIT_SECCOMP 1326
#define LINUX_AUDIT_EOE 1320
#define LINUX_AUDIT_LANDLOCK_ACCESS 1423
#define LINUX_AUDIT_LANDLOCK_DOMAIN 1424

/* Open a NETLINK_AUDIT socket (non-blocking, close-on-exec) joined to AUDIT_NLGRP_READLOG, with a
 * 1 MiB receive buffer (SO_RCVBUFFORCE, falling back to SO_RCVBUF). Returns the fd (caller owns)
 * or -1 with *err (EPROTONOSUPPORT: no CONFIG_AUDIT; EPERM: no CAP_AUDIT_READ). */
int linux_audit_open (asbx_err_t *err);

/* The kernel's audit_enabled (AUDIT_GET on a fresh socket): 0 off, 1 on, 2 locked on; -1 with
 * *err when the request fails. */
int linux_audit_enabled (asbx_err_t *err);

/* Set the kernel's audit_enabled to 1 (AUDIT_SET with AUDIT_STATUS_ENABLED; needs
 * CAP_AUDIT_CONTROL in the initial user namespace). Host-wide and left so: the caller has the
 * host config's consent (enableKernelAudit). 0 / -1 with *err ("audit netlink: AUDIT_SET: ..."). */
int linux_audit_enable (asbx_err_t *err);

struct linux_audit_msg
{
  int type;         /* AUDIT_* record type */
  uint64_t serial;  /* the event's serial (records of one event share it), 0 when unparsable */
  const char *text; /* the record after "audit(...): ", NUL-terminated, inside the caller's buffer */
};

/* Receive one datagram into buf (size >= 8 KiB recommended) and parse it into *m.
 * Returns 1 (a record), 0 (nothing queued: EAGAIN), 2 (records were lost: ENOBUFS; the caller
 * may note it and go on) or -1 with *err. */
int linux_audit_recv (int fd, char *buf, size_t size, struct linux_audit_msg *m, asbx_err_t *err);

/* Pure: parse a record's text "audit(1.2:SERIAL): fields" (len bytes, need not be NUL-terminated
 * but buf[len] must be writable) into *m; text points into buf. false when the prefix is missing. */
bool linux_audit_parse (int type, char *buf, size_t len, struct linux_audit_msg *m);

/* Pure: the value of field `key` in record text `text` (fields separated by spaces): a quoted
 * value unquoted, an unquoted value of an untrusted-string field (hex_ok) hex-decoded when it is
 * all hex digits of even length, else returned as is. NULL when the key is absent.
 * Returns a heap string (caller frees). */
char *linux_audit_field (const char *text, const char *key, bool hex_ok);

#endif
