#!/bin/sh
# contrib/delegate-cgroup.sh USER [PARENT] - as root, delegate a cgroup to USER so that
# `agentsbx` run by USER (without sudo) enforces memory, pids and CPU limits there
# (docs/security.md "When the caller is not root").
#
# PARENT defaults to /agentsbx-users/USER, which the host config line
#   "rootless": {"cgroupParent": "/agentsbx-users/%u"}
# in /etc/agentsbx/config.json names for every user (%u = the user name, %U = the uid).
# For each controller agentsbx uses (memory, pids, cpu, cpuacct, freezer) it makes PARENT in
# the hierarchy carrying it and gives it to USER:
#  - cgroup v1 (and hybrid hosts): the directory in each v1 hierarchy, chowned to USER, mode 0755;
#  - cgroup v2: the directory, with cgroup.procs, cgroup.subtree_control and cgroup.threads
#    chowned to USER (cgroup-v2.rst "Delegation Containment"), after the controllers are
#    enabled in cgroup.subtree_control of every ancestor. On v2 the kernel lets USER move a
#    process only within a subtree whose common ancestor's cgroup.procs it can write: USER's
#    login session must itself be placed below PARENT (or use a systemd user manager instead).
# Idempotent; `--undo USER [PARENT]` removes the (empty) directories again.
set -eu

undo=0
if [ "${1:-}" = "--undo" ]; then
	undo=1
	shift
fi
[ $# -ge 1 ] || { echo "usage: $0 [--undo] USER [PARENT]" >&2; exit 2; }
user=$1
parent=${2:-/agentsbx-users/$user}
[ "$(id -u)" = 0 ] || { echo "$0: must run as root" >&2; exit 1; }
uid=$(id -u "$user") || { echo "$0: no user $user" >&2; exit 1; }
gid=$(id -g "$user")
case $parent in
/*) ;;
*) echo "$0: PARENT must be an absolute cgroup path" >&2; exit 2 ;;
esac
case $parent in
*..* | *//* | */) echo "$0: PARENT must not contain '..', '//' or end in '/'" >&2; exit 2 ;;
esac

# mountpoint of the cgroup v1 hierarchy carrying controller $1 (empty when none)
v1_mount() {
	awk -v c="$1" '$0 ~ / - cgroup / { split($NF, o, ","); for (i in o) if (o[i] == c) { print $5; exit } }' \
		/proc/self/mountinfo
}
v2=$(awk '$0 ~ / - cgroup2 / { print $5; exit }' /proc/self/mountinfo)

done_any=0
for ctl in memory pids cpu cpuacct freezer; do
	m=$(v1_mount "$ctl")
	if [ -n "$m" ]; then
		d=$m$parent
		if [ $undo = 1 ]; then
			[ -d "$d" ] && rmdir "$d" && echo "removed $d"
		elif [ ! -d "$d" ] || [ "$(stat -c %u "$d")" != "$uid" ]; then
			mkdir -p "$d"
			chown "$uid:$gid" "$d"
			chmod 0755 "$d"
			echo "delegated $d to $user"
		fi
		done_any=1
	fi
done
# cgroup2: on a pure v2 host (or for the controllers a hybrid host binds there)
if [ -n "$v2" ] && [ -f "$v2/cgroup.controllers" ]; then
	want=""
	for ctl in memory pids cpu; do
		[ -n "$(v1_mount "$ctl")" ] && continue
		grep -qw "$ctl" "$v2/cgroup.controllers" && want="$want $ctl"
	done
	if [ -n "$want" ]; then
		d=$v2$parent
		if [ $undo = 1 ]; then
			[ -d "$d" ] && rmdir "$d" && echo "removed $d"
		else
			# enable the controllers from the root down to PARENT itself (for its children)
			cur=$v2
			rest=${parent#/}
			while :; do
				for ctl in $want; do echo "+$ctl" >"$cur/cgroup.subtree_control"; done
				[ -n "$rest" ] || break
				comp=${rest%%/*}
				case $rest in */*) rest=${rest#*/} ;; *) rest="" ;; esac
				cur=$cur/$comp
				mkdir -p "$cur"
			done
			chown "$uid:$gid" "$d" "$d/cgroup.procs" "$d/cgroup.subtree_control" "$d/cgroup.threads"
			chmod 0755 "$d"
			echo "delegated $d to $user (controllers:$want)"
		fi
		done_any=1
	fi
fi
[ $done_any = 1 ] || { echo "$0: no cgroup hierarchy carries memory, pids or cpu on this host" >&2; exit 1; }
