#!/bin/bash
# Installs what the engine suite (tests/engines) needs on Debian 12: docker.io (with containerd
# and its runc v2 shim), podman (with conmon), and Node.js + the npm packages of the CRI client.
# Idempotent: nothing is fetched when everything is present. No daemon is started or enabled:
# while apt runs, a policy-rc.d (unless one exists) stops the packages' maintainer scripts from
# starting the global dockerd/containerd; the tests start private instances themselves.
# Run as root from the top of a clone:  contrib/engines/setup.sh
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
PACKAGES=(docker.io containerd podman conmon runc iptables uidmap)
command -v node >/dev/null || PACKAGES+=(nodejs)
command -v npm >/dev/null || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "engines/setup.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	own_policy=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		own_policy=1
	fi
	rc=0
	{ apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } || rc=$?
	[ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
	[ $rc = 0 ] || exit $rc
fi

# The CRI client's two npm packages (the npm registry is reachable from CI).
cri="$top/tests/engines/cri"
if [ ! -d "$cri/node_modules/@grpc/grpc-js" ] || [ ! -d "$cri/node_modules/@grpc/proto-loader" ]; then
	(cd "$cri" && npm install --no-audit --no-fund --silent)
fi
