#!/bin/sh
# tests/vm/systemd/guest.sh - ExecStart of agentsbx-test.service in the systemd VM (run.sh);
# not for use on the host. systemd is PID 1 and mounted cgroup2, /run, /dev/pts itself; this
# adds a private /tmp, enables every cgroup2 controller for the slices (systemd enables them on
# demand, Delegate=yes scopes get what their parents have), runs the pytest selection the host
# wrote to /asbx-out/pytest-args, writes rc/timing/pytest.log there and powers off at once.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
out=/asbx-out
boot_s=$(cut -d' ' -f1 /proc/uptime)

finish() {
	echo "$1" >$out/rc
	sync
	echo "ASBX-VM-RESULT rc=$1"
	systemctl --force --force poweroff || /bin/busybox poweroff -f
	sleep 60
}

mount -t tmpfs -o mode=1777 tmpfs /tmp || finish 125
mountpoint -q /dev/shm || mount -t tmpfs -o mode=1777 tmpfs /dev/shm
[ -e /dev/ptmx ] || ln -s pts/ptmx /dev/ptmx
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf 2>/dev/null
[ "$(readlink /proc/1/exe)" = /usr/lib/systemd/systemd ] || [ "$(readlink /proc/1/exe)" = /lib/systemd/systemd ] ||
	{ echo "guest: PID 1 is $(readlink /proc/1/exe), not systemd"; finish 125; }
[ -d /run/systemd/system ] || { echo "guest: no /run/systemd/system"; finish 125; }
echo "guest: systemd $(systemctl --version | head -n1); cgroup mounts: $(grep -c " - cgroup" /proc/self/mountinfo)"
echo "guest: own cgroup $(cat /proc/self/cgroup)"
ip link set lo up 2>/dev/null
hostname asbx-systemd-vm

top=$(cat $out/top)
build=$(cat $out/build 2>/dev/null || echo "$top")
cd "$top" || finish 125
set --
while IFS= read -r a; do set -- "$@" "$a"; done <$out/pytest-args
echo "guest: up after ${boot_s}s; running pytest $*"
t0=$(cut -d' ' -f1 /proc/uptime)
AGENTSBX_RUNTIME="$build/agentsbx" AGENTSBX_PROBE="$build/tests/probe/probe" \
	AGENTSBX_TEST_CACHE=/var/cache/agentsbx-tests ASBX_SYSTEMD_VM=1 PYTHONDONTWRITEBYTECODE=1 \
	timeout -k 10 "$(cat $out/timeout)" python3 -m pytest -ra -p no:cacheprovider \
	--junitxml=$out/junit.xml "$@" >$out/pytest.log 2>&1
rc=$?
t1=$(cut -d' ' -f1 /proc/uptime)
tail -n 60 $out/pytest.log
echo "boot_seconds=$boot_s tests_seconds=$(echo "$t1 $t0" | awk '{print $1-$2}')" >$out/timing
cat $out/timing
finish $rc
