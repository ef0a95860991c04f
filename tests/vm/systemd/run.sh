#!/bin/bash
# tests/vm/systemd/run.sh [PYTEST ARGS...] - run the systemd cgroup driver tests
# (tests/integration/test_cgroups_systemd.py, and the rootless user-manager tests of
# tests/integration/test_rootless_systemd.py) in a qemu VM whose PID 1 is a real systemd.
#
# This host has no systemd as PID 1, so `--systemd-cgroup` can only be exercised in a guest.
# Reuses the cgroup v2 VM of tests/vm (same kernel, initramfs and tests/vm/init: the host's /
# read-only over 9p under a tmpfs overlay, results over a second 9p share, no network device),
# with a different guest: tests/vm/systemd/pid1.sh writes agentsbx-test.service into the
# overlay's /etc/systemd/system and execs the host's /lib/systemd/systemd as PID 1, booted
# with systemd.unit=agentsbx-test.service - a unit with DefaultDependencies=no, so none of the
# host's enabled services start; it runs tests/vm/systemd/guest.sh (pytest) and powers off.
# Pure cgroup v2 (cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1), as systemd 252 prefers;
# ASBX_VM_SD_LAYOUT=hybrid boots systemd's hybrid layout instead (v1 controllers, cgroup2 at
# /sys/fs/cgroup/unified: the layout of this CI host and of older systemd distributions).
# Env: ASBX_VM_OUT (results dir, default a new /tmp/asbx-vm-sd.XXXXXX), ASBX_VM_TIMEOUT (seconds,
# default 900), ASBX_VM_MEM (MiB, 2048), ASBX_VM_CACHE, AGENTSBX_TOP, AGENTSBX_BUILD.
# Exit status: pytest's in the guest (0 = pass), 125 = the VM did not get to run the tests.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
vm=$(cd "$here/.." && pwd)
top=${AGENTSBX_TOP:-$(cd "$vm/../.." && pwd)}
build=${AGENTSBX_BUILD:-$top}
cache=${ASBX_VM_CACHE:-/var/cache/agentsbx-vm}
timeout=${ASBX_VM_TIMEOUT:-900}

[ "$(id -u)" = 0 ] || { echo "run-systemd: needs root" >&2; exit 125; }
command -v qemu-system-x86_64 >/dev/null || { echo "run-systemd: apt-get install -y qemu-system-x86" >&2; exit 125; }
[ -x /lib/systemd/systemd ] || { echo "run-systemd: no /lib/systemd/systemd on the host (apt-get install -y systemd)" >&2; exit 125; }
# a tree under /tmp or /run: re-run from a private bind mount elsewhere (../relocate.sh says why)
# shellcheck source=tests/vm/relocate.sh
. "$vm/relocate.sh"
vm_relocate tests/vm/systemd/run.sh "$@"
for f in "$build/agentsbx" "$build/tests/probe/probe"; do
	[ -x "$f" ] || { echo "run-systemd: $f not built (make)" >&2; exit 125; }
done

img=$("$vm/build-initramfs.sh" "$cache")
out=${ASBX_VM_OUT:-$(mktemp -d /tmp/asbx-vm-sd.XXXXXX)}
mkdir -p "$out/share"
rm -f "$out/share/rc" "$out/share/timing" "$out/share/junit.xml" "$out/share/pytest.log"
echo "$top" >"$out/share/top"
echo "$build" >"$out/share/build"
echo "$here/guest.sh" >"$out/share/guest"
echo $((timeout - 180)) >"$out/share/timeout" # pytest's own bound, leaving time to boot systemd
printf '%s\n' tests/integration/test_cgroups_systemd.py tests/integration/test_rootless_systemd.py "$@" >"$out/share/pytest-args"

case ${ASBX_VM_SD_LAYOUT:-unified} in
unified) cg="cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1" ;;
hybrid) cg="systemd.unified_cgroup_hierarchy=0" ;;
*) echo "run-systemd: ASBX_VM_SD_LAYOUT must be unified or hybrid" >&2; exit 125 ;;
esac

echo "run-systemd: kernel $img, results in $out, cgroups ${ASBX_VM_SD_LAYOUT:-unified}"
start=$(date +%s)
qrc=0
timeout -k 10 "$timeout" qemu-system-x86_64 -nodefaults -no-user-config -no-reboot \
	-machine pc -accel tcg,thread=multi -cpu max -smp 2 -m "${ASBX_VM_MEM:-2048}" \
	-display none -monitor none -nic none -serial "file:$out/console.log" \
	-kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
	-append "console=ttyS0 panic=-1 loglevel=4 $cg lsm=landlock,yama asbx.guest=$here/pid1.sh systemd.unit=agentsbx-test.service systemd.show_status=0 systemd.log_target=console systemd.log_level=notice" \
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
	-virtfs "local,path=$out/share,mount_tag=asbxout,security_model=none,multidevs=remap" || qrc=$?
end=$(date +%s)

tail -n 80 "$out/console.log" || true
echo "run-systemd: VM wall time $((end - start))s ($(cat "$out/share/timing" 2>/dev/null || echo 'no timing'))"
[ $qrc = 0 ] || echo "run-systemd: qemu exited $qrc (124 = timeout after ${timeout}s)" >&2
if [ ! -f "$out/share/rc" ]; then
	echo "run-systemd: the guest wrote no result (see $out/console.log)" >&2
	exit 125
fi
rc=$(cat "$out/share/rc")
if [ "$rc" = 5 ] && [ $# -gt 0 ]; then
	echo "run-systemd: no test selected by: $*"
	rc=0
fi
exit "$rc"
