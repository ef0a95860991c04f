"""Lifecycle (runtime-spec "Lifecycle" and "Operations"): create, start, state, kill, delete, run.

runc is the reference behaviour for every case here. Liveness is checked from the kernel
(/proc/PID, its namespaces), not only from `state`.
"""

import array
import json
import os
import select
import socket
import threading
import time

import pytest

from conftest import probe_json

pytestmark = pytest.mark.runc_reference


def proc_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_create_start_kill_delete(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    st = rt.state(cid).json()
    assert st["status"] == "created"
    pid = st["pid"]
    assert proc_alive(pid)
    # Created but not started: the user process has not run yet, so the container's pid is
    # in new namespaces but is not the probe.
    assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    assert rt.start(cid).ok
    rt.wait_status(cid, "running")
    assert rt.state(cid).json()["pid"] == pid
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[:3] == [b"/probe", b"sleep", b"600"]
    assert rt.kill(cid, "KILL").ok
    rt.wait_status(cid, "stopped")
    assert not proc_alive(pid)
    assert rt.delete(cid).ok
    assert not rt.state(cid).ok
    assert not os.path.exists(os.path.join(rt.root, cid))


def test_kill_default_signal_is_term(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    assert rt.kill(cid).ok
    rt.wait_status(cid, "stopped")
    assert "probe: signal 15" in bundle.container_output()


@pytest.mark.parametrize("sig,num", [("USR1", 10), ("SIGHUP", 1), ("2", 2)])
def test_kill_signal_forms(rt, bundle, sig, num):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    # pid 1 of a pid namespace ignores a signal it has no handler for: wait until the kernel
    # shows the probe's handler (SigCgt), or a signal sent right after start is simply lost
    pid = rt.state(cid).json()["pid"]
    deadline = time.monotonic() + 30
    while not _catches(pid, num) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rt.kill(cid, sig).ok
    rt.wait_status(cid, "stopped")
    assert f"probe: signal {num}" in bundle.container_output()


def _catches(pid, num):
    """True when /proc/PID/status says the process has a handler for signal `num`."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (num - 1)))
    except OSError:
        pass
    return False


def test_start_twice_fails(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    r2 = rt.start(cid)
    assert not r2.ok
    assert r2.err.strip()


def test_start_stopped_fails(rt, bundle):
    bundle.args("/probe", "exit", "0")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    rt.wait_status(cid, "stopped")
    assert not rt.start(cid).ok


def test_delete_running_needs_force(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    pid = rt.state(cid).json()["pid"]
    r = rt.delete(cid)
    assert not r.ok
    assert proc_alive(pid), "a refused delete must leave the container running"
    assert rt.status(cid) == "running"
    assert rt.delete(cid, force=True).ok
    assert not proc_alive(pid)
    assert not rt.state(cid).ok


def test_delete_created_with_force(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    pid = rt.state(cid).json()["pid"]
    assert rt.delete(cid, force=True).ok
    assert not proc_alive(pid)
    assert not rt.state(cid).ok


@pytest.mark.parametrize("code", [0, 1, 7, 255])
def test_run_returns_exit_code(rt, bundle, code):
    bundle.args("/probe", "exit", str(code))
    r, cid = rt.run(bundle)
    assert r.rc == code, r
    # `run` without --keep deletes the container after it exits.
    assert not rt.state(cid).ok


def test_run_signal_exit_code(rt, bundle):
    # A shell that kills itself: run reports 128 + signal, as runc does.
    bundle.args("/bin/sh", "-c", "kill -KILL $$")
    bundle.linux.setdefault("namespaces", [])
    bundle.remove_namespace("pid")  # not pid 1, so SIGKILL from itself is not ignored
    r, _ = rt.run(bundle)
    assert r.rc == 137, r


def test_run_detach(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.run(bundle, None, "--detach")
    assert r.ok, r
    st = rt.state(cid).json()
    assert st["status"] == "running"
    assert proc_alive(st["pid"])
    assert rt.kill(cid, "KILL").ok
    rt.wait_status(cid, "stopped")


def test_run_keep(rt, bundle):
    bundle.args("/probe", "exit", "3")
    r, cid = rt.run(bundle, None, "--keep")
    assert r.rc == 3, r
    assert rt.status(cid) == "stopped"
    assert rt.delete(cid).ok


def test_pid_file(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    pidfile = os.path.join(bundle.path, "pidfile")
    r, cid = rt.create(bundle, None, "--pid-file", pidfile)
    assert r.ok, r
    with open(pidfile) as f:
        pid = int(f.read().strip())
    assert pid == rt.state(cid).json()["pid"]
    assert proc_alive(pid)
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")


def test_output_reaches_caller(rt, bundle):
    r, cid = rt.run(bundle, None)
    assert r.ok, r
    rep = json.loads(r.out.strip().splitlines()[-1])
    assert rep["pid"] == 1


def test_state_of_running_container(rt, bundle):
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    st = rt.state(cid).json()
    assert st["id"] == cid
    assert os.path.realpath(st["bundle"]) == os.path.realpath(bundle.path)
    assert isinstance(st["pid"], int) and st["pid"] > 0


@pytest.mark.agentsbx_only("runc 1.1.5 races here: two concurrent creates of one id can both "
                           "succeed, leaving a stray init and its cgroups")
def test_concurrent_create_same_id(rt, make_bundle):
    """Several creates of one id at once: exactly one wins, the rest fail, nothing leaks."""
    bundles = [make_bundle(args=("/probe", "sleep", "600")) for _ in range(4)]
    cid = rt.new_id()
    results = [None] * len(bundles)

    def go(i):
        results[i], _ = rt.create(bundles[i], cid)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(bundles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if r.ok]
    assert len(winners) == 1, results
    assert rt.status(cid) == "created"


def test_concurrent_kill_and_delete(rt, bundle):
    """kill, state and delete --force racing on one id end with the container gone."""
    bundle.args("/probe", "sleep", "600")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    pid = rt.state(cid).json()["pid"]
    ops = [lambda: rt.kill(cid, "KILL"), lambda: rt.delete(cid, force=True),
           lambda: rt.state(cid), lambda: rt.delete(cid, force=True)]
    threads = [threading.Thread(target=op) for op in ops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.delete(cid, force=True)
    assert not rt.state(cid).ok
    assert not proc_alive(pid)


def test_probe_write_then_read(rt, bundle):
    """Sanity of the probe's active checks inside a container."""
    bundle.args("/probe", "write", "/tmp/x", "hello")
    r, _ = rt.run(bundle)
    assert r.ok, r
    assert probe_json(r)["result"] == "ok"
    with open(os.path.join(bundle.rootfs, "tmp", "x")) as f:
        assert f.read() == "hello"


def test_kill_all(rt, bundle):
    """kill --all signals every process of the container, not only its init."""
    bundle.args("/bin/sh", "-c", "/probe sleep 600 & /probe sleep 600 & wait")
    r, cid = rt.create(bundle)
    assert r.ok, r
    assert rt.start(cid).ok
    pid = rt.state(cid).json()["pid"]
    r = rt.kill(cid, "KILL", "--all")
    assert r.ok, r
    rt.wait_status(cid, "stopped")
    assert not proc_alive(pid)


def test_console_socket_terminal(rt, bundle, tmp_path):
    """process.terminal with --console-socket: the runtime sends the pty master over the unix
    socket (SCM_RIGHTS); the probe sees a tty on 0, 1 and 2."""
    sock_path = str(tmp_path / "console.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    srv.settimeout(60)
    bundle.process["terminal"] = True
    bundle.args("/probe", "report")
    r, cid = rt.create(bundle, None, "--console-socket", sock_path)
    assert r.ok, r
    conn, _ = srv.accept()
    fds = array.array("i")
    _msg, anc, _flags, _addr = conn.recvmsg(4096, socket.CMSG_LEN(fds.itemsize))
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[:fds.itemsize])
    conn.close()
    srv.close()
    assert len(fds) == 1, "no pty master received on the console socket"
    master = fds[0]
    try:
        assert rt.start(cid).ok
        out = b""

        def complete(b):
            """the report is in: its last line parses (a `}` at a read's end may close an inner
            object: the report is longer than one read of the pty under load)"""
            try:
                return b.rstrip().endswith(b"}") and isinstance(json.loads(b.decode().strip().splitlines()[-1]), dict)
            except ValueError:
                return False
        while not complete(out):
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, f"hang guard: no output on the pty; got {out!r}"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the slave side is closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    rep = json.loads(out.decode().strip().splitlines()[-1])
    for k in ("0", "1", "2"):
        assert rep["tty"][k]["isatty"], rep["tty"]
        assert rep["tty"][k]["ttyname"].startswith("/dev/pts/"), rep["tty"]
    rt.wait_status(cid, "stopped")


def cgroup_dirs_of(pid):
    """The host directories of pid's cgroups, one per mounted hierarchy."""
    dirs = []
    with open(f"/proc/{pid}/cgroup") as f:
        for ln in f:
            _, ctls, path = ln.rstrip("\n").split(":", 2)
            if ctls == "":
                base = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"
            else:
                name = ctls.replace("name=", "")
                base = os.path.join("/sys/fs/cgroup", name)
                if not os.path.isdir(base):
                    continue
            dirs.append(os.path.join(base, path.lstrip("/")))
    return [d for d in dirs if os.path.isdir(d)]


def test_delete_force_of_frozen_container(rt, bundle):
    """delete --force of a paused (frozen) container thaws, kills and removes it: no process and
    no cgroup directory is left in any hierarchy."""
    bundle.args("/bin/sh", "-c", "/probe sleep 600 & /probe sleep 600")
    r, cid = rt.run(bundle, None, "--detach")
    assert r.ok, r
    rt.wait_status(cid, "running")
    pid = rt.state(cid).json()["pid"]
    dirs = [d for d in cgroup_dirs_of(pid) if cid in d]
    assert dirs, "no cgroup of the container found"
    with open(os.path.join(dirs[0], "cgroup.procs")) as f:
        procs = [int(x) for x in f.read().split()]
    assert len(procs) >= 2, procs
    assert rt.cmd("pause", cid).ok
    assert rt.state(cid).json()["status"] == "paused"
    d = rt.delete(cid, force=True)
    assert d.ok, d
    for p in procs:
        alive = os.path.exists(f"/proc/{p}") and \
            open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
        assert not alive, f"process {p} survived delete --force"
    left = [x for x in dirs if os.path.exists(x)]
    assert not left, f"cgroups left: {left}"
    assert not rt.state(cid).ok
