#!/bin/bash
# Builds agentsbx and runs the whole test suite: unit tests (C, cmocka) and the integration
# suite (pytest, as root, against the agentsbx just built; runc_reference tests also run against
# runc), then (in CI or with ASBX_ENGINES=1) the engine suite tests/engines.
# Run as root from the top of a clone on Debian 12:  contrib/test.sh [PYTEST ARGS...]
# e.g. contrib/test.sh -k lifecycle -x. Exits non-zero on any failure.
# AGENTSBX_RUNTIME=runc contrib/test.sh runs the integration suite against runc instead.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/setup.sh"
cd "$top"
# Sequential on purpose (unit and integration output stay readable); -k so that a unit test
# failure does not hide the integration results (the exit status is still non-zero).
rc=0
# CI only: Debian's chromium for the headless-browser check of `audit --html`
# (tests/integration/test_audit_html.py; skipped with the reason when absent outside CI)
if [ -n "${CI:-}" ] && ! command -v chromium >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null || rc=1
fi
make -k check PYTEST_ARGS="$*" || rc=1
# The engines (tests/engines, docs/engines.md): private Docker, Podman and containerd/CRI
# instances driving agentsbx, runc as the control in the same run. In CI, or with
# ASBX_ENGINES=1; about 3 minutes plus the first install. Exit 5 = every engine test was
# deselected by the PYTEST ARGS given (e.g. -k lifecycle): not a failure.
if [ -n "${CI:-}" ] || [ -n "${ASBX_ENGINES:-}" ]; then
  erc=0
  "$top/contrib/engines/setup.sh" || erc=1
  if [ $erc = 0 ]; then
    AGENTSBX_RUNTIME="${AGENTSBX_RUNTIME:-$top/agentsbx}" \
      timeout --kill-after=30 1200 /usr/bin/python3 -m pytest -ra -p no:cacheprovider "$@" tests/engines \
      || erc=$?
    [ $erc = 5 ] && erc=0
  fi
  [ $erc = 0 ] || rc=1
fi
# The OCI runtime-tools validation suite (make check-conformance, tests/conformance): in CI, or
# with ASBX_CONFORMANCE=1; about 2 minutes (a full run took 92 s here). Skipped with the reason
# when ../shared/conformance is absent. Any failure not in tests/conformance/expected-failures.txt
# fails, and so does a listed failure that starts passing (a stale entry).
if [ -n "${CI:-}" ] || [ -n "${ASBX_CONFORMANCE:-}" ]; then
  make check-conformance || rc=1
fi
# The Debian package (make check-deb, contrib/test-deb.sh): dpkg-buildpackage, lintian, the .deb
# against make install/uninstall, then install, --version, sandbox -- true, man, purge, nothing
# left, all in a private mount namespace over overlays (the machine is left as found). In CI, or
# with ASBX_DEB=1; about 2 minutes; installs debhelper, lintian, fakeroot, man-db and
# bash-completion when missing.
if [ -n "${CI:-}" ] || [ -n "${ASBX_DEB:-}" ]; then
  "$top/contrib/test-deb.sh" || rc=1
fi
# cgroup v2 (tests/vm, make check-cgroupv2): the cgroup tests again on a pure v2 kernel in a qemu
# VM, in CI only unless asked (ASBX_CGROUPV2=1); about 8 minutes on 2 cores.
if [ -n "${CI:-}" ] || [ -n "${ASBX_CGROUPV2:-}" ]; then
  dpkg -s qemu-system-x86 busybox-static >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q --no-install-recommends qemu-system-x86 busybox-static; } >/dev/null
  make check-cgroupv2 PYTEST_ARGS="$*" || rc=1
  # the systemd cgroup driver against a real systemd as PID 1 (same VM), on systemd's unified
  # and hybrid layouts: about 3 minutes each
  "$top/tests/vm/systemd/run.sh" "$@" || rc=1
  ASBX_VM_SD_LAYOUT=hybrid "$top/tests/vm/systemd/run.sh" "$@" || rc=1
fi
# Security proof (docs/security.md), in CI only unless asked (ASBX_SECURITY=1): the escape suite,
# each fuzz target for FUZZ_SECONDS (3 targets x 60 s), and one ASan+UBSan build of the runtime
# running the integration suite (separate build dir). Together about 8 minutes on 2 cores.
# First the static checks (about 2 minutes): make lint (include layers + clang-tidy + cppcheck, must be clean) and
# make format-check (every C file must match .clang-format).
if [ -n "${CI:-}" ] || [ -n "${ASBX_SECURITY:-}" ]; then
  for t in clang-tidy cppcheck git-clang-format; do
    command -v "$t" >/dev/null || { apt-get install -y clang-tidy cppcheck clang-format >/dev/null; break; }
  done
  make lint || rc=1
  make format-check || rc=1
  make check-escape PYTEST_ARGS="$*" || rc=1
  make check-noopenat2 PYTEST_ARGS="$*" || rc=1  # openat2 -> ENOSYS: the userspace fallback
  command -v clang >/dev/null || apt-get install -y clang >/dev/null
  make fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-60}" || rc=1
  make check-asan PYTEST_ARGS="$*" || rc=1
fi
exit $rc
