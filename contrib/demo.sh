#!/bin/bash
# The main job, end to end, on a fresh Debian 12 machine (as root, from the top of a clone):
#   1. install the build dependencies and build agentsbx (contrib/setup.sh);
#   2. make a Debian bookworm rootfs with mmdebstrap (cached in /var/cache/agentsbx-tests,
#      shared with the test suite) and a bundle for it in /var/lib/agentsbx-demo, whose
#      config.json comes from `agentsbx spec`;
#   3. `agentsbx run` a command in it and print what it prints.
# Idempotent: the rootfs is built once; config.json is regenerated on every run.
# AGENTSBX=/path/to/runtime (e.g. AGENTSBX=runc) runs the same bundle with another runtime.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/setup.sh" >&2

runtime=${AGENTSBX:-$top/agentsbx}
cache=/var/cache/agentsbx-tests
tarball=$cache/debian-bookworm-minbase-python3.tar   # same key as tests/integration/conftest.py
bundle=/var/lib/agentsbx-demo/bundle

if [ ! -f "$tarball" ]; then
	echo "demo: building the Debian rootfs with mmdebstrap (about a minute, once)" >&2
	mkdir -p "$cache"
	mmdebstrap --variant=minbase --include=python3 bookworm "$cache/.demo.$$.tar" >&2
	mv "$cache/.demo.$$.tar" "$tarball"
fi
if [ ! -d "$bundle/rootfs/usr" ]; then
	rm -rf "$bundle/rootfs"
	mkdir -p "$bundle/rootfs"
	tar -C "$bundle/rootfs" -xf "$tarball"
fi

rm -f "$bundle/config.json"
"$runtime" spec --bundle "$bundle"
/usr/bin/python3 - "$bundle/config.json" <<'PY'
import json, sys
path = sys.argv[1]
with open(path) as f:
    cfg = json.load(f)
cfg["process"]["terminal"] = False
cfg["process"]["args"] = ["/bin/sh", "-c",
    'echo "hello from agentsbx: Debian $(cat /etc/debian_version), uid $(id -u), '
    'hostname $(hostname)"; python3 -c "print(\'python3 says\', 6 * 7)"']
cfg["process"]["env"] = ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"]
cfg["root"] = {"path": "rootfs", "readonly": True}
cfg["hostname"] = "agentsbx-demo"
with open(path, "w") as f:
    json.dump(cfg, f, indent=2)
PY

id=agentsbx-demo-$$
trap '"$runtime" delete --force "$id" >/dev/null 2>&1 || true' EXIT
"$runtime" run --bundle "$bundle" "$id" </dev/null
