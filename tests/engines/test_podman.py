"""Podman (Debian's 4.3, through conmon) driving agentsbx, with runc as the control.

A private CONTAINERS_CONF / CONTAINERS_STORAGE_CONF: own graphroot, runroot, tmp_dir, file
locks, cgroupfs, file events, the ulimits this machine allows without CAP_SYS_RESOURCE, and
both runtimes in [engine.runtimes] (agentsbx is listed in runtime_supports_json: it writes
--log-format json). conmon calls the runtime without --root, so the state dirs checked are the
runtimes' defaults (/run/agentsbx, /run/runc).
"""

import json
import os
import tempfile

import pytest

from conftest import HANG_GUARD, IMAGE, Leaks, _need, rt_root_dirs, sh, wait_for, write_podman_conf

pytestmark = pytest.mark.podman


class Podman:
    def __init__(self, d, runtime_paths):
        self.dir = d
        graph, run = os.path.join(d, "graph"), os.path.join(d, "run")
        tmp = os.path.join(d, "tmp")
        for x in (graph, run, tmp, os.path.join(d, "net")):
            os.makedirs(x, exist_ok=True)
        conf, storage = write_podman_conf(d, runtime_paths, graph, run, tmp)
        self.env = dict(os.environ, CONTAINERS_CONF=conf, CONTAINERS_STORAGE_CONF=storage,
                        XDG_RUNTIME_DIR=run, TMPDIR=tmp)

    def cli(self, *args, check=True, timeout=HANG_GUARD, **kw):
        return sh(["podman", *map(str, args)], check=check, timeout=timeout, env=self.env, **kw)


@pytest.fixture(scope="module")
def podman(eng_dir, runtime_paths, rootfs_tar):
    _need("podman", "podman")
    d = tempfile.mkdtemp(prefix="pm-", dir=eng_dir)
    pm = Podman(d, runtime_paths)
    try:
        pm.cli("import", rootfs_tar, IMAGE)
        yield pm
    finally:
        pm.cli("rm", "-af", "-t", "0", check=False)
        pm.cli("system", "reset", "-f", check=False)


@pytest.fixture
def pm(podman, engine_rt):
    # the storage driver's own private bind of graph/overlay appears at first use and stays
    leaks = Leaks([podman.dir], ignore_mounts=[os.path.join(podman.dir, "graph", "overlay")])
    rt = {"agentsbx": "agentsbx", "runc": "runcref"}[engine_rt]

    def run(*args, check=True, input=None):
        r = podman.cli("run", "--runtime", rt, "--network", "none", "--cidfile",
                       cidfile := os.path.join(podman.dir, f"cid-{os.urandom(4).hex()}"),
                       *args, check=False, input=input,
                       stdin=None if input is not None else __import__("subprocess").DEVNULL)
        if os.path.exists(cidfile):
            with open(cidfile) as f:
                r.cid = f.read().strip()
            os.unlink(cidfile)
            leaks.track(r.cid, rt_root_dirs(engine_rt))
        if check and r.returncode != 0:
            raise AssertionError(f"podman run {args} -> rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    yield podman, leaks, run
    for cid in leaks.ids:
        podman.cli("rm", "-f", "-t", "0", cid, check=False)
    leaks.check()


def test_run_rm_exit_code_stdin(pm):
    _, _, run = pm
    r = run("--rm", IMAGE, "sh", "-c", "echo hi-$(cat /proc/1/comm); exit 42", check=False)
    assert r.returncode == 42 and "hi-sh" in r.stdout, r
    r = run("--rm", "-i", IMAGE, "tr", "a-z", "A-Z", input="piped\n")
    assert r.stdout == "PIPED\n"


def test_exec_stop_rm(pm, engine_rt):
    podman, _, run = pm
    cid = run("-d", IMAGE, "sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.1; done").cid
    # the runtime asked for is the one conmon ran: its state dir exists while the container runs
    assert os.path.isdir(os.path.join(rt_root_dirs(engine_rt), cid))
    r = podman.cli("exec", cid, "sh", "-c", "echo exec-$(cat /proc/1/comm); exit 3", check=False)
    assert r.returncode == 3 and "exec-sh" in r.stdout, r
    podman.cli("stop", "-t", "30", cid)
    st = json.loads(podman.cli("inspect", cid).stdout)[0]["State"]
    assert st["ExitCode"] == 7 and not st["Running"], st
    cid2 = run("-d", IMAGE, "sleep", "infinity").cid
    podman.cli("stop", "-t", "1", cid2)  # pid 1 ignores SIGTERM: SIGKILL after 1 s
    st = json.loads(podman.cli("inspect", cid2).stdout)[0]["State"]
    assert st["ExitCode"] == 137, st
    podman.cli("rm", cid, cid2)


def test_annotation_reaches_config(pm):
    podman, _, run = pm
    cid = run("-d", "--annotation", "io.agentsbx.profile=open", IMAGE, "sleep", "infinity").cid
    bundle = podman.cli("inspect", "-f", "{{.StaticDir}}", cid).stdout.strip()
    paths = [os.path.join(bundle, "config.json")]
    paths.append(os.path.join(podman.dir, "graph", "overlay-containers", cid, "userdata",
                              "config.json"))
    cfg = None
    for p in paths:
        if os.path.exists(p):
            with open(p) as f:
                cfg = json.load(f)
            break
    assert cfg is not None, f"no config.json in {paths}"
    assert cfg["annotations"].get("io.agentsbx.profile") == "open"
    podman.cli("rm", "-f", "-t", "0", cid)
