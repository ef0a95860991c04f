#!/bin/sh
# run-all.sh [SECONDS] - build every libFuzzer target in tests/fuzz with clang + ASan/UBSan and
# run each for SECONDS (default 60) on a copy of its seed corpus (tests/fuzz/corpus/<target>).
# Any crash, leak or sanitizer report = non-zero exit (the input is kept in $FUZZ_WORKDIR/<t>/).
# FUZZ_TARGETS picks a subset (default: all five), e.g. to run long runs one per process.
# FUZZ_PARALLEL targets run at a time (default 2: five 60 s targets take 3 min of CI, not 5; on
# a shared machine run long ones under `nice -n 19`).
# Prints "fuzz <target>: <execs> execs in <s> s" per target (libFuzzer's final stats).
set -eu
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
work=${FUZZ_WORKDIR:-/tmp/agentsbx-fuzz}
cc=${CC_FUZZ:-clang}
par=${FUZZ_PARALLEL:-2}
command -v "$cc" >/dev/null || { echo "run-all.sh: $cc not found (apt-get install -y clang)" >&2; exit 2; }
config_h=
[ -f "$top/config.h" ] && config_h="-include $top/config.h"
core="$top/src/core/error.c $top/src/core/util.c $top/src/core/log.c $top/src/core/json.c $top/src/core/sha256.c $top/src/core/pathlex.c"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -I $top/src -I $top $config_h"

# build and run target $1; its verdict goes to $work/$1/status (0 = clean)
run_one() {
  t=$1
  d="$work/$t"
  mkdir -p "$d/corpus" "$d/artifacts"
  echo 1 >"$d/status"
  cp "$top"/tests/fuzz/corpus/$t/* "$d/corpus/" 2>/dev/null || true
  case $t in
    ocispec) srcs="$top/tests/fuzz/fuzz_ocispec.c $top/libocispec/*.c" ;;
    sync) srcs="$top/tests/fuzz/fuzz_sync.c $top/src/runtime/sync.c" ;;
    policy)
      # the built-in profiles' C file is generated (not checked in): made here from contrib/profiles
      sh "$top/src/policy/gen-profiles.sh" "$top/contrib/profiles" >"$d/profiles_data.c"
      srcs=$(ls "$top"/src/policy/*.c | grep -v '/profiles_data\.c$' | tr '\n' ' ')" $d/profiles_data.c $top/tests/fuzz/fuzz_policy.c $top/libocispec/*.c" ;;
    dns) srcs="$top/tests/fuzz/fuzz_dns.c $top/src/monitor/dns_parse.c $top/src/monitor/dns_build.c" ;;
    sni) srcs="$top/tests/fuzz/fuzz_sni.c $top/src/monitor/sni_parse.c" ;;
    http) srcs="$top/tests/fuzz/fuzz_http.c $top/src/monitor/http_req.c" ;;
    *) echo "fuzz $t: no such target" >&2; return 0 ;;
  esac
  # shellcheck disable=SC2086
  if ! $cc $flags -o "$d/fuzz_$t" $srcs $core -lyajl 2>"$d/build.log"; then
    echo "fuzz $t: build failed:" >&2; tail -20 "$d/build.log" >&2; return 0
  fi
  if "$d/fuzz_$t" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$d/artifacts/" -print_final_stats=1 "$d/corpus" >"$d/run.log" 2>&1; then
    echo 0 >"$d/status"
    echo "fuzz $t: $(grep -m1 'stat::number_of_executed_units' "$d/run.log" | awk '{print $2}') execs in $secs s, no crash"
  else
    echo "fuzz $t: FAILED (see $d/run.log, inputs in $d/artifacts)" >&2
    grep -E 'ERROR|SUMMARY' "$d/run.log" | head -5 >&2
  fi
}

targets=${FUZZ_TARGETS:-ocispec sync policy dns sni http}
n=0
for t in $targets; do
  run_one "$t" &
  n=$((n + 1))
  [ "$n" -lt "$par" ] || { wait; n=0; }
done
wait
status=0
for t in $targets; do
  [ "$(cat "$work/$t/status" 2>/dev/null)" = 0 ] || status=1
done
exit $status
