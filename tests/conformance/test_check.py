"""Self-test of tests/conformance/check.py, the CI gate over runtime-tools results: it must fail
on a failure that is not listed, on a listed failure that passes (unless flaky), on a hang and on
a changed host device, and pass when every failure is listed. No root, no suite needed."""

import json
import os
import subprocess
import sys

import pytest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check.py")


def prog(ok=1, notok=0, fails=(), note="", timed_out=False, dev_changed=()):
    return dict(ok=ok, notok=notok, skip=0, rc=0, timed_out=timed_out, seconds=0.1, note=note,
                fails=list(fails), dev_changed=list(dev_changed))


def check(tmp_path, results, expect, *extra):
    r = tmp_path / "results.json"
    e = tmp_path / "expected.txt"
    r.write_text(json.dumps(results))
    e.write_text(expect)
    p = subprocess.run([sys.executable, CHECK, str(r), str(e), *extra], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def test_all_failures_listed_passes(tmp_path):
    res = {"a": prog(), "b": prog(ok=2, notok=1, fails=["3 x MUST y"]), "c": prog(ok=0, notok=1, note="no TAP")}
    rc, out = check(tmp_path, res, "b 3 test-bug why\nc * host why\n")
    assert rc == 0, out


def test_unlisted_failure_fails(tmp_path):
    res = {"a": prog(ok=2, notok=1, fails=["2 x"])}
    rc, out = check(tmp_path, res, "a 3 test-bug another case\n")
    assert rc == 1 and "UNEXPECTED FAILURE" in out, out


def test_program_level_failure_needs_star(tmp_path):
    res = {"a": prog(ok=0, notok=1, note="exit 1 without failing TAP")}
    rc, out = check(tmp_path, res, "a 1 test-bug case 1 only\n")
    assert rc == 1, out


@pytest.mark.parametrize("kind,want", [("test-bug", 1), ("host", 1), ("deviation", 1), ("pending", 1),
                                       ("flaky", 0)])
def test_listed_failure_that_passes(tmp_path, kind, want):
    rc, out = check(tmp_path, {"a": prog(ok=3)}, f"a * {kind} why\n")
    assert rc == want, out
    if want:
        assert "XPASS" in out, out


def test_hang_and_device_change_fail_even_if_listed(tmp_path):
    rc, out = check(tmp_path, {"a": prog(ok=0, notok=1, timed_out=True)}, "a * flaky why\n")
    assert rc == 1 and "hung" in out, out
    rc, out = check(tmp_path, {"a": prog(dev_changed=["/dev/null mode 0600"])}, "")
    assert rc == 1 and "device" in out, out


def test_subset_ignores_programs_not_run(tmp_path):
    rc, out = check(tmp_path, {"a": prog()}, "b * host why\n", "--only", "a")
    assert rc == 0, out
    rc, out = check(tmp_path, {"a": prog()}, "b * host why\n")
    assert rc == 1 and "did not run" in out, out


def test_bad_line_refused(tmp_path):
    rc, out = check(tmp_path, {"a": prog()}, "a 1 nonsense-kind why\n")
    assert rc not in (0, 1) or "expected" in out, out
    assert rc != 0
