#!/bin/sh
# The node installer of contrib/kubernetes/installer.yaml (as Kata's kata-deploy and gVisor's
# installers do): copy agentsbx onto the node, add the containerd runtime handlers with
# `agentsbx setup containerd` (agentsbx and agentsbx-PROFILE per profile, as the RuntimeClasses of
# runtimeclasses.yaml name them), restart containerd; `uninstall` undoes all of it.
#   install.sh install | uninstall
# Environment (defaults for the DaemonSet, whose pod mounts the node's / at /host):
#   HOST=/host                 the node's root; commands on the node run chrooted there
#   BIN_SRC=/opt/agentsbx/agentsbx   the binary shipped in the installer image
#   BIN_DIR=/usr/local/bin     where it goes on the node
#   WRAPPER_DIR=/usr/local/libexec/agentsbx   the per-profile wrappers (agentsbx-setup(8))
#   PROFILES="agent build locked open"
#   CONTAINERD_CONFIG=/etc/containerd/config.toml   (a path on the node)
#   RESTART="nsenter -t 1 -m -u -i -n -p -- systemctl restart containerd"   ("" = do not restart)
# Paths are node paths; tests/engines/test_k8s_installer.py runs it with HOST=/ against a
# private containerd.
set -eu

HOST=${HOST:-/host}
BIN_SRC=${BIN_SRC:-/opt/agentsbx/agentsbx}
BIN_DIR=${BIN_DIR:-/usr/local/bin}
WRAPPER_DIR=${WRAPPER_DIR:-/usr/local/libexec/agentsbx}
PROFILES=${PROFILES-agent build locked open}
CONTAINERD_CONFIG=${CONTAINERD_CONFIG:-/etc/containerd/config.toml}
RESTART=${RESTART-nsenter -t 1 -m -u -i -n -p -- systemctl restart containerd}
bin=$BIN_DIR/agentsbx

on_node() { if [ "$HOST" = / ]; then "$@"; else chroot "$HOST" "$@"; fi; }
restart() {
	[ -n "$RESTART" ] || return 0
	echo "agentsbx-installer: $RESTART"
	sh -c "$RESTART"
}

case ${1:-} in
install)
	mkdir -p "$HOST$BIN_DIR"
	install -m 0755 "$BIN_SRC" "$HOST$bin.new"
	mv -f "$HOST$bin.new" "$HOST$bin"
	# the node must have the libraries the binary links (libyajl2, libseccomp2, libcap2,
	# libnftables1 on Debian/Ubuntu): say which are missing rather than break containerd
	if ! on_node "$bin" --version >/dev/null 2>&1; then
		echo "agentsbx-installer: $bin does not run on this node:" >&2
		on_node ldd "$bin" 2>&1 | grep "not found" >&2 || on_node "$bin" --version >&2 || :
		rm -f "$HOST$bin"
		exit 1
	fi
	set --
	for p in $PROFILES; do set -- "$@" --profile "$p"; done
	on_node "$bin" setup containerd --config "$CONTAINERD_CONFIG" --runtime-path "$bin" \
		--wrapper-dir "$WRAPPER_DIR" "$@"
	restart
	echo "agentsbx-installer: installed $(on_node "$bin" --version | head -1)"
	;;
uninstall)
	if [ -x "$HOST$bin" ]; then
		on_node "$bin" setup containerd --config "$CONTAINERD_CONFIG" --wrapper-dir "$WRAPPER_DIR" --undo
		restart
		rm -f "$HOST$bin"
		rmdir "$HOST$WRAPPER_DIR" 2>/dev/null || :
	fi
	echo "agentsbx-installer: uninstalled"
	;;
*)
	echo "usage: install.sh install|uninstall" >&2
	exit 2
	;;
esac
