#!/bin/bash
# Installs the Debian 12 packages agentsbx needs to build and test, then builds it.
# Idempotent: packages already installed are not fetched again (no apt-get update then), and the
# build only redoes what changed. Run as root from the top of a clone:  contrib/setup.sh
# Used by contrib/demo.sh and contrib/test.sh.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)

# Build: autotools, compiler, libraries. Tests: pytest, busybox (static), mmdebstrap for the
# Debian rootfs, runc as the reference runtime, util-linux for unshare, file, criu for
# checkpoint/restore (which also test why CRIU cannot work where it cannot), uidmap for the
# rootless tests' subordinate id ranges (newuidmap/newgidmap); skopeo and umoci as the OCI
# layout readers other than ours (sandbox --image, workspace export), git for --seed-git,
# qemu-system-x86 for the vm isolation tier (its guest kernel: contrib/vm/fetch-kernel.sh).
PACKAGES=(autoconf automake libtool pkg-config make gcc libc6-dev
          libyajl-dev libseccomp-dev libcap-dev libselinux1-dev libapparmor-dev libcmocka-dev libsystemd-dev
          libnftables-dev libssl-dev libarchive-dev nftables passt iproute2 uidmap
          python3 python3-pytest busybox-static mmdebstrap runc util-linux file criu
          ca-certificates skopeo umoci git qemu-system-x86)

if [ "$(id -u)" != 0 ]; then
	echo "setup.sh: run as root (it installs packages and the tests need root)" >&2
	exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
	./autogen.sh
fi
if [ ! -f Makefile ] || [ configure -nt config.status ]; then
	./configure
fi
make -j"$(nproc)"
