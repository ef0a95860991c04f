"""Rootless Podman (Debian's 4.3, through conmon) run by an ordinary user with `--runtime
agentsbx`, runc as the control (issue 17, "Rootless OCI"; docs/engines.md "Rootless Podman").

The suite creates a throw-away user (useradd; its /etc/subuid and /etc/subgid range is
useradd's own or one added here, removed after), gives it a private XDG_RUNTIME_DIR,
CONTAINERS_CONF and CONTAINERS_STORAGE_CONF (native overlay, file locks, cgroupfs, file events),
and imports a busybox rootfs as the image (no registry). Podman runs the OCI runtime inside its
own user namespace (newuidmap/newgidmap from Debian's uidmap): euid 0 there is not the host's
root, no cgroup is writable, mknod is refused; conmon passes no --root, so the runtime's state
is under the user's XDG_RUNTIME_DIR (agentsbx/ID, runc/ID), checked from the host.

Judged from the host (the state dirs, the user's processes, the audit log the monitor wrote in
the user's home) and from what the container prints (its uid map, seccomp mode, a write to /etc).
On main every agentsbx case fails: `open state root /run/agentsbx: Permission denied`."""

import io
import json
import os
import pwd
import shutil
import subprocess
import tarfile
import tempfile
import time
import uuid

import pytest

from conftest import HANG_GUARD, _need, processes_naming, write_podman_conf

pytestmark = pytest.mark.podman

IMAGE = "localhost/asbx-busybox:rootless"
SUB_COUNT = 65536


def _busybox_tar(path):
    """A busybox rootfs as a tar (root-owned entries, applet symlinks), for `podman import`."""
    bb = shutil.which("busybox") or "/bin/busybox"
    _need(bb, "busybox-static")
    applets = subprocess.run([bb, "--list"], capture_output=True, text=True, check=True).stdout.split()
    with tarfile.open(path, "w") as t:
        def add_dir(name, mode=0o755):
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode = tarfile.DIRTYPE, mode
            t.addfile(ti)
        for d in ("bin", "etc", "proc", "sys", "dev", "run", "root"):
            add_dir(d)
        add_dir("tmp", 0o1777)
        t.add(bb, "bin/busybox", filter=lambda ti: (setattr(ti, "uid", 0), setattr(ti, "gid", 0), ti)[2])
        for a in applets:
            if a != "busybox":
                ti = tarfile.TarInfo(f"bin/{a}")
                ti.type, ti.linkname = tarfile.SYMTYPE, "busybox"
                t.addfile(ti)
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
            data = text.encode()
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))


def _has_sub_entry(path, name):
    try:
        with open(path) as f:
            return any(ln.split(":", 1)[0] == name for ln in f)
    except FileNotFoundError:
        return False


def _user_pids(uid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.stat(f"/proc/{p}").st_uid == uid:
                    out.append(int(p))
            except OSError:
                pass
    return out


class UserPodman:
    def __init__(self, pw, d, runtime_paths):
        self.pw, self.dir = pw, d
        self.xdg = os.path.join("/tmp", f"asbx-pmrl-{pw.pw_uid}")
        os.mkdir(self.xdg, 0o700)
        os.chown(self.xdg, pw.pw_uid, pw.pw_gid)
        conf, storage = write_podman_conf(d, runtime_paths, f"{d}/graph", f"{self.xdg}/containers", f"{d}/tmp",
                                          static=False)
        self.env = {"HOME": pw.pw_dir, "USER": pw.pw_name, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
                    "XDG_RUNTIME_DIR": self.xdg, "CONTAINERS_CONF": conf, "CONTAINERS_STORAGE_CONF": storage}

    def cli(self, *args, check=True, timeout=HANG_GUARD):
        argv = ["setpriv", f"--reuid={self.pw.pw_uid}", f"--regid={self.pw.pw_gid}", "--init-groups",
                "env", "-i"] + [f"{k}={v}" for k, v in self.env.items()] + ["podman"] + [str(a) for a in args]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.pw.pw_dir,
                           stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"podman {args} -> rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r


@pytest.fixture(scope="module")
def upm(eng_dir, runtime_paths):
    if os.geteuid() != 0:
        pytest.skip("creating the test user needs root (useradd)")
    _need("podman", "podman")
    _need("newuidmap", "uidmap")
    _need("setpriv", "util-linux")
    name = f"asbxpm{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
    pw = pwd.getpwnam(name)
    added = []
    # useradd gives the user a range when /etc/subuid exists; otherwise one of ours
    start = 3000000 + (pw.pw_uid % 1000) * SUB_COUNT
    for f in ("/etc/subuid", "/etc/subgid"):
        if not _has_sub_entry(f, name):
            line = f"{name}:{start}:{SUB_COUNT}\n"
            with open(f, "a") as fh:
                fh.write(line)
            added.append((f, line))
    d = os.path.join(pw.pw_dir, "podman")
    for x in ("", "net", "tmp", "graph"):
        os.makedirs(os.path.join(d, x), exist_ok=True)
    tar = os.path.join(d, "busybox.tar")
    _busybox_tar(tar)
    subprocess.run(["chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", d], check=True)
    pm = None
    try:
        pm = UserPodman(pw, d, runtime_paths)
        pm.cli("import", "--change", "ENV PATH=/bin", tar, IMAGE)
        yield pm
    finally:
        if pm:
            pm.cli("rm", "-af", "-t", "0", check=False)
            pm.cli("system", "reset", "-f", check=False)
        # what is left of the user's own (Podman's pause process): ours to stop, by pid
        for pid in _user_pids(pw.pw_uid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
        subprocess.run(["userdel", "-r", "-f", name], check=False, capture_output=True)
        for f, line in added:
            with open(f) as fh:
                lines = fh.readlines()
            with open(f, "w") as fh:
                fh.writelines(ln for ln in lines if ln != line)
        shutil.rmtree(os.path.join("/tmp", f"asbx-pmrl-{pw.pw_uid}"), ignore_errors=True)


@pytest.fixture
def upr(upm, engine_rt):
    """(podman, runtime name, run(*args) -> CompletedProcess with .cid); leak check after."""
    rt = {"agentsbx": "agentsbx", "runc": "runcref"}[engine_rt]
    state = os.path.join(upm.xdg, {"agentsbx": "agentsbx", "runc": "runc"}[engine_rt])
    cids = []

    def run(*args, check=True):
        cidfile = os.path.join(upm.xdg, f"cid-{uuid.uuid4().hex[:8]}")
        r = upm.cli("run", "--runtime", rt, "--network", "none", "--cidfile", cidfile, *args, check=False)
        r.cid = None
        if os.path.exists(cidfile):
            with open(cidfile) as f:
                r.cid = f.read().strip()
            os.unlink(cidfile)
            cids.append(r.cid)
        if check and r.returncode != 0:
            raise AssertionError(f"podman run {args} -> rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    yield upm, state, run
    for cid in cids:
        upm.cli("rm", "-f", "-t", "0", cid, check=False)
    problems = []
    for cid in cids:
        if os.path.exists(os.path.join(state, cid)):
            problems.append(f"state dir {state}/{cid} left")
        # conmon and `podman container cleanup` exit just after `rm -f` returns
        deadline = time.monotonic() + 30
        while processes_naming(cid) and time.monotonic() < deadline:
            time.sleep(0.2)
        problems += processes_naming(cid)
    assert not problems, "leaked after the test:\n  " + "\n  ".join(problems)


def test_rootless_run_rm(upr):
    upm, _, run = upr
    r = run("--rm", IMAGE, "sh", "-c",
            "echo hi-$(id -u); cat /proc/self/uid_map; echo x > /etc/f && echo wrote-etc; exit 42", check=False)
    assert r.returncode == 42, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert lines[0] == "hi-0", r.stdout
    # Podman's user namespace: container root = the user, then its subordinate range
    assert lines[1].split() == ["0", str(upm.pw.pw_uid), "1"], r.stdout
    assert lines[2].split()[0] == "1" and lines[2].split()[2] == str(SUB_COUNT), r.stdout
    assert lines[3] == "wrote-etc", r.stdout  # no annotation: no policy, the image's /etc is writable


def test_rootless_detached_exec_stop_rm(upr):
    upm, state, run = upr
    cid = run("-d", IMAGE, "sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.1; done").cid
    # conmon passed no --root: the runtime asked for kept its state under the user's XDG_RUNTIME_DIR
    sd = os.path.join(state, cid)
    assert os.path.isdir(sd) and os.stat(sd).st_uid == upm.pw.pw_uid
    r = upm.cli("exec", cid, "sh", "-c", "echo exec-$(cat /proc/1/comm); exit 3", check=False)
    assert r.returncode == 3 and "exec-sh" in r.stdout, r
    upm.cli("stop", "-t", "30", cid)
    st = json.loads(upm.cli("inspect", cid).stdout)[0]["State"]
    assert st["ExitCode"] == 7 and not st["Running"], st
    cid2 = run("-d", IMAGE, "sleep", "1000").cid
    upm.cli("stop", "-t", "1", cid2)  # pid 1 ignores SIGTERM: SIGKILL after 1 s
    st = json.loads(upm.cli("inspect", cid2).stdout)[0]["State"]
    assert st["ExitCode"] == 137, st
    upm.cli("rm", cid, cid2)
    assert not os.path.exists(sd) and not os.path.exists(os.path.join(state, cid2))
    assert not processes_naming(cid) and not processes_naming(cid2)


def podman_annotation(key, value):
    """podman parses --annotation as one CSV field: quote it, inner quotes doubled"""
    return '"' + f"{key}={value}".replace('"', '""') + '"'


POLICY = {"version": 1, "extends": "agent", "network": {"mode": "none"}, "degrade": ["cgroup"]}
SCRIPT = "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status; echo x > /etc/f && echo WROTE || echo refused"


@pytest.mark.parametrize("how", ["profile", "policy"])
def test_rootless_annotation_policy(upr, engine_rt, how):
    if engine_rt == "runc":
        pytest.skip("runc does not read io.agentsbx.* annotations (the control for this test is "
                    "test_rootless_run_rm's writable /etc)")
    upm, _, run = upr
    ann = ("io.agentsbx.profile=rootless" if how == "profile"
           else podman_annotation("io.agentsbx.policy", json.dumps(POLICY)))
    r = run("--rm", "--annotation", ann, IMAGE, "sh", "-c", SCRIPT)
    out = r.stdout.split("\n")
    assert "Seccomp:\t2" in out and "NoNewPrivs:\t1" in out, r.stdout
    assert "refused" in out and "WROTE" not in out, r.stdout
    # the monitor's audit log, in the user's own state dir, names the container
    audit = os.path.join(upm.pw.pw_dir, ".local", "state", "agentsbx", f"{r.cid}.jsonl")
    assert os.path.exists(audit), os.listdir(os.path.dirname(audit))
    assert os.stat(audit).st_uid == upm.pw.pw_uid
    with open(audit) as f:
        recs = [json.loads(ln) for ln in f if ln.strip()]
    pol = [x for x in recs if x.get("event") == "policy" and x.get("container") == r.cid]
    assert pol, recs[:3]
    want = "io.agentsbx.profile" if how == "profile" else "io.agentsbx.policy"
    assert any(want in s for s in pol[0]["sources"]), pol[0]


def test_rootless_uidmap_nested_userns(upr):
    """--uidmap: the bundle asks for a user namespace of its own inside Podman's; the runtime (euid
    0 there) writes its maps, relative to Podman's namespace. Judged from the host: the sleeping
    init's host uid is the user's first subordinate id (container 0 = Podman's 1)."""
    upm, _, run = upr
    cid = run("-d", "--uidmap", "0:1:1000", "--gidmap", "0:1:1000", IMAGE, "sleep", "1000").cid
    pid = json.loads(upm.cli("inspect", cid).stdout)[0]["State"]["Pid"]
    with open("/etc/subuid") as f:
        start = [ln.strip().split(":")[1] for ln in f if ln.split(":", 1)[0] == upm.pw.pw_name][0]
    with open(f"/proc/{pid}/uid_map") as f:  # as the host sees it
        assert [ln.split() for ln in f] == [["0", start, "1000"]]
    with open(f"/proc/{pid}/status") as f:
        uid = [ln.split()[1] for ln in f if ln.startswith("Uid:")][0]
    assert uid == start
    upm.cli("rm", "-f", "-t", "0", cid)
