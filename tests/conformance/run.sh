#!/bin/bash
# The OCI runtime-tools validation suite (opencontainers/runtime-tools, runtime-spec 1.3.0) against
# agentsbx, compared with tests/conformance/expected-failures.txt by tests/conformance/check.py.
# The suite is test tooling built for this machine kind outside the project
# (../shared/conformance/runtime-tools: the validation tarball and run_rt.py, which runs each
# program with a host guard); it is never copied into the tree.
#
# usage: tests/conformance/run.sh [RUNTIME]     (root; RUNTIME defaults to ./agentsbx)
# Variables: ASBX_CONFORMANCE_DIR  the suite (default: the first of ../shared/conformance/
#              runtime-tools and ../../shared/conformance/runtime-tools from the top of the tree)
#            ASBX_CONFORMANCE_ONLY a,b,c: run only these programs (iterating on a fix)
#            ASBX_CONFORMANCE_OUT  where TAP, stderr, results.json and guard.log go (default: a
#              fresh /tmp/asbx-conformance.* directory, kept and printed)
#            ASBX_CONFORMANCE_EXPECT the expectations file (default: ours)
# Exit: 0 clean (every failure listed, no listed failure passing), 1 otherwise, 77 skipped
# (the suite is absent: the reason is printed).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
rtbin=${1:-$top/agentsbx}
suite=${ASBX_CONFORMANCE_DIR:-}
if [ -z "$suite" ]; then
  for d in "$top/../shared/conformance/runtime-tools" "$top/../../shared/conformance/runtime-tools"; do
    [ -f "$d/run_rt.py" ] && { suite=$(cd "$d" && pwd); break; }
  done
fi
if [ -z "$suite" ] || [ ! -f "$suite/run_rt.py" ]; then
  echo "check-conformance: SKIPPED: the runtime-tools suite is not here (looked for" \
       "../shared/conformance/runtime-tools next to the tree; set ASBX_CONFORMANCE_DIR)" >&2
  exit 77
fi
tarball=$(ls "$suite"/runtime-tools-*-validation.tar.xz 2>/dev/null | head -n1)
[ -n "$tarball" ] || { echo "check-conformance: no runtime-tools-*-validation.tar.xz in $suite" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "check-conformance: needs root" >&2; exit 1; }
[ -x "$rtbin" ] || { echo "check-conformance: $rtbin is not an executable" >&2; exit 1; }
rtbin=$(cd "$(dirname "$rtbin")" && pwd)/$(basename "$rtbin")

scratch=$(mktemp -d /tmp/asbx-conformance-rt.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
out=${ASBX_CONFORMANCE_OUT:-$(mktemp -d /tmp/asbx-conformance.XXXXXX)}
mkdir -p "$out"
# mktemp makes it 0700; the programs keep their bundles under it, and a container in a user
# namespace (linux_uid_mappings, linux_ns_nopath) must reach its rootfs as its mapped root
chmod 0755 "$out"
tar -xJf "$tarball" -C "$scratch"
args=(--runtime "$rtbin" --rt-dir "$scratch" --out "$out")
[ -n "${ASBX_CONFORMANCE_ONLY:-}" ] && args+=(--only "$ASBX_CONFORMANCE_ONLY")
echo "check-conformance: $(basename "$tarball") against $rtbin, results in $out"
start=$(date +%s)
# run_rt.py's own 600 s guard per program; the whole run is bounded too (58 programs)
timeout --kill-after=60 3600 /usr/bin/python3 "$suite/run_rt.py" "${args[@]}"
echo "check-conformance: the run took $(( $(date +%s) - start )) s"
check=(/usr/bin/python3 "$top/tests/conformance/check.py" "$out/results.json"
       "${ASBX_CONFORMANCE_EXPECT:-$top/tests/conformance/expected-failures.txt}")
[ -n "${ASBX_CONFORMANCE_ONLY:-}" ] && check+=(--only "$ASBX_CONFORMANCE_ONLY")
"${check[@]}"
