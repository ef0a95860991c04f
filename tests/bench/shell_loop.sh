#!/bin/bash
# shell_loop.sh N AGENTSBX_A AGENTSBX_B TRUE_BUNDLE SLEEP_BUNDLE
# A second timing method for `make bench` (issue 20): `run` of TRUE_BUNDLE (/bin/true) and
# `exec` of /bin/true into a container of SLEEP_BUNDLE, timed with date +%s%N around each
# command, binaries A and B alternating, N pairs; medians and min-max in ms at the end. Not part
# of `make check`. Uses its own state roots under a temporary directory; stops only the two
# containers it started.
set -u
N=$1 A=$2 B=$3 TB=$4 SB=$5
R=$(mktemp -d /tmp/agentsbx-shell-loop-XXXXXX)
OUT=$R/times
for w in a b; do
  bin=$A; [ $w = b ] && bin=$B
  mkdir -p "$R/$w"
  "$bin" --root "$R/$w" run --detach --bundle "$SB" "s$w" >/dev/null || { echo "$bin: detached run failed" >&2; exit 1; }
done
for i in $(seq "$N"); do
  for w in a b; do
    bin=$A; [ $w = b ] && bin=$B
    t0=$(date +%s%N); "$bin" --root "$R/$w" run --bundle "$TB" "l$w$i" >/dev/null 2>&1; t1=$(date +%s%N)
    "$bin" --root "$R/$w" exec "s$w" /bin/true >/dev/null 2>&1; t2=$(date +%s%N)
    echo "$w run $(((t1 - t0) / 1000))" >>"$OUT"
    echo "$w exec $(((t2 - t1) / 1000))" >>"$OUT"
  done
done
for w in a b; do
  bin=$A; [ $w = b ] && bin=$B
  "$bin" --root "$R/$w" delete --force "s$w" >/dev/null 2>&1
done
python3 - "$OUT" "$A" "$B" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w, verb, us = line.split()
    d[(verb, w)].append(int(us) / 1000)
names = {"a": sys.argv[2], "b": sys.argv[3]}
for verb in ("run", "exec"):
    med = {w: statistics.median(d[(verb, w)]) for w in "ab"}
    for w in "ab":
        v = d[(verb, w)]
        print(f"{verb:5} {names[w]}: median {med[w]:.1f} ms, min-max {min(v):.1f}-{max(v):.1f} ({len(v)} runs)")
    print(f"{verb:5} a/b {med['a'] / med['b']:.2f}")
PY
rm -rf "$R"
