#!/bin/sh
# tests/vm/systemd/pid1.sh - PID 1 right after tests/vm/init switched onto the overlay of the
# host's root (asbx.guest=); not for use on the host. Writes the test unit into the overlay
# (the host sees nothing: the overlay's upper layer is a tmpfs) and execs systemd, which stays
# PID 1 and starts only what systemd.unit=agentsbx-test.service pulls in.
#
# DefaultDependencies=no: no sysinit.target/basic.target, so the host's enabled services,
# mounts and sockets are never started; the unit needs nothing but systemd's own early setup
# (/run, /sys/fs/cgroup, /dev/pts, the private socket /run/systemd/private).
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
fail() {
	echo "ASBX-VM-RESULT rc=125 pid1: $*" >/dev/console
	echo 125 >/asbx-out/rc
	sync
	/bin/busybox poweroff -f
	sleep 60
}
[ -x /lib/systemd/systemd ] || fail "no /lib/systemd/systemd"
guest=$(cat /asbx-out/guest) || fail "no /asbx-out/guest"
mkdir -p /etc/systemd/system || fail "mkdir /etc/systemd/system"
cat >/etc/systemd/system/agentsbx-test.service <<UNIT || fail "write the unit"
[Unit]
Description=agentsbx systemd cgroup driver tests
DefaultDependencies=no

[Service]
Type=oneshot
ExecStart=/bin/sh $guest
StandardOutput=tty
StandardError=tty
TTYPath=/dev/console
UNIT
# a stable machine id so systemd does not try to write one to the (read-only) lower layer
[ -s /etc/machine-id ] || echo 0123456789abcdef0123456789abcdef >/etc/machine-id
# The host's root may carry a container marker (/.dockerenv): systemd would then believe it
# runs in a container, read its settings from its own argv instead of /proc/cmdline, and keep
# the cgroup layout it finds. This is a VM: remove the markers from the overlay (the host keeps
# them) and also hand systemd the systemd.* settings of the kernel command line.
rm -f /.dockerenv /run/.containerenv
set --
for a in $(cat /proc/cmdline); do
	case $a in systemd.*) set -- "$@" "$a" ;; esac
done
exec /lib/systemd/systemd "$@"
fail "exec systemd"
