"""Docker (Debian's docker.io 20.10) driving agentsbx through containerd's runc v2 shim, with
runc as the control: each scenario runs with `--runtime=agentsbx` and `--runtime=runcref`
against one private dockerd.

Docker calls the runtime as `PATH --root <exec-root>/runtime-runc/<ns> --log <bundle>/log.json
--log-format json create|start|exec|kill|delete|update|pause|resume|ps|events ...`, with a
--console-socket for -t, and injects a prestart hook (libnetwork-setkey) even with --network
none. Assertions come from inside the container or from the kernel (cgroup files), not from
what Docker reports about itself.
"""

import glob
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import (DOCKER_CLI, HANG_GUARD, IMAGE, Leaks, _need, sh, start_daemon, stop_daemon,
                      wait_for)

pytestmark = pytest.mark.docker
RT_NAMES = {"agentsbx": "agentsbx", "runc": "runcref"}


class Docker:
    def __init__(self, d, runtime_paths):
        self.dir = d
        self.sock = os.path.join(d, "docker.sock")
        self.exec_root = os.path.join(d, "exec")
        self.data_root = os.path.join(d, "data")
        self.ns = f"asbx-{os.getpid()}"
        self.runtime_paths = runtime_paths
        self.env = dict(os.environ, DOCKER_HOST="unix://" + self.sock)
        self.env.pop("DOCKER_CONTEXT", None)
        self.env["DOCKER_CONFIG"] = os.path.join(d, "client")
        self.audit_dir = os.path.join(d, "audit")
        self.proc = None
        self.daemon_env = None  # dockerd's environment (None: ours); containerd and the shim inherit it

    def config(self, live_restore=False):
        return {
            "runtimes": {
                "agentsbx": {"path": self.runtime_paths["agentsbx"]},
                "runcref": {"path": self.runtime_paths["runc"]},
                # the runtime-class wiring of contrib/engines/docker-daemon.json: global flags
                # through runtimeArgs (Docker writes a wrapper script around the path)
                "agentsbx-open": {"path": self.runtime_paths["agentsbx"],
                                  "runtimeArgs": ["--profile=open",
                                                  "--audit-dir=" + self.audit_dir]},
            },
            "data-root": self.data_root, "exec-root": self.exec_root,
            "pidfile": os.path.join(self.dir, "docker.pid"),
            "hosts": ["unix://" + self.sock],
            "containerd-namespace": self.ns, "containerd-plugins-namespace": self.ns + "-p",
            "exec-opts": ["native.cgroupdriver=cgroupfs"],
            "iptables": False, "ip6tables": False, "ip-forward": False, "ip-masq": False,
            "bridge": "none", "live-restore": live_restore, "shutdown-timeout": 2, "storage-driver": "overlay2",
        }

    def start(self, live_restore=False):
        self.live_restore = live_restore
        cfg = os.path.join(self.dir, "daemon.json")
        with open(cfg, "w") as f:
            json.dump(self.config(live_restore), f, indent=1)
        self.proc = start_daemon(["dockerd", "--config-file", cfg],
                                 os.path.join(self.dir, "dockerd.log"), env=self.daemon_env)

        def up():
            assert self.proc.poll() is None, "dockerd exited:\n" + self.log()[-3000:]
            return self.cli("version", check=False).returncode == 0
        wait_for(up, "dockerd to answer")

    def stop(self):
        if self.proc:
            stop_daemon(self.proc)
            self.proc = None

    def log(self):
        with open(os.path.join(self.dir, "dockerd.log"), errors="replace") as f:
            return f.read()

    def cli(self, *args, check=True, timeout=HANG_GUARD, **kw):
        return sh([DOCKER_CLI, *map(str, args)], check=check, timeout=timeout, env=self.env, **kw)

    def state_roots(self):
        return glob.glob(os.path.join(self.exec_root, "runtime-*", self.ns)) + \
            [os.path.join(self.exec_root, "runtime-runc", self.ns)]


def running_docker(cls, prefix, eng_dir, runtime_paths, rootfs_tar):
    """A private dockerd of class cls (Docker or a subclass with its own daemon.json) in a fresh
    directory under eng_dir, the test image imported; every container removed and the daemon
    stopped after. A generator for the module fixtures: `yield from running_docker(...)`."""
    _need("dockerd", "docker.io")
    _need(DOCKER_CLI, "docker.io")
    d = tempfile.mkdtemp(prefix=prefix, dir=eng_dir)
    dk = cls(d, runtime_paths)
    dk.start()
    try:
        dk.cli("import", rootfs_tar, IMAGE)
        yield dk
    finally:
        if dk.proc:
            ids = dk.cli("ps", "-aq", check=False).stdout.split()
            if ids:
                dk.cli("rm", "-f", *ids, check=False)
        dk.stop()


@pytest.fixture(scope="module")
def docker(eng_dir, runtime_paths, rootfs_tar):
    yield from running_docker(Docker, "dk-", eng_dir, runtime_paths, rootfs_tar)


@pytest.fixture
def dk(docker, engine_rt):
    """(docker, leaks, run) for one test: `run(*args)` = docker run --runtime=<rt> --network none
    with a --cidfile, the id registered for the leak check done at teardown."""
    leaks = Leaks([docker.dir])
    rt = RT_NAMES[engine_rt]
    n = [0]

    def run(*args, check=True, input=None, detach=False, timeout=HANG_GUARD):
        n[0] += 1
        cidfile = os.path.join(docker.dir, f"cid.{os.getpid()}.{n[0]}.{engine_rt}")
        if os.path.exists(cidfile):
            os.unlink(cidfile)
        argv = ["run", f"--runtime={rt}", "--network", "none", "--cidfile", cidfile]
        argv += (["-d"] if detach else []) + list(args)
        r = docker.cli(*argv, check=False, input=input, timeout=timeout,
                       stdin=None if input is not None else subprocess.DEVNULL)
        if os.path.exists(cidfile):
            with open(cidfile) as f:
                cid = f.read().strip()
            os.unlink(cidfile)
            leaks.track(cid, *docker.state_roots())
            r.cid = cid
        if check and r.returncode != 0:
            raise AssertionError(f"docker {argv} -> rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    yield docker, leaks, run
    for cid in leaks.ids:
        docker.cli("rm", "-f", cid, check=False)
    leaks.check()


def inspect(docker, cid, fmt):
    return docker.cli("inspect", "-f", fmt, cid).stdout.strip()


def cgroup_file(docker, cid, controller, name):
    pid = inspect(docker, cid, "{{.State.Pid}}")
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if controller in ctrls.split(","):
                mnt = f"/sys/fs/cgroup/{ctrls}"
                if not os.path.isdir(mnt):
                    mnt = f"/sys/fs/cgroup/{controller}"
                with open(os.path.join(mnt, path.lstrip("/"), name)) as g:
                    return g.read().strip()
    raise AssertionError(f"no {controller} cgroup for pid {pid}")


# ---------------------------------------------------------------------------------------------

def test_run_rm_exit_code(dk):
    docker, _, run = dk
    r = run("--rm", IMAGE, "sh", "-c", "echo hello-from-$(cat /proc/1/comm); exit 42", check=False)
    assert r.returncode == 42, r
    assert "hello-from-sh" in r.stdout


def test_run_interactive_piped_stdin(dk):
    _, _, run = dk
    r = run("--rm", "-i", IMAGE, "sh", "-c", "tr a-z A-Z; echo done", input="piped text\n")
    assert r.stdout.splitlines() == ["PIPED TEXT", "done"]


def test_run_tty(dk, tty_run, engine_rt):
    docker, leaks, _ = dk
    cidfile = os.path.join(docker.dir, f"cid.tty.{engine_rt}.{os.getpid()}")
    rc, out = tty_run([DOCKER_CLI, "run", "--rm", "-t", f"--runtime={RT_NAMES[engine_rt]}",
                       "--network", "none", "--cidfile", cidfile, IMAGE, "sh", "-c",
                       "tty; test -t 0 && echo stdin-is-tty; exit 5"], env=docker.env)
    with open(cidfile) as f:
        leaks.track(f.read().strip(), *docker.state_roots())
    os.unlink(cidfile)
    assert rc == 5, out
    assert "/dev/pts/0" in out and "stdin-is-tty" in out


def test_detach_exec_plain_and_tty(dk, tty_run, engine_rt):
    docker, _, run = dk
    cid = run(IMAGE, "sleep", "infinity", detach=True).cid
    # the runtime asked for is the one the shim ran: its log (--log-format json) is in the bundle
    bundle = os.path.join(docker.exec_root, "containerd", "daemon", "io.containerd.runtime.v2.task",
                          docker.ns, cid)
    with open(os.path.join(bundle, "options.json")) as f:  # the shim's runc options
        assert docker.runtime_paths[engine_rt] in f.read()
    assert any(os.path.isdir(os.path.join(r, cid)) for r in docker.state_roots())
    r = docker.cli("exec", cid, "sh", "-c", "echo in-exec $(cat /proc/1/comm); exit 3", check=False)
    assert r.returncode == 3 and "in-exec sleep" in r.stdout, r
    r = docker.cli("exec", "-i", cid, "cat", input="via exec stdin\n", stdin=None)
    assert r.stdout == "via exec stdin\n"
    rc, out = tty_run([DOCKER_CLI, "exec", "-t", cid, "sh", "-c", "tty; exit 4"], env=docker.env)
    assert rc == 4 and "/dev/pts/" in out, out
    # the exec'd processes are gone, the init still runs
    r = docker.cli("exec", cid, "ps", "-e", "-o", "comm=", check=False)
    procs = r.stdout.split() if r.returncode == 0 else None
    if procs is not None:
        assert procs.count("sleep") == 1 and "sh" not in procs, procs


def test_stop_sigterm_then_sigkill(dk):
    docker, _, run = dk
    trap = run(IMAGE, "sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.1; done",
               detach=True).cid
    stubborn = run(IMAGE, "sleep", "infinity", detach=True).cid  # pid 1 ignores SIGTERM
    docker.cli("stop", "-t", "30", trap)
    assert inspect(docker, trap, "{{.State.ExitCode}}") == "7"
    docker.cli("stop", "-t", "1", stubborn)
    assert inspect(docker, stubborn, "{{.State.ExitCode}}") == "137"
    assert inspect(docker, stubborn, "{{.State.Running}}") == "false"


def test_kill(dk):
    docker, _, run = dk
    cid = run(IMAGE, "sh", "-c", "trap 'exit 9' USR1; while :; do sleep 0.1; done",
              detach=True).cid
    docker.cli("kill", "-s", "USR1", cid)
    wait_for(lambda: inspect(docker, cid, "{{.State.Running}}") == "false", "exit on USR1")
    assert inspect(docker, cid, "{{.State.ExitCode}}") == "9"
    cid2 = run(IMAGE, "sleep", "infinity", detach=True).cid
    docker.cli("kill", cid2)
    wait_for(lambda: inspect(docker, cid2, "{{.State.Running}}") == "false", "exit on KILL")
    assert inspect(docker, cid2, "{{.State.ExitCode}}") == "137"


def test_pause_unpause(dk):
    docker, _, run = dk
    cid = run(IMAGE, "sh", "-c", "while :; do date +%s%N > /tmp/tick; sleep 0.05; done",
              detach=True).cid
    docker.cli("pause", cid)
    assert cgroup_file(docker, cid, "freezer", "freezer.state") == "FROZEN"
    assert inspect(docker, cid, "{{.State.Paused}}") == "true"
    r = docker.cli("exec", cid, "true", check=False)
    assert r.returncode != 0  # exec into a paused container is refused
    docker.cli("unpause", cid)
    assert cgroup_file(docker, cid, "freezer", "freezer.state") == "THAWED"
    t1 = docker.cli("exec", cid, "cat", "/tmp/tick").stdout
    wait_for(lambda: docker.cli("exec", cid, "cat", "/tmp/tick").stdout != t1, "ticking again")


def test_update_memory_top_stats(dk):
    docker, _, run = dk
    name = f"upd-{os.getpid()}-{len(run.__name__)}-{os.urandom(3).hex()}"
    cid = run("--name", name, IMAGE, "sleep", "infinity", detach=True).cid
    docker.cli("update", "--memory", "96m", "--memory-swap", "192m", cid)
    assert cgroup_file(docker, cid, "memory", "memory.limit_in_bytes") == str(96 << 20)
    r = docker.cli("exec", cid, "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
    assert r.stdout.strip() == str(96 << 20)
    top = docker.cli("top", cid).stdout
    assert "sleep infinity" in top, top
    stats = docker.cli("stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}", cid).stdout
    assert name in stats and "96MiB" in stats, stats


def test_read_only_cap_drop_user(dk):
    _, _, run = dk
    r = run("--rm", "--read-only", IMAGE, "sh", "-c", "touch /x 2>&1; echo rc=$?", check=False)
    assert "Read-only file system" in r.stdout and "rc=1" in r.stdout, r
    r = run("--rm", "--cap-drop", "ALL", IMAGE, "sh", "-c",
            "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status")
    for line in r.stdout.splitlines():
        assert line.split()[1] == "0000000000000000", r.stdout
    r = run("--rm", "--user", "1000:1001", IMAGE, "sh", "-c", "id -u; id -g")
    assert r.stdout.split() == ["1000", "1001"]


def test_seccomp_default_unconfined_and_file(dk, engine_rt):
    docker, _, run = dk
    r = run("--rm", IMAGE, "grep", "^Seccomp:", "/proc/self/status")
    assert r.stdout.split()[1] == "2"  # Docker's default profile is installed
    r = run("--rm", "--security-opt", "seccomp=unconfined", IMAGE, "grep", "^Seccomp:",
            "/proc/self/status")
    assert r.stdout.split()[1] == "0"
    prof = os.path.join(docker.dir, f"seccomp-{engine_rt}.json")
    with open(prof, "w") as f:
        json.dump({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
                   "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                                 "errnoRet": 13}]}, f)
    r = run("--rm", "--security-opt", f"seccomp={prof}", IMAGE, "sh", "-c",
            "mkdir /tmp/d 2>&1; echo rc=$?; touch /tmp/f && echo touch-ok", check=False)
    assert "Permission denied" in r.stdout and "rc=1" in r.stdout and "touch-ok" in r.stdout, r


def test_resource_limits(dk):
    docker, _, run = dk
    cid = run("--memory", "48m", "--pids-limit", "57", "--cpus", "0.5", IMAGE,
              "sleep", "infinity", detach=True).cid
    assert cgroup_file(docker, cid, "memory", "memory.limit_in_bytes") == str(48 << 20)
    assert cgroup_file(docker, cid, "pids", "pids.max") == "57"
    assert cgroup_file(docker, cid, "cpu", "cpu.cfs_quota_us") == "50000"
    assert cgroup_file(docker, cid, "cpu", "cpu.cfs_period_us") == "100000"
    r = docker.cli("exec", cid, "cat", "/sys/fs/cgroup/pids/pids.max")
    assert r.stdout.strip() == "57"


def test_tmpfs_bind_volume_network_none(dk, engine_rt):
    docker, _, run = dk
    vol = tempfile.mkdtemp(prefix=f"vol-{engine_rt}-", dir=docker.dir)
    with open(os.path.join(vol, "in.txt"), "w") as f:
        f.write("from-host\n")
    r = run("--rm", "--tmpfs", "/scratch:size=4m", "-v", f"{vol}:/vol", IMAGE, "sh", "-c",
            "grep ' /scratch ' /proc/mounts; cat /vol/in.txt; echo from-ctr > /vol/out.txt; "
            "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("tmpfs /scratch tmpfs") and "size=4096k" in lines[0], r.stdout
    assert "from-host" in lines
    assert lines[-1:] == ["lo"] and "eth0" not in lines  # --network none: loopback only
    with open(os.path.join(vol, "out.txt")) as f:
        assert f.read() == "from-ctr\n"
    shutil.rmtree(vol, ignore_errors=True)


@pytest.mark.parametrize("live_restore", [False, True], ids=["live-restore-off",
                                                             "live-restore-on"])
def test_daemon_restart(dk, live_restore):
    docker, _, run = dk
    if docker.live_restore != live_restore:
        docker.stop()
        docker.start(live_restore=live_restore)
    cid = run(IMAGE, "sleep", "infinity", detach=True).cid
    pid = inspect(docker, cid, "{{.State.Pid}}")
    docker.stop()
    try:
        alive = os.path.exists(f"/proc/{pid}")
        docker.start(live_restore=live_restore)
        if live_restore:
            assert alive, "live-restore: the container died with the daemon"
            assert inspect(docker, cid, "{{.State.Running}}") == "true"
            assert inspect(docker, cid, "{{.State.Pid}}") == pid
            r = docker.cli("exec", cid, "cat", "/proc/1/comm")
            assert r.stdout.strip() == "sleep"
            docker.cli("stop", "-t", "1", cid)
        else:
            assert not alive, "live-restore off: the container outlived the daemon"
            assert inspect(docker, cid, "{{.State.Running}}") == "false"
            docker.cli("start", cid)  # the stopped container starts again on the new daemon
            assert inspect(docker, cid, "{{.State.Running}}") == "true"
            docker.cli("rm", "-f", cid)
    finally:
        if docker.proc is None or docker.live_restore:
            docker.stop()
            docker.start()


def test_runtime_args_reach_agentsbx(docker):
    """agentsbx only (runc has no policy flags): a runtime declared with runtimeArgs gets them.
    The `open` profile audits every lifecycle event into --audit-dir, one file per container."""
    leaks = Leaks([docker.dir])
    cidfile = os.path.join(docker.dir, f"cid.args.{os.getpid()}")
    r = docker.cli("run", "--rm", "--runtime=agentsbx-open", "--network", "none", "--cidfile",
                   cidfile, IMAGE, "sh", "-c", "echo with-args", check=False)
    with open(cidfile) as f:
        cid = leaks.track(f.read().strip(), *docker.state_roots())
    os.unlink(cidfile)
    assert r.returncode == 0 and "with-args" in r.stdout, r
    logs = os.listdir(docker.audit_dir) if os.path.isdir(docker.audit_dir) else []
    assert any(cid in name for name in logs), logs
    leaks.check()
