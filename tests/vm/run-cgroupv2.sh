#!/bin/bash
# tests/vm/run-cgroupv2.sh [PYTEST ARGS...] - run the cgroup integration tests on a pure cgroup
# v2 kernel, in a qemu VM (this host is hybrid: v1 controllers + an almost empty cgroup2).
#
# Why a VM: a pure v2 layout needs every controller unbound from v1, which cannot be done on a
# shared hybrid host without breaking the other tests (and their cgroups) running on it.
#
# How (no KVM here: qemu TCG, 2 vCPUs, 2 GiB):
#  - kernel: Debian 12's linux-image-amd64 (6.1), fetched by build-initramfs.sh into
#    $ASBX_VM_CACHE (default /var/cache/agentsbx-vm), never installed on the host; booted with
#    cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1;
#  - root: the host's / exported read-only over virtio-9p, under a tmpfs overlay (tests/vm/init),
#    so the guest runs this tree's agentsbx, probe, python3 and pytest as they are on the host;
#  - results: a second 9p share, a fresh directory on the host (pytest.log, junit.xml, rc,
#    timing), the serial console in console.log there; no network device at all (-nic none);
#  - the guest (tests/vm/guest.sh) mounts cgroup2, enables all controllers, runs pytest, powers off.
# Selection: VM_TESTS below, then the arguments given (pytest keeps the last -k, so
# `run-cgroupv2.sh -k v2` narrows it; `-x`, `-v` add to it).
# Env: ASBX_VM_OUT (results dir, default a new /tmp/asbx-vm.XXXXXX, kept), ASBX_VM_TIMEOUT
# (seconds for the whole pass, default 900), ASBX_VM_MEM (MiB, 2048), AGENTSBX_TOP (source
# tree), AGENTSBX_BUILD (build tree, default the source tree; neither under /tmp or /run, which
# are fresh tmpfs in the guest).
# The host's / is readable by the guest's root (read-only); the guest runs only this tree's tests.
# Exit status: pytest's in the guest (0 = pass), 125 = the VM did not get to run the tests.
# Needs root (9p with security_model=none reads the host as root), qemu-system-x86, busybox-static.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=${AGENTSBX_TOP:-$(cd "$here/../.." && pwd)}
build=${AGENTSBX_BUILD:-$top}
cache=${ASBX_VM_CACHE:-/var/cache/agentsbx-vm}
timeout=${ASBX_VM_TIMEOUT:-900}
# The cgroup files in full; from the other files only what touches the cgroup (exec joins it,
# pause refuses exec, a failed create removes it). The runtime under test only: with runc as
# the reference too (ASBX_VM_RUNC=1) the pass takes about 3 minutes more. Not here: the policy
# tests (test_policy_*: nftables needs modules the guest cannot load; their cgroup limits are
# the same files tested here).
if [ -n "${ASBX_VM_RUNC:-}" ]; then
	sel="test_cgroups or (subject and (cgroup or paused or failed_))"
else
	sel="(subject and (test_cgroups or cgroup or paused or failed_)) or only_cgroup2_is_mounted"
fi
VM_TESTS=(tests/integration/test_cgroups_basic.py tests/integration/test_cgroups_resources.py
          tests/integration/test_cgroups_v2.py tests/integration/test_exec.py
          tests/integration/test_failure_cleanup.py -k "$sel")

[ "$(id -u)" = 0 ] || { echo "run-cgroupv2: needs root" >&2; exit 125; }
command -v qemu-system-x86_64 >/dev/null || { echo "run-cgroupv2: apt-get install -y qemu-system-x86" >&2; exit 125; }
# a tree under /tmp or /run: re-run from a private bind mount elsewhere (relocate.sh says why)
# shellcheck source=tests/vm/relocate.sh
. "$here/relocate.sh"
vm_relocate tests/vm/run-cgroupv2.sh "$@"
for d in "$top" "$build"; do
	case $d in /tmp | /tmp/* | /run | /run/*)
		echo "run-cgroupv2: $d: the trees must not be under /tmp or /run (fresh tmpfs in the guest)" >&2
		exit 125 ;;
	esac
done
for f in "$build/agentsbx" "$build/tests/probe/probe"; do
	[ -x "$f" ] || { echo "run-cgroupv2: $f not built (make)" >&2; exit 125; }
done

img=$("$here/build-initramfs.sh" "$cache")
out=${ASBX_VM_OUT:-$(mktemp -d /tmp/asbx-vm.XXXXXX)}
mkdir -p "$out/share"
rm -f "$out/share/rc" "$out/share/timing" "$out/share/junit.xml" "$out/share/pytest.log"
echo "$top" >"$out/share/top"
echo "$build" >"$out/share/build"
echo $((timeout - 120)) >"$out/share/timeout" # pytest's own bound, leaving time to boot
printf '%s\n' "${VM_TESTS[@]}" "$@" >"$out/share/pytest-args"

echo "run-cgroupv2: kernel $img, results in $out"
start=$(date +%s)
# -nodefaults: no NIC, VGA, floppy; the only devices are the two 9p shares and the serial port.
# qemu is stopped by its own pid (timeout) if the guest never powers off.
qrc=0
timeout -k 10 "$timeout" qemu-system-x86_64 -nodefaults -no-user-config -no-reboot \
	-machine pc -accel tcg,thread=multi -cpu max -smp 2 -m "${ASBX_VM_MEM:-2048}" \
	-display none -monitor none -nic none -serial "file:$out/console.log" \
	-kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
	-append "console=ttyS0 panic=-1 loglevel=4 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 lsm=landlock,yama asbx.guest=$here/guest.sh" \
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
	-virtfs "local,path=$out/share,mount_tag=asbxout,security_model=none,multidevs=remap" || qrc=$?
end=$(date +%s)

tail -n 70 "$out/console.log" || true
echo "run-cgroupv2: VM wall time $((end - start))s ($(cat "$out/share/timing" 2>/dev/null || echo 'no timing'))"
if [ $qrc != 0 ]; then
	echo "run-cgroupv2: qemu exited $qrc (124 = timeout after ${timeout}s)" >&2
fi
if [ ! -f "$out/share/rc" ]; then
	echo "run-cgroupv2: the guest wrote no result (see $out/console.log)" >&2
	exit 125
fi
rc=$(cat "$out/share/rc")
# 5 = the arguments given deselected every test (e.g. contrib/test.sh -k lifecycle): not a failure
if [ "$rc" = 5 ] && [ $# -gt 0 ]; then
	echo "run-cgroupv2: no test selected by: $*"
	rc=0
fi
exit "$rc"
