"""containerd through `ctr run --runtime io.containerd.runc.v2 --runc-binary PATH --runc-root
DIR`: the shim's BinaryName is set to the runtime, exactly as a Kubernetes RuntimeClass handler
does. runc is the control. ctr's default spec has no seccomp and sets noNewPrivileges."""

import os

import pytest

from conftest import IMAGE_FULL, Leaks, wait_for

pytestmark = pytest.mark.containerd


@pytest.fixture
def ctr(containerd, engine_rt):
    leaks = Leaks([containerd.dir])
    path = containerd.runtime_paths[engine_rt]
    root = containerd.rt_roots[engine_rt]
    n = [0]

    def run(*args, cmd=("true",), check=True, **kw):
        n[0] += 1
        cid = f"ctr-{engine_rt}-{os.getpid()}-{n[0]}-{os.urandom(2).hex()}"
        leaks.track(cid, os.path.join(root, containerd.ns))  # the shim adds the namespace
        r = containerd.ctr("run", "--runtime", "io.containerd.runc.v2", "--runc-binary", path,
                           "--runc-root", root, *args, IMAGE_FULL, cid, *cmd, check=check, **kw)
        r.cid = cid
        return r

    yield containerd, leaks, run
    for cid in leaks.ids:
        containerd.ctr("task", "kill", "-s", "SIGKILL", cid, check=False)
        containerd.ctr("task", "delete", "-f", cid, check=False)
        containerd.ctr("container", "delete", cid, check=False)
    leaks.check()


def test_run_rm_exit_code(ctr):
    _, _, run = ctr
    r = run("--rm", cmd=("sh", "-c", "echo ctr-$(cat /proc/1/comm); grep NoNewPrivs "
                                     "/proc/self/status; exit 23"), check=False)
    assert r.returncode == 23, r
    assert "ctr-sh" in r.stdout and "NoNewPrivs:\t1" in r.stdout


def test_detached_annotation_exec_kill(ctr, engine_rt):
    containerd, _, run = ctr
    r = run("-d", "--annotation", "io.agentsbx.profile=open",
            cmd=("sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.1; done"))
    cid = r.cid
    import json
    with open(os.path.join(containerd.bundle(containerd.ns, cid), "config.json")) as f:
        cfg = json.load(f)
    assert cfg["annotations"]["io.agentsbx.profile"] == "open"
    # the runtime asked for is the one that runs it: its state dir under --runc-root
    assert os.path.isdir(os.path.join(containerd.rt_roots[engine_rt], containerd.ns, cid))
    r = containerd.ctr("task", "exec", "--exec-id", "x1", cid, "sh", "-c",
                       "echo exec-$(cat /proc/1/comm); exit 4", check=False)
    assert r.returncode == 4 and "exec-sh" in r.stdout, r
    containerd.ctr("task", "kill", "-s", "SIGTERM", cid)

    def stopped():
        out = containerd.ctr("task", "ls").stdout
        return any(line.split()[0] == cid and "STOPPED" in line for line in out.splitlines()[1:])
    wait_for(stopped, "the task to stop on SIGTERM")
    r = containerd.ctr("task", "delete", cid)
    assert "7" in r.stdout or r.returncode == 0
    containerd.ctr("container", "delete", cid)


def test_run_tty(ctr, tty_run, engine_rt):
    containerd, leaks, _ = ctr
    cid = f"ctrt-{engine_rt}-{os.getpid()}-{os.urandom(2).hex()}"
    leaks.track(cid, os.path.join(containerd.rt_roots[engine_rt], containerd.ns))
    rc, out = tty_run(["/usr/bin/ctr", "--address", containerd.sock, "--namespace",
                       containerd.ns, "run", "--rm", "-t", "--runtime", "io.containerd.runc.v2",
                       "--runc-binary", containerd.runtime_paths[engine_rt], "--runc-root",
                       containerd.rt_roots[engine_rt], IMAGE_FULL, cid, "sh", "-c",
                       "tty; exit 6"])
    assert rc == 6 and "/dev/pts/0" in out, out
