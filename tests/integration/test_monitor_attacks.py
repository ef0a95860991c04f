"""The supervisor and the audit log under attack (issue 14 §3-§5), judged from outside: the
kill seen from the host (processes gone), the audit file read from the host.

§3: limits fire whatever the container makes the monitor do. The load: processes holding
thousands of fds each, plus pipelined DNS-over-TCP queries for unlisted names under
`approvals.network: ask` - each held query makes the monitor look for its sender. On the code
before issue 14 that lookup walked /proc (every fd of every container process) synchronously in
the monitor's loop, and the wall clock kill waited behind it."""
import json
import os
import shutil
import time
import uuid

import pytest

from test_egress import HOSTUP4, POLICY, ZONE, Approver, audit_args, ebundle, lab, usr_template  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = [pytest.mark.agentsbx_only("agent policy monitor")]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_audit(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data == b"" or data.endswith(b"\n"), "the audit log's last line is cut"
    return [json.loads(line) for line in data.decode().splitlines()]


def lifecycle(recs, state):
    return [r for r in recs if r["event"] == "lifecycle" and r.get("state") == state]


def test_wall_clock_kill_not_stalled_by_querier_lookups(rt, ebundle, lab, tmp_path):  # noqa: F811
    """wallClockSeconds 5 with 150 processes x 4000 fds and 4 connections x 30 pipelined queries
    for unlisted names (held, approvals ask, no approver, long timeout). The container must be
    gone well before 4x its wall clock, with exitReason wallclock, and nothing of it alive."""
    wall = 5
    lab.zone(ZONE)
    shutil.copy2(os.path.join(HERE, "attack", "stall.py"), os.path.join(ebundle.rootfs, "egress", "stall.py"))
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(dict(POLICY, approvals={"network": "ask", "timeoutSeconds": 120, "onTimeout": "deny"},
                                   limits={"wallClockSeconds": wall, "openFiles": 4096})))
    ebundle.process["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 4096}]
    ebundle.args("/usr/bin/python3", "/egress/stall.py", "150", "4000", "4", "30")
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
    cid = f"stall-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    try:
        r, _ = rt.run(ebundle, cid, global_args=audit_args(tmp_path, "--policy", str(pol)), env=env,
                      timeout=8 * wall + 30)
    except Exception as e:  # the hang guard: the container outlived its wall clock
        pytest.fail(f"the container was still running {time.monotonic() - t0:.0f} s after start "
                    f"(wallClockSeconds {wall}): {e!r}")
    elapsed = time.monotonic() - t0
    recs = read_audit(tmp_path / "audit" / f"{cid}.jsonl")
    asked = [x for x in recs if x["event"] == "approval" and x["action"] == "asked"]
    assert asked, f"the load never reached the stub (no held question): {r!r}"
    created = lifecycle(recs, "created")[-1]
    exited = lifecycle(recs, "exited")
    assert exited and exited[-1]["exitReason"] == "wallclock", (exited, r)
    assert not alive(created["pid"]), "the container's init is still alive"
    assert elapsed < 4 * wall, f"the container lived {elapsed:.1f} s with wallClockSeconds {wall}"


def test_held_question_names_its_sender(rt, ebundle, lab, tmp_path):  # noqa: F811
    """The sender of a held query (UDP and TCP) is found without walking /proc (sock_diag +
    the container's own processes): the question carries its host pid and exe."""
    lab.zone(ZONE)
    pol = tmp_path / "policy.json"
    pol.write_text(json.dumps(dict(POLICY, approvals={"network": "ask", "timeoutSeconds": 20, "onTimeout": "deny"})))
    cid = f"askq-{uuid.uuid4().hex[:8]}"
    ap = Approver(rt, cid, lambda q: "deny")
    ap.start()
    ebundle.args("/usr/bin/python3", "/egress/client.py",
                 json.dumps([["rawdns", "127.0.0.1", "one.unlisted.test"], ["tcpdns", "127.0.0.1", "two.unlisted.test"]]))
    env = dict(os.environ, AGENTSBX_UPSTREAM_DNS=HOSTUP4)
    try:
        r, _ = rt.run(ebundle, cid, global_args=audit_args(tmp_path, "--policy", str(pol)), env=env)
    finally:
        ap.stop.set()
        ap.join(10)
    assert r.ok, r
    qs = {q["host"]: q for q in ap.questions}
    assert set(qs) == {"one.unlisted.test", "two.unlisted.test"}, ap.questions
    for q in qs.values():
        assert isinstance(q["pid"], int) and q["pid"] > 0, q
        assert q["exe"] and os.path.basename(q["exe"]).startswith("python3"), q
