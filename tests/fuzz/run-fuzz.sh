#!/bin/sh
# run-fuzz.sh [SECONDS] - build tests/fuzz/fuzz_ocispec with clang + libFuzzer + ASan/UBSan and
# run it for SECONDS (default 60) on a corpus seeded from tests/unit/data/ocispec.
# Env: FUZZ_WORKDIR (default /tmp/fuzz-ocispec: binary, corpus, crash artifacts), FUZZ_JOBS.
# Exit status is libFuzzer's (non-zero when a crash was found; the input is in FUZZ_WORKDIR).
set -eu
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
work=${FUZZ_WORKDIR:-/tmp/fuzz-ocispec}
mkdir -p "$work/corpus" "$work/artifacts"
cp "$top"/tests/unit/data/ocispec/*.json "$work/corpus/"

cc=${CC_FUZZ:-clang}
command -v "$cc" >/dev/null || { echo "run-fuzz.sh: $cc not found (apt-get install -y clang)" >&2; exit 2; }
config_h=
[ -f "$top/config.h" ] && config_h="-include $top/config.h"
# shellcheck disable=SC2086
"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE \
  -I "$top/src" -I "$top" $config_h \
  -o "$work/fuzz_ocispec" "$top/tests/fuzz/fuzz_ocispec.c" "$top"/libocispec/*.c \
  "$top/src/core/error.c" "$top/src/core/util.c" "$top/src/core/log.c" -lyajl

cat > "$work/json.dict" <<'DICT'
"{"
"}"
"["
"]"
":"
","
"null"
"true"
"false"
"\"ociVersion\""
"\"1.2.0\""
"\"process\""
"\"cwd\""
"\"linux\""
"\"namespaces\""
"\"resources\""
"\"mounts\""
"\"hooks\""
"\"annotations\""
"\"sysctl\""
"18446744073709551616"
"-1"
"\\u0000"
DICT

exec "$work/fuzz_ocispec" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -dict="$work/json.dict" -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus"
