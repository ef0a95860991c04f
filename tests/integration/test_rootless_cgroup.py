"""Limits of `agentsbx sandbox` run by an ordinary user (issue 17: memory, pids and CPU through an
admin-delegated cgroup, CPU time without one; docs/security.md "When the caller is not root").

The suite's throw-away user (test_rootless_sandbox's fixtures) runs the runtime with a host config
(global `--config`) naming `"rootless": {"cgroupParent": "/<unique>/%u"}`, delegated by
contrib/delegate-cgroup.sh. What is judged is what the kernel reports from outside: the limit files
of the container's cgroup below the delegated directory, memory.oom_control / pids.events /
freezer.state there, the user's processes in /proc, the exit status and the audit log. On main
every case here fails: the host config key `rootless` is unknown there, the refusal names no way to
delegate, and limits.cpuSeconds without a cgroup is refused."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from test_rootless_sandbox import (HANG_GUARD, as_user, binary, no_user_processes, policy_file,  # noqa: F401
                                   user, user_processes, ws)

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DELEGATE = os.path.join(TOP, "contrib", "delegate-cgroup.sh")
NONE = {"version": 1, "extends": "agent", "network": {"mode": "none"}}


def v1_mount(ctl):
    """The mountpoint of the cgroup v1 hierarchy carrying ctl, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fields = post.split()
            if fields and fields[0] == "cgroup" and ctl in fields[-1].split(","):
                return pre.split()[4]
    return None


@pytest.fixture(scope="module")
def v1():
    mounts = {c: v1_mount(c) for c in ("memory", "pids", "cpu", "cpuacct", "freezer")}
    if not all(mounts.values()):
        pytest.skip(f"the admin-delegated subtree test runs on a v1 or hybrid host (this one: {mounts}); "
                    "pure cgroup v2 delegation is tested in the systemd VM")
    return mounts


@pytest.fixture(scope="module")
def top():
    """A unique top directory under every hierarchy root, removed after the module."""
    t = f"asbx-rl-{uuid.uuid4().hex[:6]}"
    yield t
    for ctl in ("memory", "pids", "cpu", "cpuacct", "freezer"):
        m = v1_mount(ctl)
        if m and os.path.isdir(os.path.join(m, t)):
            for d, subs, _ in sorted(os.walk(os.path.join(m, t)), key=lambda x: -len(x[0])):
                try:
                    os.rmdir(d)
                except OSError:
                    pass


@pytest.fixture(scope="module")
def delegated(user, v1, top):
    """contrib/delegate-cgroup.sh USER /TOP/USER, and a host config naming /TOP/%u."""
    parent = f"/{top}/{user.pw_name}"
    r = subprocess.run([DELEGATE, user.pw_name, parent], capture_output=True, text=True)
    assert r.returncode == 0, r
    for ctl, m in v1.items():
        st = os.stat(m + parent)
        assert st.st_uid == user.pw_uid, (ctl, st)
    yield parent
    subprocess.run([DELEGATE, "--undo", user.pw_name, parent], capture_output=True)


def host_config(tmpdir, parent_tmpl):
    p = os.path.join(tmpdir, f"config-{uuid.uuid4().hex[:6]}.json")
    with open(p, "w") as f:
        json.dump({"rootless": {"cgroupParent": parent_tmpl}}, f)
    os.chmod(p, 0o644)
    return p


@pytest.fixture(scope="module")
def confdir():
    d = tempfile.mkdtemp(prefix="asbx-rl-conf-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(user, binary, ws, cmd, pol, config=None, sid=None, wait=True):
    a = [binary] + (["--config", config] if config else []) + ["sandbox", "--workspace", ws,
                                                                "--policy", policy_file(user, pol)]
    if sid:
        a += ["--id", sid]
    return as_user(user, a + ["--", "/bin/sh", "-c", cmd], cwd=ws, wait=wait)


def wait_file(path, p):
    deadline = time.monotonic() + HANG_GUARD
    while not os.path.exists(path):
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def stop(p):
    p.terminate()
    out, err = p.communicate(timeout=HANG_GUARD)
    return out, err


def audit(user, sid):
    log = os.path.join(user.pw_dir, ".local", "state", "agentsbx", f"{sid}.jsonl")
    return [json.loads(x) for x in open(log)]


def test_memory_limit_oom_killed_in_delegated_cgroup(user, binary, ws, delegated, v1, confdir, top):
    sid = f"rl-{uuid.uuid4().hex[:8]}"
    done = os.path.join(ws, "done")
    pol = dict(NONE, limits={"memoryBytes": "32MiB", "pids": 64})
    p = run(user, binary, ws, "dd if=/dev/zero of=/dev/null bs=128M count=1; echo $? > /workspace/done; sleep 300", pol,
            config=host_config(confdir, f"/{top}/%u"), sid=sid, wait=False)
    try:
        wait_file(done, p)
        time.sleep(0.2)
        cg = os.path.join(v1["memory"] + delegated, sid)
        with open(os.path.join(cg, "memory.limit_in_bytes")) as f:
            assert int(f.read()) == 32 << 20
        with open(os.path.join(cg, "memory.oom_control")) as f:
            kills = dict(line.split() for line in f)
        assert int(kills.get("oom_kill", "0")) >= 1, kills
        with open(done) as f:
            assert f.read().strip() == "137"  # dd got SIGKILL from the OOM killer
        with open(os.path.join(cg, "cgroup.procs")) as f:
            procs = [int(x) for x in f.read().split()]
        assert procs and all(os.stat(f"/proc/{x}").st_uid == user.pw_uid for x in procs), procs
    finally:
        stop(p)
    assert not os.path.exists(os.path.join(v1["memory"] + delegated, sid))  # removed at the end
    assert not no_user_processes(user.pw_uid)


def test_pids_limit_stops_fork_bomb(user, binary, ws, delegated, v1, confdir, top):
    """Forks past pids.max of the delegated cgroup fail (dash then gives up): fewer than 12
    children ever started, the kernel's refusals are on record (pids.events, read by the
    monitor into a `limit` record) and nothing of the user's is left."""
    sid = f"rl-{uuid.uuid4().hex[:8]}"
    pol = dict(NONE, limits={"pids": 12})
    cmd = "i=0; while [ $i -lt 60 ]; do sleep 300 & i=$((i+1)); echo $i >> /workspace/n; done; sleep 300"
    r = run(user, binary, ws, cmd, pol, config=host_config(confdir, f"/{top}/%u"), sid=sid)
    assert r.rc != 0, r
    with open(os.path.join(ws, "n")) as f:
        started = f.read().split()
    assert 0 < len(started) < 12, (started, r)
    recs = audit(user, sid)
    refused = [x for x in recs if x.get("event") == "limit" and x.get("limit") == "pids"]
    assert refused and refused[0]["action"] == "refused" and refused[0]["value"] == 12, recs
    assert not os.path.exists(os.path.join(v1["pids"] + delegated, sid))
    assert not no_user_processes(user.pw_uid)


def test_cpu_quota_ps_pause_in_delegated_cgroup(user, binary, ws, delegated, v1, confdir, top):
    """limits.cpus is the quota of the delegated cpu hierarchy; ps, pause/resume and kill as the
    user use the same cgroup (seen in freezer.state and cgroup.procs)."""
    sid = f"rl-{uuid.uuid4().hex[:8]}"
    up = os.path.join(ws, "up")
    xdg = tempfile.mkdtemp(prefix=f"asbx-xdg-{user.pw_uid}-")
    os.chown(xdg, user.pw_uid, user.pw_gid)
    os.chmod(xdg, 0o700)
    env = {"XDG_RUNTIME_DIR": xdg}
    pol = dict(NONE, limits={"cpus": 0.5, "memoryBytes": "256MiB", "pids": 64})
    a = [binary, "--config", host_config(confdir, f"/{top}/%u"), "sandbox", "--workspace", ws, "--policy",
         policy_file(user, pol), "--id", sid, "--", "/bin/sh", "-c", "touch /workspace/up; sleep 300"]
    p = as_user(user, a, env=env, cwd=ws, wait=False)
    try:
        wait_file(up, p)
        with open(os.path.join(v1["cpu"] + delegated, sid, "cpu.cfs_quota_us")) as f:
            quota = int(f.read())
        with open(os.path.join(v1["cpu"] + delegated, sid, "cpu.cfs_period_us")) as f:
            assert quota * 2 == int(f.read())
        with open(os.path.join(v1["freezer"] + delegated, sid, "cgroup.procs")) as f:
            procs = set(f.read().split())
        r = as_user(user, [binary, "ps", sid], env=env)
        assert r.rc == 0, r
        assert procs and procs <= {line.split()[1] for line in r.out.splitlines()[1:]}, (procs, r)
        r = as_user(user, [binary, "pause", sid], env=env)
        assert r.rc == 0, r
        with open(os.path.join(v1["freezer"] + delegated, sid, "freezer.state")) as f:
            assert f.read().strip() == "FROZEN"
        r = as_user(user, [binary, "resume", sid], env=env)
        assert r.rc == 0, r
        with open(os.path.join(v1["freezer"] + delegated, sid, "freezer.state")) as f:
            assert f.read().strip() == "THAWED"
        r = as_user(user, [binary, "kill", sid, "KILL"], env=env)
        assert r.rc == 0, r
        p.communicate(timeout=HANG_GUARD)
    finally:
        if p.poll() is None:
            stop(p)
        shutil.rmtree(xdg, ignore_errors=True)
    assert not os.path.exists(os.path.join(v1["cpu"] + delegated, sid))
    assert not no_user_processes(user.pw_uid)


def test_refused_without_delegation_names_field_and_ways(user, binary, ws, v1, confdir):
    """A host config naming a directory that does not exist for this user, and no host config at
    all: the limit is refused before the command runs, naming the field and how to delegate."""
    marker = os.path.join(ws, "ran")
    pol = dict(NONE, limits={"memoryBytes": "64MiB", "pids": 32})
    for config in (host_config(confdir, f"/asbx-none-{uuid.uuid4().hex[:6]}/%u"), None):
        r = run(user, binary, ws, "touch /workspace/ran", pol, config=config)
        assert r.rc != 0, r
        assert "limits.memoryBytes" in r.err and "limits.pids" in r.err, r
        assert "contrib/delegate-cgroup.sh" in r.err and "cgroupParent" in r.err and "degrade" in r.err, r
        assert not os.path.exists(marker), r
    assert not no_user_processes(user.pw_uid)


@pytest.mark.parametrize("kind", ["root-owned", "world-writable"])
def test_parent_not_delegated_refused(user, binary, ws, v1, confdir, kind):
    """The directory exists but is not the caller's own: fail closed, naming the directory."""
    t = f"asbx-rl-bad-{uuid.uuid4().hex[:6]}"
    made = []
    try:
        for m in v1.values():
            d = os.path.join(m, t, user.pw_name)
            os.makedirs(d)
            made.append(d)
            if kind == "world-writable":
                os.chown(d, user.pw_uid, user.pw_gid)
                os.chmod(d, 0o777)
        marker = os.path.join(ws, "ran")
        r = run(user, binary, ws, "touch /workspace/ran", dict(NONE, limits={"pids": 32}),
                config=host_config(confdir, f"/{t}/%u"))
        assert r.rc != 0, r
        assert "rootless.cgroupParent" in r.err and f"/{t}/{user.pw_name}" in r.err, r
        assert ("not by you" in r.err) if kind == "root-owned" else ("writable by every user" in r.err), r
        assert not os.path.exists(marker), r
        for d in made:
            assert os.listdir(d) and not [x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x))]
    finally:
        for d in made:
            os.rmdir(d)
            os.rmdir(os.path.dirname(d))


CHILDREN = ("while :; do sh -c 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'; done")


@pytest.mark.parametrize("shape,cmd", [
    ("busy-loop", "while :; do :; done"),
    # short children, each reaped long before it could reach the limit alone: only their
    # cumulative time (the reaper's cutime/cstime) can exhaust the budget
    ("reaped-children", CHILDREN),
])
def test_cpu_seconds_without_cgroup(user, binary, ws, shape, cmd):
    """limits.cpuSeconds with no cgroup at all (nothing delegated, degrade cgroup): the monitor
    sums the CPU time of the pid namespace's processes; the command is killed at the budget,
    not by the (hang guard) wall clock, and nothing of the user's is left."""
    sid = f"rl-{uuid.uuid4().hex[:8]}"
    pol = dict(NONE, degrade=["cgroup"], limits={"cpuSeconds": 2, "wallClockSeconds": 90})
    r = run(user, binary, ws, cmd, pol, sid=sid)
    assert r.rc != 0, r
    recs = audit(user, sid)
    lim = [x for x in recs if x.get("event") == "limit"]
    assert lim and lim[0]["limit"] == "cpuSeconds" and lim[0]["used"] >= 2, recs
    ex = [x for x in recs if x.get("state") == "exited"]
    assert ex and ex[-1]["exitReason"] == "cpu" and ex[-1]["cpuUsec"] >= 2000000, ex
    assert not no_user_processes(user.pw_uid)


def test_partly_delegated_names_the_missing_controller(user, binary, ws, v1, confdir):
    """Only the memory hierarchy delegated: pids is refused naming limits.pids alone; with degrade
    cgroup it runs, memoryBytes still enforced there (an allocation past it is OOM-killed), and the
    audit log lists only limits.pids as not enforced."""
    t = f"asbx-rl-part-{uuid.uuid4().hex[:6]}"
    d = os.path.join(v1["memory"], t, user.pw_name)
    os.makedirs(d)
    os.chown(d, user.pw_uid, user.pw_gid)
    try:
        config = host_config(confdir, f"/{t}/%u")
        pol = dict(NONE, limits={"memoryBytes": "64MiB", "pids": 32})
        r = run(user, binary, ws, "touch /workspace/ran", pol, config=config)
        assert r.rc != 0, r
        assert "limits.pids" in r.err and "limits.memoryBytes" not in r.err, r
        assert "not delegated" in r.err and "contrib/delegate-cgroup.sh" in r.err, r
        assert not os.path.exists(os.path.join(ws, "ran")), r
        sid = f"rl-{uuid.uuid4().hex[:8]}"
        cg = os.path.join(d, sid)
        r = run(user, binary, ws, "dd if=/dev/zero of=/dev/null bs=128M count=1 2>/dev/null; echo dd=$?",
                dict(pol, degrade=["cgroup"]), config=config, sid=sid)
        assert r.rc == 0 and "dd=137" in r.out, r  # the memory limit still holds: OOM-killed
        recs = audit(user, sid)
        deg = [x for x in recs if x.get("event") == "policy"][0]["degradations"]
        cgd = [x for x in deg if x.startswith("cgroup:")]
        assert cgd and "limits.pids" in cgd[0] and "limits.memoryBytes" not in cgd[0], deg
        assert not os.path.exists(cg)  # removed at the end
    finally:
        for x in os.listdir(d):
            if os.path.isdir(os.path.join(d, x)):
                os.rmdir(os.path.join(d, x))
        os.rmdir(d)
        os.rmdir(os.path.dirname(d))
    assert not no_user_processes(user.pw_uid)
