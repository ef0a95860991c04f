#!/usr/bin/python3
"""Compare a runtime-tools results.json (written by run_rt.py) with the expectations file.

usage: check.py RESULTS_JSON EXPECTED_FAILURES [--only a,b]

The expectations file (tests/conformance/expected-failures.txt) has one entry a line:
    PROGRAM CASE KIND REASON...
CASE is a TAP test number of PROGRAM, or `*` for every failure of the program (including a
program-level failure: non-zero exit, no TAP result, hang). KIND is one of
    test-bug     the upstream test is wrong (cannot pass for any runtime)
    host         a limitation of this machine kind (kernel, cgroup layout, bounding set)
    deviation    agentsbx deliberately differs from the spec text (docs/engines.md says why)
    flaky        the upstream test races; it may pass or fail on any run
    pending      a feature being built elsewhere; its entry goes when the feature lands
Exit status: 0 when every failure is expected and no expected failure passed; 1 when a failure
is not listed (a regression), when a program hung, or changed a host /dev node; 2 on bad input.
An expected failure that passes (XPASS) also fails (exit 1), except for `flaky` entries: the
entry is stale and must be removed so that the list keeps describing this runtime exactly.
"""
import json
import re
import sys

KINDS = ("test-bug", "host", "deviation", "flaky", "pending")


def load_expectations(path):
    exp = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
            if not line:
                continue
            parts = line.split(None, 3)
            if len(parts) < 4 or parts[2] not in KINDS or not (parts[1] == "*" or parts[1].isdigit()):
                sys.exit("%s:%d: expected `PROGRAM CASE|* %s REASON`, got %r" % (path, n, "|".join(KINDS), line))
            exp.setdefault(parts[0], {})[parts[1]] = (parts[2], parts[3])
    return exp


def failed_cases(r):
    """TAP numbers of the failed cases, plus `exit` for a program-level failure."""
    cases = set()
    for f in r.get("fails", []):
        m = re.match(r"(\d+)", f)
        if m:
            cases.add(m.group(1))
    if r["notok"] > len(cases):
        cases.add("exit")
    return cases


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    results = json.load(open(sys.argv[1]))
    exp = load_expectations(sys.argv[2])
    only = set(sys.argv[4].split(",")) if len(sys.argv) > 4 and sys.argv[3] == "--only" else None
    bad, xpass, expected = [], [], []
    for prog, r in sorted(results.items()):
        e = exp.get(prog, {})
        if r.get("timed_out"):
            bad.append("%s: hung (%s)" % (prog, r.get("note")))
        for d in r.get("dev_changed") or []:
            bad.append("%s: changed a host device node: %s" % (prog, d))
        cases = failed_cases(r)
        for c in sorted(cases):
            if "*" in e:
                expected.append("%s %s [%s] %s" % (prog, c, e["*"][0], e["*"][1]))
            elif c in e:
                expected.append("%s %s [%s] %s" % (prog, c, e[c][0], e[c][1]))
            else:
                desc = next((f for f in r.get("fails", []) if f.split(" ", 1)[0] == c), r.get("note", ""))
                bad.append("%s case %s: UNEXPECTED FAILURE: %s" % (prog, c, desc[:200]))
        for c, (kind, why) in sorted(e.items()):
            passed = (r["notok"] == 0) if c == "*" else (c not in cases)
            if passed and kind != "flaky":
                xpass.append("%s %s [%s]: listed as failing (%s) but PASSED: remove the entry" % (prog, c, kind, why))
    for prog in sorted(exp):
        if prog not in results and (only is None or prog in only):
            bad.append("%s: listed in the expectations but did not run" % prog)
    T = [sum(r[k] for r in results.values()) for k in ("ok", "notok", "skip")]
    clean = [p for p, r in results.items() if r["notok"] == 0]
    outside = [p for p in results if p not in exp]
    print("conformance: %d ok / %d not ok / %d skip; %d/%d programs clean; %d/%d programs outside the "
          "expectations file clean" % (T[0], T[1], T[2], len(clean), len(results),
                                      len([p for p in outside if p in clean]), len(outside)))
    for x in expected:
        print("  expected failure: " + x)
    for x in xpass:
        print("  XPASS (stale expectation): " + x)
    for x in bad:
        print("  FAIL: " + x)
    if xpass:
        print("conformance: %d expected failure(s) now PASS: update tests/conformance/expected-failures.txt"
              % len(xpass), file=sys.stderr)
    if bad:
        print("conformance: %d unexpected failure(s)" % len(bad), file=sys.stderr)
    return 1 if bad or xpass else 0


if __name__ == "__main__":
    sys.exit(main())
