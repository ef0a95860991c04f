"""The vm tier's detached lifecycle (issue 22; runtime/vm_supervisor.h): create, start, state, kill,
delete of a container whose process runs in a microVM, observed from outside as an engine's shim
sees it: the state JSON, the output the process wrote, the exit status of the container's pid
(the supervisor, reaped here by a subreaper as containerd's shim does), and nothing left in the
state root or <root>/vm afterwards.

Three boots (TCG: 10-20 s each): create/start/kill TERM; `run --detach` under a wall clock;
delete of a container that was never started. Needs what test_vm.py needs (its fixtures)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_vm import DEFAULT_GUEST_MIB, OWNER, QEMU_OVERHEAD_MIB, _bundle, qemu_cgroup, vm_env  # noqa: F401

pytestmark = pytest.mark.agentsbx_only("the vm isolation tier is agentsbx's")

POLICY = {"version": 1, "isolation": "vm", "network": {"mode": "none"}}
HANG = 300  # seconds: a guard against hangs, never an assertion on speed

# A minimal shim: a child subreaper that runs the runtime's create (or run --detach), then waits
# for the container's pid (reparented to it when the runtime exits) and prints its status as
# JSON; every other orphan is reaped too (as containerd-shim does).
SHIM = r"""
import ctypes, json, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
out = open(sys.argv[1], "w")
pidfile, argv = sys.argv[2], sys.argv[3:]
rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out).returncode
print(json.dumps({"runtime": rc}), flush=True)
if rc != 0:
    sys.exit(0)
pid = int(open(pidfile).read())
status = None
while True:
    try:
        p, st = os.wait()
    except ChildProcessError:
        break
    if p == pid:
        status = os.waitstatus_to_exitcode(st)
print(json.dumps({"status": status}), flush=True)
"""


class Shim:
    def __init__(self, env, name, script, policy=POLICY, verb=("create",)):
        self.bin = env["bin"]
        self.id = "vml-" + name
        self.root = os.path.join(env["work"], "state-" + self.id)
        b, self.ws, pol = _bundle(env, "lc-" + name, script, policy)
        self.out = os.path.join(env["work"], self.id + ".out")
        pidfile = os.path.join(env["work"], self.id + ".pid")
        argv = [self.bin, "--root", self.root, "--policy", pol, *verb, "--bundle", b, "--pid-file", pidfile, self.id]
        self.p = subprocess.Popen([sys.executable, "-c", SHIM, self.out, pidfile, *argv],
                                  stdout=subprocess.PIPE, text=True)
        self.created = json.loads(self.p.stdout.readline())["runtime"]

    def rt(self, *args, check=True):
        return subprocess.run([self.bin, "--root", self.root, *args], capture_output=True, text=True,
                              timeout=HANG, check=check)

    def state(self):
        return json.loads(self.rt("state", self.id).stdout)

    def status(self):
        self.p.wait(timeout=HANG)  # the hang guard: the shim exits once the container's pid did
        return json.loads(self.p.stdout.readline())["status"]

    def output(self):
        with open(self.out) as f:
            return f.read()

    def assert_nothing_left(self):
        left = [e for e in os.listdir(self.root) if e != "vm"] if os.path.isdir(self.root) else []
        assert not left, left
        assert not os.path.exists(os.path.join(self.root, "vm", self.id)), "the VM's run directory was left"
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert self.id not in ps and self.root not in ps, [x for x in ps.splitlines() if self.id in x]

    def wait_for(self, pred, what):
        deadline = time.monotonic() + HANG
        while not pred():
            assert time.monotonic() < deadline, what
            time.sleep(0.1)


def test_create_start_kill_delete(vm_env):
    s = Shim(vm_env, "main", "echo started-in=$(uname -r); echo to-stderr >&2; "
             "trap 'echo got-term; exit 9' TERM; echo trap-set; while :; do sleep 1; done")
    assert s.created == 0, s.output()
    st = s.state()
    assert st["status"] == "created" and st["pid"] > 0, st
    assert os.path.exists(f"/proc/{st['pid']}"), st  # the supervisor, alive
    assert "started-in" not in s.output()  # held at the start gate
    # what is not built in the tier is refused with its error, and does not run on the host
    ex = s.rt("exec", s.id, "/bin/true", check=False)  # as for a container: exec needs `running`
    assert ex.returncode != 0 and "not running" in ex.stderr, ex
    pa = s.rt("pause", s.id, check=False)
    assert pa.returncode != 0 and "vm tier" in pa.stderr, pa
    assert s.rt("start", s.id).returncode == 0
    assert s.state()["status"] == "running"
    s.wait_for(lambda: "started-in=" in s.output(), "the process's output")
    release = s.output().split("started-in=")[1].split()[0]
    assert release != os.uname().release, release
    assert "to-stderr" in s.output()
    # a second start is refused as for a container
    again = s.rt("start", s.id, check=False)
    assert again.returncode != 0 and "not created" in again.stderr, again
    # a TERM before the trap is set is ignored (the pid namespace's init has no handler yet)
    s.wait_for(lambda: "trap-set" in s.output(), "the trap to be set")
    assert s.rt("kill", s.id, "TERM").returncode == 0
    assert s.status() == 9  # the trap's exit status, the supervisor's
    assert "got-term" in s.output()
    assert s.state()["status"] == "stopped"
    k = s.rt("kill", s.id, "TERM", check=False)
    assert k.returncode != 0 and "not running" in k.stderr, k
    assert s.rt("delete", s.id).returncode == 0
    s.assert_nothing_left()


def test_run_detach_wall_clock(vm_env):
    """run --detach: the wall clock is enforced from the host (QEMU killed, status 124)"""
    pol = dict(POLICY, limits={"wallClockSeconds": 45})
    s = Shim(vm_env, "wall", "echo up; while :; do sleep 1; done", policy=pol, verb=("run", "--detach"))
    assert s.created == 0, s.output()
    assert s.state()["status"] == "running"
    assert s.status() == 124
    assert "up" in s.output()
    assert s.state()["status"] == "stopped"
    assert s.rt("delete", s.id).returncode == 0
    s.assert_nothing_left()


def test_delete_created_kills_the_vm(vm_env):
    """delete of a created container: the supervisor gets SIGKILL (QEMU dies with it), the run
    directory it could not remove is removed by delete"""
    s = Shim(vm_env, "never", "echo must-not-run")
    assert s.created == 0, s.output()
    st = s.state()
    assert st["status"] == "created"
    assert os.path.isdir(os.path.join(s.root, "vm", s.id))
    # QEMU (its pid from the state dir's record) in the VM's own cgroup, limited (vm_cgroup.h)
    with open(os.path.join(s.root, s.id, "vm-qemu")) as f:
        qpid = int(f.read().split()[0])
    path, limit, _, mdir = qemu_cgroup(qpid)
    assert path == "/agentsbx/vm-" + s.id, path
    assert limit == (DEFAULT_GUEST_MIB + QEMU_OVERHEAD_MIB) << 20, limit
    assert s.rt("delete", s.id).returncode == 0
    assert not os.path.exists(mdir), "delete left QEMU's cgroup behind"
    assert s.status() == -signal.SIGKILL  # killed by SIGKILL: a shim reports 137
    assert "must-not-run" not in s.output()
    s.assert_nothing_left()


def _children(pid, comm):
    """pids of `pid`'s children whose comm starts with `comm` (the host's /proc)"""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        name, rest = st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()
        if int(rest[1]) == pid and name.startswith(comm):
            found.append(int(d))
    return found


def test_killed_foreground_run_reaped_by_delete_force_and_by_the_next_run(vm_env):
    """outside attack 15: SIGKILL of a foreground `run` left QEMU's cgroup and <root>/vm/<id>;
    `delete --force` removed neither and the next run of the id was refused (runtime/vm_runrec.h)"""
    b, ws, pol = _bundle(vm_env, "lc-fgkill", "echo up > /workspace/up; while :; do sleep 1; done", POLICY)
    cid = "vml-fgkill"
    root = os.path.join(vm_env["work"], "state-" + cid)

    def run_and_kill():
        up = os.path.join(ws, "up")
        if os.path.exists(up):
            os.unlink(up)
        p = subprocess.Popen([vm_env["bin"], "--root", root, "--policy", pol, "run", "--bundle", b, cid],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + HANG
        while not os.path.exists(up):
            assert p.poll() is None and time.monotonic() < deadline, "the VM's process did not start"
            time.sleep(0.2)
        qemu = _children(p.pid, "qemu-system")
        assert len(qemu) == 1, qemu
        mdir = qemu_cgroup(qemu[0])[3]
        p.kill()  # SIGKILL: nothing of the run's own cleanup runs
        p.wait(timeout=HANG)
        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{qemu[0]}"):  # QEMU dies with its runner (PDEATHSIG)
            assert time.monotonic() < deadline, "QEMU outlived its SIGKILLed run"
            time.sleep(0.1)
        assert os.path.isdir(mdir) and os.path.isdir(os.path.join(root, "vm", cid))  # left until reaped
        return mdir

    mdir = run_and_kill()
    d = subprocess.run([vm_env["bin"], "--root", root, "delete", "--force", cid], capture_output=True, text=True,
                       timeout=HANG)
    assert d.returncode == 0, d
    assert not os.path.exists(mdir), "delete --force left QEMU's cgroup"
    assert not os.path.exists(os.path.join(root, "vm", cid)), "delete --force left the run directory"
    # killed again, then run again without a delete: the new run reaps the stale one and runs
    mdir = run_and_kill()
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["args"] = ["/bin/sh", "-c", "echo second-run"]
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    r = subprocess.run([vm_env["bin"], "--root", root, "--policy", pol, "run", "--bundle", b, cid],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 0 and "second-run" in r.stdout, r
    assert not os.path.exists(mdir), "the stale run's cgroup was left"
    left = [e for e in os.listdir(os.path.join(root, "vm"))] if os.path.isdir(os.path.join(root, "vm")) else []
    assert not left, left


def test_guest_console_flood_is_bounded(vm_env):
    """outside attack 15: what the guest writes to its serial console (/dev/ttyS0; here a
    createRuntime hook, which runs in the guest in a foreground run) reached console.log
    whole, without a cap: now its first 512 KiB and last 256 KiB (runtime/vm_console.h)"""
    b, ws, pol = _bundle(vm_env, "lc-console", "echo ran", POLICY)
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    busybox = os.path.join(b, "rootfs", "bin", "busybox")
    cfg["hooks"] = {"createRuntime": [{"path": busybox, "args": [
        "busybox", "sh", "-c",
        "head -c 4000000 /dev/zero | tr '\\0' x > /dev/ttyS0; echo CONSOLE-END-MARK > /dev/ttyS0"]}]}
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    subprocess.run(["chown", "-R", f"{OWNER}:{OWNER}", b], check=True)
    cid = "vml-console"
    root = os.path.join(vm_env["work"], "state-" + cid)
    r = subprocess.run([vm_env["bin"], "--root", root, "--policy", pol, "run", "--bundle", b, cid],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=HANG,
                       env=dict(os.environ, AGENTSBX_VM_KEEP="1"))
    rundir = os.path.join(root, "vm", cid)
    try:
        assert r.returncode == 0 and "ran" in r.stdout, r
        log = os.path.join(rundir, "console.log")
        size = os.path.getsize(log)
        assert size <= (512 << 10) + (256 << 10) + 200, size
        with open(log, "rb") as f:
            data = f.read()
        assert b"bytes of the console dropped here" in data
        assert b"CONSOLE-END-MARK" in data[-(256 << 10):]  # the last of it is kept
    finally:
        subprocess.run(["rm", "-rf", rundir])
