#!/bin/sh
# tests/vm/guest.sh - runs as PID 1 inside the cgroup v2 VM after tests/vm/init switched onto
# the overlay of the host's root. Not for use on the host.
#
# Sets up a pure cgroup v2 machine: cgroup2 on /sys/fs/cgroup (the kernel was booted with
# cgroup_no_v1=all, so no v1 hierarchy can exist), every available controller enabled in the
# root's cgroup.subtree_control, fresh tmpfs on /tmp and /run, devpts, RAM block devices
# (brd) for io.max/io.weight and a soft-RoCE device (asbxrxe0) for rdma.max. Then runs the pytest selection the host wrote to
# /asbx-out/pytest-args (one argument per line) in the source tree /asbx-out/top names, with the
# agentsbx binary and probe of the build tree /asbx-out/build. Writes /asbx-out/rc, /asbx-out/timing and the pytest
# log there, prints "ASBX-VM-RESULT rc=N" on the console and powers off.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
out=/asbx-out
boot_s=$(cut -d' ' -f1 /proc/uptime)

finish() {
	echo "$1" >$out/rc
	sync
	echo "ASBX-VM-RESULT rc=$1"
	/bin/busybox poweroff -f
	echo o >/proc/sysrq-trigger
	sleep 60
}

mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /dev/shm 2>/dev/null || { mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm; }
mkdir -p /dev/pts && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /dev/pts
[ -e /dev/ptmx ] || ln -s pts/ptmx /dev/ptmx
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup || finish 125
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
# Sanity: nothing of v1 may be mounted, and /proc/cgroups must show every controller on
# hierarchy 0 (= the v2 hierarchy).
if grep -q ' - cgroup ' /proc/self/mountinfo || awk 'NR>1 && $2 != 0' /proc/cgroups | grep -q .; then
	echo "guest: a cgroup v1 hierarchy exists"; cat /proc/cgroups; finish 125
fi
ctrls=$(cat /sys/fs/cgroup/cgroup.controllers)
for c in $ctrls; do echo "+$c"; done >/sys/fs/cgroup/cgroup.subtree_control ||
	for c in $ctrls; do echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control || echo "guest: cannot enable $c"; done
echo "guest: cgroup2 controllers: $ctrls; enabled: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
# RAM disks /dev/ram0../dev/ram1 (8 MiB each): block devices for the io controller tests.
[ -b /dev/ram0 ] || echo "guest: no /dev/ram0 (brd)"
ip link set lo up 2>/dev/null
# A soft-RoCE device over lo (rdma_rxe): an RDMA device the rdma controller knows, for rdma.max.
rdma link add asbxrxe0 type rxe netdev lo 2>&1 || echo "guest: no soft-RoCE device (rdma tests skip)"
hostname asbx-cgroupv2-vm

top=$(cat $out/top)
build=$(cat $out/build 2>/dev/null || echo "$top")
cd "$top" || finish 125
set --
while IFS= read -r a; do set -- "$@" "$a"; done <$out/pytest-args
echo "guest: up after ${boot_s}s; running pytest $*"
t0=$(cut -d' ' -f1 /proc/uptime)
AGENTSBX_RUNTIME="$build/agentsbx" AGENTSBX_PROBE="$build/tests/probe/probe" \
	AGENTSBX_TEST_CACHE=/var/cache/agentsbx-tests ASBX_CGROUPV2_VM=1 PYTHONDONTWRITEBYTECODE=1 \
	timeout -k 10 "$(cat $out/timeout)" python3 -m pytest -ra -p no:cacheprovider \
	--junitxml=$out/junit.xml "$@" >$out/pytest.log 2>&1
rc=$?
t1=$(cut -d' ' -f1 /proc/uptime)
tail -n 60 $out/pytest.log
echo "boot_seconds=$boot_s tests_seconds=$(echo "$t1 $t0" | awk '{print $1-$2}')" >$out/timing
cat $out/timing
finish $rc
