# tests/vm/relocate.sh - sourced by the VM scripts (run-cgroupv2.sh, systemd/run.sh).
#
# The guest mounts fresh tmpfs on /tmp and /run, hiding whatever the host's / holds there; a
# clone under /tmp (CI may check out anywhere) would be invisible to the guest. So a tree under
# /tmp or /run is bind-mounted, in a private mount namespace that only this run (and its qemu)
# sees, at /var/lib/agentsbx-vm/trees/<pid>/{src,build}, and the script re-executes itself from
# there. Nothing changes in the host's mount table; the empty mount points are removed after.
#
# vm_relocate REL_PATH_OF_THE_SCRIPT "$@" - returns when no relocation is needed (or already
# done); otherwise runs the relocated script and exits with its status. Uses $top and $build.

vm_under_tmpfs() {
	case $1 in /tmp | /tmp/* | /run | /run/*) return 0 ;; esac
	return 1
}

vm_relocate() {
	local rel=$1 base nb rc
	shift
	[ -z "${ASBX_VM_RELOCATED:-}" ] || return 0
	vm_under_tmpfs "$top" || vm_under_tmpfs "$build" || return 0
	base=/var/lib/agentsbx-vm/trees/$$
	mkdir -p "$base/src" "$base/build"
	nb=$base/src
	[ "$build" = "$top" ] || nb=$base/build
	echo "vm: $top is under a directory the guest mounts over: running from $base (private bind)" >&2
	set +e
	unshare -m --propagation private /bin/bash -c '
		mount --bind "$1" "$2" || exit 125
		if [ "$3" != "$1" ]; then mount --bind "$3" "$4" || exit 125; fi
		shift 4
		exec "$@"' vm-relocate "$top" "$base/src" "$build" "$nb" \
		env ASBX_VM_RELOCATED=1 AGENTSBX_TOP="$base/src" AGENTSBX_BUILD="$nb" "$base/src/$rel" "$@"
	rc=$?
	set -e
	rmdir "$base/src" "$base/build" "$base" 2>/dev/null || true
	exit $rc
}
