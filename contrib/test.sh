#!/bin/bash
# Builds agentsbx and runs the whole test suite: unit tests (C, cmocka) and the integration
# suite (pytest, as root, against the agentsbx just built; runc_reference tests also run against
# runc). Run as root from the top of a clone on Debian 12:  contrib/test.sh [PYTEST ARGS...]
# e.g. contrib/test.sh -k lifecycle -x. Exits non-zero on any failure.
# AGENTSBX_RUNTIME=runc contrib/test.sh runs the integration suite against runc instead.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/setup.sh"
cd "$top"
# Sequential on purpose (unit and integration output stay readable); -k so that a unit test
# failure does not hide the integration results (the exit status is still non-zero).
make -k check PYTEST_ARGS="$*"
