#!/bin/bash
# contrib/vm/fetch-kernel.sh CACHE_DIR [SUITE] - fetch a Debian guest kernel (the package
# linux-image-amd64 of SUITE depends on today) into CACHE_DIR/kernel-<package>/ and print that
# directory. Everything but the directory goes to stderr.
#
# SUITE, by user:
#  - default <release>-backports (bookworm-backports on Debian 12: Linux 6.12): the vm isolation
#    tier's kernel (src/runtime/vm.h: CACHE_DIR /var/cache/agentsbx-vm; the runtime picks the
#    newest kernel-linux-image-* of Linux 6.8 or newer there: the policy's filesystem layers need
#    a unique mount id, 6.8, and Landlock ABI 3+, 6.2);
#  - the host's release itself (`bookworm`: Debian 12's 6.1): the cgroup v2 test VM
#    (tests/vm/build-initramfs.sh), whose module list and cgroup expectations are 6.1's.
# The host's release resolves through the host's own apt sources (security updates included), as
# `apt-get download` always did here. Any other suite goes through a private apt setup in
# CACHE_DIR/apt-SUITE/: a sources.list naming the host's Debian mirror (the one its sources use
# for its release) for SUITE, signed by debian-archive-keyring (apt still checks the suite's
# signature), its own lists, archives, an empty dpkg status and no preferences. The host's apt
# configuration, lists and caches are left as they are.
# The package is fetched with `apt-get download` and unpacked with `dpkg-deb -x`: it is never
# installed on the host. A cached kernel is reused without the network; lists are refreshed only
# when the package they name is not cached and cannot be fetched (superseded on the mirror).
set -euo pipefail

cache=${1:?usage: fetch-kernel.sh CACHE_DIR [SUITE]}
# shellcheck source=/dev/null
release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$release" ] || { echo "fetch-kernel: no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }
suite=${2:-$release-backports}
case $suite in *[!a-z0-9-]* | "") echo "fetch-kernel: bad suite name '$suite'" >&2; exit 1 ;; esac
mkdir -p "$cache"
cd "$cache"
# one fetch of a suite at a time (apt's own lock would make a second one fail)
exec 9>"$cache/.fetch-$suite.lock"
flock 9

A=()
if [ "$suite" != "$release" ]; then
	adir=$cache/apt-$suite
	mkdir -p "$adir/lists/partial" "$adir/archives/partial"
	: >"$adir/status"
	A=(-o "Dir::Etc::SourceList=$adir/sources.list" -o Dir::Etc::SourceParts=/dev/null
	   -o "Dir::State::Lists=$adir/lists" -o "Dir::Cache::Archives=$adir/archives"
	   -o "Dir::State::status=$adir/status" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
	   -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null)
	if [ ! -s "$adir/sources.list" ]; then
		# the mirror the host's sources name for its release (what `update` would fetch first),
		# asked with the private lists dir so that nothing of the host's is locked or read
		mirror=$(apt-get -o "Dir::State::Lists=$adir/lists" update --print-uris 2>/dev/null |
			sed -n "s,^'\(.*\)/dists/$release/InRelease'.*,\1,p" | head -n1)
		[ -n "$mirror" ] || { echo "fetch-kernel: the host's apt sources name no mirror for $release" >&2; exit 1; }
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$adir/sources.list"
	fi
fi

# the exact package linux-image-amd64 points at in the suite (e.g. linux-image-6.12.95+deb12-amd64)
resolve() {
	apt-cache "${A[@]}" depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1 || true
}
# the newest kernel of this suite in the cache (a directory without .suite is the host release's:
# made before there was a choice)
cached() {
	for d in "$cache"/kernel-linux-image-*/; do
		[ -d "$d/boot" ] || continue
		s=$(cat "$d/.suite" 2>/dev/null || echo "$release")
		[ "$s" = "$suite" ] && basename "$d" | sed 's,^kernel-,,'
	done | sort -V | tail -n1 || true
}
update() {
	apt-get "${A[@]}" update -q >&2 || true
}

pkg=$(resolve)
# no or stale lists (a fresh machine): refresh them once, unless a kernel of the suite is cached
if [ -z "$pkg" ] || { [ ! -d "$cache/kernel-$pkg/boot" ] && ! apt-get "${A[@]}" download --print-uris "$pkg" >/dev/null 2>&1; }; then
	if [ -z "$(cached)" ]; then
		update
		pkg=$(resolve)
	fi
fi
if [ -z "$pkg" ]; then
	# no lists (offline, fresh container): reuse the suite's cached kernel
	pkg=$(cached)
	[ -n "$pkg" ] || { echo "fetch-kernel: cannot resolve linux-image-amd64 in $suite (apt-get update?)" >&2; exit 1; }
fi
kdir=$cache/kernel-$pkg
if [ ! -d "$kdir/boot" ]; then
	echo "fetch-kernel: fetching $pkg ($suite)" >&2
	rm -rf "$kdir.tmp" && mkdir -p "$kdir.tmp"
	chown _apt "$kdir.tmp" 2>/dev/null || true # apt's download sandbox writes as _apt
	if ! (cd "$kdir.tmp" && apt-get "${A[@]}" download "$pkg" >&2); then
		# stale lists (the version was superseded on the mirror): refresh once and start over
		rm -rf "$kdir.tmp"
		[ -z "${ASBX_VM_APT_RETRIED:-}" ] || exit 1
		update
		exec 9>&-
		ASBX_VM_APT_RETRIED=1 exec "$0" "$@"
	fi
	dpkg-deb -x "$kdir.tmp"/"$pkg"_*.deb "$kdir.tmp/x"
	echo "$suite" >"$kdir.tmp/x/.suite"
	mv "$kdir.tmp/x" "$kdir" && rm -rf "$kdir.tmp"
fi
echo "$kdir"
