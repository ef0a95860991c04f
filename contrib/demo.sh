#!/bin/bash
# The main job, end to end, on a fresh Debian 12 machine (as root, from the top of a clone):
#   1. install the build dependencies and build agentsbx (contrib/setup.sh);
#   2. run an example agent script (contrib/examples/agent.sh) under `agentsbx sandbox` with the
#      built-in `agent` profile and a 5-second wall clock (contrib/examples/demo-policy.json):
#      its workspace write succeeds, the write to /etc is refused, an SSH key in a home
#      directory is hidden, a binary it wrote cannot run, a user namespace is refused, and the
#      package download from the allowed test registry succeeds, a request to an unlisted host
#      is refused, and the runaway loop at the end is stopped by the wall clock (exit status 124);
#   3. print the container's audit log (and write it as an HTML page, audit --html) and what
#      reached the fake internet;
#   4. review: an agent edits two files and adds a third under `sandbox --review` (the host
#      directory is not written), `workspace diff` shows the changes, `workspace apply` takes
#      one file, `workspace discard` drops the rest; the script exits 0 only when the host shows
#      exactly the applied change and no workspace is left.
# The "internet" is a fake one made here: a network namespace (asbx-demo-up) joined to the host
# by a veth pair (198.51.100.241 <-> 198.51.100.242, a documentation range: the sandbox's DNS stub
# refuses answers naming private addresses), no default route in it and IP forwarding left as
# it is, running tests/integration/egress/upstream.py - DNS for demo.test and an HTTP "registry".
# The sandbox's DNS stub asks it (AGENTSBX_UPSTREAM_DNS); it is removed on exit (trap).
# Idempotent. The fake SSH key lives in /home/agentsbx-demo (created once, demo only).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/setup.sh" >&2

runtime=$top/agentsbx
work=/srv/agentsbx-demo
mkdir -p "$work/workspace" /home/agentsbx-demo/.ssh
[ -f /home/agentsbx-demo/.ssh/id_ed25519 ] || echo "FAKE-KEY-FOR-THE-AGENTSBX-DEMO" > /home/agentsbx-demo/.ssh/id_ed25519
chmod 700 /home/agentsbx-demo/.ssh
cp "$top/contrib/examples/agent.sh" "$work/workspace/agent.sh"
rm -f "$work/workspace/result.txt" "$work/workspace/tool"

# ---- the fake internet ----
up=asbx-demo-up upaddr=198.51.100.241 hostaddr=198.51.100.242 vh=asbxdemo0 vu=asbxdemo1
state= upstream_pid=
cleanup() {
	if [ -n "$upstream_pid" ]; then kill "$upstream_pid" 2>/dev/null || :; wait "$upstream_pid" 2>/dev/null || :; fi
	ip link del "$vh" 2>/dev/null || :
	ip netns del "$up" 2>/dev/null || :
	if [ -n "$state" ]; then rm -rf "$state"; fi
}
trap cleanup EXIT
cleanup # what a run killed hard left behind
state=$(mktemp -d /tmp/agentsbx-demo-net.XXXXXX)
ip netns add "$up"
ip link add "$vh" type veth peer name "$vu" netns "$up"
ip -n "$up" addr add "$upaddr/28" dev "$vu"
ip -n "$up" link set "$vu" up
ip -n "$up" link set lo up
ip addr add "$hostaddr/28" dev "$vh"
ip link set "$vh" up
# never send to anything but our namespace: the host must reach the upstream over our veth
ip -o route get "$upaddr" | grep -q "dev $vh " || { echo "demo: $upaddr is not routed over $vh" >&2; exit 1; }
printf '{"registry.demo.test": {"A": ["%s"], "ttl": 60}, "evil.demo.test": {"A": ["%s"], "ttl": 60}}\n' \
	"$upaddr" "$upaddr" >"$state/zone.json"
ip netns exec "$up" /usr/bin/python3 "$top/tests/integration/egress/upstream.py" "$state" "$state/zone.json" \
	>"$state/upstream.log" 2>&1 &
upstream_pid=$!
for _ in $(seq 100); do [ -e "$state/ready" ] && break; sleep 0.05; done
[ -e "$state/ready" ] || { echo "demo: the fake registry did not start" >&2; exit 1; }
echo "== fake internet: registry.demo.test and evil.demo.test at $upaddr (netns $up, no default route)"

id=agentsbx-demo-$$
rm -f "$work/workspace/pkg.tar.gz"
echo "== agentsbx sandbox --policy contrib/examples/demo-policy.json -- sh /workspace/agent.sh"
set +e
AGENTSBX_UPSTREAM_DNS=$upaddr "$runtime" sandbox --id "$id" --policy "$top/contrib/examples/demo-policy.json" \
	--workspace "$work/workspace" -- sh /workspace/agent.sh </dev/null
status=$?
set -e
echo "== the agent exited with status $status (124 = stopped by the wall clock)"
echo "== on the host: $(cat "$work/workspace/result.txt" 2>/dev/null || echo 'no result') in $work/workspace/result.txt;" \
	"/etc/hosts $(grep -q evil /etc/hosts && echo 'CHANGED' || echo 'unchanged')"
echo "== audit log ($runtime audit $id):"
"$runtime" audit "$id" | tail -n 16
"$runtime" audit --html "$id" >"$work/report.html"
echo "== the same as one page for a browser: $work/report.html ($runtime audit --html $id)"
echo "== what reached the fake internet (DNS questions; HTTP requests by Host):"
sed 's/^/   dns  /' "$state/queries.log" 2>/dev/null
sed 's/^/   http /' "$state/http.log" 2>/dev/null
if grep -q evil "$state/queries.log" "$state/http.log" 2>/dev/null; then
	echo "== evil.demo.test REACHED the fake internet" && status=1
else
	echo "== evil.demo.test: refused inside the sandbox, nothing about it reached the fake internet"
fi
[ "$status" = 124 ] || { echo "== demo: the first run did not end as expected (status $status)" >&2; exit 1; }

# ---- review: the agent's changes are held back, reviewed, partly applied, the rest discarded ----
rv=$work/review rid=agentsbx-demo-review
"$runtime" workspace discard "$rid" >/dev/null 2>&1 || : # left by a run killed before its end
rm -rf "$rv" && mkdir -p "$rv"
printf 'print("v1")\n' >"$rv/app.py"
printf '# notes\n' >"$rv/NOTES.md"
show_host() { for f in app.py NOTES.md extra.txt; do
	printf '   %-9s %s\n' "$f" "$(cat "$rv/$f" 2>/dev/null | tr '\n' ' ' || echo '(absent)')"; done; }
echo "== agentsbx sandbox --review --id $rid --workspace $rv -- sh -c '<edit app.py and NOTES.md, add extra.txt>'"
"$runtime" sandbox --review --id "$rid" --workspace "$rv" -- sh -c \
	'echo "print(\"v2\")" > app.py; echo "agent: rewrote app.py" >> NOTES.md; echo scratch > extra.txt; ls' </dev/null
echo "== on the host after the run (nothing written yet):"
show_host
echo "== agentsbx workspace diff $rid"
"$runtime" workspace diff "$rid"
echo "== agentsbx workspace apply $rid app.py"
"$runtime" workspace apply "$rid" app.py
echo "== agentsbx workspace discard $rid (NOTES.md's edit and extra.txt)"
"$runtime" workspace discard "$rid"
echo "== on the host now:"
show_host
if [ "$(cat "$rv/app.py")" = 'print("v2")' ] && [ "$(cat "$rv/NOTES.md")" = '# notes' ] && [ ! -e "$rv/extra.txt" ] \
	&& [ "$(ls -A "$rv" | sort | tr '\n' ' ')" = 'NOTES.md app.py ' ] \
	&& ! "$runtime" workspace list | grep -qw "$rid"; then
	echo "== review: exactly the applied change (app.py) reached the host; the rest was discarded, nothing is left"
else
	echo "== review: the host does not show exactly the applied change" >&2
	exit 1
fi
