"""`denial` records from what the kernel reports (POLICY.md §6; issue 6): seccomp group answers
(logged with SECCOMP_FILTER_FLAG_LOG, errno kept), Landlock denials (kernel audit must be enabled:
the test enables it and restores the previous value), the sandbox's closing summary, and the
`pids` exit reason."""

import json
import os
import socket
import struct

import pytest

from policyutil import audit_dir

pytestmark = pytest.mark.agentsbx_only("kernel-reported denials")

AUDIT_GET, AUDIT_SET = 1000, 1001


def _audit_req(typ, body=b""):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)
    try:
        s.settimeout(2)
        flags = 1 if typ == AUDIT_GET else 5  # NLM_F_REQUEST (| NLM_F_ACK for a set)
        s.sendto(struct.pack("=IHHII", 16 + len(body), typ, flags, 1, 0) + body, (0, 0))
        for _ in range(4):
            d = s.recv(65536)
            t = struct.unpack("=H", d[4:6])[0]
            if t == AUDIT_GET:
                return struct.unpack("=8I", d[16:48])[1]
            if t == 2:
                err = struct.unpack("=i", d[16:20])[0]
                if err:
                    raise OSError(-err, "audit netlink")
                if typ != AUDIT_GET:
                    return None
    finally:
        s.close()


@pytest.fixture
def kernel_audit_on():
    """audit_enabled=1 for the test (Landlock logs only then), the host's value restored after."""
    try:
        old = _audit_req(AUDIT_GET)
    except OSError as e:
        pytest.skip(f"no kernel audit: {e}")
    if old == 2:
        yield
        return
    _audit_req(AUDIT_SET, struct.pack("=8I", 1, 1, 0, 0, 0, 0, 0, 0) + b"\0" * 12)
    try:
        yield
    finally:
        _audit_req(AUDIT_SET, struct.pack("=8I", 1, old, 0, 0, 0, 0, 0, 0) + b"\0" * 12)


def sandbox(rt, *args, policy=None, opts=()):
    g = ["--audit-dir", audit_dir(rt)]
    if policy is not None:
        p = os.path.join(rt.workdir, f"pol-{os.urandom(3).hex()}.json")
        with open(p, "w") as f:
            json.dump(policy, f)
        g += ["--policy", p]
    ws = os.path.join(rt.workdir, f"ws-{os.urandom(3).hex()}")
    os.makedirs(ws)
    cid = f"den-{os.urandom(4).hex()}"
    r = rt.cmd("sandbox", "--id", cid, "--workspace", ws, *opts, "--", *args, global_args=g, timeout=60)
    with open(os.path.join(audit_dir(rt), f"{cid}.jsonl")) as f:
        return r, [json.loads(x) for x in f.read().splitlines()]


def denials(recs, kind):
    return [r for r in recs if r["event"] == "denial" and r.get("kind") == kind]


def test_seccomp_group_denial_recorded_errno_kept(rt):
    """unshare -U under agent: EPERM to the caller AND a syscall denial record (audit off or on)."""
    r, recs = sandbox(rt, "/bin/sh", "-c", "unshare -U true; echo rc=$?")
    assert "rc=1" in r.out and "Operation not permitted" in r.err, r
    d = denials(recs, "syscall")
    assert d and d[0]["syscall"] == "unshare" and d[0]["access"] == "errno", recs
    assert d[0]["path"].endswith("/unshare") and d[0]["source"] == "seccomp"
    pol = [x for x in recs if x["event"] == "policy"][-1]
    assert "seccomp" in pol["kernelDenials"], pol
    assert "agentsbx sandbox: denied syscall: 1 (unshare x1)" in r.err, r


def test_landlock_denial_recorded(rt, kernel_audit_on):
    r, recs = sandbox(rt, "/bin/sh", "-c", "echo x > /dev/shm/x; echo x > /dev/shm/y; true")
    assert r.rc == 0, r
    d = denials(recs, "fs")
    assert len(d) == 2 and all(x["path"] == "/dev/shm" and x["access"] == "fs.make_reg" for x in d), recs
    pol = [x for x in recs if x["event"] == "policy"][-1]
    assert pol["kernelDenials"] == "landlock,seccomp", pol
    assert "agentsbx sandbox: denied fs: 2 (/dev/shm fs.make_reg x2)" in r.err, r


def test_no_records_of_other_processes(rt, kernel_audit_on):
    """a denial on the host during the run is not the container's"""
    import subprocess
    r, recs = sandbox(rt, "/bin/sh", "-c", "sleep 0.5")
    assert r.rc == 0 and not [x for x in recs if x["event"] == "denial"], recs
    subprocess.run(["unshare", "-U", "true"])  # host: allowed, no record anyway


def test_summary_names_the_limit(rt):
    pol = {"version": 1, "extends": "agent", "limits": {"wallClockSeconds": 1}}
    r, recs = sandbox(rt, "/bin/sh", "-c", "unshare -U true; sleep 30", policy=pol)
    assert r.rc == 124, r
    assert "stopped by the policy: wallclock: wallClockSeconds 1 reached" in r.err, r
    assert "denied syscall: 1 (unshare x1)" in r.err, r


def test_pids_exit_reason(rt):
    """a command failing after pids.max refused its forks ends with exitReason pids (137)"""
    pol = {"version": 1, "extends": "agent", "limits": {"pids": 4}}
    r, recs = sandbox(rt, "/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 5 & done; exit 3",
                      policy=pol)
    ex = [x for x in recs if x["event"] == "lifecycle" and x.get("state") == "exited"][-1]
    assert ex["exitReason"] == "pids" and r.rc == 137, (ex, r)
    # the same command without hitting the limit is an ordinary exit 3
    r, recs = sandbox(rt, "/bin/sh", "-c", "exit 3", policy=pol)
    ex = [x for x in recs if x["event"] == "lifecycle" and x.get("state") == "exited"][-1]
    assert ex["exitReason"] == "exited" and r.rc == 3, (ex, r)


def _summary_lines(err):
    return [x for x in err.splitlines() if x.startswith("agentsbx sandbox:")]


def test_clean_run_prints_no_summary(rt):
    """a run with nothing denied and no limit struck is silent, whatever the kernel reports
    (with kernel audit off the Landlock caveat line used to be printed on every run)"""
    r, recs = sandbox(rt, "/bin/sh", "-c", "echo hello")
    assert r.rc == 0 and r.out.strip() == "hello", r
    assert not [x for x in recs if x["event"] == "denial"], recs
    assert _summary_lines(r.err) == [], r


def test_summary_json_denial(rt):
    """--summary json: the last stderr line is one object whose counts are the log's records"""
    r, recs = sandbox(rt, "/bin/sh", "-c", "unshare -U true; exit 3", opts=("--summary", "json"))
    assert r.rc == 3, r
    assert _summary_lines(r.err) == [], r
    s = json.loads(r.err.splitlines()[-1])
    assert s["exitStatus"] == 3 and s["exitReason"] == "exited" and s["limit"] is None, s
    assert s["denials"]["syscall"] == {"total": 1, "top": [{"target": "unshare", "count": 1}]}, s
    assert s["denials"]["fs"]["total"] == len(denials(recs, "fs")), (s, recs)
    assert s["auditLog"].endswith(".jsonl") and os.path.exists(s["auditLog"]), s
    pol = [x for x in recs if x["event"] == "policy"][-1]
    assert s["kernelDenials"] == (None if pol["kernelDenials"].startswith("landlock")
                                  else pol["kernelDenials"]), (s, pol)


def test_summary_json_clean_and_limit(rt):
    """a clean run still prints its object (tools always get one); a limit kill names the limit"""
    r, _ = sandbox(rt, "/bin/true", opts=("--summary", "json"))
    s = json.loads(r.err.splitlines()[-1])
    assert r.rc == 0 and s["exitStatus"] == 0 and s["notLogged"] == 0, (r, s)
    assert all(s["denials"][k]["total"] == 0 for k in ("fs", "net", "syscall")), s
    pol = {"version": 1, "extends": "agent", "limits": {"wallClockSeconds": 1}}
    r, recs = sandbox(rt, "/bin/sh", "-c", "sleep 30", policy=pol, opts=("--summary", "json"))
    s = json.loads(r.err.splitlines()[-1])
    assert r.rc == 124 and s["exitStatus"] == 124 and s["exitReason"] == "wallclock", (r, s)
    assert s["limit"]["limit"] == "wallClockSeconds" and s["limit"]["value"] == 1, s


def test_quiet(rt):
    """--quiet: the command's own stderr and exit status, none of our summary lines"""
    r, recs = sandbox(rt, "/bin/sh", "-c", "unshare -U true; exit 5", opts=("--quiet",))
    assert r.rc == 5 and "Operation not permitted" in r.err, r
    assert denials(recs, "syscall"), recs  # it was denied and logged, just not printed
    assert _summary_lines(r.err) == [], r


def test_summary_bad_format(rt):
    r = rt.cmd("sandbox", "--summary", "yaml", "--", "/bin/true", timeout=30)
    assert r.rc != 0 and "--summary `yaml`: expected text, json or none" in r.err, r
