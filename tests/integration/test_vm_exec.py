"""`exec` into a container of the vm tier (issue 22; runtime/vm_exec.h): the process runs in the
guest, applied there by the guest's agentsbx under the container's policy, with its stdio, exit
status and signals relayed to the host's caller. Observed from outside: what the process prints,
the exit status the caller gets, files it writes in the shared workspace, and the host's /proc.

One boot (TCG: 10-20 s) under `extends: agent` with network none, serving every exec below; the
last test stops the container and checks nothing is left. Needs what test_vm.py needs."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_vm import vm_env  # noqa: F401
from test_vm_lifecycle import HANG, Shim

pytestmark = pytest.mark.agentsbx_only("the vm isolation tier is agentsbx's")

POLICY = {"version": 1, "extends": "agent", "isolation": "vm", "network": {"mode": "none"}}

# the same subreaper as test_vm_lifecycle's SHIM, for `exec --detach`: the relay's pid is the
# process's on the host, and its exit status the process's
DSHIM = r"""
import ctypes, json, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
pidfile, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
# files, not pipes: the relay keeps the caller's stdio (as runc's detached process does)
with open(out, "w") as f:
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=f)
print(json.dumps({"runtime": r.returncode, "out": open(out).read()}), flush=True)
if r.returncode != 0:
    sys.exit(0)
pid = int(open(pidfile).read())
print(json.dumps({"pid": pid}), flush=True)
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


@pytest.fixture(scope="module")
def vm(vm_env):
    s = Shim(vm_env, "exec", "echo main-up; while :; do sleep 1; done",
             policy=POLICY)
    assert s.created == 0, s.output()
    # before start: the guest serves exec once the process runs, as runc's exec needs `running`
    early = s.rt("exec", s.id, "/bin/true", check=False)
    assert early.returncode != 0 and "not running" in early.stderr, early
    assert s.rt("start", s.id).returncode == 0
    s.wait_for(lambda: "main-up" in s.output(), "the container's process")
    s.env = vm_env
    yield s
    if s.p.poll() is None:
        s.rt("kill", s.id, "KILL", check=False)
        s.p.wait(timeout=HANG)
    s.rt("delete", "--force", s.id, check=False)


def ex(vm, *args, input=None, timeout=HANG):
    return subprocess.run([vm.bin, "--root", vm.root, "exec", *args], input=input, capture_output=True,
                          timeout=timeout)


def test_exec_runs_in_the_guest_in_the_container(vm):
    r = ex(vm, vm.id, "/bin/sh", "-c", "uname -r; tr '\\0' ' ' < /proc/1/cmdline; echo; echo ws > /workspace/from-exec")
    assert r.returncode == 0, r
    release, init = r.stdout.decode().split("\n", 2)[:2]
    assert release == vm.env["release"] and release != os.uname().release, release
    # the container's pid namespace (its pid 1 is the container's process, not the guest's /init)
    # and its mounts (/workspace is where config.json put it)
    assert "main-up" in init, init
    with open(os.path.join(vm.ws, "from-exec")) as f:
        assert f.read() == "ws\n"


def test_exec_status_stdout_stderr_apart(vm):
    r = ex(vm, vm.id, "/bin/sh", "-c", "echo to-out; echo to-err >&2; exit 7")
    assert r.returncode == 7, r
    assert r.stdout == b"to-out\n" and r.stderr == b"to-err\n", r
    k = ex(vm, vm.id, "/bin/sh", "-c", "kill -TERM $$")
    assert k.returncode == 128 + signal.SIGTERM, k


def test_exec_options_reach_the_guest(vm):
    r = ex(vm, "--cwd", "/workspace", "--env", "ASBX_X=forty-two", "--user", "1000:1000", vm.id,
           "/bin/sh", "-c", "pwd; echo $ASBX_X; id -u; id -g")
    assert r.returncode == 0, r
    assert r.stdout.decode().split() == ["/workspace", "forty-two", "1000", "1000"], r
    proc = os.path.join(vm.env["work"], "process.json")
    with open(proc, "w") as f:
        json.dump({"args": ["/bin/sh", "-c", "echo from-process-json; exit 4"], "cwd": "/",
                   "env": ["PATH=/bin:/usr/bin"], "user": {"uid": 0, "gid": 0}}, f)
    p = ex(vm, "--process", proc, vm.id)
    assert p.returncode == 4 and p.stdout == b"from-process-json\n", p


def test_exec_under_the_containers_policy(vm):
    """the agent profile holds for an exec'd process too: /etc read-only, Landlock's exec rules
    (a copy of busybox in the workspace does not run), seccomp's userns group"""
    r = ex(vm, vm.id, "/bin/sh", "-c",
           "echo x > /etc/from-exec 2>/dev/null; echo etc=$?; "
           "cp /bin/busybox /workspace/bb && /workspace/bb true 2>/dev/null; echo wsexec=$?; rm -f /workspace/bb; "
           "unshare -U true 2>/dev/null; echo userns=$?; grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")
    assert r.returncode == 0, r
    out = r.stdout.decode()
    obs = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert obs["etc"] != "0" and obs["wsexec"] != "0" and obs["userns"] != "0", out
    assert "Seccomp:\t2" in out and "NoNewPrivs:\t1" in out, out


def test_exec_stdin_relayed_whole(vm):
    data = os.urandom(3 << 20)  # more than every buffer on the way (VM_EXEC_BUF_HIGH 1 MiB)
    r = ex(vm, vm.id, "/bin/sh", "-c", "cat; echo done >&2", input=data)
    assert r.returncode == 0, r.stderr
    assert r.stdout == data and r.stderr == b"done\n", (len(r.stdout), r.stderr)


def test_exec_signal_forwarded(vm):
    p = subprocess.Popen([vm.bin, "--root", vm.root, "exec", vm.id, "/bin/sh", "-c",
                          "trap 'echo got-usr1; exit 3' USR1; echo ready; while :; do sleep 0.1; done"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=HANG)
    assert p.returncode == 3 and out == "got-usr1\n", (p.returncode, out, err)


def test_exec_failure_is_the_guests_error(vm):
    r = ex(vm, vm.id, "/no/such/program")
    assert r.returncode == 255, r
    err = r.stderr.decode()
    assert "/no/such/program" in err and "exec in the guest failed" not in err, err


def test_exec_not_built_refused(vm):
    t = ex(vm, "-t", vm.id, "/bin/true")
    assert t.returncode != 0 and b"terminal" in t.stderr, t
    f = ex(vm, "--preserve-fds", "1", vm.id, "/bin/true")
    assert f.returncode != 0 and b"--preserve-fds" in f.stderr, f


def _ticks(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def test_exec_detach_relay_is_the_process(vm):
    pidfile = os.path.join(vm.env["work"], "exec-detach.pid")
    argv = [vm.bin, "--root", vm.root, "exec", "--detach", "--pid-file", pidfile, vm.id, "/bin/sh", "-c",
            "sleep 3; echo detached > /workspace/detached; exit 5"]
    out = os.path.join(vm.env["work"], "exec-detach.out")
    p = subprocess.Popen([sys.executable, "-c", DSHIM, pidfile, out, *argv], stdout=subprocess.PIPE, text=True)
    first = json.loads(p.stdout.readline())
    assert first["runtime"] == 0, first
    pid = json.loads(p.stdout.readline())["pid"]
    # the relay stands for the process on the host: running (not a zombie) while the process runs
    with open(f"/proc/{pid}/stat") as f:
        alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"
    status = json.loads(p.stdout.readline())["status"]
    assert alive and status == 5, (alive, status, first)
    p.wait(timeout=HANG)
    with open(os.path.join(vm.ws, "detached")) as f:
        assert f.read() == "detached\n"


def test_exec_caller_killed_kills_the_process(vm):
    tick = os.path.join(vm.ws, "tick")
    p = subprocess.Popen([vm.bin, "--root", vm.root, "exec", vm.id, "/bin/sh", "-c",
                          "echo go; while :; do date +%s%N > /workspace/tick; sleep 0.2; done"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "go\n"
    vm.wait_for(lambda: _ticks(tick), "the first tick")
    p.kill()  # SIGKILL: nothing can be forwarded; the connection closes
    p.wait(timeout=HANG)
    time.sleep(2)
    before = _ticks(tick)
    time.sleep(2)
    assert _ticks(tick) == before, "the exec'd process outlived its caller"


def test_exec_parallel_sessions_and_nothing_left(vm):
    procs = [subprocess.Popen([vm.bin, "--root", vm.root, "exec", vm.id, "/bin/sh", "-c",
                               f"i=0; while [ $i -lt 200 ]; do echo s{n}-$i; i=$((i+1)); done; exit {n}"],
                              stdout=subprocess.PIPE, text=True) for n in range(6)]
    for n, p in enumerate(procs):
        out, _ = p.communicate(timeout=HANG)
        assert p.returncode == n and out.split() == [f"s{n}-{i}" for i in range(200)], (n, p.returncode)
    assert vm.rt("kill", vm.id, "KILL").returncode == 0
    vm.status()
    assert vm.rt("delete", vm.id).returncode == 0
    vm.assert_nothing_left()
