"""Agent policy: capabilities, limits and the monitor (POLICY.md §2 capabilities/limits, §4, §6).

Capabilities are read from /proc/self/status inside. Each monitor limit must fire with its
exitReason both in the audit log (the `exited` lifecycle record) and in `state` (the
io.agentsbx.exitReason annotation); cgroup limits are shown from inside (fork refused, OOM kill).
The monitor must outlive the CLI, die with the container, and take the container down with it.
"""

import os
import signal
import time

import pytest

from conftest import caps_mask
from policyutil import (PROBE, alive, audit_records, exited_record, last_json, pcreate,
                        policy_bundle, prun, script, state_reason, steps_out, wait_for)

pytestmark = pytest.mark.agentsbx_only("agent policy")

AGENT_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
              "CAP_SETGID", "CAP_SETUID", "CAP_NET_BIND_SERVICE"]


@pytest.fixture
def pb(make_bundle):
    return policy_bundle(make_bundle)


def status_caps(report, key):
    return int(report["status"][key], 16)


def test_caps_intersected_with_profile(rt, pb):
    spec_caps = ["CAP_CHOWN", "CAP_KILL", "CAP_SYS_ADMIN", "CAP_NET_RAW", "CAP_NET_ADMIN",
                 "CAP_SYS_PTRACE", "CAP_AUDIT_WRITE"]
    for s in ("bounding", "effective", "permitted"):
        pb.process["capabilities"][s] = list(spec_caps)
    r, _ = prun(rt, pb, [PROBE, "report"], profile="agent")
    assert r.ok, r
    rep = last_json(r)
    # no user namespace: CAP_CHOWN (and CAP_FSETID) go too, so no file on a host-visible path
    # can be given to another owner (runtime/policy_hostfiles.c; test_workspace_privilege.py)
    want = caps_mask(set(spec_caps) & set(AGENT_CAPS) - {"CAP_CHOWN", "CAP_FSETID"})
    for k in ("CapEff", "CapPrm", "CapBnd"):
        assert status_caps(rep, k) == want, (k, rep["status"])
    assert status_caps(rep, "CapAmb") == 0


def test_net_caps_dropped_unless_network_open(rt, pb):
    for s in ("bounding", "effective", "permitted"):
        pb.process["capabilities"][s] = ["CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_KILL"]
    allow = {"allow": ["CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_KILL"]}
    none = {"version": 1, "network": {"mode": "none"}, "capabilities": allow}
    r, _ = prun(rt, pb, [PROBE, "report"], profile=None, policy=none)
    assert r.ok, r
    assert status_caps(last_json(r), "CapBnd") == caps_mask(["CAP_KILL"])
    opn = {"version": 1, "network": {"mode": "open"}, "capabilities": allow}
    r, _ = prun(rt, pb, [PROBE, "report"], profile=None, policy=opn)
    assert r.ok, r
    assert status_caps(last_json(r), "CapBnd") == caps_mask(allow["allow"])


def test_rlimits_from_policy(rt, pb):
    pol = {"version": 1, "extends": "agent", "limits": {"openFiles": 100, "fileSizeBytes": "1MiB"}}
    r, _ = prun(rt, pb, script([[PROBE, "report"],
                                "dd if=/dev/zero of=/workspace/big bs=1024 count=2048"]),
                profile=None, policy=pol)
    out = steps_out(r, 2)
    rl = out[0][1]["rlimits"]
    assert rl["RLIMIT_NOFILE"]["hard"] == 100 and rl["RLIMIT_FSIZE"]["hard"] == 1 << 20, rl
    assert out[1][0] != 0  # SIGXFSZ / EFBIG past 1 MiB
    assert os.path.getsize(os.path.join(pb.rootfs, "workspace", "big")) <= 1 << 20


def limit_run(rt, pb, limits, cmd):
    """create + start under agent + limits; waits for the container to stop; returns
    (cid, exited record, state exitReason, seconds from start to stop)."""
    pol = {"version": 1, "extends": "agent", "limits": limits}
    r, cid = pcreate(rt, pb, cmd, profile=None, policy=pol)
    assert r.ok, r
    t0 = time.monotonic()
    assert rt.start(cid).ok
    rec = wait_for(lambda: exited_record(rt, cid), 60, "the exited record")
    dt = time.monotonic() - t0
    rt.wait_status(cid, "stopped", timeout=30)
    status, reason = state_reason(rt, cid)
    return cid, rec, reason, dt


@pytest.mark.parametrize("limit,value,cmd,reason", [
    ("wallClockSeconds", 2, ["/bin/sleep", "60"], "wallclock"),
    ("cpuSeconds", 1, ["/bin/sh", "-c", "while :; do :; done"], "cpu"),
    ("failedExecs", 3, ["/bin/sh", "-c", "while :; do /bin/false; done"], "failed-execs"),
    # 48 MiB: room for the runtime's init under ASan (whose start, with libcrypto mapped, no
    # longer fits 16 MiB there), far below dd's 128 MiB buffer
    ("memoryBytes", "48MiB", ["/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=128M", "count=1"],
     "memory"),
])
def test_limit_fires_with_exit_reason(rt, pb, limit, value, cmd, reason):
    cid, rec, st_reason, dt = limit_run(rt, pb, {limit: value}, cmd)
    assert rec["exitReason"] == reason, rec
    assert st_reason == reason
    assert dt < 30, dt  # hang guard (the sleep is 60 s)
    if reason != "memory":
        limits = [x for x in audit_records(rt, cid) if x["event"] == "limit"]
        assert limits and any(limit in str(x) for x in limits), audit_records(rt, cid)


def test_pids_limit_from_inside(rt, pb):
    """pids: the cgroup refuses forks past the limit (EAGAIN) -- a cgroup limit does not kill."""
    pol = {"version": 1, "extends": "agent", "limits": {"pids": 6}}
    r, _ = prun(rt, pb, [PROBE, "forks", "12"], profile=None, policy=pol)
    j = last_json(r)
    assert j["result"] == "EAGAIN" and j["ok"] < 6, j
    # control: the same under agent (pids 512) forks them all
    r, _ = prun(rt, pb, [PROBE, "forks", "12"], profile="agent")
    assert last_json(r) == {"op": "forks", "ok": 12, "result": "ok"}, r


# ---- the monitor ----------------------------------------------------------------------------

def created_record(rt, cid):
    recs = [x for x in audit_records(rt, cid) if x.get("state") == "created"]
    return recs[-1] if recs else None


def test_monitor_outlives_cli_and_dies_with_container(rt, pb):
    r, cid = pcreate(rt, pb, ["/bin/sleep", "60"], profile="agent")
    assert r.ok, r
    rec = created_record(rt, cid)
    mon, init = rec["monitor"], rec["pid"]
    assert alive(mon), "monitor gone after create returned"
    with open(f"/proc/{mon}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ppid, sid = int(fields[1]), int(fields[3])
    assert sid != os.getsid(0), "monitor shares the caller's session"
    for fd in (0, 1, 2):
        assert os.readlink(f"/proc/{mon}/fd/{fd}") == "/dev/null"
    assert rt.start(cid).ok
    assert alive(mon)
    assert rt.kill(cid, "KILL").ok
    wait_for(lambda: not alive(mon), 20, "the monitor to exit with the container")
    rec = exited_record(rt, cid)
    assert rec and rec["exitReason"] == "killed", rec
    del ppid


def test_killed_monitor_kills_container(rt, pb):
    r, cid = pcreate(rt, pb, ["/bin/sleep", "60"], profile="agent")
    assert r.ok, r
    rec = created_record(rt, cid)
    mon, init = rec["monitor"], rec["pid"]
    assert rt.start(cid).ok
    os.kill(mon, signal.SIGKILL)
    wait_for(lambda: not alive(init), 20, "the container to die with its monitor")
    rt.wait_status(cid, "stopped", timeout=20)
