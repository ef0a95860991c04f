#!/bin/bash
# The main job, end to end, on a fresh Debian 12 machine (as root, from the top of a clone):
#   1. install the build dependencies and build agentsbx (contrib/setup.sh);
#   2. run an example agent script (contrib/examples/agent.sh) under `agentsbx sandbox` with the
#      built-in `agent` profile and a 5-second wall clock (contrib/examples/demo-policy.json):
#      its workspace write succeeds, the write to /etc is refused, an SSH key in a home
#      directory is hidden, a binary it wrote cannot run, a user namespace is refused, and the
#      runaway loop at the end is stopped by the wall clock (exit status 124);
#   3. print the container's audit log.
# Idempotent. The fake SSH key lives in /home/agentsbx-demo (created once, demo only).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/setup.sh" >&2

runtime=$top/agentsbx
work=/var/lib/agentsbx-demo
mkdir -p "$work/workspace" /home/agentsbx-demo/.ssh
[ -f /home/agentsbx-demo/.ssh/id_ed25519 ] || echo "FAKE-KEY-FOR-THE-AGENTSBX-DEMO" > /home/agentsbx-demo/.ssh/id_ed25519
chmod 700 /home/agentsbx-demo/.ssh
cp "$top/contrib/examples/agent.sh" "$work/workspace/agent.sh"
rm -f "$work/workspace/result.txt" "$work/workspace/tool"

id=agentsbx-demo-$$
echo "== agentsbx sandbox --policy contrib/examples/demo-policy.json -- sh /workspace/agent.sh"
set +e
"$runtime" sandbox --id "$id" --policy "$top/contrib/examples/demo-policy.json" --workspace "$work/workspace" \
	-- sh /workspace/agent.sh </dev/null
status=$?
set -e
echo "== the agent exited with status $status (124 = stopped by the wall clock)"
echo "== on the host: $(cat "$work/workspace/result.txt" 2>/dev/null || echo 'no result') in $work/workspace/result.txt;" \
	"/etc/hosts $(grep -q evil /etc/hosts && echo 'CHANGED' || echo 'unchanged')"
echo "== audit log ($runtime audit $id):"
"$runtime" audit "$id" | tail -n 12
[ "$status" = 124 ]
