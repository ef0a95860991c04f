"""The OCI lifecycle run by an ordinary user on a `spec --rootless` bundle (issue 17, "Rootless
OCI"; docs/security.md "When the caller is not root").

A throw-away user (test_rootless_sandbox's fixture: useradd, removed at the end) runs the
runtime with setpriv(1), no setuid helper of ours and no capability, on a busybox bundle in its
home whose config.json it wrote itself with `spec --rootless`. What is judged is what the host
sees: the init's and exec'd processes in /proc (their pid namespace, their host uid), the state
directory under the user's $XDG_RUNTIME_DIR, and for refusals that nothing ran and nothing was
left. Subordinate ranges (/etc/subuid entries the suite adds for the user and removes after) go
through Debian's newuidmap/newgidmap.

On main (before this work) every test here fails: ps and kill --all need a cgroup the user has
none of, pause says only "has no cgroup", ranges cannot be written to uid_map, and the refused
resources/devices are silently dropped or bound as another device."""

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from test_rootless_sandbox import binary, user  # noqa: F401 (fixtures)

HANG_GUARD = 120  # seconds, against hangs only
SUB_START = 1200000  # the test user's /etc/subuid and /etc/subgid range
SUB_COUNT = 65536


@pytest.fixture(scope="module")
def xdg(user):
    """The user's XDG_RUNTIME_DIR (no login session here), 0700 and its own."""
    d = f"/tmp/asbx-rloci-xdg-{user.pw_uid}"
    shutil.rmtree(d, ignore_errors=True)
    os.mkdir(d, 0o700)
    os.chown(d, user.pw_uid, user.pw_gid)
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Res:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def __repr__(self):
        return f"rc={self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


class Rootless:
    """The runtime as the test user; every id it creates is force-deleted at teardown."""

    def __init__(self, user, binary, xdg):
        self.user, self.binary, self.xdg = user, binary, xdg
        self.ids = []

    def __call__(self, *args, cwd=None, prefix=()):
        """The runtime with args as the user; stdout/stderr through files (a created
        container's init keeps the runtime's stdio open, a pipe would never see EOF)."""
        e = {"HOME": self.user.pw_dir, "USER": self.user.pw_name, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
             "XDG_RUNTIME_DIR": self.xdg}
        argv = ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--init-groups",
                "env", "-i"] + [f"{k}={v}" for k, v in e.items()] + list(prefix) + [self.binary] + list(args)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 cwd=cwd or self.user.pw_dir)
            try:
                rc = p.wait(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise AssertionError(f"hang guard: {argv} still running after {HANG_GUARD}s")
            out.seek(0)
            err.seek(0)
            return Res(rc, out.read().decode(errors="replace"), err.read().decode(errors="replace"))

    def new_id(self):
        cid = f"rl-{uuid.uuid4().hex[:8]}"
        self.ids.append(cid)
        return cid

    def state_dir(self, cid):
        return os.path.join(self.xdg, "agentsbx", cid)

    def status(self, cid):
        r = self("state", cid)
        assert r.rc == 0, r
        return json.loads(r.out)["status"]


@pytest.fixture
def rl(user, binary, xdg):
    r = Rootless(user, binary, xdg)
    yield r
    for cid in r.ids:
        r("delete", "--force", cid)
    left = [cid for cid in r.ids if os.path.exists(r.state_dir(cid))]
    assert not left, f"state dirs left after delete --force: {left}"


@pytest.fixture
def bundle(user, rl, busybox_template):
    """A busybox bundle in the user's home, owned by the user, config.json from `spec --rootless`
    run as the user; yields (dir, config dict, save function)."""
    d = os.path.join(user.pw_dir, f"bundle-{uuid.uuid4().hex[:6]}")
    os.mkdir(d, 0o755)
    shutil.copytree(busybox_template, os.path.join(d, "rootfs"), symlinks=True)
    subprocess.run(["chown", "-R", "-h", f"{user.pw_uid}:{user.pw_gid}", d], check=True)
    r = rl("spec", "--rootless", cwd=d)
    assert r.rc == 0, r
    path = os.path.join(d, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = False

    def save():
        with open(path, "w") as f:
            json.dump(cfg, f)

    save()
    yield d, cfg, save
    shutil.rmtree(d, ignore_errors=True)


def host_status(pid):
    """{field: value} of /proc/PID/status, or None when the process is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except OSError:
        return None
    return None if st.get("State", "").startswith("Z") else st


def gone(pid, within=15):
    deadline = time.monotonic() + within
    while host_status(pid) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def pidns(pid):
    return os.readlink(f"/proc/{pid}/ns/pid")


def start_sleeper(rl, d, cfg, save):
    cfg["process"]["args"] = ["sleep", "600"]
    save()
    cid = rl.new_id()
    r = rl("create", "--bundle", d, cid)
    assert r.rc == 0, r
    assert rl.status(cid) == "created"
    r = rl("start", cid)
    assert r.rc == 0, r
    return cid, json.loads(rl("state", cid).out)["pid"]


def test_spec_rootless_lifecycle(user, rl, bundle):
    d, cfg, save = bundle
    # the config the user's own `spec --rootless` wrote maps exactly the user's ids
    assert {"type": "user"} in cfg["linux"]["namespaces"]
    assert cfg["linux"]["uidMappings"] == [{"containerID": 0, "hostID": user.pw_uid, "size": 1}]
    cid, pid = start_sleeper(rl, d, cfg, save)
    assert rl.status(cid) == "running"
    st = host_status(pid)
    assert st is not None and st["Uid"].split()[0] == str(user.pw_uid), st  # container root = the user
    assert pidns(pid) != pidns(os.getpid())
    r = rl("exec", cid, "sh", "-c", "echo out-$(id -u)")
    assert (r.rc, r.out) == (0, "out-0\n"), r
    r = rl("list")
    assert r.rc == 0, r
    row = [ln.split() for ln in r.out.splitlines() if ln.startswith(cid)]
    assert row and row[0][1] == str(pid) and row[0][2] == "running" and row[0][-1] == user.pw_name, r
    # ps without a cgroup: the processes of the container's pid namespace, as the host sees them
    pidf = os.path.join(rl.xdg, f"{cid}.exec.pid")
    r = rl("exec", "--detach", "--pid-file", pidf, cid, "sleep", "500")
    assert r.rc == 0, r
    with open(pidf) as f:
        epid = int(f.read())
    assert pidns(epid) == pidns(pid)
    r = rl("ps", "--format", "json", cid)
    assert r.rc == 0, r
    assert sorted(json.loads(r.out)) == sorted([pid, epid]), r
    r = rl("ps", cid)
    assert r.rc == 0 and "sleep 500" in r.out and "sleep 600" in r.out, r
    r = rl("kill", cid, "KILL")
    assert r.rc == 0, r
    assert gone(pid) and gone(epid)
    assert rl.status(cid) == "stopped"
    r = rl("delete", cid)
    assert r.rc == 0, r
    assert not os.path.exists(rl.state_dir(cid))
    r = rl("list")
    assert cid not in r.out, r


def test_kill_all_without_cgroup(rl, bundle):
    """kill --all TERM reaches every process of the container's pid namespace: the init (which
    has no TERM handler, so the kernel ignores a TERM from outside its namespace) stays, the
    exec'd process dies - on main only the init was signalled and the exec'd one lived on."""
    d, cfg, save = bundle
    cid, pid = start_sleeper(rl, d, cfg, save)
    pidf = os.path.join(rl.xdg, f"{cid}.exec.pid")
    r = rl("exec", "--detach", "--pid-file", pidf, cid, "sleep", "500")
    assert r.rc == 0, r
    with open(pidf) as f:
        epid = int(f.read())
    r = rl("kill", "--all", cid, "TERM")
    assert r.rc == 0, r
    assert gone(epid), "the exec'd process survived kill --all"
    assert host_status(pid) is not None
    r = rl("delete", "--force", cid)
    assert r.rc == 0, r
    assert gone(pid) and not os.path.exists(rl.state_dir(cid))


def test_pause_refused_naming_the_freezer(rl, bundle):
    d, cfg, save = bundle
    cid, pid = start_sleeper(rl, d, cfg, save)
    for verb in ("pause", "resume"):
        r = rl(verb, cid)
        assert r.rc != 0, r
        assert "freezer" in r.err and "delegated" in r.err, r
    assert rl.status(cid) == "running"
    assert host_status(pid)["State"].startswith("S"), host_status(pid)


REFUSED = {
    "device-allow-rule": ({"resources": {"devices": [{"allow": False, "access": "rwm"},
                                                     {"allow": True, "type": "c", "major": 1,
                                                      "minor": 3, "access": "rwm"}]}},
                          "linux.resources.devices[1]"),
    "cpu-shares": ({"resources": {"cpu": {"shares": 512}}}, "linux.resources.cpu"),
    "cpuset": ({"resources": {"cpu": {"cpus": "0"}}}, "linux.resources.cpu.cpus"),
    "blkio-weight": ({"resources": {"blockIO": {"weight": 500}}}, "linux.resources.blockIO"),
    "hugepages": ({"resources": {"hugepageLimits": [{"pageSize": "2MB", "limit": 2097152}]}},
                  "linux.resources.hugepageLimits"),
    "memory-swap": ({"resources": {"memory": {"swap": 100000000}}}, "linux.resources.memory"),
    # a node the container cannot mknod is bound from the host; the host's /dev/full is 1:7
    "device-other-node": ({"devices": [{"path": "/dev/full", "type": "c", "major": 1, "minor": 3}]},
                          "linux.devices[0]"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_privileged_request_refused_naming_the_field(user, rl, bundle, case):
    d, cfg, save = bundle
    extra, field = REFUSED[case]
    marker = "/tmp/ran"
    cfg["linux"].update(json.loads(json.dumps(extra)))
    cfg["process"]["args"] = ["sh", "-c", f"touch {marker}"]
    cfg["root"]["readonly"] = False
    save()
    cid = rl.new_id()
    r = rl("run", "--bundle", d, cid)
    assert r.rc != 0, r
    assert field in r.err, r
    assert not os.path.exists(os.path.join(d, "rootfs", marker.lstrip("/"))), "the process ran"
    assert not os.path.exists(rl.state_dir(cid)), "state left after a refused create"
    assert not [p for p in os.listdir("/proc") if p.isdigit() and host_status(p)
                and host_status(p)["Uid"].split()[0] == str(user.pw_uid)]


# ---------------------------------------------------------------------------------------------
# subordinate ranges: newuidmap/newgidmap (Debian's uidmap package)

@pytest.fixture
def subids(user):
    for t in ("newuidmap", "newgidmap"):
        if shutil.which(t) is None:
            pytest.skip(f"{t} not installed (apt-get install -y uidmap)")
    line = f"{user.pw_name}:{SUB_START}:{SUB_COUNT}\n"
    for f in ("/etc/subuid", "/etc/subgid"):
        with open(f, "a") as fh:
            fh.write(line)
    yield SUB_START
    # only our line goes: others (useradd's own allocations, other tests') stay as they are
    for f in ("/etc/subuid", "/etc/subgid"):
        with open(f) as fh:
            lines = fh.readlines()
        with open(f, "w") as fh:
            fh.writelines(ln for ln in lines if ln != line)


def ranges(user, start, gid=False):
    return [{"containerID": 0, "hostID": user.pw_gid if gid else user.pw_uid, "size": 1},
            {"containerID": 1, "hostID": start, "size": SUB_COUNT}]


def test_subuid_range_through_newuidmap(user, rl, bundle, subids):
    d, cfg, save = bundle
    cfg["linux"]["uidMappings"] = ranges(user, subids)
    cfg["linux"]["gidMappings"] = ranges(user, subids, gid=True)
    cfg["process"]["user"] = {"uid": 1000, "gid": 1000}
    cid, pid = start_sleeper(rl, d, cfg, save)
    st = host_status(pid)
    # container uid 1000 = the range's 1000th id on the host; setgroups is denied, so the
    # process keeps the user's own supplementary groups as the host sees them (it cannot drop
    # one that denies access on the host: CVE-2018-7169's class, outside tester)
    assert st["Uid"].split()[0] == str(subids + 999), st
    assert st["Gid"].split()[0] == str(subids + 999), st
    assert sorted(st["Groups"].split()) == sorted(str(g) for g in os.getgrouplist(user.pw_name, user.pw_gid)), st
    with open(f"/proc/{pid}/setgroups") as f:
        assert f.read().strip() == "deny"
    with open(f"/proc/{pid}/uid_map") as f:
        assert [ln.split() for ln in f] == [["0", str(user.pw_uid), "1"],
                                             ["1", str(subids), str(SUB_COUNT)]]
    r = rl("exec", cid, "id")
    assert r.rc == 0 and "uid=1000" in r.out, r
    r = rl("kill", cid, "KILL")
    assert r.rc == 0, r
    assert gone(pid)
    assert rl("delete", cid).rc == 0 and not os.path.exists(rl.state_dir(cid))


def test_subuid_range_additional_gids_refused_naming_the_field(user, rl, bundle, subids):
    """additionalGids would need setgroups(2), which stays denied for a caller without root."""
    d, cfg, save = bundle
    cfg["linux"]["uidMappings"] = ranges(user, subids)
    cfg["linux"]["gidMappings"] = ranges(user, subids, gid=True)
    cfg["process"]["user"] = {"uid": 1000, "gid": 1000, "additionalGids": [5]}
    cfg["process"]["args"] = ["true"]
    save()
    cid = rl.new_id()
    r = rl("run", "--bundle", d, cid)
    assert r.rc != 0 and "process.user.additionalGids" in r.err, r
    assert not os.path.exists(rl.state_dir(cid))


def test_subuid_range_not_granted_refused(user, rl, bundle, subids):
    d, cfg, save = bundle
    cfg["linux"]["uidMappings"] = ranges(user, subids + SUB_COUNT)  # beyond the user's range
    cfg["linux"]["gidMappings"] = ranges(user, subids, gid=True)
    cfg["process"]["args"] = ["true"]
    save()
    cid = rl.new_id()
    r = rl("run", "--bundle", d, cid)
    assert r.rc != 0, r
    assert "linux.uidMappings" in r.err and "newuidmap" in r.err and "/etc/subuid" in r.err, r
    assert not os.path.exists(rl.state_dir(cid))
    with contextlib.suppress(FileNotFoundError):
        assert not os.listdir(os.path.join(rl.xdg, "agentsbx")) or cid not in os.listdir(
            os.path.join(rl.xdg, "agentsbx"))


# ---------------------------------------------------------------------------------------------
# euid 0 in a user namespace someone else made (what rootless Podman gives its OCI runtime)

def test_root_in_foreign_user_namespace(user, rl, bundle):
    """`unshare -U -r` as the user: euid 0 but not the host's root. The bundle has no user
    namespace of its own (as Podman's); no cgroup can be made, and none is asked, so the
    container runs, with its device nodes bind-mounted (no mknod there). On main create failed
    at `mkdir cgroup ... Permission denied`."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) not installed")
    d, cfg, save = bundle
    cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "user"]
    del cfg["linux"]["uidMappings"], cfg["linux"]["gidMappings"]
    cfg["process"]["args"] = ["sh", "-c", "id -u; echo x > /dev/null && echo null-ok; cat /proc/self/uid_map"]
    save()
    root = os.path.join(rl.xdg, "nested")
    r = rl("--root", root, "run", "--bundle", d, "n1", prefix=["unshare", "-U", "-r", "-m"])
    assert r.rc == 0, r
    lines = r.out.split("\n")
    assert lines[0] == "0" and lines[1] == "null-ok", r
    assert lines[2].split() == ["0", str(user.pw_uid), "1"], r
    assert not os.path.exists(os.path.join(root, "n1"))
