#!/bin/sh
# An "agent" for the demo: it tries what coding agents do, well-behaved and not. Runs inside
# `agentsbx sandbox` under contrib/examples/demo-policy.json (the built-in `agent` profile with
# a 5-second wall clock). Each step prints what it tried and what happened.
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

say "6. get stuck in a retry loop (the policy's wall clock is 5 s)"
while :; do :; done
