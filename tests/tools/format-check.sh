#!/bin/sh
# format-check.sh - clang-format (.clang-format) check for every tracked C source, used by
# `make format-check` and CI (contrib/test.sh).
#
# Strict on the whole tree: the tree was reformatted in one commit once nobody else was editing
# it, so any file that differs from what clang-format (Debian's clang-format 14, as in CI) wants
# fails the check, with the diff printed. Hand-laid tables use /* clang-format off/on */.
# Fix: clang-format -i FILE (or `git clang-format` on a change).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
command -v clang-format >/dev/null || { echo "format-check: clang-format not found (apt-get install -y clang-format)" >&2; exit 2; }
status=0 n=0 all=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for f in $(git ls-files '*.[ch]'); do
  # generated (src/policy/gen-profiles.sh writes it from contrib/profiles): not hand-formatted
  [ "$f" = src/policy/profiles_data.c ] && continue
  all=$((all + 1))
  if ! clang-format "$f" | diff -u --label "a/$f" --label "b/$f" "$f" - >"$tmp" 2>&1; then
    head -n 40 "$tmp"
    echo "format-check: FAILED: $f is not formatted (clang-format -i $f)" >&2
    n=$((n + 1))
    status=1
  fi
done
echo "format-check: $((all - n)) of $all tracked C files formatted"
exit $status
