#!/bin/bash
# contrib/vm/fetch-kernel.sh CACHE_DIR - fetch Debian's guest kernel (the package
# linux-image-amd64 depends on today) into CACHE_DIR/kernel-<package>/ and print that directory.
# Shared by the vm isolation tier (src/runtime/vm.h: CACHE_DIR /var/cache/agentsbx-vm, the
# runtime picks the newest kernel-linux-image-* there) and the cgroup v2 test VM
# (tests/vm/build-initramfs.sh). The package is fetched with `apt-get download` and unpacked
# with `dpkg-deb -x`: it is never installed on the host. Everything but the directory goes to
# stderr.
set -euo pipefail

cache=${1:?usage: fetch-kernel.sh CACHE_DIR}
mkdir -p "$cache"
cd "$cache"

# The exact package linux-image-amd64 points at today (e.g. linux-image-6.1.0-57-amd64).
resolve() {
	apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1
}
pkg=$(resolve)
# no or stale apt lists (a fresh machine): refresh them once, unless a kernel is cached already
if [ -z "$pkg" ] || { [ ! -d "$cache/kernel-$pkg/boot" ] && ! apt-get download --print-uris "$pkg" >/dev/null 2>&1; }; then
	if ! ls -d "$cache"/kernel-linux-image-*/boot >/dev/null 2>&1; then
		apt-get update -q >&2 || true
		pkg=$(resolve)
	fi
fi
if [ -z "$pkg" ]; then
	# no apt lists (fresh container): reuse whatever kernel is cached
	pkg=$(ls -d kernel-linux-image-*/ 2>/dev/null | sed 's,^kernel-,,;s,/$,,' | sort -V | tail -n1)
	[ -n "$pkg" ] || { echo "fetch-kernel: cannot resolve linux-image-amd64 (apt-get update?)" >&2; exit 1; }
fi
kdir=$cache/kernel-$pkg
if [ ! -d "$kdir/boot" ]; then
	echo "fetch-kernel: fetching $pkg" >&2
	rm -rf "$kdir.tmp" && mkdir -p "$kdir.tmp"
	if ! (cd "$kdir.tmp" && apt-get download "$pkg" >&2); then
		# stale lists (the version was superseded on the mirror): refresh once and start over
		rm -rf "$kdir.tmp"
		[ -z "${ASBX_VM_APT_RETRIED:-}" ] || exit 1
		apt-get update -q >&2 || true
		ASBX_VM_APT_RETRIED=1 exec "$0" "$@"
	fi
	dpkg-deb -x "$kdir.tmp"/"$pkg"_*.deb "$kdir.tmp/x"
	mv "$kdir.tmp/x" "$kdir" && rm -rf "$kdir.tmp"
fi
echo "$kdir"
