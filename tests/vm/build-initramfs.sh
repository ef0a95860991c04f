#!/bin/bash
# tests/vm/build-initramfs.sh CACHE_DIR - fetch Debian's guest kernel and build the initramfs of
# the cgroup v2 VM (tests/vm/run-cgroupv2.sh). Prints the directory holding vmlinuz and
# initrd.img on stdout; everything else goes to stderr.
#
# The kernel is Debian 12's linux-image-amd64 dependency, fetched with `apt-get download` and
# unpacked with `dpkg-deb -x` into CACHE_DIR: it is never installed on the host. The initramfs is
# only busybox-static, the handful of modules needed to reach the root (virtio-pci, 9p over
# virtio, overlayfs) plus brd (RAM block devices for io.max/io.weight) and soft-RoCE (rdma_rxe:
# an RDMA device for rdma.max, over lo), and tests/vm/init.
# Both are cached: the kernel by package name, the initramfs by the hash of its inputs.
set -euo pipefail

cache=${1:?usage: build-initramfs.sh CACHE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache"
cd "$cache"

# the kernel: Debian 12's own (6.1: this module list, the cgroup tests calibrated on it), fetched
# and cached by the script the vm isolation tier shares (which takes bookworm-backports' 6.12)
# shellcheck source=/dev/null
kdir=$("$here/../../contrib/vm/fetch-kernel.sh" "$cache" "$(. /etc/os-release && echo "$VERSION_CODENAME")")
pkg=${kdir##*/kernel-}
kver=$(ls "$kdir/lib/modules" | head -n1)
mods=$kdir/lib/modules/$kver/kernel

# Load order = dependency order (the package ships no modules.dep; `depends=` in each .ko).
MODULES="drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev
	drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci fs/netfs/netfs
	fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p fs/overlayfs/overlay
	drivers/block/brd crypto/crc32_generic net/ipv4/udp_tunnel net/ipv6/ip6_udp_tunnel
	drivers/infiniband/core/ib_core drivers/infiniband/core/ib_uverbs drivers/infiniband/sw/rxe/rdma_rxe"

bb=/bin/busybox
file -L "$bb" 2>/dev/null | grep -q 'statically linked\|static-pie' ||
	{ echo "build-initramfs: $bb is not static: apt-get install -y busybox-static" >&2; exit 1; }

key=$( (echo "$pkg"; echo "$MODULES"; sha256sum "$bb" "$here/init") | sha256sum | cut -c1-16)
out=$cache/initrd-$key
if [ ! -f "$out/initrd.img" ]; then
	echo "build-initramfs: building $out" >&2
	tmp=$(mktemp -d "$cache/initrd.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/root/bin" "$tmp/root/lib/modules" "$tmp/root/proc" "$tmp/root/sys" "$tmp/root/dev"
	cp "$bb" "$tmp/root/bin/busybox"
	install -m 0755 "$here/init" "$tmp/root/init"
	for m in $MODULES; do
		f=$mods/$m.ko
		[ -f "$f" ] || f=$(ls "$mods/$m".ko.* 2>/dev/null | head -n1)
		[ -f "$f" ] || { echo "build-initramfs: module $m missing in $pkg" >&2; exit 1; }
		case $f in
		*.xz) xz -dc "$f" >"$tmp/root/lib/modules/$(basename "$m").ko" ;;
		*.zst) zstd -qdc "$f" >"$tmp/root/lib/modules/$(basename "$m").ko" ;;
		*) cp "$f" "$tmp/root/lib/modules/$(basename "$m").ko" ;;
		esac
		case $m in
		*/brd) echo "?brd rd_nr=2 rd_size=8192" ;; # two 8 MiB RAM disks
		*/9p* | */virtio* | */netfs | */fscache | */overlay) basename "$m" ;;
		*) echo "?$(basename "$m")" ;; # optional: the tests needing it skip without it
		esac >>"$tmp/root/lib/modules/order"
	done
	(cd "$tmp/root" && find . | "$bb" cpio -o -H newc 2>/dev/null) | gzip -1 >"$tmp/initrd.img"
	mkdir -p "$out.new"
	mv "$tmp/initrd.img" "$out.new/initrd.img"
	cp "$kdir/boot/vmlinuz-$kver" "$out.new/vmlinuz"
	rm -rf "$out" && mv "$out.new" "$out"
fi
echo "$out"
