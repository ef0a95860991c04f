"""The supervisor and the audit log under attack (issue 14 §3-§5), judged from outside: the
kill seen from the host (processes gone), the audit file read from the host.

§3: limits fire whatever the container makes the monitor do. The load: processes holding
thousands of fds each, plus pipelined DNS-over-TCP queries for unlisted names under
`approvals.network: ask` - each held query makes the monitor look for its sender. On the code
before issue 14 that lookup walked /proc (every fd of every container process) synchronously in
the monitor's loop, and the wall clock kill waited behind it."""
import json
import subprocess
import os
import shutil
import time
import uuid

import pytest

from policyutil import sandbox_run
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


# ---- §4: the audit log cannot be flooded, forged or emptied -----------------------------------

FLOOD = r"""
import subprocess, sys, time
n, size, tail = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
junk = "\x01\x1b[2J\n{\"event\":\"lifecycle\",\"state\":\"exited\"}\n" * (size // 40)
for i in range(n):
    subprocess.call(["/bin/true", "marker-%d" % i, junk])
time.sleep(tail)
"""


@pytest.fixture
def ubundle(make_bundle, usr_template):  # noqa: F811
    """A bundle with the host's /usr (python3) in a fresh network namespace (no lab needed)."""
    b = make_bundle(rootfs_template=usr_template)
    b.add_mount("/usr", "bind", "/usr", ["rbind", "ro", "nosuid", "nodev"])
    with open(os.path.join(b.rootfs, "egress", "flood.py"), "w") as f:
        f.write(FLOOD)
    return b


def flood_run(rt, b, audit_dir, tmp_path, n, size, tail, on_full=None):
    pol = {"version": 1, "extends": "agent"}
    if on_full:
        pol["audit"] = {"onFull": on_full}
    p = tmp_path / f"flood-{uuid.uuid4().hex[:6]}.json"
    p.write_text(json.dumps(pol))
    b.args("/usr/bin/python3", "/egress/flood.py", str(n), str(size), str(tail))
    cid = f"flood-{uuid.uuid4().hex[:8]}"
    r, _ = rt.run(b, cid, global_args=["--policy", str(p), "--audit-dir", str(audit_dir)])
    return r, read_audit(os.path.join(audit_dir, f"{cid}.jsonl"))


def test_exec_flood_capped_and_counted(rt, ubundle, tmp_path):
    """1200 execs with 100 KB of control bytes and fake records in argv: every line is one JSON
    object of bounded size, argv is truncated with its real size (never []), the rate quota
    suppresses and counts, and the exited record is there."""
    audit = tmp_path / "audit"
    r, recs = flood_run(rt, ubundle, str(audit), tmp_path, 1200, 100000, 0)
    assert r.rc == 0, r
    with open(audit / os.listdir(audit)[0], "rb") as f:
        lines = f.read().splitlines()
    assert max(len(line) for line in lines) < 16384, "a record is not capped"
    execs = [x for x in recs if x["event"] == "exec"]
    assert execs, "no exec record at all"
    assert not [x for x in execs if x.get("argv") == []], "an argv was dropped to []"
    trues = [x for x in execs if x.get("argv") and any(a.startswith("marker-") for a in x["argv"])]
    assert trues, "no exec record of the flood carries its argv"
    for x in trues:
        # argvBytes is absent when the process was gone before /proc/PID/stat was read
        assert x["argvTruncated"] is True and x.get("argvBytes", 100001) > 100000, x
    assert [x for x in trues if "argvBytes" in x], "no exec record carries the argv's real size"
    forged = [x for x in recs if x["event"] == "lifecycle" and x.get("state") == "exited"]
    assert len(forged) == 1, "a record forged from argv, or no exited record"
    ex = forged[0]
    assert ex["exitCode"] == 0 and ex["exitReason"] == "exited", ex
    assert ex["suppressed"]["exec"] > 0, ex
    reports = [x for x in recs if x["event"] == "limit" and x.get("limit") == "audit"]
    assert reports and reports[-1]["suppressed"]["exec"] > 0, reports


@pytest.fixture
def small_audit_dir(tmp_path):
    d = tmp_path / "small-audit"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k,mode=0700", "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def test_audit_full_kills_by_default(rt, ubundle, tmp_path, small_audit_dir):
    """A 128 KiB audit file system filled by exec records: with audit.onFull unset (kill) the
    container is killed - no agent runs unaudited - and the log still ends with whole lines, the
    limit record and the exited record (written into the reserved space)."""
    r, recs = flood_run(rt, ubundle, str(small_audit_dir), tmp_path, 600, 100000, 60)
    limits = [x for x in recs if x["event"] == "limit" and x.get("limit") == "audit.onFull"]
    assert limits and limits[0]["action"] == "kill", recs[-3:]
    ex = lifecycle(recs, "exited")
    assert ex and ex[-1]["exitReason"] == "audit-full", recs[-3:]
    assert r.rc != 0, r


def test_audit_full_continue_keeps_lifecycle(rt, ubundle, tmp_path, small_audit_dir):
    """audit.onFull continue: the container runs to its end, the dropped records are counted in
    the exited record, which is there and whole."""
    r, recs = flood_run(rt, ubundle, str(small_audit_dir), tmp_path, 600, 100000, 0, on_full="continue")
    assert r.rc == 0, r
    ex = lifecycle(recs, "exited")
    assert ex and ex[-1]["exitReason"] == "exited" and ex[-1]["exitCode"] == 0, recs[-3:]
    assert sum(ex[-1]["suppressed"].values()) > 0, ex[-1]
    assert [x for x in recs if x["event"] == "limit" and x.get("limit") == "audit" and x["action"] == "full"], \
        "the file system never filled: the test did not test onFull"


# ---- §5: every blocked attempt is on record --------------------------------------------------

from test_egress import UP4, UP6, filtered  # noqa: E402,F401


def test_refused_network_attempts_each_on_record(filtered, lab):  # noqa: F811
    """Connections to unlisted addresses (TCP and UDP, v4, v6, v4-mapped, a decimal IPv4) and
    queries sent to a hard-coded resolver (UDP and TCP): each blocked attempt leaves a record."""
    dec = str(int.from_bytes(bytes(int(x) for x in UP4.split(".")), "big"))
    res, recs = filtered([["connect", UP4, 8080], ["connect", UP6, 8080], ["connect", f"::ffff:{UP4}", 8081],
                          ["connect", dec, 8082], ["udp", UP4, 9998], ["udp", UP6, 9997],
                          ["rawdns", UP4, "leak-udp.unlisted.test"], ["tcpdns", UP4, "leak-tcp.unlisted.test"]])
    assert not any(r["ok"] for r in res[:6]), res
    net = {(r["addr"], r.get("port"), r["proto"]) for r in recs if r["event"] == "network"}
    for want in ((UP4, 8080, "tcp"), (UP6, 8080, "tcp"), (UP4, 8081, "tcp"), (UP4, 8082, "tcp"),
                 (UP4, 9998, "udp"), (UP6, 9997, "udp")):
        assert want in net, (want, net)
    dns = {(r["host"], r["decision"]) for r in recs if r["event"] == "dns"}
    for name in ("leak-udp.unlisted.test", "leak-tcp.unlisted.test"):
        assert (name, "refused") in dns, (name, dns)


def sandbox_records(rt, tmp_path, pol, script):
    ws = tmp_path / f"ws-{uuid.uuid4().hex[:6]}"
    ws.mkdir()
    cid = f"rec-{uuid.uuid4().hex[:8]}"
    r = sandbox_run(rt, "--id", cid, "--workspace", str(ws), "--", "/bin/sh", "-c", script, policy=pol,
                    audit=tmp_path / "audit")
    return r, read_audit(tmp_path / "audit" / f"{cid}.jsonl")


def test_fork_bomb_on_record(rt, tmp_path):
    """pids.max refuses forks silently (EAGAIN): the monitor turns the cgroup's pids.events
    counter into a `limit` record, even when the agent copes and exits 0."""
    r, recs = sandbox_records(rt, tmp_path, {"version": 1, "extends": "agent", "limits": {"pids": 16}},
                     "i=0; while [ $i -lt 40 ]; do sleep 3 & i=$((i+1)); done; wait; exit 0")
    got = [x for x in recs if x["event"] == "limit" and x.get("limit") == "pids"]
    assert got and got[0]["action"] == "refused" and got[-1]["used"] > 0, (r.err[-500:], recs[-2:])


def test_policy_record_degradations_are_what_was_degraded(rt, tmp_path):
    """A policy that accepts running without Landlock, on a host whose Landlock has everything
    the ruleset needs: nothing was degraded, so `degradations` is empty; what was accepted is
    `degradeAccepted`."""
    abi = subprocess.run(["python3", "-c", "import ctypes;l=ctypes.CDLL(None);"
                          "print(l.syscall(444,0,0,1))"], capture_output=True, text=True).stdout.strip()
    if not abi or int(abi) < 5:
        pytest.skip(f"Landlock ABI {abi}: this host would degrade for real")
    r, recs = sandbox_records(rt, tmp_path, {"version": 1, "extends": "agent", "degrade": ["landlock"]}, "true")
    assert r.rc == 0, r
    pol = [x for x in recs if x["event"] == "policy"][-1]
    assert pol["degradations"] == [], pol
    assert pol.get("degradeAccepted") == ["landlock"], pol


def test_refused_network_attempts_on_record_in_a_fresh_netns(rt, tmp_path):
    """`sandbox` under agent (filtered, nothing allowed, approvals deny): the namespace has only
    loopback, so
    before issue 14 a connection or a hard-coded resolver failed at the route lookup
    (ENETUNREACH), before any netfilter hook, and left no record. Each attempt must leave one.
    The addresses are the egress lab's; nothing can leave a namespace with only `lo`."""
    ws = tmp_path / "ws"
    ws.mkdir()
    os.chmod(ws, 0o777)
    shutil.copy2(os.path.join(HERE, "egress", "client.py"), ws / "client.py")
    dec = str(int.from_bytes(bytes(int(x) for x in UP4.split(".")), "big"))
    actions = [["connect", UP4, 8080], ["connect", UP6, 8080], ["connect", f"::ffff:{UP4}", 8081],
               ["connect", dec, 8082], ["udp", UP4, 9998], ["udp", UP6, 9997],
               ["rawdns", UP4, "leak-udp.unlisted.test"], ["tcpdns", UP4, "leak-tcp.unlisted.test"]]
    cid = f"fresh-{uuid.uuid4().hex[:8]}"
    pol = tmp_path / "deny.json"  # unlisted names refused at once (no approval question, no pasta)
    pol.write_text(json.dumps({"version": 1, "extends": "agent", "approvals": {"network": "deny"}}))
    r = sandbox_run(rt, "--id", cid, "--workspace", str(ws), "--", "/usr/bin/python3", "/workspace/client.py",
                    json.dumps(actions), policy=pol, audit=tmp_path / "audit")
    assert r.rc == 0, r
    res = json.loads(r.out.strip().splitlines()[-1])
    assert not any(x["ok"] and "rcode" not in x for x in res), res
    recs = read_audit(tmp_path / "audit" / f"{cid}.jsonl")
    net = {(x["addr"], x.get("port"), x["proto"]) for x in recs if x["event"] == "network"}
    dns = {(x["host"], x["decision"]) for x in recs if x["event"] == "dns"}
    missing = [w for w in ((UP4, 8080, "tcp"), (UP6, 8080, "tcp"), (UP4, 8081, "tcp"), (UP4, 8082, "tcp"),
                           (UP4, 9998, "udp"), (UP6, 9997, "udp")) if w not in net]
    missing += [n for n in ("leak-udp.unlisted.test", "leak-tcp.unlisted.test") if (n, "refused") not in dns]
    assert not missing, (missing, res[-2:], net, dns)


def test_host_config_enables_kernel_audit_for_fs_denials(rt, tmp_path):
    """Kernel audit off: Landlock's denials are reported only with it on. The host config's
    `enableKernelAudit` lets the monitor turn it on; a write outside the grant is then a `denial`
    record. The host's audit_enabled is restored after the test."""
    from test_denials import AUDIT_GET, AUDIT_SET, _audit_req
    import struct
    try:
        old = _audit_req(AUDIT_GET)
    except OSError as e:
        pytest.skip(f"no kernel audit: {e}")
    if old != 0:
        pytest.skip(f"kernel audit is already on here (audit_enabled={old}): nothing to enable")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"enableKernelAudit": True}))
    ws = tmp_path / "ws"
    ws.mkdir()
    cid = f"kaud-{uuid.uuid4().hex[:8]}"
    try:
        r = sandbox_run(rt, "--id", cid, "--workspace", str(ws), "--", "/bin/sh", "-c", "echo x > /dev/shm/x; true",
                        audit=tmp_path / "audit", global_args=["--config", str(cfg)])
        now = _audit_req(AUDIT_GET)
    finally:
        _audit_req(AUDIT_SET, struct.pack("=8I", 1, old, 0, 0, 0, 0, 0, 0) + b"\0" * 12)
    assert r.rc == 0, r
    assert now == 1, "the monitor did not enable kernel audit"
    recs = read_audit(tmp_path / "audit" / f"{cid}.jsonl")
    pol = [x for x in recs if x["event"] == "policy"][-1]
    assert pol["kernelDenials"] == "landlock,seccomp", pol
    d = [x for x in recs if x["event"] == "denial" and x.get("kind") == "fs"]
    assert d and d[0]["path"] == "/dev/shm", recs


# the attacker's script of issue 14 §4: 20 perl processes, each overwriting its argv area with
# an innocent `ls -la /workspace/ddd...` of the same length ($0 assignment) before the monitor
# could read /proc/PID/cmdline
FORGE = r"""
export C='my $n=length("perl")+1+length("-e")+1+length($ENV{C})+1; $n+=length($_)+1 for @ARGV; my $f="ls\0-la\0/workspace/"; $f.="d" x ($n-length($f)-1); $0=$f; select(undef,undef,undef,0.3); open(F,">>/workspace/forge-ran.txt"); print F "ran $$ @ARGV\n"; close F'
for i in $(seq 1 20); do perl -e "$C" EXFIL-SECRET-MARKER-$i & done; wait
"""


def test_exec_records_not_forged_by_argv_rewrite(rt, tmp_path):
    """Under `agent` (network filtered: the seccomp supervisor is there) every exec record of
    the 20 perl processes carries the argv given to execve - the marker - whatever the process
    wrote over its argv area afterwards. Judged from the audit file: the kernel's exe link says
    which records are perl's."""
    if not shutil.which("perl"):
        pytest.skip("perl not installed on the host (the sandbox uses the host's /usr)")
    r, recs = sandbox_records(rt, tmp_path, {"version": 1, "extends": "agent"}, FORGE)
    assert r.rc == 0, r
    perl = [x for x in recs if x["event"] == "exec" and str(x.get("path", "")).startswith("/usr/bin/perl")]
    assert len(perl) == 20, (len(perl), [x for x in recs if x["event"] == "exec"][-3:])
    forged = [x for x in perl if not any(a.startswith("EXFIL-SECRET-MARKER-") for a in x.get("argv") or [])]
    assert not forged, f"{len(forged)} of 20 exec records show the rewritten argv: {forged[:2]}"
    markers = {a for x in perl for a in x["argv"] if a.startswith("EXFIL-SECRET-MARKER-")}
    assert markers == {f"EXFIL-SECRET-MARKER-{i}" for i in range(1, 21)}, markers
    assert all(x.get("argvSource") == "execve" for x in perl), perl[:2]


def test_execve_sourced_records_keep_the_caps(rt, tmp_path):
    """The execve copy obeys the record caps: 100 arguments of 40 bytes each -> at most 64
    arguments and 1024 bytes kept, argvTruncated; a short argv is whole (argvBytes its size);
    processes that exit at once still carry their argv (the copy is taken before they run)."""
    long_args = " ".join(f"CAP{i:03d}-" + "x" * 33 for i in range(100))
    script = f"/bin/true {long_args}; i=0; while [ $i -lt 30 ]; do /bin/true QUICK-$i; i=$((i+1)); done"
    r, recs = sandbox_records(rt, tmp_path, {"version": 1, "extends": "agent"}, script)
    assert r.rc == 0, r
    # path: the exe link, or (a process gone before it was read) the execve filename
    execs = [x for x in recs if x["event"] == "exec" and x.get("path") in ("/usr/bin/true", "/bin/true")]
    big = [x for x in execs if any(a.startswith("CAP000-") for a in x.get("argv") or [])]
    assert len(big) == 1, execs[:2]
    b = big[0]
    assert b["argvSource"] == "execve" and b.get("argvTruncated") is True, b
    assert len(b["argv"]) <= 64 and sum(len(a) + 1 for a in b["argv"]) <= 1024 + 1, b
    quick = sorted(a for x in execs for a in x.get("argv") or [] if a.startswith("QUICK-"))
    assert quick == sorted(f"QUICK-{i}" for i in range(30)), quick
    for x in execs:
        if x not in big:
            assert x["argvSource"] == "execve" and x["argvBytes"] == sum(len(a) + 1 for a in x["argv"]), x


# ---- §5: failedExecs counts failed execve calls inside one process ----------------------------

EXEC_LOOP = r"""
import os, sys
open("/workspace/noexec", "w").write("not a program")
n = 0
for i in range(3000):
    for p in ("/nonexistent/missing", "/workspace/noexec"):
        try:
            os.execv(p, [p, "x"])
        except OSError:
            n += 1
open("/workspace/survived", "w").write("%d failed execve calls\n" % n)
"""


@pytest.mark.parametrize("mode", ["filtered", "open"])
def test_failed_execve_in_one_process_hits_the_budget(rt, tmp_path, mode):
    """One python process calls execve 6000 times on a missing and on a non-executable file and
    never exits non-zero: with failedExecs 100 it is killed, under filtered and under open (the
    execve notification is installed for the budget too). Judged from the host: the marker the
    process writes after its loop is absent, and its pid is gone. On main the process survived
    (only processes that exited non-zero counted)."""
    pol = {"version": 1, "extends": "agent", "limits": {"failedExecs": 100}}
    if mode == "open":
        pol["network"] = {"mode": "open"}
    p = tmp_path / "pol.json"
    p.write_text(json.dumps(pol))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "loop.py").write_text(EXEC_LOOP)
    cid = f"fx-{uuid.uuid4().hex[:8]}"
    r = sandbox_run(rt, "--id", cid, "--workspace", str(ws), "--", "/usr/bin/python3", "/workspace/loop.py",
                    policy=p, audit=tmp_path / "audit", timeout=120)
    assert (ws / "noexec").exists(), r  # the loop ran
    assert not (ws / "survived").exists(), f"the process finished its loop: {(ws / 'survived').read_text()}"
    assert r.rc != 0, r
    recs = read_audit(tmp_path / "audit" / f"{cid}.jsonl")
    assert not alive(lifecycle(recs, "created")[-1]["pid"])


DEFER = r"""
import os, sys, threading, time
T, K, R, HOLD = (int(a) for a in sys.argv[1:5])
ev = threading.Event()
def t(i):
    for r in range(R):
        for j in range(K):  # one command, the directory spelt /, //, ///, ...
            try:
                os.execv("/" * (j + 1) + "nonexist/t%d" % i, ["t%d" % i])
            except OSError:
                pass
    if HOLD:
        ev.wait()  # and the thread stays alive
open("/workspace/alive", "w").write("%.3f\\n" % time.time())
ths = [threading.Thread(target=t, args=(i,), daemon=True) for i in range(T)]
for x in ths:
    x.start()
if not HOLD:
    for x in ths:
        x.join()
t0 = time.time()
while time.time() - t0 < HOLD:
    with open("/workspace/alive", "a") as f:
        f.write("%.3f\n" % time.time())
    time.sleep(0.5)
open("/workspace/survived", "w").write("done\n")
"""


@pytest.mark.parametrize("shape", ["400x63", "100x1", "spellings"])
def test_failed_execve_runs_cannot_be_deferred(rt, tmp_path, shape):
    """failedExecs 5. 400x63: 400 threads each try one command in 63 spellings of one directory
    (/, //, ...: under the 64-directory cap, never the same string twice) and stay alive, the
    agent writing a keep-alive marker every 0.5 s for 20 s; 100x1: 100 threads, one attempt each,
    the same. An open run counts once it is a second old, so the container is killed long before
    its own end. spellings: one thread tries the 63 spellings 4 times and the process exits 0
    at once: cleaned, each spelling is the same file again, so it is stopped by failedExecs (its
    short loop may end first: the count is asynchronous). Judged from the host: the marker the
    agent writes at its end is absent (held shapes), the exit says failedExecs, the keep-alive
    marker no longer grows, the pid is gone.
    On main all three survived (a run counted only when its thread went on or exited; 4 counts
    for spellings)."""
    t, k, r_, hold = {"400x63": (400, 63, 1, 20), "100x1": (100, 1, 1, 20), "spellings": (1, 63, 4, 0)}[shape]
    pol = {"version": 1, "extends": "agent", "limits": {"failedExecs": 5}}
    p = tmp_path / "pol.json"
    p.write_text(json.dumps(pol))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "defer.py").write_text(DEFER)
    cid = f"fd-{uuid.uuid4().hex[:8]}"
    r = sandbox_run(rt, "--id", cid, "--workspace", str(ws), "--", "/usr/bin/python3", "/workspace/defer.py",
                    str(t), str(k), str(r_), str(hold), policy=p, audit=tmp_path / "audit", timeout=120)
    if hold:
        assert not (ws / "survived").exists(), f"the agent reached its end: {r}"
    else:
        # a 252-call loop can end before the kill lands (the count is asynchronous): what
        # must hold is that it was counted - stopped by failedExecs, where main exited 0
        assert r.rc == 125 and "failedExecs 5 reached" in r.err, r
    assert r.rc != 0, r
    if hold:
        alive_marker = ws / "alive"
        assert alive_marker.exists(), r  # the agent did run
        before = alive_marker.read_text()
        time.sleep(1.5)
        assert alive_marker.read_text() == before  # nothing in the container writes any more
        assert len(before.split()) < 2 * hold, before
    recs = read_audit(tmp_path / "audit" / f"{cid}.jsonl")
    assert not alive(lifecycle(recs, "created")[-1]["pid"])


PATH_SEARCH = r"""
P=; for d in $(seq 1 30); do P="$P/nope$d:"; done; export PATH="${P}/usr/bin:/bin"
i=0; while [ $i -lt 300 ]; do env cat /dev/null || exit 3; i=$((i+1)); done
python3 -c 'import subprocess; [subprocess.check_call(["true"]) for _ in range(30)]' || exit 4
echo done > /workspace/done
"""


@pytest.mark.parametrize("mode", ["filtered", "open"])
def test_path_search_is_not_a_failed_exec(rt, tmp_path, mode):
    """300 commands run by env (execvp: one failing execve per directory of a 32-entry PATH,
    then the one that works) and 30 by python's subprocess (the same search): a PATH search
    that ends in an exec counts nothing, so a budget of 100 is not reached."""
    pol = {"version": 1, "extends": "agent", "limits": {"failedExecs": 100}}
    if mode == "open":
        pol["network"] = {"mode": "open"}
    p = tmp_path / "pol.json"
    p.write_text(json.dumps(pol))
    ws = tmp_path / "ws"
    ws.mkdir()
    r = sandbox_run(rt, "--id", f"px-{uuid.uuid4().hex[:8]}", "--workspace", str(ws), "--", "/bin/sh", "-c",
                    PATH_SEARCH, policy=p, audit=tmp_path / "audit", timeout=120)
    assert r.rc == 0, r
    assert (ws / "done").read_text() == "done\n"


def test_argv_flipped_during_execve_is_flagged(rt, tmp_path):
    """§4, the argv race: 30 processes each exec /bin/sh with a last argument a sibling thread
    keeps flipping between an innocent and a secret one. The shell writes the argument the kernel
    really gave it (the ground truth, from the workspace). No exec record may show only the
    innocent argument where the kernel gave the secret: the monitor compares its execve copy with
    the new image's cmdline and records both (argvMismatch, argvAtExec). On main 6 of 30 were
    forged. A script run by its #! line (argv rewritten by the kernel) is no mismatch."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy2(os.path.join(HERE, "attack", "argvflip.py"), ws / "argvflip.py")
    (ws / "s.sh").write_text("#!/bin/sh\nsleep 0.2\n")
    (ws / "s.sh").chmod(0o755)
    p = tmp_path / "pol.json"
    # filtered (the seccomp supervisor copies execve's argv), exec anywhere: the script runs from
    # the workspace
    p.write_text(json.dumps({"version": 1, "network": {"mode": "filtered"}, "audit": {"events": ["exec"]}}))
    cid = f"flip-{uuid.uuid4().hex[:8]}"
    r = sandbox_run(rt, "--id", cid, "--workspace", str(ws), "--", "/bin/sh", "-c",
                    "/workspace/s.sh SCRIPT-ARG && /usr/bin/python3 /workspace/argvflip.py 30",
                    policy=p, audit=tmp_path / "audit", timeout=120)
    assert r.rc == 0, r
    truth = {line[-2:]: line for line in (ws / "truth.txt").read_text().split()}
    assert len(truth) == 30, truth
    recs = read_audit(tmp_path / "audit" / f"{cid}.jsonl")
    shells = [x for x in recs if x["event"] == "exec" and len(x.get("argv") or []) == 4
              and x["argv"][1] == "-c" and x["argv"][3][-2:] in truth]
    assert len(shells) == 30, shells[:2]
    secret = [x for x in shells if truth[x["argv"][3][-2:]].startswith("EXFIL")]
    forged = [x for x in secret if not x["argv"][3].startswith("EXFIL") and not x.get("argvMismatch")]
    assert not forged, f"{len(forged)} of {len(secret)} records hide the secret argv: {forged[:2]}"
    for x in shells:
        if x.get("argvMismatch"):  # the new image's cmdline is what the kernel gave it
            assert x["argvAtExec"][3] == truth[x["argv"][3][-2:]] != x["argv"][3], x
    script = [x for x in recs if x["event"] == "exec" and "SCRIPT-ARG" in (x.get("argv") or [])]
    assert script and not any(x.get("argvMismatch") for x in script), script


def test_argv_forged_with_an_interpreter_shape_is_flagged(rt, tmp_path):
    """§4, the argv race with the whole call flipped: FAKE execve("/usr/bin/zgrep", ["zgrep", q])
    and REAL execve("/usr/bin/perl", ["/usr/bin/perl", "-e<code>", "/usr/bin/zgrep", q]). REAL's
    cmdline is "two interpreter words, FAKE's path and argv[1:]": what binfmt_script would make
    of FAKE under some #! line, but not under zgrep's real one (#!/bin/sh). Every run of the REAL
    code (it alone writes its token to the workspace: the ground truth) must have a record that
    shows its code or is flagged argvMismatch with argvAtExec. On main 16-19 of about 100 REAL
    runs were recorded as ["zgrep", q] with no flag (attack round 16)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy2(os.path.join(HERE, "attack", "argvflip.py"), ws / "argvflip.py")
    p = tmp_path / "pol.json"
    p.write_text(json.dumps({"version": 1, "network": {"mode": "filtered"}, "audit": {"events": ["exec"]}}))
    # real scripts, #! with an argument, by a relative and an absolute name: no mismatch
    (ws / "s2.sh").write_text("#!/bin/sh  -e \nsleep 0.2\n")
    (ws / "s2.sh").chmod(0o755)
    cid = f"flip-{uuid.uuid4().hex[:8]}"
    r = sandbox_run(rt, "--id", cid, "--workspace", str(ws), "--", "/bin/sh", "-c",
                    "cd /workspace && ./s2.sh REL-ARG && /workspace/s2.sh ABS-ARG && python3 argvflip.py 300 interp",
                    policy=p, audit=tmp_path / "audit", timeout=300)
    assert r.rc == 0, r
    scripts = [x for x in read_audit(tmp_path / "audit" / f"{cid}.jsonl")
               if x["event"] == "exec" and {"REL-ARG", "ABS-ARG"} & set(x.get("argv") or [])]
    assert len(scripts) == 2 and not any(x.get("argvMismatch") for x in scripts), scripts
    ran = set((ws / "real-ran.txt").read_text().split()) if (ws / "real-ran.txt").exists() else set()
    if not ran:
        pytest.skip("the race was never won (no REAL run in 300): nothing to judge")
    recs = [x for x in read_audit(tmp_path / "audit" / f"{cid}.jsonl") if x["event"] == "exec"]
    hidden = []
    for t in sorted(ran):
        mine = [x for x in recs if t in (x.get("argv") or []) or t in (x.get("argvAtExec") or [])]
        honest = [x for x in mine if any("real-ran" in a for a in (x.get("argv") or []) + (x.get("argvAtExec") or []))]
        if not honest:
            hidden.append((t, mine))
    assert not hidden, f"{len(hidden)} of {len(ran)} REAL runs have no honest record: {hidden[:2]}"


def test_exec_flood_does_not_hide_a_network_denial(rt, tmp_path):
    """§4: the audit quota has a bucket per kind. 5500 fast execs empty the exec bucket (most of
    them are suppressed and counted); a connection to an unlisted address made during the flood
    must still be on record - five of them, back to back. On main one bucket was shared and the
    denials were suppressed too."""
    ws = tmp_path / "ws"
    ws.mkdir()
    os.chmod(ws, 0o777)
    shutil.copy2(os.path.join(HERE, "egress", "client.py"), ws / "client.py")
    cid = f"qk-{uuid.uuid4().hex[:8]}"
    pol = tmp_path / "deny.json"
    pol.write_text(json.dumps({"version": 1, "extends": "agent", "approvals": {"network": "deny"}}))
    ports = list(range(8090, 8095))
    # 1000 execs use up the burst; the flood goes on while the connection is tried, so the exec
    # records take every token a shared bucket refills
    script = ("i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done; "
              "for j in 1 2 3; do (i=0; while [ $i -lt 1500 ]; do /bin/true; i=$((i+1)); done) & done; sleep 0.5; "
              f"/usr/bin/python3 /workspace/client.py '{json.dumps([['connect', UP4, p] for p in ports])}'; wait")
    r = sandbox_run(rt, "--id", cid, "--workspace", str(ws), "--", "/bin/sh", "-c", script, policy=pol,
                    audit=tmp_path / "audit", timeout=120)
    assert r.rc == 0, r
    recs = read_audit(tmp_path / "audit" / f"{cid}.jsonl")
    exited = lifecycle(recs, "exited")[-1]
    assert exited["suppressed"]["exec"] > 1000, exited  # the flood did exhaust the exec bucket
    net = {x.get("port") for x in recs if x["event"] == "network" and x.get("addr") == UP4}
    assert net == set(ports), (net, exited)


def test_monitor_crash_leaves_no_core_in_the_workspace(rt, tmp_path):
    """The monitor holds the egress CA's key and credentials' values (issue 19). A crash of it
    with the caller's core limit raised and a relative core_pattern used to write `core` into
    the caller's working directory, the sandbox's default workspace, where the next agent read
    a bearer token from it (outside attack 5). Judged from the host: the monitor is killed with
    SIGSEGV and no core file appears in the workspace (nor anywhere under the test's dirs)."""
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    if pattern.startswith("|") or pattern.startswith("/"):
        pytest.skip(f"core_pattern {pattern!r} is not relative: a core would not land in the workspace, "
                    "so this test could not fail here")
    import resource
    import signal
    ws = tmp_path / "ws"
    ws.mkdir()
    cid = f"nodump-{uuid.uuid4().hex[:8]}"

    def unlimited_core():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    argv = [rt.binary, "--root", rt.root, "--audit-dir", str(tmp_path / "audit"), "--profile", "agent",
            "sandbox", "--id", cid, "--", "sleep", "30"]
    p = subprocess.Popen(argv, cwd=ws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, preexec_fn=unlimited_core)
    try:
        pidfile = os.path.join(rt.root, cid, "monitor.pid")
        for _ in range(200):
            if os.path.exists(pidfile) and open(pidfile).read().strip():
                break
            assert p.poll() is None, p.stderr.read().decode(errors="replace")
            time.sleep(0.05)
        mon = int(open(pidfile).read().split()[0])
        with open(f"/proc/{mon}/status") as f:
            assert "asbx-monitor" in f.readline(), "monitor.pid does not name the monitor"
        assert resource.prlimit(mon, resource.RLIMIT_CORE)[0] == 0, "the monitor keeps the caller's core limit"
        assert os.readlink(f"/proc/{mon}/cwd") == "/", "the monitor keeps the caller's working directory"
        os.kill(mon, signal.SIGSEGV)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        rt.cmd("delete", "--force", cid, timeout=60)
    cores = [os.path.join(d, n) for d, _, names in os.walk(tmp_path) for n in names if n.startswith("core")]
    assert cores == [], f"the monitor's crash wrote {cores}"
