"""exec (runc's `exec`): a new process joins a running container's namespaces, cgroup and
security settings. runc is the reference behaviour; each case also runs against runc.
Everything asserted is what the probe reports from inside, or the kernel's view in /proc."""

import json
import os

import pytest

from conftest import assert_refused, probe_json

pytestmark = pytest.mark.runc_reference


@pytest.fixture
def running(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.run(bundle, None, "--detach")
    assert r.ok, r
    rt.wait_status(cid, "running")
    return cid


def ns_of(pid):
    return {n: os.readlink(f"/proc/{pid}/ns/{n}") for n in ("mnt", "pid", "net", "ipc", "uts", "cgroup")}


def test_exec_joins_namespaces_and_cgroup(rt, bundle, running):
    init_pid = rt.state(running).json()["pid"]
    r = rt.cmd("exec", running, "/probe", "report")
    assert r.ok, r
    rep = probe_json(r)
    assert rep["namespaces"]["pid"] == os.readlink(f"/proc/{init_pid}/ns/pid")
    assert rep["namespaces"]["mnt"] == os.readlink(f"/proc/{init_pid}/ns/mnt")
    assert rep["namespaces"]["net"] == os.readlink(f"/proc/{init_pid}/ns/net")
    assert rep["pid"] > 1  # not the init: a new process inside the pid namespace


def test_exec_joins_cgroup(rt, running, tmp_path):
    """Seen from the host: the exec'd process is in the init's cgroup in every hierarchy."""
    pidf = tmp_path / "exec.pid"
    r = rt.cmd("exec", "--detach", "--pid-file", pidf, running, "/probe", "sleep", "600")
    assert r.ok, r
    init_pid = rt.state(running).json()["pid"]
    with open(f"/proc/{init_pid}/cgroup") as a, open(f"/proc/{int(pidf.read_text())}/cgroup") as b:
        assert a.read() == b.read()


def test_exec_exit_code_passed_through(rt, running):
    assert rt.cmd("exec", running, "/probe", "exit", "7").rc == 7


def test_exec_env_cwd_user(rt, running):
    r = rt.cmd("exec", "--env", "FOO=bar", "--cwd", "/tmp", "--user", "1000:1001",
               "--additional-gids", "44", running, "/probe", "report")
    assert r.ok, r
    rep = probe_json(r)
    assert "FOO=bar" in rep["env"]
    assert rep["cwd"] == "/tmp"
    assert (rep["uid"], rep["gid"]) == (1000, 1001)
    assert 44 in rep["groups"]


def test_exec_process_json(rt, bundle, running, tmp_path):
    proc = dict(bundle.process)
    proc.update({"args": ["/probe", "report"], "cwd": "/", "env": ["X=1", "PATH=/bin"],
                 "user": {"uid": 5, "gid": 6}, "terminal": False})
    pf = tmp_path / "process.json"
    pf.write_text(json.dumps(proc))
    r = rt.cmd("exec", "--process", pf, running)
    assert r.ok, r
    rep = probe_json(r)
    assert (rep["uid"], rep["gid"]) == (5, 6)
    assert "X=1" in rep["env"]


def test_exec_missing_command_fails(rt, running):
    r = rt.cmd("exec", running, "/no/such/command")
    assert r.rc == 255, r  # runc: "exec failed: ..." exits 255 (engines tell it from the process's own status)
    assert "no/such/command" in r.err


def test_exec_into_stopped_container_fails(rt, bundle):
    bundle.args("/probe", "exit", "0")
    r, cid = rt.run(bundle, None, "--detach")
    assert r.ok, r
    rt.wait_status(cid, "stopped")
    r = rt.cmd("exec", cid, "/probe", "exit", "0")
    assert r.rc == 255 and r.err.strip(), r


def test_exec_unknown_container_fails(rt):
    r = rt.cmd("exec", "no-such-container-x", "/probe", "exit", "0")
    assert r.rc == 255 and r.err.strip(), r


def test_exec_detach_pid_file(rt, running, tmp_path):
    pidf = tmp_path / "exec.pid"
    r = rt.cmd("exec", "--detach", "--pid-file", pidf, running, "/probe", "sleep", "600")
    assert r.ok, r
    pid = int(pidf.read_text())
    init_pid = rt.state(running).json()["pid"]
    assert os.readlink(f"/proc/{pid}/ns/pid") == os.readlink(f"/proc/{init_pid}/ns/pid")


def test_exec_bad_user_string(rt, running):
    for bad in ("abc:", "1000:x", "-1", ":5"):
        r = rt.cmd("exec", "--user", bad, running, "/probe", "exit", "0")
        assert_refused(rt, r, "--user", repr(bad)[1:-1])


def test_exec_paused_refused(rt, running):
    assert rt.cmd("pause", running).ok
    try:
        r = rt.cmd("exec", running, "/probe", "exit", "0")
        assert r.rc != 0 and "paused" in r.err
    finally:
        assert rt.cmd("resume", running).ok


def test_exec_no_fd_leak(rt, running):
    r = rt.cmd("exec", running, "/probe", "report")
    assert r.ok, r
    fds = probe_json(r)["fds"]
    assert sorted(int(k) for k in fds) == [0, 1, 2, 3] or sorted(int(k) for k in fds) == [0, 1, 2], fds


def test_exec_applies_container_seccomp(rt, bundle):
    """The container's seccomp filter applies to exec'd processes too."""
    bundle.linux["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW",
                               "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_ERRNO",
                                             "errnoRet": 1}]}
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.run(bundle, None, "--detach")
    assert r.ok, r
    r = rt.cmd("exec", cid, "/probe", "syscall", "getppid")
    assert r.out.strip(), r
    assert probe_json(r)["result"] == "EPERM", r.out


def test_exec_process_group_exists_in_container(rt, running):
    """The exec'd process leads a process group (and session) of its own, one that exists in the
    container's pid namespace: getpgrp() is its own pid, not 0 (a group left in the host's)."""
    r = rt.cmd("exec", running, "/probe", "report")
    assert r.ok, r
    rep = probe_json(r)
    assert rep["pgrp"] != 0 and rep["pgrp"] == rep["pid"], rep
    assert rep["sid"] == rep["pid"], rep


def test_exec_cwd_missing_fails_cleanly(rt, bundle, running):
    """exec --cwd to a directory that does not exist fails (runc: chdir ... no such file), names
    the directory, and creates nothing in the rootfs."""
    r = rt.cmd("exec", "--cwd", "/no/such/dir", running, "/probe", "report")
    assert r.rc != 0, r
    assert "/no/such/dir" in r.err, r
    assert not os.path.exists(os.path.join(bundle.rootfs, "no")), "exec created the cwd"
    assert rt.state(running).json()["status"] == "running"


def test_exec_children_stay_in_container_pid_namespace(rt, running):
    """The exec'd process and the processes it forks are in the init's pid namespace (P forks E
    with its pid namespace for children pointed at the container's, then points it back)."""
    init_pid = rt.state(running).json()["pid"]
    r = rt.cmd("exec", running, "/probe", "report")
    assert r.ok, r
    ns = probe_json(r)["namespaces"]
    assert ns["pid"] == ns["pid_for_children"] == os.readlink(f"/proc/{init_pid}/ns/pid")
    # a second exec right after the first: the runtime's own pid namespace was set back, its
    # children of the next command start from the host's view again and join as before
    r = rt.cmd("exec", running, "/probe", "report")
    assert r.ok, r
    assert probe_json(r)["namespaces"]["pid"] == os.readlink(f"/proc/{init_pid}/ns/pid")


def _exec_joins_all(rt, bundle, extra_ns):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.run(bundle, None, "--detach")
    assert r.ok, r
    rt.wait_status(cid, "running")
    init_pid = rt.state(cid).json()["pid"]
    r = rt.cmd("exec", cid, "/probe", "report")
    assert r.ok, r
    rep = probe_json(r)
    for n in ("mnt", "pid", "net", "ipc", "uts") + extra_ns:
        assert rep["namespaces"][n] == os.readlink(f"/proc/{init_pid}/ns/{n}"), n
    assert rep["pid"] > 1
    return rep


@pytest.mark.agentsbx_only("runc 1.1.5 has no time namespace support")
def test_exec_joins_time_namespace(rt, bundle):
    """A container with a time namespace: P cannot take the direct path (setns CLONE_NEWTIME
    would switch its own clocks), S joins everything and forks E, which is in both."""
    bundle.set_namespace("time")
    bundle.linux["timeOffsets"] = {"monotonic": {"secs": 86400, "nanosecs": 0}}
    _exec_joins_all(rt, bundle, ("time",))


def test_exec_joins_user_namespace(rt, bundle):
    """A container with its own user namespace: E joins it with the others, as root of it."""
    bundle.set_namespace("user")
    bundle.linux["uidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.linux["gidMappings"] = [{"containerID": 0, "hostID": 200000, "size": 65536}]
    bundle.process["user"] = {"uid": 0, "gid": 0}
    rep = _exec_joins_all(rt, bundle, ("user",))
    assert rep["namespaces"]["user"] != os.readlink("/proc/self/ns/user")
