"""The per-container monitor and the audit log (POLICY.md §4, §6; issue 6).

Until the policy compiler reaches `create`, the monitor is driven through tests/unit/monitor_driver
(a root-only C program linking libasbx.a): it forks CMD into a fresh cgroup, calls monitor_start()
with a hand-filled plan, releases CMD (the init's exec = `started`) and exits like the CLI does.
Everything is asserted on what the kernel shows (/proc, the cgroup) and on the audit log file --
never on the driver's own report.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import TOP, cgroup_hierarchies

DRIVER = os.path.join(TOP, "tests", "unit", "monitor_driver")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the monitor tests need root")


@pytest.fixture(scope="session")
def driver():
    # always (re)build: make is a no-op when it is up to date
    r = subprocess.run(["make", "-C", TOP, "tests/unit/monitor_driver"], capture_output=True, text=True)
    if not os.path.exists(DRIVER):
        pytest.fail(f"cannot build {DRIVER}: {r.stderr[-2000:]}")
    # a build error elsewhere in the tree leaves the last driver built: use it
    return DRIVER


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(pred, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Mon:
    """One monitored process: paths, pids, records."""

    def __init__(self, driver, work, cid, cgroup):
        self.driver, self.work, self.cid, self.cgroup = driver, work, cid, cgroup
        self.state_dir = os.path.join(work, "state", cid)
        self.audit_dir = os.path.join(work, "audit")
        self.init = self.monitor = None
        self.mask = 0

    def start(self, cmd, *flags):
        os.makedirs(os.path.dirname(self.state_dir), exist_ok=True)
        r = subprocess.run([self.driver, "run", "--id", self.cid, "--state-dir", self.state_dir,
                            "--audit-dir", self.audit_dir, "--cgroup", self.cgroup, *flags, "--", *cmd],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"driver failed: {r.stderr}"
        info = json.loads(r.stdout.strip().splitlines()[-1])
        self.init, self.monitor, self.mask = info["init"], info["monitor"], info["mask"]
        return self

    def records(self):
        p = os.path.join(self.audit_dir, f"{self.cid}.jsonl")
        if not os.path.exists(p):
            return []
        with open(p, "rb") as f:
            data = f.read()
        assert data == b"" or data.endswith(b"\n"), "audit log does not end with a whole line"
        return [json.loads(line) for line in data.decode().splitlines()]

    def exit_reason(self):
        try:
            with open(os.path.join(self.state_dir, "exit_reason")) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    def exited_record(self):
        recs = [r for r in self.records() if r["event"] == "lifecycle" and r.get("state") == "exited"]
        return recs[-1] if recs else None

    def wait_exited(self, timeout=20.0):
        rec = wait_for(self.exited_record, timeout, f"the exited record of {self.cid}")
        wait_for(lambda: not alive(self.monitor), 10, "the monitor to exit")
        return rec


@pytest.fixture
def mon(driver):
    work = tempfile.mkdtemp(prefix="mon-")
    made = []

    def make(cid=None):
        cid = cid or f"mon{os.getpid()}-{len(made)}-{os.urandom(3).hex()}"
        m = Mon(driver, work, cid, f"/agentsbx/{cid}")
        made.append(m)
        return m
    yield make
    leaks = []
    for m in made:
        for pid in (m.init, m.monitor):
            if pid and alive(pid):
                leaks.append(f"pid {pid} of {m.cid} still alive")
                os.kill(pid, signal.SIGKILL)
        if m.init:
            # the guard, if left: the monitor's child that is not the init
            subprocess.run([driver, "cleanup", "--cgroup", m.cgroup, "--mask", str(m.mask)])
        for h in cgroup_hierarchies():
            if os.path.isdir(os.path.join(h, m.cgroup.lstrip("/"))):
                leaks.append(f"cgroup {h}{m.cgroup} left")
    shutil.rmtree(work, ignore_errors=True)
    assert not leaks, "\n".join(leaks)


def check_common(m):
    recs = m.records()
    for r in recs:
        assert r["container"] == m.cid
        assert r["ts"].endswith("Z") and len(r["ts"]) == 27, r["ts"]  # RFC 3339 UTC, µs
    kinds = [(r["event"], r.get("state")) for r in recs]
    assert kinds[0] == ("lifecycle", "created")
    assert kinds[1][0] == "policy" and recs[1]["digest"].startswith("sha256:")
    assert ("lifecycle", "started") in kinds
    return recs


def test_wall_clock_kills_with_reason(mon):
    m = mon().start(["/bin/sleep", "100"], "--wall", "2")
    t0 = time.monotonic()
    rec = m.wait_exited()
    assert 1.5 <= time.monotonic() - t0 < 15
    assert not alive(m.init)
    assert rec["exitReason"] == "wallclock" and rec["exitCode"] == 137
    assert m.exit_reason() == "wallclock"
    recs = check_common(m)
    lim = [r for r in recs if r["event"] == "limit"]
    assert lim and lim[0]["limit"] == "wallClockSeconds" and lim[0]["value"] == 2


def test_failed_execs_kill(mon):
    m = mon().start(["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do /bin/false; done; exec /bin/sleep 100"],
                    "--failed", "3")
    rec = m.wait_exited()
    assert rec["exitReason"] == "failed-execs" and rec["failedExecs"] == 3
    assert m.exit_reason() == "failed-execs"
    assert not alive(m.init)


def test_successful_children_are_not_failures(mon):
    m = mon().start(["/bin/sh", "-c", "for i in 1 2 3 4 5 6; do /bin/true; done; exit 0"], "--failed", "1")
    rec = m.wait_exited()
    assert rec["exitReason"] == "exited" and rec["exitCode"] == 0 and rec["failedExecs"] == 0


def test_cpu_seconds_kill(mon):
    m = mon().start(["/bin/sh", "-c", "while :; do :; done"], "--cpu", "1")
    t0 = time.monotonic()
    rec = m.wait_exited(timeout=30)
    assert time.monotonic() - t0 < 20
    assert rec["exitReason"] == "cpu"
    assert rec["cpuUsec"] >= 1_000_000
    assert m.exit_reason() == "cpu"


def test_exit_code_and_reason_of_a_normal_exit(mon):
    m = mon().start(["/bin/sh", "-c", "sleep 0.3; exit 7"])
    rec = m.wait_exited()
    assert rec["exitCode"] == 7 and rec["exitReason"] == "exited"
    assert m.exit_reason() == "exited"


def test_killed_from_outside_is_killed(mon):
    m = mon().start(["/bin/sleep", "100"])
    wait_for(lambda: any(r.get("state") == "started" for r in m.records()), 10, "started")
    os.kill(m.init, signal.SIGTERM)
    rec = m.wait_exited()
    assert rec["exitReason"] == "killed" and rec["exitCode"] == 128 + signal.SIGTERM


def test_monitor_survives_the_cli_detached(mon):
    m = mon().start(["/bin/sleep", "100"], "--wall", "30")
    # the driver (our "CLI") has exited; the monitor lives on, in its own session, with no fd
    # of ours: stdio on /dev/null and no pipe
    assert alive(m.monitor)
    with open(f"/proc/{m.monitor}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    assert int(fields[3]) == m.monitor, "the monitor is not a session leader"
    fds = {int(fd): os.readlink(f"/proc/{m.monitor}/fd/{fd}") for fd in os.listdir(f"/proc/{m.monitor}/fd")}
    for fd in (0, 1, 2):
        assert fds[fd] == "/dev/null"
    assert not [t for t in fds.values() if t.startswith("pipe:")] or all(
        fd > 2 for fd, t in fds.items() if t.startswith("pipe:")), fds
    # the only pipe it holds is its own guard pipe (one), never the engine's stdio
    assert sum(1 for t in fds.values() if t.startswith("pipe:")) <= 1, fds
    assert m.exit_reason() is None
    # it dies with the container
    os.kill(m.init, signal.SIGKILL)
    m.wait_exited()
    assert not alive(m.monitor)


def guard_of(m):
    kids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == m.monitor:
                        kids.append(int(p))
            except (FileNotFoundError, ProcessLookupError):
                pass
    assert len(kids) == 1, kids
    return kids[0]


def test_killed_monitor_kills_the_container(mon):
    m = mon().start(["/bin/sh", "-c", "/bin/sleep 100 & exec /bin/sleep 100"])
    wait_for(lambda: any(r.get("state") == "started" for r in m.records()), 10, "started")
    os.kill(m.monitor, signal.SIGKILL)
    wait_for(lambda: not alive(m.init), 10, "the container to die with its monitor")
    rec = wait_for(m.exited_record, 10, "the guard's exited record")
    assert rec["exitReason"] == "killed" and rec["detail"] == "the monitor died"
    assert m.exit_reason() == "killed"
    # the whole cgroup, not only the init
    for h in cgroup_hierarchies():
        procs = os.path.join(h, m.cgroup.lstrip("/"), "cgroup.procs")
        if os.path.exists(procs):
            wait_for(lambda: open(procs).read().strip() == "", 10, "an empty cgroup")


def test_killed_guard_kills_the_container(mon):
    m = mon().start(["/bin/sleep", "100"])
    g = guard_of(m)
    os.kill(g, signal.SIGKILL)
    rec = m.wait_exited()
    assert rec["exitReason"] == "killed" and rec["detail"] == "the monitor's guard died"
    assert not alive(m.init)


def test_exec_records_path_and_argv(mon):
    m = mon().start(["/bin/sh", "-c", "/bin/sleep 0.2; exec /bin/sleep 0.3"], "--exec")
    m.wait_exited()
    execs = [r for r in m.records() if r["event"] == "exec"]
    sleeps = [r for r in execs if r.get("argv", [])[:1] == ["/bin/sleep"]]
    assert any(r["argv"] == ["/bin/sleep", "0.2"] and r["path"].endswith("/sleep") for r in sleeps), execs
    assert any(r["argv"] == ["/bin/sleep", "0.3"] and r["pid"] == m.init for r in sleeps), execs
    # without --exec: no exec records
    m2 = mon().start(["/bin/sh", "-c", "/bin/true"])
    m2.wait_exited()
    assert not [r for r in m2.records() if r["event"] == "exec"]


def test_same_id_appends_and_audit_verb(mon, subject_binary):
    cid = f"monapp{os.getpid()}"
    m = mon(cid).start(["/bin/true"])
    m.wait_exited()
    m2 = mon(cid)
    m2.start(["/bin/sh", "-c", "exit 3"])
    m2.wait_exited()
    recs = m2.records()
    assert [r.get("state") for r in recs if r["event"] == "lifecycle"] == [
        "created", "started", "exited", "created", "started", "exited"]
    ad = ["--audit-dir", m.audit_dir]
    j = subprocess.run([subject_binary, *ad, "audit", "--json", cid], capture_output=True, text=True)
    assert j.returncode == 0
    with open(os.path.join(m.audit_dir, f"{cid}.jsonl")) as f:
        assert j.stdout == f.read()
    h = subprocess.run([subject_binary, *ad, "audit", cid], capture_output=True, text=True)
    assert h.returncode == 0
    lines = h.stdout.splitlines()
    assert len(lines) == len(recs)
    assert "lifecycle exited" in lines[-1] and "exitCode=3" in lines[-1] and "exitReason=exited" in lines[-1]
    # --follow ends after the last session's exited record
    f = subprocess.run([subject_binary, *ad, "audit", "--follow", cid], capture_output=True, text=True, timeout=30)
    assert f.returncode == 0 and f.stdout == h.stdout
    missing = subprocess.run([subject_binary, *ad, "audit", "nosuch"], capture_output=True, text=True)
    assert missing.returncode != 0 and "no audit log" in missing.stderr


def test_follow_streams_a_running_session(mon, subject_binary):
    m = mon().start(["/bin/sh", "-c", "sleep 1; exit 0"])
    p = subprocess.Popen([subject_binary, "--audit-dir", m.audit_dir, "audit", "--follow", "--json", m.cid],
                         stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=30)
    recs = [json.loads(line) for line in out.splitlines()]
    assert recs[-1]["event"] == "lifecycle" and recs[-1]["state"] == "exited"


def test_state_reports_exit_reason_annotation(rt, bundle):
    """`state` shows the monitor's exitReason (written by the monitor into the state dir) and a
    config.json annotation cannot forge it."""
    bundle.config.setdefault("annotations", {})["io.agentsbx.exitReason"] = "forged"
    bundle.args("/bin/true")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    rt.wait_status(cid, "stopped")
    st = rt.state(cid).json()
    assert st["annotations"].get("io.agentsbx.exitReason") == "forged"  # no monitor: untouched
    with open(os.path.join(rt.root, cid, "exit_reason"), "w") as f:
        f.write("wallclock\n")
    st = rt.state(cid).json()
    assert st["annotations"]["io.agentsbx.exitReason"] == "wallclock"


def test_run_audit_dir_from_host_config(rt, bundle, subject_binary):
    """Issue 6 for create/run: with no --audit-dir the monitor writes where the host config's
    auditDir says, and `agentsbx audit` (given the same --config) reads it there."""
    adir = os.path.join(rt.workdir, "cfg-audit")
    cfg = os.path.join(rt.workdir, "host-config.json")
    with open(cfg, "w") as f:
        json.dump({"auditDir": adir}, f)
    bundle.args("/bin/sh", "-c", "exit 4")
    r, cid = rt.run(bundle, global_args=["--config", cfg, "--profile", "open"])
    assert r.rc == 4, r
    path = os.path.join(adir, f"{cid}.jsonl")
    wait_for(lambda: os.path.exists(path) and '"state":"exited"' in open(path).read(), what="exited record")
    assert not os.path.exists(f"/var/log/agentsbx/{cid}.jsonl")
    a = subprocess.run([subject_binary, "--config", cfg, "audit", cid], capture_output=True, text=True)
    assert a.returncode == 0, a.stderr
    assert "lifecycle exited" in a.stdout and "exitCode=4" in a.stdout, a.stdout
