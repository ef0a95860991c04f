#!/usr/bin/env python3
"""check-layers.py - the include direction between the source folders (docs/ARCHITECTURE.md).

Reads every `#include "..."` in src/ and libocispec/ and fails, naming file:line and the rule,
on an edge against the allowed direction:

    cli -> runtime -> monitor -> {policy, spec, linux} -> {libocispec, core}

A folder includes itself and the folders listed for it below, nothing else. Includes without a
folder (`#include "error.h"`) resolve next to the including file (C's quote rule), so they stay in
the folder; a path with `..` is refused (it hides the folder it reaches). Includes in angle
brackets are system headers and not checked.

Usage: check-layers.py [TOP_SRCDIR]   (default: the current directory). Exit 0 = no bad edge,
1 = at least one (each printed), 2 = a source folder this table does not know (add it here and
in docs/ARCHITECTURE.md).
"""
import os
import re
import sys

# folder -> the other folders it may include (itself always)
ALLOWED = {
    "cli": {"runtime", "core", "libocispec"},
    "runtime": {"monitor", "policy", "spec", "linux", "core", "libocispec"},
    "monitor": {"policy", "spec", "linux", "core", "libocispec"},
    "policy": {"core", "libocispec"},
    "spec": {"core", "libocispec"},
    "linux": {"core", "libocispec"},
    "libocispec": {"core"},
    "core": set(),
}

# why an edge is refused, by the including folder (printed with the violation)
WHY = {
    "cli": "the CLI parses options and calls the runtime's API (runtime/), not its internals",
    "runtime": "the runtime is the top library layer: it is called by cli/, never the reverse",
    "monitor": "the monitor is started by the runtime: what it needs comes in monitor_opts, "
    "not from runtime/",
    "policy": "policy/ is pure (no syscalls): documents -> plan; it never includes linux/, "
    "runtime/, monitor/",
    "spec": "spec/ is the model and its validation (no syscalls): it never includes linux/, "
    "runtime/, monitor/, policy/",
    "linux": "linux/ is one module per kernel mechanism, driven by the runtime: it takes plain "
    "arguments, never a policy plan, and never includes runtime/, monitor/, policy/",
    "libocispec": "libocispec/ is the OCI spec library: it depends on core/ only",
    "core": "core/ is the bottom layer: it includes nothing of the project outside core/",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder_of(rel):
    """src/X/file -> X; libocispec/file -> libocispec"""
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "libocispec":
        return "libocispec"
    return None


def check_file(top, rel, bad):
    src = folder_of(rel)
    if src is None:
        return
    if src not in ALLOWED:
        print("%s: folder `%s` is not in tests/tools/check-layers.py's table" % (rel, src))
        sys.exit(2)
    with open(os.path.join(top, rel), encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if ".." in target.split("/"):
                bad.append("%s:%d: #include \"%s\": name the folder (X/file.h), not a relative path"
                           % (rel, n, target))
                continue
            if "/" not in target:
                continue  # next to the including file: the same folder
            dst = target.split("/")[0]
            if dst == src or dst in ALLOWED[src]:
                continue
            if dst not in ALLOWED:
                continue  # not a project folder (e.g. a generated or third-party path)
            bad.append("%s:%d: #include \"%s\": %s/ -> %s/ is against the layers (%s may include: %s). %s"
                       % (rel, n, target, src, dst, src,
                          ", ".join(sorted(ALLOWED[src] | {src})), WHY[src]))


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = []
    for base in ("src", "libocispec"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(top, base)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith((".c", ".h")):
                    rel = os.path.relpath(os.path.join(dirpath, name), top)
                    check_file(top, rel, bad)
    for b in bad:
        print(b)
    if bad:
        print("check-layers: %d include edge(s) against the layers (docs/ARCHITECTURE.md)" % len(bad))
        return 1
    print("check-layers: every include follows cli -> runtime -> monitor -> {policy, spec, linux} "
          "-> {libocispec, core}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
