#!/bin/sh
# run-all.sh [SECONDS] - build every libFuzzer target in tests/fuzz with clang + ASan/UBSan and
# run each for SECONDS (default 60) on a copy of its seed corpus (tests/fuzz/corpus/<target>).
# Any crash, leak or sanitizer report = non-zero exit (the input is kept in $FUZZ_WORKDIR/<t>/).
# FUZZ_TARGETS picks a subset (default: all), e.g. to run two long runs in parallel.
# Prints "fuzz <target>: <execs> execs in <s> s" per target (libFuzzer's final stats).
set -eu
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
work=${FUZZ_WORKDIR:-/tmp/agentsbx-fuzz}
cc=${CC_FUZZ:-clang}
command -v "$cc" >/dev/null || { echo "run-all.sh: $cc not found (apt-get install -y clang)" >&2; exit 2; }
config_h=
[ -f "$top/config.h" ] && config_h="-include $top/config.h"
core="$top/src/core/error.c $top/src/core/util.c $top/src/core/log.c"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -I $top/src -I $top $config_h"
status=0
for t in ${FUZZ_TARGETS:-ocispec sync policy}; do
  d="$work/$t"
  mkdir -p "$d/corpus" "$d/artifacts"
  cp "$top"/tests/fuzz/corpus/$t/* "$d/corpus/" 2>/dev/null || true
  case $t in
    ocispec) srcs="$top/tests/fuzz/fuzz_ocispec.c $top/libocispec/*.c" ;;
    sync) srcs="$top/tests/fuzz/fuzz_sync.c $top/src/runtime/sync.c" ;;
    policy) srcs=$(ls "$top"/src/policy/*.c | tr '\n' ' ')" $top/tests/fuzz/fuzz_policy.c $top/libocispec/*.c" ;;
  esac
  # shellcheck disable=SC2086
  if ! $cc $flags -o "$d/fuzz_$t" $srcs $core -lyajl 2>"$d/build.log"; then
    echo "fuzz $t: build failed:" >&2; tail -20 "$d/build.log" >&2; status=1; continue
  fi
  if "$d/fuzz_$t" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$d/artifacts/" -print_final_stats=1 "$d/corpus" >"$d/run.log" 2>&1; then
    echo "fuzz $t: $(grep -m1 'stat::number_of_executed_units' "$d/run.log" | awk '{print $2}') execs in $secs s, no crash"
  else
    echo "fuzz $t: FAILED (see $d/run.log, inputs in $d/artifacts)" >&2
    grep -E 'ERROR|SUMMARY' "$d/run.log" | head -5 >&2
    status=1
  fi
done
exit $status
