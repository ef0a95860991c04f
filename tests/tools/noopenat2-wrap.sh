#!/bin/sh
# noopenat2-wrap.sh DIR RUNTIME - set up DIR for `make check-noopenat2`: DIR/no-openat2 (built
# from no-openat2.c), DIR/agentsbx.real (a private copy of RUNTIME, so a rebuild during the run
# cannot swap it) and DIR/agentsbx, a wrapper that execs `no-openat2 agentsbx.real "$@"`, so
# every runtime command - and every process it starts, the container included - sees openat2
# fail with ENOSYS. Absolute paths are baked in: the test suite copies AGENTSBX_RUNTIME.
set -eu
dir=$1
runtime=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
${CC:-cc} -O2 -o "$dir/no-openat2" "$here/no-openat2.c" -lseccomp
cp "$runtime" "$dir/agentsbx.real"
printf '#!/bin/sh\nexec %s/no-openat2 %s/agentsbx.real "$@"\n' "$dir" "$dir" >"$dir/agentsbx"
chmod 755 "$dir/agentsbx"
# the wrapper must really take openat2 away, or the pass would prove nothing
"$dir/no-openat2" python3 -c 'import ctypes, os
r = ctypes.CDLL(None, use_errno=True).syscall(437, -100, b"/", b"\0" * 24, 24)
assert r == -1 and ctypes.get_errno() == 38, "no-openat2 did not make openat2 fail with ENOSYS"'
